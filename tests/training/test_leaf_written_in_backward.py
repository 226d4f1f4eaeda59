"""A backward kernel that writes its saved leaf input (Note [backward writes to leaf inputs]).

Eagerly the raw launch overwrites the leaf's memory. Traced, the write goes one of two ways:
committed as a functional update that AOTAutograd copies back into the input (torch >= 2.13), or
launched in place on the saved input (where that copy-back fails, torch < 2.13). Both paths run
here wherever they can (the copy-back one only where torch supports it), bit for bit against eager:
outputs, the leaf's data after backward, every ``.grad``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from functorch.compile import aot_function, default_partition, min_cut_rematerialization_partition

import functional_triton as ft
from functional_triton import _compat
from functional_triton import functionalize as ft_functionalize
from tests import kernels as K
from tests.harness import AOT_MODES, check_compiled, check_matches_eager, compile_mode, raw
from tests.helpers import nop

PATHS = [
    pytest.param(True, id="in_place"),
    pytest.param(
        False,
        id="copy_back",
        marks=pytest.mark.skipif(
            not _compat.backward_writes_to_leaf_inputs_supported(),
            reason="this torch's AOTAutograd cannot copy a backward write back into a leaf input",
        ),
    ),
]


@pytest.fixture(params=PATHS)
def in_place(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(ft_functionalize, "LEAF_WRITES_IN_PLACE", request.param)
    return bool(request.param)


def _add_one(wrap: Any, t: torch.Tensor) -> None:
    wrap(K.add_one_inplace)[(1,)](t, t.numel(), BLOCK=16)


class WritesSavedLeaf(torch.autograd.Function):
    """Backward adds one to its saved input (or a view of it) and returns the gradient computed from it."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wrap: Any, view: bool) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.wrap, ctx.view = wrap, view
        return x * 2

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        (x,) = ctx.saved_tensors
        before = x * 3  # read before the launch: the old value
        _add_one(ctx.wrap, x.view(-1) if ctx.view else x)
        return dy * x + before, None, None


class ReturnsWrittenLeaf(torch.autograd.Function):
    """Liger's swiglu pattern: backward writes the gradient into the saved input and returns it."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wrap: Any) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.wrap = wrap
        return x * 2

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        (x,) = ctx.saved_tensors
        _add_one(ctx.wrap, x)
        return x, None


def _leaf() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(16.0).reshape(4, 4).requires_grad_(), torch.arange(16.0).reshape(4, 4)


@pytest.mark.parametrize("view", [False, True], ids=["input", "view"])
def test_saved_leaf_written_in_backward(in_place: bool, view: bool) -> None:
    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return WritesSavedLeaf.apply(x, wrap, view) * y

    check_matches_eager(prog, _leaf, modes=AOT_MODES)


def test_written_leaf_returned_as_its_gradient(in_place: bool) -> None:
    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ReturnsWrittenLeaf.apply(x, wrap) + y

    check_matches_eager(prog, _leaf, modes=AOT_MODES)


def _backward_graph(prog: Any) -> torch.fx.GraphModule:
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, example: Any) -> Any:
        graphs.append(gm)
        return nop(gm, example)

    x, y = _leaf()
    aot_function(lambda x, y: prog(ft.wrap_triton, x, y), fw_compiler=keep, bw_compiler=keep)(
        x, y
    ).sum().backward()
    return graphs[1]


def test_in_place_path_launches_on_the_saved_input(in_place: bool) -> None:
    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return WritesSavedLeaf.apply(x, wrap, False) * y

    bw = _backward_graph(prog)
    launches = [n for n in bw.graph.nodes if n.target is ft.triton_kernel_wrapper_mutation]
    functional = [n for n in bw.graph.nodes if n.target is ft.triton_kernel_wrapper_functional]
    copies = [n for n in bw.graph.nodes if n.target is torch.ops.aten.copy_.default]
    if in_place:
        assert len(launches) == 1 and not functional and not copies, bw.code
        (arg,) = launches[0].kwargs["kwargs"].values()
        assert arg.op == "placeholder", bw.code  # the saved input itself
    else:
        assert not launches and len(functional) == 1 and len(copies) == 1, bw.code


@triton.jit
def add_one_to_both(a_ptr, b_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(a_ptr + offs, tl.load(a_ptr + offs, mask=m) + 1, mask=m)
    tl.store(b_ptr + offs, tl.load(b_ptr + offs, mask=m) + 1, mask=m)


class WritesLeafAndForwardTensor(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        ctx.save_for_backward(x, y)
        return x * 3

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        x, y = ctx.saved_tensors
        ft.wrap_triton(add_one_to_both)[(1,)](x, y, x.numel(), BLOCK=16)
        return dy * y


def test_one_launch_writing_a_leaf_and_a_forward_tensor_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ft_functionalize, "LEAF_WRITES_IN_PLACE", True)
    call = aot_function(lambda x: WritesLeafAndForwardTensor.apply(x), fw_compiler=nop, bw_compiler=nop)
    with pytest.raises(NotImplementedError, match="add_one_to_both writes, in a backward, the leaf input"):
        call(torch.arange(16.0).requires_grad_())  # the joint graph is traced at the first call


@pytest.mark.parametrize("mode", ["aot_function", "aot_module"])
def test_known_limit_min_cut_partitioner_under_aot_drops_the_in_place_leaf_write(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """README known limit: on the in-place path (torch < 2.13; forced here), aot_function / aot_module
    given ``partition_fn=min_cut_rematerialization_partition`` are not detected (torch.compile's
    reordering backends are refused, tests/compile/test_leaf_writes.py). The min-cut partitioner drops
    a launch that comes before any use of the incoming gradient: no error, the leaf is left unwritten
    and its gradient is computed from the unwritten value. The default partitioner matches eager."""
    monkeypatch.setattr(ft_functionalize, "LEAF_WRITES_IN_PLACE", True)

    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return WritesSavedLeaf.apply(x, wrap, False) + y

    x, y = _leaf()
    prog(raw, x, y).sum().backward()
    original = _leaf()[0].detach()
    assert torch.equal(x.detach(), original + 1), "eager's backward should have written the leaf"
    assert x.grad is not None and torch.equal(x.grad, (original + 1) + original * 3)

    call = compile_mode(mode, prog, _leaf(), partition_fn=min_cut_rematerialization_partition)
    x, y = _leaf()
    call(x, y).sum().backward()  # no error
    assert torch.equal(x.detach(), original), "the launch ran: the known limit is gone"
    assert x.grad is not None and torch.equal(x.grad, original + original * 3)

    check_matches_eager(prog, _leaf, modes=(mode,), no_grad=(False,), partition_fn=default_partition)


@pytest.mark.filterwarnings(
    # torch 2.13's Dynamo instantiates autograd.Function classes itself; its Inductor touches
    # torch.jit.script_method while compiling (as in tests/compile/conftest.py).
    "ignore:<class 'torch.autograd.function.Function'> should not be instantiated:DeprecationWarning",
    "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning",
)
def test_in_place_path_under_torch_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """The functional_triton backend runs the in-place path as eager does; Inductor's partitioner
    reorders the backward, so there it is refused naming the kernel (tests/compile/test_leaf_writes.py)."""
    monkeypatch.setattr(ft_functionalize, "LEAF_WRITES_IN_PLACE", True)

    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return WritesSavedLeaf.apply(x, wrap, False) * y

    try:
        check_compiled(prog, _leaf, backends=("functional_triton",), no_grad=(False,))
        torch._dynamo.reset()
        compiled = torch.compile(lambda x, y: prog(ft.wrap_triton, x, y), backend="inductor", fullgraph=True)
        x, y = _leaf()
        # Dynamo wraps the backend's NotImplementedError (raised when the joint graph is traced).
        with pytest.raises(
            torch._dynamo.exc.BackendCompilerFailed,
            match=r"\nNotImplementedError: add_one_inplace writes, in a backward, the leaf input\(s\)",
        ) as info:
            compiled(x, y).sum().backward()
        assert isinstance(info.value.inner_exception, NotImplementedError)
    finally:
        torch._dynamo.reset()
