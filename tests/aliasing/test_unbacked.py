"""Data-dependent (unbacked) sizes: ``x[x > 2]`` and friends, then a launch (issue 15, item 3).

No guard may be put on an unbacked size: the alias-group geometry, the buffer extent and the
grid stay symbolic, and the kernel runs with the run-time size. Every program runs eagerly
with raw kernels and under each mode, on several inputs (sizes change between calls).
"""

from __future__ import annotations

import functools

import pytest
import torch
import triton

import functional_triton as ft
from tests import kernels as K
from tests.harness import compare, compile_mode, raw, run_once

DYNAMIC_MODES = ("aot_function", "reinplace", "reinplace_keep", "aot_module")


def inputs_for(n: int, requires_grad: bool = False):
    # values 0..n-1 shuffled deterministically: x > 2 keeps n - 3 of them, in a changing order
    x = ((torch.arange(n) * 7) % n).to(torch.float32)
    return lambda: (x.clone().requires_grad_(requires_grad),)


def check_dynamic(prog, sizes, *, modes=DYNAMIC_MODES, requires_grad=False, no_grad=(False, True)) -> None:
    """Trace once per mode (dynamic=True), then call on inputs of every size, compare with eager."""
    for ng in no_grad:
        first = inputs_for(sizes[0], requires_grad)
        for mode in modes:
            call = compile_mode(mode, prog, first(), dynamic=True) if mode != "symbolic" else None
            if call is None:
                call = _symbolic(prog, first())
            for n in sizes:
                make = inputs_for(n, requires_grad)
                expected = run_once(functools.partial(prog, raw), make, ng)
                compare(run_once(call, make, ng), expected, f"{mode} n={n} no_grad={ng}")


def _symbolic(prog, example):
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(
        torch.func.functionalize(functools.partial(prog, ft.wrap_triton)), tracing_mode="symbolic"
    )(*example)


def masked_add_one(wrap, x):
    y = x[x > 2]
    n = y.numel()
    wrap(K.add_one_inplace)[(triton.cdiv(n, 4),)](y, n, BLOCK=4)
    return y * 2


def test_masked_selection_then_launch() -> None:
    check_dynamic(masked_add_one, (10, 23, 5))


def test_masked_selection_then_launch_make_fx_symbolic() -> None:
    check_dynamic(masked_add_one, (10, 23, 5), modes=("symbolic",), no_grad=(True,))


def test_masked_selection_that_is_empty_at_run_time() -> None:
    # n == 3: the values are 0, 1, 2, so x > 2 keeps no element and the grid is (0,)
    check_dynamic(masked_add_one, (10, 3, 17))


def test_masked_selection_training() -> None:
    def prog(wrap, x):
        y = x[x > 2] * 1.5
        n = y.numel()
        wrap(K.add_one_inplace)[(triton.cdiv(n, 4),)](y, n, BLOCK=4)
        return y * x[x > 2]

    check_dynamic(prog, (10, 23), requires_grad=True, modes=("aot_function", "reinplace"))


def test_masked_selection_with_an_aliasing_view_in_one_launch() -> None:
    # y and y[1:] share storage, y written: one alias group whose extent is symbolic
    def prog(wrap, x):
        y = x[x > 2]
        out = torch.zeros(4)
        wrap(K.write_then_read)[(1,)](y, y[1:], out, 4, BLOCK=4)
        return y + 0, out

    check_dynamic(prog, (12, 20))


def test_masked_selection_read_only_next_to_a_fresh_output() -> None:
    def prog(wrap, x):
        y = x[x > 2]
        out = torch.empty_like(y)
        n = y.numel()
        wrap(K.add_kernel)[(triton.cdiv(n, 4),)](y, y, out, n, BLOCK=4)
        return out

    check_dynamic(prog, (10, 23, 5))


def test_masked_selection_viewed_two_dimensionally() -> None:
    def prog(wrap, x):
        y = x[x > 2]
        m = y[: (y.numel() // 2) * 2].view(-1, 2).t()  # a transpose of an unbacked-sized view
        wrap(K.scale_inplace_2d)[(2,)](m, 2, m.shape[1], m.stride(0), m.stride(1), BLOCK=16)
        return y + 0

    check_dynamic(prog, (12, 20))


@pytest.mark.parametrize("backend", ["aot_eager", "functional_triton"])
def test_torch_compile_captures_dynamic_output_shapes(backend: str) -> None:
    import torch._dynamo

    def f(x):
        return masked_add_one(ft.wrap_triton, x)

    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(f, dynamic=True, backend=backend, fullgraph=True)
        for n in (10, 23, 5):
            x = inputs_for(n)()[0]
            expected = masked_add_one(raw, x.clone())
            torch.testing.assert_close(compiled(x), expected, rtol=0, atol=0)
    torch._dynamo.reset()
