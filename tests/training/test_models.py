"""Small models whose layers are Triton kernels in autograd.Functions, trained under aot_module.

Each model takes a ``wrap`` callable: ``raw`` (the kernel itself, plain ``kernel[grid](...)``
launches) for the eager reference, ``ft.wrap_triton`` for the copy trained through
``aot_module`` with nop compilers. Both start from the same parameters, see the same batches and
take the same optimizer steps; the loss, every gradient and every parameter must match bit for bit
after each step. The kernels have fixed reduction orders (tests/training/kernels.py), so this holds
on a GPU as well as on the interpreter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import triton
from functorch.compile import aot_module

import functional_triton as ft
from tests.harness import check_matches_eager, raw
from tests.helpers import Capture, kernel_calls
from tests.training import kernels as K

Wrap = Callable[[Any], Any]
STEPS = 4


def _pow2(n: int) -> int:
    return triton.next_power_of_2(n)


# --- the autograd.Functions -------------------------------------------------------------------------------


class Softmax(torch.autograd.Function):
    """Row-wise softmax over the last dimension; backward writes dx into ``into``.

    into: "fresh" (a new buffer), "saved" (over the saved output y), "grad_out" (over dy).
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wrap: Wrap, into: str) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        rows, cols = x2.shape
        wrap(K.softmax_fwd)[(rows,)](x2, y, x2.stride(0), y.stride(0), cols, BLOCK=_pow2(cols))
        ctx.save_for_backward(y)
        ctx.wrap, ctx.into, ctx.shape = wrap, into, x.shape
        return y.view(x.shape)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        (y,) = ctx.saved_tensors
        dy = dy.reshape(y.shape).contiguous()
        dx = {"fresh": torch.empty_like(y), "saved": y, "grad_out": dy}[ctx.into]
        rows, cols = y.shape
        ctx.wrap(K.softmax_bwd)[(rows,)](
            y, dy, dx, y.stride(0), dy.stride(0), dx.stride(0), cols, BLOCK=_pow2(cols)
        )
        return dx.view(ctx.shape), None, None


class LayerNorm(torch.autograd.Function):
    """Layer norm over the last dimension; forward saves mean and rstd, backward reduces dw / db in
    two stages (per-group partial sums, then one atomic add per element into zeroed buffers).

    dx_into_dy: write dx over the incoming gradient instead of a fresh buffer.
    """

    GROUP = 4

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float, wrap: Wrap, dx_into_dy: bool
    ) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        rows, cols = x2.shape
        y = torch.empty_like(x2)
        mean = torch.empty(rows, device=x.device, dtype=torch.float32)
        rstd = torch.empty(rows, device=x.device, dtype=torch.float32)
        wrap(K.layer_norm_fwd)[(rows,)](x2, y, w, b, mean, rstd, x2.stride(0), cols, eps, BLOCK=_pow2(cols))
        ctx.save_for_backward(x2, w, mean, rstd)
        ctx.wrap, ctx.dx_into_dy, ctx.shape = wrap, dx_into_dy, x.shape
        return y.view(x.shape)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        x2, w, mean, rstd = ctx.saved_tensors
        rows, cols = x2.shape
        group = LayerNorm.GROUP
        dy = dy.reshape(x2.shape).contiguous()
        dx = dy if ctx.dx_into_dy else torch.empty_like(dy)
        partial_dw = torch.empty(group, cols, device=x2.device, dtype=torch.float32)
        partial_db = torch.empty(group, cols, device=x2.device, dtype=torch.float32)
        ctx.wrap(K.layer_norm_bwd_dx)[(group,)](
            x2,
            dy,
            dx,
            w,
            mean,
            rstd,
            partial_dw,
            partial_db,
            x2.stride(0),
            rows,
            cols,
            ROWS_PER_GROUP=triton.cdiv(rows, group),
            GROUP=group,
            BLOCK=_pow2(cols),
        )
        dw = torch.zeros_like(w)
        db = torch.zeros_like(w)
        block = 16
        ctx.wrap(K.layer_norm_bwd_dwdb)[(triton.cdiv(cols, block),)](
            partial_dw, partial_db, dw, db, cols, GROUP=group, BLOCK=block
        )
        return dx.view(ctx.shape), dw, db, None, None, None


def _grid(n: int, block: int = 64) -> tuple[int]:
    return (triton.cdiv(n, block),)


class GeluTanh(torch.autograd.Function):
    """GELU (tanh approximation); dx_over_x: backward writes dx over the saved input."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wrap: Wrap, dx_over_x: bool) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        wrap(K.gelu_tanh_fwd)[_grid(x.numel())](x, y, x.numel(), BLOCK=64)
        ctx.save_for_backward(x)
        ctx.wrap, ctx.dx_over_x = wrap, dx_over_x
        return y

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        (x,) = ctx.saved_tensors
        dy = dy.contiguous()
        dx = x if ctx.dx_over_x else torch.empty_like(x)
        ctx.wrap(K.gelu_tanh_bwd)[_grid(x.numel())](x, dy, dx, x.numel(), BLOCK=64)
        return dx, None, None


class LeakyReLUInplace(torch.autograd.Function):
    """In-place leaky ReLU (like nn.LeakyReLU(inplace=True)): forward overwrites x, saves the output,
    and backward turns the incoming gradient into dx in place."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wrap: Wrap, slope: float) -> torch.Tensor:
        assert x.is_contiguous()
        wrap(K.leaky_relu_inplace)[_grid(x.numel())](x, x.numel(), slope, BLOCK=64)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        ctx.wrap, ctx.slope = wrap, slope
        return x

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        (y,) = ctx.saved_tensors
        dy = dy.contiguous()
        ctx.wrap(K.leaky_relu_bwd_inplace)[_grid(y.numel())](y, dy, y.numel(), ctx.slope, BLOCK=64)
        return dy, None, None


# --- the models --------------------------------------------------------------------------------------------


class Attention(torch.nn.Module):
    """Single-head self-attention whose softmax is the kernel pair."""

    def __init__(self, wrap: Wrap, into: str, dim: int = 16) -> None:
        super().__init__()
        self.wrap, self.into = wrap, into
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.scale = dim**-0.5  # a power of two for dim = 16

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        attn = Softmax.apply((q @ k.transpose(-1, -2)) * self.scale, self.wrap, self.into)
        return self.proj(attn @ v)


class NormMLP(torch.nn.Module):
    """Linear -> kernel LayerNorm (own weight and bias) -> Linear."""

    def __init__(self, wrap: Wrap, dx_into_dy: bool, dim: int = 12, hidden: int = 24) -> None:
        super().__init__()
        self.wrap, self.dx_into_dy = wrap, dx_into_dy
        self.fc1 = torch.nn.Linear(dim, hidden)
        self.norm_weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, hidden))
        self.norm_bias = torch.nn.Parameter(torch.linspace(-0.25, 0.25, hidden))
        self.fc2 = torch.nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = LayerNorm.apply(self.fc1(x), self.norm_weight, self.norm_bias, 1e-5, self.wrap, self.dx_into_dy)
        return self.fc2(h)


class ActivationMLP(torch.nn.Module):
    """Linear -> kernel activation -> Linear."""

    def __init__(self, wrap: Wrap, activation: str, dim: int = 12, hidden: int = 40) -> None:
        super().__init__()
        self.wrap, self.activation = wrap, activation
        self.fc1 = torch.nn.Linear(dim, hidden)
        self.fc2 = torch.nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        if self.activation == "leaky_relu_inplace":
            h = LeakyReLUInplace.apply(h, self.wrap, 0.125)
        else:
            h = GeluTanh.apply(h, self.wrap, self.activation == "gelu_dx_over_x")
        return self.fc2(h)


# --- training eagerly and under aot_module, step by step ---------------------------------------------------


def _equal(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=lambda m: f"{what}: {m}")


def train_and_compare(
    make_model: Callable[[Wrap], torch.nn.Module],
    make_batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]],
    device: str,
) -> dict[str, list[set[str]]]:
    """Train an eager copy and an aot_module copy for STEPS steps; compare after every step.

    Returns the names of the kernels in each forward and backward graph the compilers saw.
    """
    torch.manual_seed(0)
    eager = make_model(raw).to(device)
    traced = make_model(ft.wrap_triton).to(device)
    traced.load_state_dict(eager.state_dict())
    kept = Capture()
    compiled = aot_module(traced, **kept.compilers)
    runs = [
        (eager, eager, torch.optim.SGD(eager.parameters(), lr=0.125, momentum=0.5)),
        (traced, compiled, torch.optim.SGD(traced.parameters(), lr=0.125, momentum=0.5)),
    ]
    gen = torch.Generator(device="cpu").manual_seed(1)  # batches are drawn on cpu, then moved
    for step in range(STEPS):
        x, target = (t.to(device) for t in make_batch(gen))
        results = []
        for model, call, opt in runs:
            opt.zero_grad()
            out = call(x.clone())
            loss = torch.nn.functional.mse_loss(out, target)
            loss.backward()
            grads = []
            for name, p in model.named_parameters():
                assert p.grad is not None, f"step {step}: {name}.grad is None"
                grads.append(p.grad.clone())
            opt.step()
            params = [p.detach().clone() for p in model.parameters()]
            results.append((out.detach(), loss.detach(), grads, params))
        (e_out, e_loss, e_grads, e_params), (t_out, t_loss, t_grads, t_params) = results
        _equal(t_out, e_out, f"step {step}: output")
        _equal(t_loss, e_loss, f"step {step}: loss")
        names = [n for n, _ in eager.named_parameters()]
        for name, t, e in zip(names, t_grads, e_grads):
            _equal(t, e, f"step {step}: {name}.grad")
        for name, t, e in zip(names, t_params, e_params):
            _equal(t, e, f"step {step}: {name} after the optimizer step")
    return {kind: [{name for name, _ in kernel_calls(g)} for g in gms] for kind, gms in kept.by_kind.items()}


def batches(*shape: int) -> Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]]:
    """(input, target) pairs drawn on cpu (the same numbers on every device)."""
    return lambda gen: (
        torch.randn(*shape, generator=gen, device="cpu"),
        torch.randn(*shape, generator=gen, device="cpu"),
    )


@pytest.mark.parametrize("into", ["fresh", "saved", "grad_out"])
def test_attention_softmax(device: str, into: str) -> None:
    graphs = train_and_compare(
        lambda wrap: Attention(wrap, into),
        batches(2, 8, 16),
        device,
    )
    assert graphs == {"fw": [{"softmax_fwd"}], "bw": [{"softmax_bwd"}]}


@pytest.mark.parametrize("dx_into_dy", [False, True], ids=["dx_fresh", "dx_into_dy"])
def test_layer_norm(device: str, dx_into_dy: bool) -> None:
    graphs = train_and_compare(
        lambda wrap: NormMLP(wrap, dx_into_dy),
        batches(10, 12),
        device,
    )
    assert graphs == {"fw": [{"layer_norm_fwd"}], "bw": [{"layer_norm_bwd_dx", "layer_norm_bwd_dwdb"}]}


@pytest.mark.parametrize("activation", ["gelu", "gelu_dx_over_x", "leaky_relu_inplace"])
def test_activation(device: str, activation: str) -> None:
    fw, bw = {
        "gelu": ("gelu_tanh_fwd", "gelu_tanh_bwd"),
        "gelu_dx_over_x": ("gelu_tanh_fwd", "gelu_tanh_bwd"),
        "leaky_relu_inplace": ("leaky_relu_inplace", "leaky_relu_bwd_inplace"),
    }[activation]
    graphs = train_and_compare(
        lambda wrap: ActivationMLP(wrap, activation),
        batches(6, 12),
        device,
    )
    assert graphs == {"fw": [{fw}], "bw": [{bw}]}


def test_softmax_output_saved_twice_and_overwritten_in_backward(device: str) -> None:
    """y is saved by matmul (autograd's) and by the kernel softmax, whose backward overwrites y.

    Eager runs matmul's backward first, so it reads y before the softmax backward kernel overwrites
    it; the traced graphs must give the same gradients (a forward output, saved, mutated in backward:
    pytorch#174124).
    """

    def prog(wrap: Wrap, s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return Softmax.apply(s, wrap, "saved") @ v

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator(device="cpu").manual_seed(0)
        s = torch.randn(6, 8, generator=g, device="cpu").to(device).requires_grad_()
        v = torch.randn(8, 5, generator=g, device="cpu").to(device).requires_grad_()
        return s, v

    check_matches_eager(prog, make, modes=("aot_function", "aot_module"))
