"""reinplace_compiler's runner folds views that change nothing or repeat (Note [folding views])."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from functorch.compile import aot_function, make_boxed_func
from torch import fx
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from functional_triton.passes.views import _PLAIN_VIEWS, _layout, fold_views
from tests import kernels as K
from tests.helpers import RecordingMode

aten = torch.ops.aten


def _views(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target in _PLAIN_VIEWS]


def _chained_identity(node: fx.Node) -> bool:
    """Whether a view has the layout of a value it is a chain of plain views of."""
    source = node.args[0]
    while isinstance(source, fx.Node):
        if _layout(source) == _layout(node):
            return True
        if not (source.op == "call_function" and source.target in _PLAIN_VIEWS):
            return False
        source = source.args[0]
    return False


def _program(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    a = w.t().t()  # the value itself
    b = x.view(-1, 6).view(4, 6)  # the value itself, through a chain
    m = torch.mm(x, w.t()) + torch.mm(x, w.t())  # one view computed twice
    c = x.transpose(0, 1).transpose(0, 1).transpose(0, 1)  # one transpose
    d = x.expand(4, 6)[0:4]  # the value itself (same sizes, strides, offset)
    e = x[1:3].t()  # real views: other sizes
    y = a.sum() + b.sum() + m.sum() + c.sum() + d.sum() + e.sum()
    return y, x.view(4, 6), c  # outputs that are views of an input


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(4, 6), torch.randn(5, 6)


def test_views_that_change_nothing_or_repeat_are_folded_with_the_same_values() -> None:
    x, w = _inputs()
    gm = make_fx(_program, tracing_mode="fake")(x, w)
    folded = copy.deepcopy(gm)
    before = _views(gm)
    erased = fold_views(folded)
    after = _views(folded)
    assert erased == len(before) - len(after) and erased >= 8, (len(before), len(after))
    # Left: real views, and the nodes the outputs name (only the output uses those).
    output = folded.graph.output_node()
    inner = [n for n in after if n.users.keys() != {output}]
    assert not [n for n in inner if _chained_identity(n)]
    keys = [(n.target, repr(n.args)) for n in inner]
    assert len(keys) == len(set(keys)), "a view computed twice is left"
    want = _program(x, w)
    for got in (gm(x, w), folded(x, w)):
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e, rtol=0, atol=0)
    # The outputs stay the nodes they were: AOTAutograd regenerates outputs aliasing inputs itself.
    out: Any = folded.graph.output_node().args[0]
    assert out[1].target is aten.view.default and out[2].target is aten.transpose.int
    got = folded(x, w)
    assert got[1]._base is x and got[2]._base is x


def test_views_with_other_strides_or_an_offset_are_kept() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        # a square transpose (same sizes, other strides), a broadcast row, a slice at an offset
        return x.t() + x[0:1].expand(4, 4) + x[1:].sum()

    x = torch.randn(4, 4)
    gm = make_fx(f, tracing_mode="fake")(x)
    before = [(n.target, repr(n.args)) for n in _views(gm)]
    assert fold_views(gm) == 0
    assert [(n.target, repr(n.args)) for n in _views(gm)] == before
    torch.testing.assert_close(gm(x), f(x), rtol=0, atol=0)


def test_a_graph_changing_a_view_in_place_is_left_alone() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        a = y.view(4, 4)
        y.t_()  # a base's metadata changes between two views of it
        return a + y.view(4, 4)

    x = torch.randn(4, 4)
    gm = make_fx(f, tracing_mode="fake")(x)
    assert any(n.target is aten.t_.default for n in gm.graph.nodes)
    code = gm.code
    assert fold_views(gm) == 0 and gm.code == code
    torch.testing.assert_close(gm(x), f(x), rtol=0, atol=0)


def test_symbolic_sizes_are_left_alone() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.t().t() + x.view(-1).view(x.shape)

    x = torch.randn(4, 6)
    gm = make_fx(f, tracing_mode="symbolic")(x)
    assert _views(gm)
    assert fold_views(gm) == 0
    torch.testing.assert_close(gm(x), f(x), rtol=0, atol=0)


class _ScaleThenMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        ft.wrap_triton(K.add_kernel)[(1,)](x, x, out, x.numel(), BLOCK=32)  # out = 2x
        ctx.save_for_backward(out, w)
        return out.view(-1, 6).view(4, 6) @ w.t()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, w = ctx.saved_tensors
        return (grad @ w) * 2, grad.t() @ out.view(4, 6)


@pytest.mark.parametrize("requires_grad", [True, False], ids=["training", "inference"])
def test_reinplace_compiler_runs_fewer_views_with_eager_results(requires_grad: bool) -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = _ScaleThenMatmul.apply(x, w)
        return y.t().t().view(-1).view(4, 5) + w.t()[0:6].t().sum()

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(0)
        x = torch.randn(4, 6).requires_grad_(requires_grad)
        return x, torch.randn(5, 6).requires_grad_(requires_grad)

    nop = lambda gm, _: make_boxed_func(gm.forward)  # noqa: E731
    counts, results = [], []
    for compiler in (nop, ft.reinplace_compiler):
        compiled = aot_function(f, fw_compiler=compiler, bw_compiler=compiler)
        args = make()
        compiled(*args)  # compiled once, outside the mode
        args = make()
        with RecordingMode() as mode:
            out = compiled(*args)
            if requires_grad:
                out.sum().backward()
        counts.append(sum(op in _PLAIN_VIEWS for op in mode.seen))
        results.append((out, *(a.grad for a in args)))
    x, w = make()
    want = f(x, w)
    if requires_grad:
        want.sum().backward()
    for got in results:
        for g, e in zip(got, (want, x.grad, w.grad)):
            torch.testing.assert_close(g, e, rtol=0, atol=0)
    assert counts[1] < counts[0], counts
