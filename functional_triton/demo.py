"""Train a small module whose forward and backward launch Triton kernels, under aot_module.

Run ``python -m functional_triton.demo``. On a machine without a GPU it uses Triton's
interpreter on CPU tensors (``TRITON_INTERPRET=1`` is set before triton is imported);
``--device cuda`` runs the same kernels on a GPU. Every step is compared bit for bit
with the same model run eagerly with raw ``kernel[grid](...)`` launches.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import types
from collections.abc import Callable
from typing import Any


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", default="cpu", help="cpu (Triton interpreter) or cuda")
    p.add_argument("--steps", type=int, default=4)
    return p.parse_args()


def _kernels() -> types.SimpleNamespace:
    """The demo's three kernels (triton is imported here: after TRITON_INTERPRET is set)."""
    import triton
    import triton.language as tl

    @triton.jit
    def leaky_relu_fwd(x_ptr, out_ptr, n, slope, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(out_ptr + offs, tl.where(x > 0, x, x * slope), mask=m)

    @triton.jit
    def leaky_relu_bwd(x_ptr, grad_out_ptr, grad_in_ptr, n, slope, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        g = tl.load(grad_out_ptr + offs, mask=m)
        tl.store(grad_in_ptr + offs, tl.where(x > 0, g, g * slope), mask=m)

    @triton.jit
    def ema_update(avg_ptr, x_ptr, n, momentum, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        avg = tl.load(avg_ptr + offs, mask=m)
        tl.store(avg_ptr + offs, avg * momentum + tl.load(x_ptr + offs, mask=m) * (1 - momentum), mask=m)

    return types.SimpleNamespace(
        leaky_relu_fwd=leaky_relu_fwd, leaky_relu_bwd=leaky_relu_bwd, ema_update=ema_update
    )


def _net_class() -> type:
    """A module whose forward and backward launch the kernels through ``self.wrap``."""
    import torch
    import triton

    k = _kernels()
    BLOCK = 64
    Wrap = Callable[[Any], Any]

    def grid(n: int) -> tuple[int]:
        return (triton.cdiv(n, BLOCK),)

    class LeakyReLU(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, wrap: Wrap) -> torch.Tensor:
            out = torch.empty_like(x)
            wrap(k.leaky_relu_fwd)[grid(x.numel())](x, out, x.numel(), 0.125, BLOCK=BLOCK)
            ctx.save_for_backward(x)
            ctx.wrap = wrap
            return out

        @staticmethod
        def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, None]:
            (x,) = ctx.saved_tensors
            grad_out = grad_out.contiguous()
            grad_in = torch.empty_like(x)
            ctx.wrap(k.leaky_relu_bwd)[grid(x.numel())](x, grad_out, grad_in, x.numel(), 0.125, BLOCK=BLOCK)
            return grad_in, None

    class Net(torch.nn.Module):
        def __init__(self, wrap: Wrap) -> None:
            super().__init__()
            self.wrap = wrap
            self.fc1 = torch.nn.Linear(16, 32)
            self.fc2 = torch.nn.Linear(32, 4)
            self.register_buffer("mean_activation", torch.zeros(32))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = LeakyReLU.apply(self.fc1(x), self.wrap)
            batch_mean = h.detach().mean(0)  # in place on a buffer, outside autograd
            self.wrap(k.ema_update)[grid(32)](self.mean_activation, batch_mean, 32, 0.875, BLOCK=BLOCK)
            out: torch.Tensor = self.fc2(h)
            return out

    return Net


def _same(eager: Any, traced: Any, loss: Any, eager_loss: Any) -> bool:
    import torch

    return torch.equal(loss.detach(), eager_loss) and all(
        torch.equal(a, b)
        for a, b in zip([*eager.parameters(), *eager.buffers()], [*traced.parameters(), *traced.buffers()])
    )


def main() -> int:
    args = _parse()
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    from functorch.compile import aot_module, make_boxed_func

    import functional_triton as ft

    torch.manual_seed(0)
    device = torch.device(args.device)
    eager = _net_class()(lambda k: k).to(device)  # raw kernel[grid](...) launches
    traced_net = copy.deepcopy(eager)
    traced_net.wrap = ft.wrap_triton
    graphs: list[str] = []

    def show(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm.code)
        return make_boxed_func(gm.forward)

    compiled = aot_module(traced_net, fw_compiler=show, bw_compiler=show)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.0625)
    opt_t = torch.optim.SGD(traced_net.parameters(), lr=0.0625)
    for step in range(args.steps):
        x = torch.randn(8, 16, device=device)
        target = torch.randn(8, 4, device=device)
        for net, fn, opt in ((eager, eager, opt_e), (traced_net, compiled, opt_t)):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(fn(x), target)
            loss.backward()
            opt.step()
            if net is eager:
                eager_loss = loss.detach()
        if step == 0:
            print("functionalized forward graph:\n" + graphs[0])
        same = _same(eager, traced_net, loss, eager_loss)
        print(f"step {step}: loss {loss.item():.6f}  parameters and buffer equal to eager: {same}")
        if not same:
            print("MISMATCH with eager", file=sys.stderr)
            return 1
    print("ok: every step matched eager bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
