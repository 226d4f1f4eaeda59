"""One training step of a small Llama-style decoder block built from Liger-Kernel's ops.

RMSNorm, RoPE, causal attention (torch SDPA), a SwiGLU MLP and a chunked linear cross-entropy,
each Liger kernel routed through ``ft.wrap_triton`` (``tests/integration/liger.py``), under
``aot_module`` with ``reinplace_compiler`` as forward and backward compiler, against the same
step eager with Liger's raw kernels. Measured side by side in one run: step time and the step's
peak memory (``torch.cuda.max_memory_allocated`` during the step, above what was allocated before it
with that model's gradients cleared, so both sides count the gradients the step allocates).
The same step under ``torch.compile`` (``backend="functional_triton"`` and ``backend="inductor"``, the
kernels routed through ``ft.wrap_triton``; ``--backends`` chooses) is measured in the same run, and the
table gives every variant's time and peak memory as ratios to eager Liger (the variants take turns round
by round, so a host whose speed drifts slows each alike).
``--profile`` adds, for eager and aot_module, the CUDA kernels that take the most device time.
The loss is Liger's cross-entropy kernels without Liger's data-dependent Python
(``tests/integration/liger_workarounds.py``, README known limits), scaled by 2 (loss scaling).

GPU: ``python benchmarks/bench_training.py --gpu`` (hidden 2048, seq 2048, vocab 32000, bf16; ``--seq 8192``
for a step whose kernels outlast its host time).
Without ``--gpu``: a tiny-shape smoke run on the interpreter that checks the aot_module step's and the
``torch.compile(backend="functional_triton")`` step's loss, gradients and inputs equal eager's bit for
bit (no figures claimed). ``--backends functional_triton inductor`` adds Inductor (about 15 s more on
two cores): its generated code for torch's ops may round differently from eager on the CPU too, so
its largest difference is printed, not asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

SMOKE = "--gpu" not in sys.argv
if SMOKE and os.path.basename(sys.argv[0]).startswith("bench_"):  # imported: see bench_graphs.py
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


QUEUED_STEPS = 5  # steps issued back to back per queued sample


Run = tuple[str, Callable[[], Any], Callable[[], Any]]  # name, one step, the context its turn runs in


def side_by_side(runs: list[Run], rounds: int) -> dict[str, tuple[float, float]]:
    """Per run, the median seconds of one synchronised step and of one step among ``QUEUED_STEPS``
    issued back to back with one synchronisation at the end (as a training loop runs: host time hides
    behind the previous step's kernels). The runs take turns round by round, so a host whose speed
    drifts (the GPU machine's does) slows every run alike; ``context`` wraps each run's turn."""
    sync: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    queue: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    for _ in range(rounds):
        for name, fn, context in runs:
            with context():
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                sync[name].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                for _ in range(QUEUED_STEPS):
                    fn()
                torch.cuda.synchronize()
                queue[name].append((time.perf_counter() - t0) / QUEUED_STEPS)
    return {name: (statistics.median(sync[name]), statistics.median(queue[name])) for name, _, _ in runs}


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
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    busy = sum(e.device_time for e in kernels) / 1e3
    print(f"--- {name}: {len(kernels)} kernels, {busy:.2f} ms of device time in kernels")
    print(events.table(sort_by="device_time_total", row_limit=top, max_name_column_width=60))


def print_host_profile(name: str, fn: Callable[[], Any], top: int = 25) -> None:
    """Where one step's host time goes (cProfile, by own time), the device synchronised before and after."""
    import cProfile
    import pstats

    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    fn()
    torch.cuda.synchronize()
    prof.disable()
    print(f"--- {name}: host profile")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


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


def counting_launches(backend: str, counts: list[int]) -> Callable[..., Any]:
    """The torch.compile backend ``backend``, counting the ft launches in each graph Dynamo hands it."""
    inner = torch._dynamo.lookup_backend(backend)
    ops = (ft.triton_kernel_wrapper_mutation, ft.triton_kernel_wrapper_functional)

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs = [
            m.graph for m in gm.modules() if isinstance(m, torch.fx.GraphModule)
        ]  # Functions' bodies too
        counts.append(sum(node.target in ops for graph in graphs for node in graph.nodes))
        return inner(gm, example_inputs)

    return compile_graph


def host_time(run_eager: Callable[[], Any], run_traced: Callable[[], Any], rounds: int = 15) -> None:
    """The host time of one step, eager and traced side by side (rounds interleaved), with every
    Triton kernel's ``run`` a no-op: what the step costs the host beyond its kernels' work (the
    values it computes are then meaningless, so this runs after the smoke check)."""
    from functional_triton.launch_spec import _triton_kernel_types
    from tests.integration.liger import _liger_modules

    stubbed: dict[int, Any] = {
        id(v): v for m in _liger_modules() for v in vars(m).values() if isinstance(v, _triton_kernel_types())
    }
    own = {key: vars(kernel).get("run") for key, kernel in stubbed.items()}
    for kernel in stubbed.values():
        kernel.run = lambda *a, **k: None
    try:
        samples: dict[str, list[float]] = {"eager": [], "traced": []}
        for fn in (run_eager, run_traced):
            for _ in range(5):
                fn()
        for _ in range(rounds):
            for name, fn in (("eager", run_eager), ("traced", run_traced)):
                t0 = time.perf_counter()
                for _ in range(20):
                    fn()
                samples[name].append((time.perf_counter() - t0) / 20)
    finally:
        for key, kernel in stubbed.items():
            if own[key] is None:
                del kernel.run
            else:
                kernel.run = own[key]
    eager_s, traced_s = (statistics.median(samples[n]) for n in ("eager", "traced"))
    print(
        f"host time per step, kernels' run a no-op ({len(stubbed)} kernels): eager {eager_s * 1e6:.0f} us, "
        f"aot_module+reinplace {traced_s * 1e6:.0f} us ({traced_s / eager_s:.3f}x)"
    )


def fixed_device_arch() -> None:
    """Liger's swiglu asks ``infer_device_arch()`` (an lru_cache) on every call; Dynamo traces through
    the cache into ``is_npu_available``, whose ``import transformers`` it cannot trace (Liger installed
    with --no-deps). For torch.compile, give swiglu the answer, computed once eagerly."""
    arch = swiglu.infer_device_arch()
    swiglu.infer_device_arch = lambda: arch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="list the top kernels")
    parser.add_argument(
        "--host",
        action="store_true",
        help="without --gpu: after the smoke check (at shapes giving the GPU block's 16 loss chunks), "
        "the host time of one step, eager and aot_module+reinplace, every kernel's run a no-op",
    )
    parser.add_argument(
        "--seq", type=int, default=2048, help="GPU: tokens per step (the block's batch is one sequence)"
    )
    parser.add_argument(
        "--backends",
        nargs="*",
        default=None,
        help="torch.compile backends to add (default: functional_triton and inductor on the GPU, "
        "functional_triton in the smoke run)",
    )
    args = parser.parse_args()
    gpu = not SMOKE
    if args.backends is None:
        args.backends = ["functional_triton", "inductor"] if gpu else ["functional_triton"]
    device, dtype = ("cuda", torch.bfloat16) if gpu else ("cpu", torch.float32)
    # --host: the GPU block's 16 chunks of the loss (vocab / hidden = 16, seq 16), so its graphs
    # have the GPU step's ops, at a size the interpreter checks quickly.
    hidden, seq, vocab, heads, inter = (
        (2048, args.seq, 32000, 16, 5632)
        if gpu
        else (32, 16, 512, 2, 48)
        if args.host
        else (32, 8, 64, 2, 48)
    )
    print(
        f"torch {torch.__version__}, triton {triton.__version__}, "
        f"{torch.cuda.get_device_name() if gpu else 'CPU interpreter (smoke check, no figures)'}; "
        f"hidden {hidden}, seq {seq}, vocab {vocab}, {dtype}"
    )
    with interpreter_shims():
        torch.manual_seed(0)
        eager = DecoderBlock(hidden, heads, inter, vocab, dtype).to(device)
        eager_model_copy = copy.deepcopy(eager)  # the initial weights, for the torch.compile variants
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
        assert CLONES_LEFT and not any(CLONES_LEFT), "reinplace_compiler left kernel copies in the step"
        print("torch out-of-place ops with an in-place form, before -> after reinplacing:")
        for name, line in zip(("forward", "backward"), TORCH_OPS_LEFT):
            print(f"  {name}: {line}")
        # torch.compile of the same step, the kernels routed through ft.wrap_triton. Dynamo guards on the
        # kernel attributes it read, so every compiled step runs inside routed_through_ft (entered once
        # around each measurement, not per step).
        variants: list[tuple[str, DecoderBlock, Callable[..., Any], tuple[Any, ...]]] = []
        if args.backends:
            fixed_device_arch()
        for backend in args.backends:
            model = copy.deepcopy(eager_model_copy)
            torch._dynamo.reset()
            launches: list[int] = []
            fn = torch.compile(model, backend=counting_launches(backend, launches), fullgraph=True)
            v_args = inputs(seq, hidden, heads, vocab, dtype, device)
            with routed_through_ft():
                v_loss = step(fn, list(model.parameters()), v_args)
            # functional_triton runs the graphs as traced: eager's ops, bit for bit on the interpreter.
            # Inductor generates its own code for torch's ops (fused pointwise, decomposed attention),
            # which rounds differently from eager on CPU too: its difference is reported, not asserted.
            exact = not gpu and backend == "functional_triton"
            worst = compare(eager, model, (eager_loss, eager_args[0]), (v_loss, v_args[0]), exact=exact)
            assert sum(launches) > 0, f"{backend}: no ft launch reached the graph Dynamo captured"
            print(
                f"torch.compile(backend={backend!r}): {sum(launches)} ft launches captured; "
                f"largest difference to eager {worst:.3g}"
            )
            variants.append((f"compile({backend})", model, fn, v_args))
        if not gpu:
            print(
                "smoke check passed: loss, every gradient and the input gradient equal eager bit for bit "
                "(aot_module+reinplace, torch.compile functional_triton), no kernel copy left"
            )
            if args.host:
                host_time(
                    lambda: step(eager, list(eager.parameters()), eager_args),
                    lambda: step(compiled, list(traced_model.parameters()), traced_args),
                )
            return
        run_eager = lambda: step(eager, list(eager.parameters()), eager_args)  # noqa: E731
        run_traced = lambda: step(compiled, list(traced_model.parameters()), traced_args)  # noqa: E731
        runs: list[Run] = [
            ("eager Liger", run_eager, contextlib.nullcontext),
            ("aot_module+reinplace", run_traced, contextlib.nullcontext),
        ]
        memory = {
            "eager Liger": peak_bytes(run_eager, lambda: clear_grads(list(eager.parameters()), eager_args)),
            "aot_module+reinplace": peak_bytes(
                run_traced, lambda: clear_grads(list(traced_model.parameters()), traced_args)
            ),
        }
        for name, model, fn, v_args in variants:
            run = functools.partial(step, fn, list(model.parameters()), v_args)
            with routed_through_ft():
                run()
                clear = functools.partial(clear_grads, list(model.parameters()), v_args)
                memory[name] = peak_bytes(run, clear)
            runs.append((name, run, routed_through_ft))
        for _, fn, context in runs:  # warm
            with context():
                fn()
        times = side_by_side(runs, args.reps)
        t_eager, q_eager = times["eager Liger"]
        m_eager = memory["eager Liger"]
        rows = [(name, *times[name], memory[name]) for name, _, _ in runs[1:]]
        if args.profile:
            for name, fn in (("eager", run_eager), ("aot_module+reinplace", run_traced)):
                print_profile(name, fn)
                print_host_profile(name, fn)
    print(
        f"time: medians over {args.reps} rounds, the runs taking turns, of one synchronised step / "
        f"one step of {QUEUED_STEPS} queued back to back"
    )
    ratio = f"{'ratio':>8}"
    print(f"{'step':24} {'sync ms':>8} {ratio} {'queued ms':>10} {ratio} {'peak MiB':>10} {ratio}")
    print(
        f"{'eager Liger':24} {t_eager * 1e3:8.2f} {1:8.3f} {q_eager * 1e3:10.2f} {1:8.3f} "
        f"{m_eager / 2**20:10.1f} {1:8.3f}"
    )
    for name, t, q, m in rows:
        print(
            f"{name:24} {t * 1e3:8.2f} {t / t_eager:7.3f}x {q * 1e3:10.2f} {q / q_eager:7.3f}x "
            f"{m / 2**20:10.1f} {m / m_eager:7.3f}x"
        )


if __name__ == "__main__":
    main()
