"""One named test per aliasing scenario; each compares every mode with eager raw launches."""

from __future__ import annotations

import torch

from tests import kernels as K
from tests.harness import ALIASING_MODES, check_matches_eager

N = 8


def arange(n: int = N, requires_grad: bool = False) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32).requires_grad_(requires_grad)


def test_write_then_read_same_tensor_twice() -> None:
    def prog(wrap, x):
        out = torch.zeros(4)
        wrap(K.write_then_read)[(1,)](x, x, out, 4, BLOCK=4)
        return out

    check_matches_eager(prog, lambda: (torch.zeros(4),))


def test_halves_same_tensor_twice() -> None:
    def prog(wrap, x):
        wrap(K.halves)[(1,)](x, x, 4, BLOCK=4)
        return x.sum()

    check_matches_eager(prog, lambda: (torch.zeros(4),))


def test_write_then_read_overlapping_views() -> None:
    def prog(wrap, x):
        out = torch.zeros(4)
        wrap(K.write_then_read)[(1,)](x[0:4], x[2:6], out, 4, BLOCK=4)
        return out

    check_matches_eager(prog, lambda: (torch.zeros(8),), modes=ALIASING_MODES)


def test_same_intermediate_twice() -> None:
    def prog(wrap, x):
        y = x * 2
        wrap(K.halves)[(1,)](y, y, N, BLOCK=N)
        return y + 1

    check_matches_eager(prog, lambda: (arange(),))


def test_write_both_through_one_tensor() -> None:
    def prog(wrap, x):
        wrap(K.two_writes)[(1,)](x, x, N, BLOCK=N)
        return x

    check_matches_eager(prog, lambda: (arange(),))


def test_disjoint_halves() -> None:
    def prog(wrap, x):
        wrap(K.two_writes)[(1,)](x[: N // 2], x[N // 2 :], N // 2, BLOCK=N // 2)
        return x[1:]

    check_matches_eager(prog, lambda: (arange(),), modes=ALIASING_MODES)


def test_input_and_its_transpose() -> None:
    def prog(wrap, x):
        t = x.t()
        wrap(K.transpose_add_one)[(1,)](x, t, *x.stride(), *t.stride(), R=4, C=4)
        return t

    check_matches_eager(prog, lambda: (arange(16).reshape(4, 4),), modes=ALIASING_MODES)


def test_as_strided_with_offset() -> None:
    def prog(wrap, x):
        v = x.as_strided((2, 3), (4, 1), 3)
        wrap(K.scale_inplace_2d)[(2,)](v, 2, 3, *v.stride(), BLOCK=4)
        return x

    check_matches_eager(prog, lambda: (arange(16),))


def test_view_returned_after_kernel() -> None:
    def prog(wrap, x):
        v = x[1:]
        wrap(K.add_one_inplace)[(1,)](x, N, BLOCK=N)
        return v, x

    check_matches_eager(prog, lambda: (arange(),))


def test_graph_inputs_that_alias() -> None:
    def prog(wrap, a, b):
        out = torch.zeros(4)
        wrap(K.write_then_read)[(1,)](a, b, out, 4, BLOCK=4)
        return out

    def inputs():
        base = torch.zeros(8)
        return base[0:4], base[2:6]

    check_matches_eager(prog, inputs, modes=("aot_function", "aot_module"))


def test_non_aliasing_control() -> None:
    def prog(wrap, x, y):
        out = torch.empty_like(x)
        wrap(K.add_kernel)[(1,)](x, y, out, N, BLOCK=N)
        return out

    check_matches_eager(prog, lambda: (arange(), arange() * 3))


def test_distinct_aliases_refused_when_views_are_copies() -> None:
    import pytest
    from torch.fx.experimental.proxy_tensor import make_fx

    import functional_triton as ft

    def f(x):
        out = torch.zeros(4)
        ft.wrap_triton(K.write_then_read)[(1,)](x[0:4], x[2:6], out, 4, BLOCK=4)
        return out

    views_removed = torch.func.functionalize(f, remove="mutations_and_views")
    with pytest.raises(NotImplementedError, match=r"'a_ptr', 'b_ptr' share storage.*remove='mutations'"):
        make_fx(views_removed)(torch.zeros(8))
