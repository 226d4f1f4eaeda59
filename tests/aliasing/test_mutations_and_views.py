"""Distinct aliasing kernel arguments under functionalize(remove="mutations_and_views") (issue 15, item 2).

Views arrive as copies there; the rule rebuilds a group around a member every other member is a
view of, from the functional tensors' view chains (Note [aliasing arguments when views are
copies] in functionalize.py). Each program is compared bit for bit with eager raw launches, in
that mode and in every other one that supports aliasing arguments; the programs whose relation
cannot be recovered must raise NotImplementedError naming the arguments.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from tests import kernels as K
from tests.harness import ALIASING_MODES, check_matches_eager

MODES = (*ALIASING_MODES, "functionalize_views")


@triton.jit
def write_two_read_one(a_ptr, b_ptr, base_ptr, out_ptr, n, n_base, BLOCK: tl.constexpr):
    """a += 1, then b *= 2, then out = base (one program: each store is seen by what follows)."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(a_ptr + offs, tl.load(a_ptr + offs, mask=m) + 1, mask=m)
    tl.debug_barrier()
    tl.store(b_ptr + offs, tl.load(b_ptr + offs, mask=m) * 2, mask=m)
    tl.debug_barrier()
    mb = offs < n_base
    tl.store(out_ptr + offs, tl.load(base_ptr + offs, mask=mb), mask=mb)


@triton.jit
def write_read_base(a_ptr, b_ptr, base_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Store 7 through `a`, then out = b + base (one program)."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(a_ptr + offs, tl.full([BLOCK], 7, a_ptr.dtype.element_ty), mask=m)
    tl.debug_barrier()
    tl.store(out_ptr + offs, tl.load(b_ptr + offs, mask=m) + tl.load(base_ptr + offs, mask=m), mask=m)


def arange(n: int = 8) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32)


def test_overlapping_slices_one_written_one_read() -> None:
    # Two overlapping slices of one input, with the input passed as well (the group's root).
    def prog(wrap, x):
        out = torch.zeros(4)
        wrap(write_read_base)[(1,)](x[2:6], x[1:5], x, out, 4, BLOCK=4)
        return out, x[1:5] * 1

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_slice_of_a_slice_and_that_slice() -> None:
    def prog(wrap, x):
        out = torch.zeros(4)
        v = x[1:7]
        wrap(K.write_then_read)[(1,)](v[1:5], v, out, 4, BLOCK=4)
        return out, x[0:3] * 1

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_overlapping_slices_without_their_base_refused() -> None:
    def f(x):
        out = torch.zeros(4)
        ft.wrap_triton(K.write_then_read)[(1,)](x[0:4], x[2:6], out, 4, BLOCK=4)
        return out

    views_removed = torch.func.functionalize(f, remove="mutations_and_views")
    with pytest.raises(NotImplementedError, match=r"'a_ptr', 'b_ptr' share.*neither their storage's base"):
        make_fx(views_removed)(arange())


@pytest.mark.parametrize("b_slice", [slice(4, 8), slice(2, 6)], ids=["disjoint", "overlapping"])
def test_both_written_with_the_base_read(b_slice: slice) -> None:
    def prog(wrap, x):
        out = torch.zeros(8)
        wrap(write_two_read_one)[(1,)](x[0:4], x[b_slice], x, out, 4, 8, BLOCK=8)
        return out, x[3:7] * 1

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_both_written_one_is_the_base() -> None:
    def prog(wrap, x):
        out = torch.zeros(8)
        wrap(write_two_read_one)[(1,)](x, x[2:6], x[1:], out, 4, 7, BLOCK=8)
        return out

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_row_slice_and_base_of_a_matrix() -> None:
    # copy_2d reads src with its strides and writes dst = src + 1: a view of rows keeps its strides
    # as a copy, so the relation is exact.
    def prog(wrap, x):
        rows = x[1:3]
        wrap(K.copy_2d)[(2,)](x, rows, 4, *x.stride(), *rows.stride(), BLOCK=4)
        return x * 1

    check_matches_eager(prog, lambda: (arange(16).reshape(4, 4),), modes=MODES)


def test_transpose_and_base() -> None:
    # A transpose's copy has other strides than in eager, so the kernel would be told other
    # strides: the other modes match eager, this one refuses naming the argument.
    def prog(wrap, x):
        xt = x.t()
        wrap(K.transpose_add_one)[(1,)](x, xt, *x.stride(), *xt.stride(), R=4, C=4)
        return x * 1

    check_matches_eager(prog, lambda: (arange(16).reshape(4, 4),), modes=ALIASING_MODES)
    views_removed = torch.func.functionalize(lambda x: prog(ft.wrap_triton, x), remove="mutations_and_views")
    with pytest.raises(NotImplementedError, match=r"'dst_ptr' has strides \(4, 1\) as a copy.*\(1, 4\)"):
        make_fx(views_removed)(arange(16).reshape(4, 4))


def test_same_tensor_twice() -> None:
    def prog(wrap, x):
        wrap(K.halves)[(1,)](x, x, 8, BLOCK=8)
        return x + 0

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_views_of_an_intermediate() -> None:
    def prog(wrap, x):
        y = x * 2
        out = torch.zeros(4)
        wrap(K.write_then_read)[(1,)](y[2:6], y, out, 4, BLOCK=4)
        wrap(K.add_one_inplace)[(1,)](y[4:], 4, BLOCK=4)  # a later launch reads the committed y
        return out, y, y[1:3] + 0

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_expanded_root_refused() -> None:
    # Rows of an expand share memory in eager; the expand's copy does not repeat them.
    def f(x):
        e = x.expand(3, 4)
        ft.wrap_triton(K.write_then_read)[(1,)](e[1], e, torch.zeros(4), 4, BLOCK=4)
        return x

    views_removed = torch.func.functionalize(f, remove="mutations_and_views")
    expected = r"'b_ptr' \(views expand of its storage's base\) may repeat"
    with pytest.raises(NotImplementedError, match=expected):
        make_fx(views_removed)(arange(4))


def test_column_slice_and_base_refused() -> None:
    # A column slice's copy is contiguous (strides (2, 1)), the view in eager has its base's (4, 1):
    # the kernel would be told other strides. The other modes match eager.
    def prog(wrap, x):
        cols = x[:, 1:3]
        wrap(K.copy_2d)[(4,)](x, cols, 2, *x.stride(), *cols.stride(), BLOCK=4)
        return x * 1

    check_matches_eager(prog, lambda: (arange(16).reshape(4, 4),), modes=ALIASING_MODES)
    views_removed = torch.func.functionalize(lambda x: prog(ft.wrap_triton, x), remove="mutations_and_views")
    expected = r"arguments 'src_ptr', 'dst_ptr' share.*'dst_ptr' has strides \(2, 1\) as a copy.*\(4, 1\)"
    with pytest.raises(NotImplementedError, match=expected):
        make_fx(views_removed)(arange(16).reshape(4, 4))


def test_as_strided_view_and_base_refused() -> None:
    # A copy counts an as_strided view's offset from the copy, eager from the storage. The other
    # modes match eager.
    def prog(wrap, x):
        dst = x.as_strided((2, 2), (8, 2), 1)
        wrap(K.copy_2d)[(2,)](x, dst, 2, *x.stride(), *dst.stride(), BLOCK=2)
        return x * 1

    check_matches_eager(prog, lambda: (arange(16).reshape(4, 4),), modes=ALIASING_MODES)
    views_removed = torch.func.functionalize(lambda x: prog(ft.wrap_triton, x), remove="mutations_and_views")
    expected = r"arguments 'src_ptr', 'dst_ptr' share.*'dst_ptr' is made with as_strided\(\) from 'src_ptr'"
    with pytest.raises(NotImplementedError, match=expected):
        make_fx(views_removed)(arange(16).reshape(4, 4))


def test_views_refused_without_get_view_meta_sequence(monkeypatch: pytest.MonkeyPatch) -> None:
    # test_overlapping_slices_one_written_one_read's launch, on a torch without the binding that
    # _compat.view_chain reads: the relation of the copies cannot be recovered at all.
    def f(x):
        out = torch.zeros(4)
        ft.wrap_triton(write_read_base)[(1,)](x[2:6], x[1:5], x, out, 4, BLOCK=4)
        return out

    monkeypatch.delattr(torch._C._functionalization, "get_view_meta_sequence")
    views_removed = torch.func.functionalize(f, remove="mutations_and_views")
    expected = r"arguments 'a_ptr', 'b_ptr', 'base_ptr' share.*this torch does not tell which views they are"
    with pytest.raises(NotImplementedError, match=expected):
        make_fx(views_removed)(arange())
