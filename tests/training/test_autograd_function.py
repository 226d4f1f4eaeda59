"""Kernels inside torch.autograd.Function forward and backward, traced by aot_function / aot_module.

Each program is run eagerly with raw ``kernel[grid](...)`` launches and under AOTAutograd (joint
graph, partitioned into forward and backward graphs, nop compilers); outputs, inputs after the call
and every leaf's ``.grad`` must match bit for bit (tests/harness.py). The backward kernels write
where real code writes: a fresh gradient buffer, a tensor saved in forward, the incoming gradient,
and a kernel whose writes the analysis cannot see (pytorch#119348). A forward output the caller
holds, written by a backward kernel (pytorch#174124), must raise.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import triton
from functorch.compile import (
    aot_function,
    aot_module,
    default_partition,
    min_cut_rematerialization_partition,
)

import functional_triton as ft
import functional_triton.functionalize as ft_functionalize
import functional_triton.mutation as ft_mutation
from functional_triton import _compat
from functional_triton.functionalize import AnalysisWarning
from tests.harness import check_matches_eager, compile_mode, raw
from tests.helpers import Capture, assert_same, kernel_calls
from tests.training import kernels as K

# A backward write of a leaf input: copied back by AOTAutograd where it can (torch >= 2.13), else
# launched in place (Note [backward writes to leaf inputs]); both paths run wherever they can.
LEAF_WRITE_PATHS = (True, False) if _compat.backward_writes_to_leaf_inputs_supported() else (True,)

N = 24
BLOCK = 16  # two programs per launch, the second one masked
MODES = ("aot_function", "aot_module")
Wrap = Callable[[Any], Any]


def grid(n: int) -> tuple[int]:
    return (triton.cdiv(n, BLOCK),)


def leaves(device: str, *, rg_w: bool = True) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """Two leaves with distinct, exactly representable values (tests tell every element apart)."""

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        x = (torch.arange(N, dtype=torch.float32, device=device) - 9) / 4
        w = (torch.arange(N, dtype=torch.float32, device=device) % 7 - 3) / 2
        return x.requires_grad_(), w.requires_grad_(rg_w)

    return make


# --- the autograd.Functions -----------------------------------------------------------------------------


class Mul(torch.autograd.Function):
    """out = x * w; the backward kernel writes dx and dw where ``into`` says.

    into="fresh": new buffers (torch.empty_like), the usual way.
    into="preallocated": buffers allocated in forward and saved for backward, which fills them.
    into="saved": dx over the saved x and dw over the saved w, a memory-saving trick: both are dead
        once the gradients are computed (the kernel loads everything before it stores).
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, wrap: Wrap, into: str) -> torch.Tensor:
        out = torch.empty_like(x)
        wrap(K.mul_fwd)[grid(x.numel())](x, w, out, x.numel(), BLOCK=BLOCK)
        if into == "preallocated":
            ctx.save_for_backward(x, w, torch.empty_like(x), torch.empty_like(w))
        else:
            ctx.save_for_backward(x, w)
        ctx.wrap, ctx.into = wrap, into
        return out

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        x, w, *buffers = ctx.saved_tensors
        dy = dy.contiguous()
        if ctx.into == "fresh":
            dx, dw = torch.empty_like(x), torch.empty_like(w)
        elif ctx.into == "preallocated":
            dx, dw = buffers
        else:
            dx, dw = x, w
        ctx.wrap(K.mul_bwd)[grid(x.numel())](x, w, dy, dx, dw, x.numel(), BLOCK=BLOCK)
        return dx, dw, None, None


class MulWithGradSum(torch.autograd.Function):
    """pytorch#174124's shape: forward returns (out, acc), acc is saved, and backward adds dy into it.

    ``acc`` is a forward output that does not require grad; the backward kernel mutates it in place.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, wrap: Wrap) -> tuple[torch.Tensor, torch.Tensor]:
        out = torch.empty_like(x)
        wrap(K.mul_fwd)[grid(x.numel())](x, w, out, x.numel(), BLOCK=BLOCK)
        acc = torch.zeros_like(x)
        wrap(K.accumulate)[grid(x.numel())](acc, out, x.numel(), BLOCK=BLOCK)
        ctx.mark_non_differentiable(acc)
        ctx.save_for_backward(x, w, acc)
        ctx.wrap = wrap
        return out, acc

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor, _: Any) -> tuple[Any, ...]:
        x, w, acc = ctx.saved_tensors
        dy = dy.contiguous()
        dx, dw = torch.empty_like(x), torch.empty_like(w)
        ctx.wrap(K.mul_bwd)[grid(x.numel())](x, w, dy, dx, dw, x.numel(), BLOCK=BLOCK)
        ctx.wrap(K.accumulate)[grid(x.numel())](acc, dy, x.numel(), BLOCK=BLOCK)
        return dx, dw, None


class MulWithOutputSum(torch.autograd.Function):
    """MulWithGradSum whose backward adds the saved ``out`` into ``acc``: that kernel reads no gradient.

    Nothing then ties the write to the backward pass: the partitioner could compute it in forward.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, wrap: Wrap) -> tuple[torch.Tensor, torch.Tensor]:
        out = torch.empty_like(x)
        wrap(K.mul_fwd)[grid(x.numel())](x, w, out, x.numel(), BLOCK=BLOCK)
        acc = torch.zeros_like(x)
        ctx.mark_non_differentiable(acc)
        ctx.save_for_backward(x, w, out, acc)
        ctx.wrap = wrap
        return out, acc

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor, _: Any) -> tuple[Any, ...]:
        x, w, out, acc = ctx.saved_tensors
        dy = dy.contiguous()
        dx, dw = torch.empty_like(x), torch.empty_like(w)
        ctx.wrap(K.mul_bwd)[grid(x.numel())](x, w, dy, dx, dw, x.numel(), BLOCK=BLOCK)
        ctx.wrap(K.accumulate)[grid(x.numel())](acc, out, x.numel(), BLOCK=BLOCK)
        return dx, dw, None


class GeluTanh(torch.autograd.Function):
    """GELU (tanh); the backward kernel writes dx over the incoming gradient, or over the saved x."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wrap: Wrap, into: str) -> torch.Tensor:
        y = torch.empty_like(x)
        wrap(K.gelu_tanh_fwd)[grid(x.numel())](x, y, x.numel(), BLOCK=BLOCK)
        ctx.save_for_backward(x)
        ctx.wrap, ctx.into = wrap, into
        return y

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        (x,) = ctx.saved_tensors
        dy = dy.contiguous()
        dx = {"grad_out": dy, "saved": x, "fresh": torch.empty_like(x)}[ctx.into]
        ctx.wrap(K.gelu_tanh_bwd)[grid(x.numel())](x, dy, dx, x.numel(), BLOCK=BLOCK)
        return dx, None, None


class MulOpaqueBackward(torch.autograd.Function):
    """out = x * w whose backward kernel mutation analysis cannot see through."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, wrap: Wrap, opaque: bool) -> torch.Tensor:
        out = torch.empty_like(x)
        wrap(K.mul_fwd)[grid(x.numel())](x, w, out, x.numel(), BLOCK=BLOCK)
        ctx.save_for_backward(x, w)
        ctx.wrap, ctx.opaque = wrap, opaque
        return out

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        x, w = ctx.saved_tensors
        dy = dy.contiguous()
        dx, dw = torch.empty_like(x), torch.empty_like(w)
        ctx.wrap(K.mul_bwd_opaque)[grid(x.numel())](
            x, w, dy, dx, dw, x.numel(), OPAQUE=ctx.opaque, BLOCK=BLOCK
        )
        return dx, dw, None, None


# --- what the partitioned graphs hold ---------------------------------------------------------------------


def traced_graphs(
    fn: Callable[..., Any], make_inputs: Callable[[], Sequence[Any]], mode: str, in_place_ok: bool = False
) -> dict[str, list[list[tuple[str, tuple[str, ...]]]]]:
    """Trace ``fn`` under ``mode``, run forward and backward once; the kernel calls of each graph."""
    kept = Capture()
    traced = functools.partial(fn, ft.wrap_triton)
    if mode == "aot_function":
        compiled = aot_function(traced, **kept.compilers)
    else:
        compiled = aot_module(_Module(fn), **kept.compilers)
    out = compiled(*make_inputs())
    leaves_out = torch.utils._pytree.tree_leaves(out)
    torch.stack(
        [o.sum() for o in leaves_out if isinstance(o, torch.Tensor) and o.requires_grad]
    ).sum().backward()
    return {kind: [kernel_calls(gm, in_place_ok) for gm in gms] for kind, gms in kept.by_kind.items()}


class _Module(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *inputs: Any) -> Any:
        return self.fn(ft.wrap_triton, *inputs)


# --- a backward kernel writing into a fresh gradient buffer ------------------------------------------------


def mul_fresh(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return Mul.apply(x, w, wrap, "fresh")


@pytest.mark.parametrize("rg_w", [True, False], ids=["w_requires_grad", "w_no_grad"])
def test_backward_writes_fresh_gradient_buffers(device: str, rg_w: bool) -> None:
    check_matches_eager(mul_fresh, leaves(device, rg_w=rg_w), modes=MODES)


def test_backward_writes_buffers_preallocated_in_forward(device: str) -> None:
    """Gradient buffers allocated in forward and saved: forward outputs that backward fills."""

    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return Mul.apply(x, w, wrap, "preallocated")

    check_matches_eager(prog, leaves(device), modes=MODES)


# Mul's graphs wherever its backward writes: one functional call each, writing these arguments.
MUL_GRAPHS = {"fw": [[("mul_fwd", ("out_ptr",))]], "bw": [[("mul_bwd", ("dx_ptr", "dw_ptr"))]]}


@pytest.mark.parametrize("mode", MODES)
def test_fresh_buffers_graphs(device: str, mode: str) -> None:
    assert traced_graphs(mul_fresh, leaves(device), mode) == MUL_GRAPHS


def test_backward_between_torch_ops(device: str) -> None:
    """The Function sits between torch ops: its grad_out and its input gradient are intermediates."""

    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = Mul.apply(torch.sin(x), w * 2, wrap, "fresh")
        return torch.cos(h) * x

    check_matches_eager(prog, leaves(device), modes=MODES)


# --- a backward kernel writing into tensors saved in forward ---------------------------------------------


def test_backward_writes_saved_tensors_in_place(device: str) -> None:
    """dx over the saved x and dw over the saved w; both are intermediates of the program."""

    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = x * 2
        b = w + 1
        out = Mul.apply(a, b, wrap, "saved")
        return out, a.sum() + b.sum()  # a and b are also read outside the Function, before backward

    check_matches_eager(prog, leaves(device), modes=MODES)


@pytest.mark.parametrize("mode", MODES)
def test_saved_tensors_in_place_graphs(device: str, mode: str) -> None:
    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return Mul.apply(x * 2, w + 1, wrap, "saved")

    assert traced_graphs(prog, leaves(device), mode) == MUL_GRAPHS


def test_backward_writes_saved_leaf_input(device: str) -> None:
    """The saved x is the program's own leaf (no grad): eager overwrites it during backward."""

    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.sin(Mul.apply(x, w * 1, wrap, "saved"))

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        x, w = leaves(device)()
        return x.detach(), w  # x does not require grad, so eager may overwrite it

    x, w = make()
    prog(raw, x, w).sum().backward()
    assert not torch.equal(x, make()[0]), "eager should have written dx over x"
    check_matches_eager(prog, make, modes=MODES)


# pytorch#174124: a tensor the forward created and saved, written by a backward kernel. Eagerly,
# whoever holds it sees the write after backward. AOTAutograd carries a backward's writes back into
# graph inputs only, so when the tensor is also an output of the traced program the partitioner
# must refuse the joint graph (Note [backward writes to forward tensors] in functionalize.py);
# when it is not, the write is invisible to the caller and the program runs.

WITH_GRAD_SUM = {"reads_grad": MulWithGradSum, "reads_no_grad": MulWithOutputSum}
PARTITIONERS = {"default": default_partition, "min_cut": min_cut_rematerialization_partition}


@pytest.mark.parametrize("partitioner", PARTITIONERS)
@pytest.mark.parametrize("fn", WITH_GRAD_SUM)
def test_forward_output_saved_and_mutated_in_backward(device: str, fn: str, partitioner: str) -> None:
    """The output is only read in forward (before backward adds into it): the caller cannot see it."""
    function = WITH_GRAD_SUM[fn]

    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, acc = function.apply(x, w, wrap)
        return torch.tanh(out), acc * 3

    check_matches_eager(prog, leaves(device), modes=MODES, partition_fn=PARTITIONERS[partitioner])


# What the program returns of ``acc``, and the node the partitioner's message then names: ours for
# ``acc`` itself, the view's (torch's ``view_N`` / ``slice_N``) for a view of it (README known limits).
RETURNED: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], str]] = {
    "acc": (lambda acc: acc, "acc_ptr_written_in_backward_by_accumulate"),
    "acc_view": (lambda acc: acc.view(4, N // 4), r"view_\d+"),
    "acc_slice": (lambda acc: acc[2:], r"slice_\d+"),
}


def _returns_acc(function: Any, returned: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    view_of = RETURNED[returned][0]

    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, acc = function.apply(x, w, wrap)
        return out, view_of(acc)

    return prog


@pytest.mark.parametrize("partitioner", PARTITIONERS)
@pytest.mark.parametrize("returned", RETURNED)
@pytest.mark.parametrize("fn", WITH_GRAD_SUM)
@pytest.mark.parametrize("mode", MODES)
def test_forward_output_mutated_in_backward_raises(
    device: str, mode: str, fn: str, returned: str, partitioner: str
) -> None:
    """pytorch#174124 as written: the caller holds ``acc``, and eager's backward adds into it.

    AOTAutograd cannot give the caller that write; it must raise, not return the forward value.
    The message is the partitioner's; the node it names is ours when ``acc`` itself is returned,
    and the view's (``view_N``, ``slice_N``) when a view of it is.
    """
    prog = _returns_acc(WITH_GRAD_SUM[fn], returned)
    x, w = leaves(device)()
    out, acc = prog(raw, x, w)
    before = acc.clone()
    out.sum().backward()
    assert not torch.equal(acc, before), "eager's backward should have written the caller's acc"

    node = RETURNED[returned][1]
    with pytest.raises(AssertionError, match=f"Node {node} was invalid, but is output"):
        check_matches_eager(
            prog, leaves(device), modes=(mode,), no_grad=(False,), partition_fn=PARTITIONERS[partitioner]
        )


# --- a backward kernel writing the incoming gradient in place ---------------------------------------------


def test_backward_writes_incoming_gradient_of_graph_output(device: str) -> None:
    """The Function's output is the graph's output: its grad_out is a tangent of the backward graph."""

    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return GeluTanh.apply(x * w, wrap, "grad_out")

    check_matches_eager(prog, leaves(device), modes=MODES)


def test_backward_writes_incoming_gradient_of_intermediate(device: str) -> None:
    """grad_out is computed inside the backward graph (the Function feeds a torch op)."""

    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = GeluTanh.apply(x, wrap, "grad_out")
        return h * w + h

    check_matches_eager(prog, leaves(device), modes=MODES)


@pytest.mark.parametrize("mode", MODES)
def test_incoming_gradient_in_place_graphs(device: str, mode: str) -> None:
    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return GeluTanh.apply(x * w, wrap, "grad_out")

    graphs = traced_graphs(prog, leaves(device), mode)
    assert graphs == {
        "fw": [[("gelu_tanh_fwd", ("y_ptr",))]],
        "bw": [[("gelu_tanh_bwd", ("dx_ptr",))]],
    }


# --- a backward kernel the mutation analysis cannot see through (pytorch#119348) --------------------------


@pytest.fixture
def opaque_backward(device: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Make mul_bwd_opaque's writes unknown to the analysis; returns the kernel's OPAQUE flag.

    On a GPU the kernel runs its non-pure inline asm and the real analysis fails. The interpreter
    cannot run inline asm, so on CPU the kernel runs without it and the analysis is made to answer
    "unknown" for this kernel only, as it does for the asm version (test_opaque_kernel_is_unknown).
    """
    # The warning is issued once per kernel per process; every test here must see it.
    monkeypatch.setattr(ft_functionalize, "_warned", type(ft_functionalize._warned)())
    if device != "cpu":
        return True
    _analysis_answers_unknown_for(K.mul_bwd_opaque, monkeypatch)
    return False


def _analysis_answers_unknown_for(opaque: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation analysis answers "unknown" for ``opaque`` only, as for a kernel it cannot read."""
    real = ft_mutation.analyze_writes

    def analyze_writes(kernel: object, args: Any) -> ft_mutation.WriteAnalysis:
        if kernel is opaque:
            return ft_mutation.WriteAnalysis(None, reason="opaque for the test", opaque_side_effects=True)
        return real(kernel, args)

    monkeypatch.setattr(ft_mutation, "analyze_writes", analyze_writes)


def test_opaque_kernel_is_unknown_to_the_analysis() -> None:
    """The asm version of the kernel really defeats the analysis (it needs no GPU to say so)."""
    x = torch.zeros(N)
    args = dict(x_ptr=x, w_ptr=x, dy_ptr=x, dx_ptr=x, dw_ptr=x, n=N, OPAQUE=True, BLOCK=BLOCK)
    assert ft_mutation.analyze_writes(K.mul_bwd_opaque, args).written_names is None
    args["OPAQUE"] = False
    assert ft_mutation.analyze_writes(K.mul_bwd_opaque, args).written_names == {"dx_ptr", "dw_ptr"}


@pytest.mark.parametrize("in_place", LEAF_WRITE_PATHS, ids=lambda p: "in_place" if p else "copy_back")
@pytest.mark.parametrize("mode", MODES)
def test_backward_analysis_failure(
    device: str, opaque_backward: bool, mode: str, in_place: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every argument of the backward kernel counts as written: saved leaves, the tangent, the buffers.

    No error ("Found an input to the backward that was mutated during the backward pass"), one
    AnalysisWarning naming the kernel, and eager's values and grads. The saved leaves make it a
    backward write of leaf inputs: copied back, or launched in place where that fails (torch < 2.13).
    """
    monkeypatch.setattr(ft_functionalize, "LEAF_WRITES_IN_PLACE", in_place)

    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return MulOpaqueBackward.apply(x, w, wrap, opaque_backward)

    with pytest.warns(AnalysisWarning, match="mul_bwd_opaque") as record:
        check_matches_eager(prog, leaves(device), modes=(mode,), no_grad=(False,))
    assert len([w for w in record if issubclass(w.category, AnalysisWarning)]) == 1


def test_backward_analysis_failure_between_torch_ops(device: str, opaque_backward: bool) -> None:
    """Unknown writes where the kernel's arguments are intermediates of both graphs."""

    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        a, b = x * 3, w - 1
        out = MulOpaqueBackward.apply(a, b, wrap, opaque_backward)
        return out * a + b

    with pytest.warns(AnalysisWarning, match="mul_bwd_opaque"):
        check_matches_eager(prog, leaves(device), modes=MODES)


@pytest.mark.parametrize("in_place", LEAF_WRITE_PATHS, ids=lambda p: "in_place" if p else "copy_back")
@pytest.mark.parametrize("mode", MODES)
def test_analysis_failure_graphs(
    device: str, opaque_backward: bool, mode: str, in_place: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ft_functionalize, "LEAF_WRITES_IN_PLACE", in_place)

    def prog(wrap: Wrap, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return MulOpaqueBackward.apply(x, w, wrap, opaque_backward)

    with pytest.warns(AnalysisWarning):
        graphs = traced_graphs(prog, leaves(device), mode, in_place_ok=True)
    # Every argument assumed written, the saved leaves among them: one launch in place on them all
    # where a leaf's copy-back fails, else a functional node writing them all.
    every = ("in place",) if in_place else ("x_ptr", "w_ptr", "dy_ptr", "dx_ptr", "dw_ptr")
    assert graphs == {"fw": [[("mul_fwd", ("out_ptr",))]], "bw": [[("mul_bwd_opaque", every)]]}


@pytest.fixture
def opaque_accumulate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``accumulate``'s writes unknown to the analysis (as a kernel it cannot read is), on any device."""
    monkeypatch.setattr(ft_functionalize, "_warned", type(ft_functionalize._warned)())
    _analysis_answers_unknown_for(K.accumulate, monkeypatch)


@pytest.mark.parametrize("partitioner", PARTITIONERS)
@pytest.mark.parametrize(
    ("fn", "returned"),
    [
        ("reads_grad", "acc"),
        pytest.param(
            "reads_grad",
            "acc_view",
            marks=pytest.mark.xfail(
                strict=True,
                reason="the caller's acc.view(4, 6) comes back with acc's shape (24,) (its values the "
                "forward's), where torch itself refuses the program (Node view_1 was invalid)",
            ),
        ),
        pytest.param(
            "reads_no_grad",
            "acc",
            marks=pytest.mark.xfail(
                strict=True,
                reason="a launch that reads no gradient is moved into the forward graph: the caller's "
                "acc holds the backward's write already after forward",
            ),
        ),
    ],
)
@pytest.mark.parametrize("mode", MODES)
def test_unreadable_backward_write_of_a_returned_tensor_leaves_the_caller_the_forward_value(
    device: str, opaque_accumulate: None, mode: str, fn: str, returned: str, partitioner: str
) -> None:
    """README known limit: where the analysis cannot read the backward kernel (AnalysisWarning), the
    check that refuses a backward write of a returned tensor is off: no error, and the caller's acc
    keeps its forward value, where eager's backward writes it. Everything else matches eager."""
    prog = _returns_acc(WITH_GRAD_SUM[fn], returned)
    x, w = leaves(device)()
    out, acc = prog(raw, x, w)
    forward_acc = acc.clone()
    out.sum().backward()
    assert not torch.equal(acc, forward_acc), "eager's backward should have written the caller's acc"

    with pytest.warns(AnalysisWarning, match="accumulate"):
        call = compile_mode(mode, prog, leaves(device)(), partition_fn=PARTITIONERS[partitioner])
        x2, w2 = leaves(device)()
        out2, acc2 = call(x2, w2)
        assert_same(acc2, forward_acc)  # after forward, as in eager
        out2.sum().backward()
    assert_same(acc2, forward_acc)  # eager's acc is the backward's write; the caller's is not
    assert_same(out2, out)
    assert x2.grad is not None and w2.grad is not None and x.grad is not None and w.grad is not None
    assert_same(x2.grad, x.grad)
    assert_same(w2.grad, w.grad)
