"""reinplace_compiler on torch's own ops: functional aten ops become in-place where no one can tell.

Note [reinplacing torch ops]. Every program runs bit for bit against eager (check_matches_eager,
AOT modes with reinplace_compiler among them); graph assertions count the out-of-place ops left
before and after the pass, so each would fail were the pass disabled.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import triton
from functorch.compile import aot_function, make_boxed_func

import functional_triton as ft
from functional_triton.passes.torch_ops import out_of_place_ops, reinplace_torch_ops
from tests import kernels as K
from tests.harness import check_matches_eager

aten = torch.ops.aten
TRAINING_MODES = ("aot_function", "aot_module", "reinplace", "reinplace_keep")


def _add_one(wrap: Any, t: torch.Tensor) -> None:
    wrap(K.add_one_inplace)[(triton.cdiv(t.numel(), 16),)](t, t.numel(), BLOCK=16)


def compiled_graphs(
    prog: Callable[..., Any],
    make_inputs: Callable[[], Sequence[Any]],
    *,
    grad: bool = True,
    **aot_kwargs: Any,
) -> list[tuple[dict[str, int], torch.fx.GraphModule]]:
    """(out-of-place ops before the pass, graph after reinplace_compiler) per graph, forward first."""
    graphs: list[tuple[dict[str, int], torch.fx.GraphModule]] = []

    def compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        before = out_of_place_ops(gm)
        ft.reinplace_compiler(gm, example_inputs)
        graphs.append((before, gm))
        return make_boxed_func(gm.forward)

    compiled = aot_function(
        functools.partial(prog, ft.wrap_triton), fw_compiler=compiler, bw_compiler=compiler, **aot_kwargs
    )
    inputs = make_inputs()
    if grad:
        out = compiled(*inputs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        sum(o.sum() for o in outs if o.requires_grad).backward()
    else:
        with torch.no_grad():
            compiled(*inputs)
    return graphs


def left(gm: torch.fx.GraphModule, *names: str) -> int:
    counts = out_of_place_ops(gm)
    return sum(n for op, n in counts.items() if op.split(".")[1] in names)


def left_on_intermediates(gm: torch.fx.GraphModule, *names: str) -> int:
    """Out-of-place ops left whose first argument is not a graph input or a view of one."""

    def on_input(node: Any) -> bool:
        while (
            isinstance(node, torch.fx.Node)
            and node.op == "call_function"
            and getattr(node.target, "is_view", False)
        ):
            node = node.args[0]
        return isinstance(node, torch.fx.Node) and node.op == "placeholder"

    return sum(
        1
        for n in gm.graph.nodes
        if n.op == "call_function"
        and str(n.target) in out_of_place_ops(gm)
        and str(n.target).split(".")[1] in names
        and not on_input(n.args[0])
    )


def count(gm: torch.fx.GraphModule, target: Any) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and n.target is target)


# --- intermediates ------------------------------------------------------------------------------------


def writes_intermediates(wrap: Any, x: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x * 2
    y.add_(1)
    y.mul_(x)
    y[1:3] = x[4:6] * 5
    y[idx] = x[:2]
    g = torch.zeros(4, 4)
    g.addmm_(x.t(), y)
    return y.sum(0), g


def _xi() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(24.0).reshape(6, 4).requires_grad_(), torch.tensor([0, 5])


def test_intermediate_writes_match_eager_and_are_done_in_place() -> None:
    check_matches_eager(writes_intermediates, _xi)
    check_matches_eager(writes_intermediates, _xi, modes=TRAINING_MODES, dynamic=True)
    (before, fw), _ = compiled_graphs(writes_intermediates, _xi)
    names = ("add", "mul", "copy", "slice_scatter", "index_put", "addmm")
    assert left(fw, *names) == 2 and left_on_intermediates(fw, *names) == 0, fw.code  # x * 2, x[4:6] * 5
    assert before.get("aten.slice_scatter.default") == 1 and before.get("aten.index_put.default") == 1
    assert (
        count(fw, aten.add_.Tensor) == count(fw, aten.mul_.Tensor) == count(fw, aten.index_put_.default) == 1
    )
    assert count(fw, aten.addmm_.default) == 1 and count(fw, aten.copy_.default) == 1


def flce_like(wrap: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return FusedLinearGrads.apply(x, w, wrap)


class FusedLinearGrads(torch.autograd.Function):
    """The fused-linear-loss pattern: gradient buffers filled chunk by chunk in forward, saved, and
    scaled in place in backward (by a kernel, as Liger's ``element_mul_kernel`` does)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, wrap: Any) -> torch.Tensor:
        grad_x, grad_w = torch.zeros_like(x), torch.zeros_like(w)
        total = x.new_zeros(())
        for start in range(0, x.shape[0], 2):
            chunk = x[start : start + 2]
            logits = chunk @ w.t()
            _add_one(wrap, logits)  # a kernel writing an intermediate in the same graph
            grad_x[start : start + 2] = logits @ w
            grad_w.addmm_(logits.t(), chunk)
            total = total + logits.sum()
        ctx.save_for_backward(grad_x, grad_w)
        ctx.wrap = wrap
        return total

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        grad_x, grad_w = ctx.saved_tensors
        _add_one(ctx.wrap, grad_x)
        return grad_x * grad, grad_w.mul_(grad), None


def _xw() -> tuple[torch.Tensor, torch.Tensor]:
    x = (torch.arange(24.0).reshape(6, 4) / 7).requires_grad_()
    return x, (torch.arange(20.0).reshape(5, 4) / 3).requires_grad_()


def test_gradient_buffers_made_in_forward_and_saved_are_written_in_place() -> None:
    check_matches_eager(flce_like, _xw, modes=TRAINING_MODES)
    check_matches_eager(flce_like, _xw, modes=TRAINING_MODES, dynamic=True)
    (before, fw), (_, bw) = compiled_graphs(flce_like, _xw)
    assert before.get("aten.addmm.default") == 3 and before.get("aten.slice_scatter.default") == 3
    assert left(fw, "addmm", "slice_scatter", "copy") == 0, fw.code
    assert count(fw, aten.addmm_.default) == 3 and count(fw, aten.copy_.default) == 3
    # the backward's saved tensors are graph inputs: torch ops never write them
    assert left(bw, "mul") == 2 and count(bw, aten.mul_.Tensor) == 0, bw.code


def test_disabled_pass_leaves_the_copies() -> None:
    """The counts above come from this pass: without it the functional ops stay."""
    graphs: list[torch.fx.GraphModule] = []

    def compiler(gm: torch.fx.GraphModule, _: Any) -> Any:
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    aot_function(functools.partial(flce_like, ft.wrap_triton), fw_compiler=compiler, bw_compiler=compiler)(
        *_xw()
    ).backward()
    fw = graphs[0]
    assert left(fw, "addmm", "slice_scatter") == 6
    assert reinplace_torch_ops(fw)["aten.addmm_.default"] == 3
    assert left(fw, "addmm", "slice_scatter") == 0


# --- what must block it ---------------------------------------------------------------------------------


def writes_graph_input(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    x.add_(1)
    x[1:3] = 0
    return x * 2


def test_graph_inputs_are_never_written_by_torch_ops() -> None:
    make = lambda: (torch.arange(8.0),)  # noqa: E731
    check_matches_eager(writes_graph_input, make, no_grad=(True,))
    for keep in (False, True):
        ((_, fw),) = compiled_graphs(
            writes_graph_input, make, grad=False, keep_inference_input_mutations=keep
        )
        assert left(fw, "add") >= 1 and count(fw, aten.add_.Tensor) == 0, fw.code
        assert all(n.args[0].op == "placeholder" for n in fw.graph.nodes if n.target is aten.copy_.default), (
            "only AOTAutograd's copy-back writes the input"
        )


def old_value_read_later(wrap: Any, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = x * 2
    v = y[2:]  # a view of y read after y's functional update
    t = y.t() if y.dim() == 2 else y.view(-1)
    z = y.add(1)
    w = y.mul(3)  # y is read again: neither may write it
    return z, w, v * 1, t * 1


def saved_value_written_later(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    y = torch.exp(x)  # autograd saves y for exp's backward
    return y.add(1) * 2  # so y must keep its contents


def same_tensor_twice(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    y = x + 1
    z = y[:4]
    z.copy_(y[4:])  # copy(y[:4], y[4:]): source and destination share y
    return y.mul(y)  # mul(y, y)


def written_then_viewed_output(wrap: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x * 2
    out = y.view(2, 4)  # returned: AOTAutograd regenerates it from y
    y2 = y.add(1)
    return out, y2


BLOCKING = {
    "view read later": old_value_read_later,
    "saved for backward": saved_value_written_later,
    "same tensor twice": same_tensor_twice,
    "view returned": written_then_viewed_output,
}


@pytest.mark.parametrize("case", BLOCKING)
def test_a_later_read_of_the_old_contents_keeps_the_op_out_of_place(case: str) -> None:
    make = lambda: (torch.arange(8.0).requires_grad_(),)  # noqa: E731
    check_matches_eager(BLOCKING[case], make)


def _node(gm: torch.fx.GraphModule, *targets: Any, arg: Any) -> torch.fx.Node:
    (node,) = (n for n in gm.graph.nodes if n.target in targets and arg in n.args[1:])
    return node


def test_blocked_ops_stay_out_of_place_and_free_ones_do_not() -> None:
    make = lambda: (torch.arange(8.0),)  # noqa: E731
    ((_, fw),) = compiled_graphs(old_value_read_later, make, grad=False)
    # y + 1 and y * 3: y, its slice and its view are read after them
    assert _node(fw, aten.add.Tensor, aten.add_.Tensor, arg=1).target is aten.add.Tensor, fw.code
    assert _node(fw, aten.mul.Tensor, aten.mul_.Tensor, arg=3).target is aten.mul.Tensor, fw.code
    # t * 1 is the last read of y's memory and t spans all of it; v * 1 reads a part of it
    assert count(fw, aten.mul_.Tensor) == 1, fw.code
    ((_, fw),) = compiled_graphs(same_tensor_twice, make, grad=False)
    assert count(fw, aten.copy.default) == 1 and count(fw, aten.mul.Tensor) == 1, fw.code
    ((_, fw),) = compiled_graphs(written_then_viewed_output, make, grad=False)
    assert count(fw, aten.add.Tensor) == 1, fw.code
    ((_, fw), _) = compiled_graphs(saved_value_written_later, lambda: (torch.arange(8.0).requires_grad_(),))
    assert count(fw, aten.add.Tensor) == 1 and count(fw, aten.mul_.Tensor) == 1, fw.code


# --- scatters and kernels ----------------------------------------------------------------------------


def scatter_of_dead_base(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    buf = torch.zeros(4, 8)
    buf = torch.slice_scatter(buf, x.view(1, 8), 0, 1, 2)
    buf = torch.select_scatter(buf, x * 3, 0, 3)
    return buf * 1


def test_scatter_into_a_dead_base_becomes_a_copy_into_the_view() -> None:
    make = lambda: (torch.arange(8.0).requires_grad_(),)  # noqa: E731
    check_matches_eager(scatter_of_dead_base, make)
    check_matches_eager(scatter_of_dead_base, make, modes=TRAINING_MODES, dynamic=True)
    (before, fw), _ = compiled_graphs(scatter_of_dead_base, make)
    assert left(fw, "slice_scatter", "select_scatter") == 0 and before, fw.code
    assert count(fw, aten.copy_.default) == 2


def kernel_and_torch_ops(wrap: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x * 2
    _add_one(wrap, y)  # kernel writes y in place
    y.mul_(3)  # torch writes it
    keep = y * 1  # a copy of the value now
    _add_one(wrap, y)  # kernel again; then a torch op that reads y's old value must not see this
    y.add_(keep)
    z = y[2:6]
    _add_one(wrap, z)  # a kernel on a view, then torch ops on the base
    y.sub_(1)
    return y, keep


def test_kernels_and_torch_ops_in_one_graph() -> None:
    make = lambda: (torch.arange(16.0).requires_grad_(),)  # noqa: E731
    check_matches_eager(kernel_and_torch_ops, make)
    check_matches_eager(kernel_and_torch_ops, make, modes=TRAINING_MODES, dynamic=True)
    (before, fw), _ = compiled_graphs(kernel_and_torch_ops, make)
    assert before.get("aten.mul.Tensor", 0) >= 2
    assert count(fw, aten.add_.Tensor) == 1 and count(fw, aten.sub_.Tensor) == 1, fw.code
    assert count(fw, ft.triton_kernel_wrapper_functional) == 0, fw.code


def part_of_a_buffer(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    return y[2:].mul(3)  # y is dead after, but y[2:] is a part of its storage


def test_a_view_of_part_of_a_buffer_is_not_written_in_place() -> None:
    """Written in place, the result would hold all of ``y``'s storage alive (a returned gradient too)."""
    make = lambda: (torch.arange(8.0).requires_grad_(),)  # noqa: E731
    check_matches_eager(part_of_a_buffer, make)
    (_, fw), (_, bw) = compiled_graphs(part_of_a_buffer, make)
    assert _node(fw, aten.mul.Tensor, aten.mul_.Tensor, arg=3).target is aten.mul.Tensor, fw.code
    out = aot_function(
        functools.partial(part_of_a_buffer, ft.wrap_triton), fw_compiler=ft.reinplace_compiler
    )(*make())
    assert out.untyped_storage().nbytes() == out.numel() * out.element_size()
