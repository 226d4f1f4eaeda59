"""A backward kernel writing a saved leaf input that requires grad, under torch.compile.

On torch < 2.13 AOTAutograd cannot copy such a write back, so the launch is made in place in the
backward graph (Note [backward writes to leaf inputs]). That is exact only with a partitioner that
keeps the traced order: ``backend="functional_triton"``. torch.compile's aot_eager and inductor
backends use the min-cut partitioner, which reorders the backward (an earlier read of the input
moved after the launch: ``x.grad`` off by the write; a launch before any use of the incoming
gradient dropped: the input left unwritten), so there the path raises naming the kernel.
``LEAF_WRITES_IN_PLACE`` forces the path, so torch 2.13 runs these too.
"""

from __future__ import annotations

import pytest
import torch

import functional_triton as ft
from functional_triton import functionalize as ft_functionalize
from functional_triton._compat import backward_leaf_copy_back_fails
from tests.compile import kernels as k
from tests.harness import check_compiled

N = 40


class _ReadsThenWrites(torch.autograd.Function):
    """The backward reads its saved input, writes it with a kernel, then uses the gradient."""

    @staticmethod
    def forward(ctx, x, wrap):
        ctx.save_for_backward(x)
        ctx.wrap = wrap
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        before = x * 3
        ctx.wrap(k.add_one_inplace)[(3,)](x, N, BLOCK=16)
        return grad * x + before, None


def _scaled(wrap, x, y):  # the gradient's first use (times y) comes before the Function's backward
    return _ReadsThenWrites.apply(x, wrap) * y


def _direct(wrap, x, y):  # the launch comes before any use of the gradient
    return _ReadsThenWrites.apply(x, wrap) + y


def _inputs():
    return torch.arange(N, dtype=torch.float32).requires_grad_(), torch.linspace(-1, 1, N)


@pytest.fixture
def leaf_writes_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ft_functionalize, "LEAF_WRITES_IN_PLACE", True)


@pytest.mark.parametrize("prog", [_scaled, _direct])
def test_the_functional_triton_backend_launches_in_place_on_the_leaf_exactly(
    prog, leaf_writes_in_place
) -> None:
    check_compiled(prog, _inputs, backends=("functional_triton",), no_grad=(False,))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("prog", [_scaled, _direct])
def test_reordering_backends_refuse_the_in_place_leaf_write_naming_the_kernel(
    prog, backend, leaf_writes_in_place
) -> None:
    # Before the refusal these gave x.grad off by 3 (_scaled, inductor) and x left unwritten
    # (_direct, both backends).
    torch._dynamo.reset()
    compiled = torch.compile(prog, backend=backend, fullgraph=True)
    x, y = _inputs()
    # Dynamo wraps the backend's NotImplementedError (raised when the joint graph is traced): the
    # caller gets BackendCompilerFailed, its message "backend='...' raised:\nNotImplementedError: ...".
    refusal = (
        rf"^backend='{backend}' raised:\n"
        r"NotImplementedError: add_one_inplace writes, in a backward, the leaf input\(s\) 'x_ptr'"
    )
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match=refusal) as info:
        compiled(ft.wrap_triton, x, y).sum().backward()
    assert isinstance(info.value.inner_exception, NotImplementedError)
    assert 'backend="functional_triton"' in str(info.value.inner_exception)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("prog", [_scaled, _direct])
def test_where_torch_copies_the_write_back_every_backend_is_exact(prog, backend) -> None:
    if backward_leaf_copy_back_fails():
        pytest.skip("this torch cannot copy a backward write into a leaf back: the refusal above applies")
    check_compiled(prog, _inputs, backends=(backend,), no_grad=(False,))
