"""autograd.py: both operators fall through autograd, so a traced kernel is as opaque as a raw launch."""

from __future__ import annotations

import functools

import pytest
import torch
from functorch.compile import aot_function
from torch._C import DispatchKey

import functional_triton as ft
from functional_triton import autograd
from tests import kernels as K
from tests.harness import check_matches_eager
from tests.helpers import Capture

N = 8
OPERATORS = [ft.triton_kernel_wrapper_mutation, ft.triton_kernel_wrapper_functional]


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.__name__)
def test_operators_fall_through_every_autograd_key(op: torch._ops.HigherOrderOperator) -> None:
    present = list(autograd.FALLTHROUGH_KEYS)
    assert DispatchKey.AutogradCPU in present and DispatchKey.AutogradCUDA in present
    for key in present:
        assert not op.non_fallthrough_keys.has(key), key
    # The keys whose rules the package registers are still handled.
    assert op.non_fallthrough_keys.has(DispatchKey.Functionalize)


def opaque(wrap, x):
    y = x * 2
    wrap(K.add_one_inplace)[(1,)](y, N, BLOCK=N)  # y keeps MulBackward: the write adds no history
    out = torch.empty_like(x)
    wrap(K.add_kernel)[(1,)](y, x, out, N, BLOCK=N)  # reads x and y: no gradient flows through it
    return y, out


def _inputs() -> tuple[torch.Tensor]:
    return (torch.arange(float(N)).requires_grad_(),)


def test_traced_kernel_is_opaque_like_a_raw_launch() -> None:
    x = _inputs()[0]
    y, out = aot_function(functools.partial(opaque, ft.wrap_triton), **Capture().compilers)(x)
    assert y.requires_grad and not out.requires_grad
    assert torch.equal(y, torch.arange(float(N)) * 2 + 1)
    assert torch.equal(out, torch.arange(float(N)) * 3 + 1)
    (y * torch.arange(1.0, N + 1)).sum().backward()
    # The mul's gradient, nothing from the kernels.
    assert x.grad is not None and torch.equal(x.grad, 2 * torch.arange(1.0, N + 1))


def test_opaque_program_matches_eager_in_every_mode() -> None:
    check_matches_eager(opaque, _inputs)
