"""Random ops in training graphs: the generator is drawn as eagerly (Note [dead forward copies]).

AOTAutograd's default partitioner copies a forward random op whose inputs are saved into the backward
graph, unused; run there it draws from the generator again, so the random stream after a traced step
differs from eager's. ``reinplace_compiler`` removes those copies. Each program runs two training steps
from one seed, eagerly with raw launches and traced; the losses, every ``.grad`` and the next draw
after each step must be equal bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import triton
from functorch.compile import aot_function, make_boxed_func

import functional_triton as ft
from functional_triton.passes.forward_copies import remove_dead_forward_copies
from tests.harness import raw
from tests.training import kernels as K

N = 24


def _gelu(wrap: Callable[[Any], Any], x: torch.Tensor) -> torch.Tensor:
    """``x`` times its GELU from a kernel (a raw kernel has no gradient: the GELU is a constant factor)."""
    out = torch.empty_like(x)
    wrap(K.gelu_tanh_fwd)[(triton.cdiv(N, 16),)](x.detach(), out, N, BLOCK=16)
    return x * out


def dropout_after_kernel(wrap: Callable[[Any], Any], x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = _gelu(wrap, x * w)  # saves x and w
    return (h * torch.nn.functional.dropout(x, 0.5)).sum()  # x is saved: its dropout is copied


def unused_random_in_forward(wrap: Callable[[Any], Any], x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    torch.rand_like(x)  # unused, drawn eagerly: stays
    return (_gelu(wrap, x * w) * w).sum()


class _NoisyBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        torch.rand_like(g)  # the backward's own draw, unused: eager draws it, so must the graph
        return g * 2


def unused_random_in_backward(wrap: Callable[[Any], Any], x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (_gelu(wrap, _NoisyBackward.apply(x) * w) * torch.nn.functional.dropout(w, 0.25)).sum()


PROGRAMS = {
    "dropout_after_kernel": dropout_after_kernel,
    "unused_random_in_forward": unused_random_in_forward,
    "unused_random_in_backward": unused_random_in_backward,
}


def _steps(step: Callable[..., torch.Tensor]) -> list[torch.Tensor]:
    """Two training steps from one seed: each loss, each .grad, and the draw after each step."""
    torch.manual_seed(3)
    x = torch.randn(N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    seen: list[torch.Tensor] = []
    for _ in range(2):
        x.grad = w.grad = None
        loss = step(x, w)
        (loss * 2).backward()
        assert x.grad is not None and w.grad is not None
        seen += [loss.detach(), x.grad, w.grad, torch.rand(4)]
    return seen


def _compare(got: list[torch.Tensor], want: list[torch.Tensor]) -> None:
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("program", PROGRAMS)
def test_aot_function_with_reinplace_compiler_draws_as_eager(program: str) -> None:
    fn = PROGRAMS[program]
    compiled = aot_function(
        lambda x, w: fn(ft.wrap_triton, x, w),
        fw_compiler=ft.reinplace_compiler,
        bw_compiler=ft.reinplace_compiler,
    )
    _compare(_steps(compiled), _steps(lambda x, w: fn(raw, x, w)))


def test_torch_compile_functional_triton_backend_draws_as_eager() -> None:
    """(Under torch.compile an unused draw in the forward is dropped by torch itself, with
    ``backend="aot_eager"`` too: README known limits. Only the partitioner's copy is this library's.)"""
    fn = dropout_after_kernel
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda x, w: fn(ft.wrap_triton, x, w), backend="functional_triton", fullgraph=True
    )
    _compare(_steps(compiled), _steps(lambda x, w: fn(raw, x, w)))


def _backward_graph(fn: Callable[..., torch.Tensor]) -> torch.fx.GraphModule:
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, _: Any) -> Any:
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    compiled = aot_function(lambda x, w: fn(ft.wrap_triton, x, w), fw_compiler=keep, bw_compiler=keep)
    x, w = torch.randn(N, requires_grad=True), torch.randn(N, requires_grad=True)
    compiled(x, w).backward()
    return graphs[-1]


def _random_ops(gm: torch.fx.GraphModule) -> list[str]:
    return [
        str(n.target)
        for n in gm.graph.nodes
        if isinstance(n.target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in n.target.tags
    ]


def test_the_pass_removes_only_the_partitioners_copy() -> None:
    """The dropout copied into the backward (no users) goes, with the pure nodes only it used; the
    backward's own unused draw stays. (Without the pass, the control: the copy is there.)"""
    gm = _backward_graph(dropout_after_kernel)
    assert _random_ops(gm) == ["aten.native_dropout.default"]  # the copy: the backward draws nothing
    assert remove_dead_forward_copies(gm) == 1
    assert _random_ops(gm) == []
    gm = _backward_graph(unused_random_in_backward)
    before = _random_ops(gm)
    assert "aten.native_dropout.default" in before and "aten.rand_like.default" in before
    assert remove_dead_forward_copies(gm) == 1
    assert _random_ops(gm) == ["aten.rand_like.default"]


def test_forward_graphs_keep_their_unused_draws() -> None:
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, _: Any) -> Any:
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    compiled = aot_function(
        lambda x, w: unused_random_in_forward(ft.wrap_triton, x, w), fw_compiler=keep, bw_compiler=keep
    )
    compiled(torch.randn(N, requires_grad=True), torch.randn(N, requires_grad=True)).backward()
    forward = graphs[0]
    assert _random_ops(forward) == ["aten.rand_like.default"]
    assert remove_dead_forward_copies(forward) == 0


@pytest.mark.parametrize("backend", ["aot_eager", "functional_triton"])
def test_known_limit_an_unused_forward_draw_is_dropped_under_torch_compile(backend: str) -> None:
    """README known limits: torch.compile (torch's own ``aot_eager`` as well) drops a draw the forward
    never uses, so the stream after the step differs from eager's; losses and gradients do not."""
    fn = unused_random_in_forward
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, w: fn(ft.wrap_triton, x, w), backend=backend, fullgraph=True)
    got, want = _steps(compiled), _steps(lambda x, w: fn(raw, x, w))
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert torch.equal(a, b) == (i % 4 != 3), i  # every fourth: the draw after a step
