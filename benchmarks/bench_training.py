"""One training step of a small Llama-style decoder block built from Liger-Kernel's ops.

RMSNorm, RoPE, causal attention (torch SDPA), a SwiGLU MLP and a chunked linear cross-entropy,
each Liger kernel routed through ``ft.wrap_triton`` (``tests/integration/liger.py``), under
``aot_module`` with ``reinplace_compiler`` as forward and backward compiler, against the same
step eager with Liger's raw kernels. Measured side by side in one run: step time and the step's
peak memory (``torch.cuda.max_memory_allocated`` during the step, above what was allocated before it
with that model's gradients cleared, so both sides count the gradients the step allocates).
``--profile`` adds, for each side, the CUDA kernels that take the most device time.
The loss is Liger's cross-entropy kernels without Liger's data-dependent Python
(``tests/integration/liger_workarounds.py``, README known limits), scaled by 2 (loss scaling).

GPU: ``python benchmarks/bench_training.py --gpu`` (hidden 2048, seq 2048, vocab 32000, bf16).
Without ``--gpu``: a tiny-shape smoke run on the interpreter that checks the traced step's loss,
gradients and inputs equal eager's bit for bit (no figures claimed).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

SMOKE = "--gpu" not in sys.argv
if SMOKE:
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import triton  # noqa: E402
from functorch.compile import aot_module  # noqa: E402
from liger_kernel.ops import rms_norm, rope, swiglu  # noqa: E402

import functional_triton as ft  # noqa: E402
from tests.integration import liger_workarounds as W  # noqa: E402
from tests.integration.liger import interpreter_shims, routed_through_ft  # noqa: E402

LOSS_SCALE = 2.0
CLONES_LEFT: list[int] = []  # per compiled graph: alias groups still copied after reinplacing
TORCH_OPS_LEFT: list[
    str
] = []  # per compiled graph: torch's out-of-place ops with an in-place form, before -> after


def counting_reinplace_compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    from functional_triton.passes.torch_ops import out_of_place_ops
    from tests.helpers import cloned_groups

    before = out_of_place_ops(gm)
    compiled = ft.reinplace_compiler(gm, example_inputs)
    CLONES_LEFT.append(cloned_groups(gm))
    after = out_of_place_ops(gm)
    TORCH_OPS_LEFT.append(
        f"{sum(before.values())} -> {sum(after.values())} "
        + "("
        + ", ".join(f"{op.split('.')[1]} {before[op]}->{after.get(op, 0)}" for op in sorted(before))
        + ")"
    )
    return compiled


class DecoderBlock(torch.nn.Module):
    """Pre-norm attention and SwiGLU MLP with residuals, a final norm and the LM-head loss."""

    def __init__(self, hidden: int, heads: int, intermediate: int, vocab: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.heads = heads

        def param(*shape: int, scale: float = 0.02) -> torch.nn.Parameter:
            return torch.nn.Parameter((torch.randn(*shape) * scale).to(dtype))

        self.norm1, self.norm2, self.norm_f = (
            torch.nn.Parameter(torch.ones(hidden, dtype=dtype)) for _ in range(3)
        )
        self.wq, self.wk, self.wv, self.wo = (param(hidden, hidden) for _ in range(4))
        self.w_gate, self.w_up = param(intermediate, hidden), param(intermediate, hidden)
        self.w_down = param(hidden, intermediate)
        self.lm_head = param(vocab, hidden)

    def attention(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        seq, hidden = x.shape
        split = lambda t: t.view(1, seq, self.heads, hidden // self.heads).transpose(1, 2)  # noqa: E731
        q, k = rope.LigerRopeFunction.apply(split(x @ self.wq.t()), split(x @ self.wk.t()), cos, sin)
        v = split(x @ self.wv.t())
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.transpose(1, 2).reshape(seq, hidden) @ self.wo.t()

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, target: torch.Tensor, count: int
    ) -> Any:
        h = x + self.attention(rms_norm.LigerRMSNormFunction.apply(x, self.norm1, 1e-6), cos, sin)
        n = rms_norm.LigerRMSNormFunction.apply(h, self.norm2, 1e-6)
        h = h + swiglu.LigerSiLUMulFunction.apply(n @ self.w_gate.t(), n @ self.w_up.t()) @ self.w_down.t()
        n = rms_norm.LigerRMSNormFunction.apply(h, self.norm_f, 1e-6)
        return W.FusedLinearCrossEntropy.apply(n, self.lm_head, target, count)


def inputs(seq: int, hidden: int, heads: int, vocab: int, dtype: torch.dtype, device: str) -> tuple[Any, ...]:
    torch.manual_seed(1)
    x = torch.randn(seq, hidden, dtype=dtype, device=device, requires_grad=True)
    angles = torch.randn(1, seq, hidden // heads, device=device).to(dtype)
    target = torch.randint(0, vocab, (seq,), device=device)
    target[::7] = -100
    return x, angles.cos(), angles.sin(), target, W.n_non_ignore(target)


def step(model: Callable[..., Any], params: list[torch.nn.Parameter], args: tuple[Any, ...]) -> torch.Tensor:
    clear_grads(params, args)
    loss = model(*args)
    (loss * LOSS_SCALE).backward()
    return loss


def timed(fn: Callable[[], Any], gpu: bool, reps: int) -> float:
    """Median seconds of one synchronised call."""
    samples = []
    for _ in range(reps):
        if gpu:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if gpu:
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def clear_grads(params: list[torch.nn.Parameter], args: tuple[Any, ...]) -> None:
    for p in params:
        p.grad = None
    args[0].grad = None


def peak_bytes(fn: Callable[[], Any], clear: Callable[[], None]) -> int:
    """Peak memory one call allocates above what was allocated before it, gradients cleared."""
    clear()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def print_profile(name: str, fn: Callable[[], Any], top: int = 12) -> None:
    """The kernels of one step that take the most device time, and the step's kernel count."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = prof.key_averages()
    print(f"--- {name}: {sum(e.count for e in events if e.device_type.name == 'CUDA')} kernel launches")
    print(events.table(sort_by="device_time_total", row_limit=top, max_name_column_width=60))


def compare(eager: DecoderBlock, traced: DecoderBlock, eager_out: Any, traced_out: Any, exact: bool) -> float:
    """Largest difference between the two steps' loss, gradients and input gradient."""
    pairs = [(eager_out[0], traced_out[0]), (eager_out[1].grad, traced_out[1].grad)]
    pairs += [(a.grad, b.grad) for a, b in zip(eager.parameters(), traced.parameters())]
    worst = 0.0
    for a, b in pairs:
        assert a is not None and b is not None, "a gradient is missing"
        if exact:
            torch.testing.assert_close(b, a, rtol=0, atol=0)
        worst = max(worst, (a.float() - b.float()).abs().max().item())
    return worst


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="list the top kernels")
    args = parser.parse_args()
    gpu = not SMOKE
    device, dtype = ("cuda", torch.bfloat16) if gpu else ("cpu", torch.float32)
    hidden, seq, vocab, heads, inter = (2048, 2048, 32000, 16, 5632) if gpu else (32, 8, 64, 2, 48)
    print(
        f"torch {torch.__version__}, triton {triton.__version__}, "
        f"{torch.cuda.get_device_name() if gpu else 'CPU interpreter (smoke check, no figures)'}; "
        f"hidden {hidden}, seq {seq}, vocab {vocab}, {dtype}"
    )
    with interpreter_shims():
        torch.manual_seed(0)
        eager = DecoderBlock(hidden, heads, inter, vocab, dtype).to(device)
        traced_model = copy.deepcopy(eager)
        compiled = aot_module(
            traced_model, fw_compiler=counting_reinplace_compiler, bw_compiler=counting_reinplace_compiler
        )
        eager_args, traced_args = inputs(seq, hidden, heads, vocab, dtype, device), None
        traced_args = inputs(seq, hidden, heads, vocab, dtype, device)
        with routed_through_ft():  # the trace sees wrapped kernels; the graphs launch them directly
            traced_loss = step(compiled, list(traced_model.parameters()), traced_args)
        eager_loss = step(eager, list(eager.parameters()), eager_args)
        worst = compare(
            eager, traced_model, (eager_loss, eager_args[0]), (traced_loss, traced_args[0]), exact=not gpu
        )
        print(f"first step: loss {eager_loss.item():.6f}; largest difference to eager {worst:.3g}")
        print(f"kernel copies left after reinplacing (forward, backward): {CLONES_LEFT}")
        print("torch out-of-place ops with an in-place form, before -> after reinplacing:")
        for name, line in zip(("forward", "backward"), TORCH_OPS_LEFT):
            print(f"  {name}: {line}")
        if not gpu:
            print("smoke check passed: loss, every gradient and the input gradient equal eager bit for bit")
            return
        run_eager = lambda: step(eager, list(eager.parameters()), eager_args)  # noqa: E731
        run_traced = lambda: step(compiled, list(traced_model.parameters()), traced_args)  # noqa: E731
        for fn in (run_eager, run_traced):
            fn()
        t_eager, t_traced = timed(run_eager, gpu, args.reps), timed(run_traced, gpu, args.reps)
        m_eager = peak_bytes(run_eager, lambda: clear_grads(list(eager.parameters()), eager_args))
        m_traced = peak_bytes(run_traced, lambda: clear_grads(list(traced_model.parameters()), traced_args))
        if args.profile:
            for name, fn in (("eager", run_eager), ("aot_module+reinplace", run_traced)):
                print_profile(name, fn)
    print(
        f"step time   eager {t_eager * 1e3:9.2f} ms   aot_module+reinplace {t_traced * 1e3:9.2f} ms   "
        f"ratio {t_traced / t_eager:.3f}x"
    )
    print(
        f"step peak   eager {m_eager / 2**20:9.1f} MiB  aot_module+reinplace {m_traced / 2**20:9.1f} MiB  "
        f"ratio {m_traced / m_eager:.3f}x"
    )


if __name__ == "__main__":
    main()
