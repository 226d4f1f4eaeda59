"""torch.compile of the bench_graphs.py cases and of a small training step: ft vs PyTorch vs raw.

Columns, all measured in this one run, ratios to ``raw`` (the program run eagerly with raw
``kernel[grid](...)`` launches):
  ft-ind    torch.compile(backend="inductor") with functional_triton.wrap_triton
  ft-rp     torch.compile(backend="functional_triton") (AOTAutograd + reinplace_compiler, no Inductor)
  torch     torch.compile(backend="inductor") with torch.library.wrap_triton (GPU only)
  raw-ind   torch.compile(backend="inductor") of the raw launches (Dynamo's own capture; GPU only)
Each compiled result is checked against raw, bit for bit, before it is timed.
GPU: ``python benchmarks/bench_compile.py --gpu``. Without ``--gpu``: a smoke run on the CPU
interpreter with tiny sizes (ft columns only; no figures claimed); it exits non-zero if a
functional_triton variant fails or differs from raw.

``--wrapper`` (CPU): the Python cost of one compiled call, the kernel launch itself left out
(each kernel's ``run`` replaced by a no-op for the measurement): what the Inductor-compiled
graph spends between its caller and the raw launch (AOTAutograd's wrappers, the generated
code, functional_triton's per-call work). ``ft-ind`` and ``ft-rp`` as above, ``raw`` the
eager raw launch (triton's own launch path, stubbed at the same point), ``empty-ind``
an Inductor-compiled function that only returns its input (the compiled-call floor). Then the
training step, beside the same Function with torch ops in place of its kernels, eager and
compiled by both backends (``ops-*``): AOTAutograd's training runtime without any launch.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any

import torch  # noqa: E402  (after bench_graphs, which chooses the interpreter)
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from bench_graphs import SMOKE, cases, host_time, print_tables, table_row, timed

import functional_triton as ft  # noqa: E402

KEYS = ("ft-ind", "ft-rp", "torch", "raw-ind")


@triton.jit
def scale_fwd(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * tl.load(w_ptr + offs, mask=m), mask=m)


def _scale_function(wrap: Any) -> type[torch.autograd.Function]:
    """out = x * w with Triton in forward and backward, launched through ``wrap``."""

    def launch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        wrap(scale_fwd)[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), BLOCK=1024)
        return out

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x, w)
            return launch(x, w)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            x, w = ctx.saved_tensors
            return launch(grad, w), launch(grad, x)

    return Scale


def raw_wrap(kernel: Any) -> Any:
    return kernel


# Built once, outside any compiled function (Dynamo cannot trace a class definition).
_FUNCTIONS: dict[Any, type[torch.autograd.Function]] = {
    w: _scale_function(w) for w in (raw_wrap, ft.wrap_triton, torch.library.wrap_triton)
}


def train_loss(wrap: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The compiled part of a training step: Triton forward (and its backward).

    No torch reduction: Inductor's own sum differs from eager's in the last bits, which would
    hide what this compares (the kernels' results).
    """
    return _FUNCTIONS[wrap].apply(x, w)


def train_step(fn: Callable[..., Any], x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """One training step around a (compiled) loss: backward, then an SGD update of ``w`` in place."""
    out = fn(x, w)
    out.backward(out.detach())  # the gradient of 0.5 * out.square().sum()
    assert w.grad is not None
    with torch.no_grad():
        w -= 0.01 * w.grad
    w.grad = None
    return out.detach()


def compiled_variants(prog: Callable[..., Any], gpu: bool) -> dict[str, Callable[..., Any] | None]:
    out: dict[str, Callable[..., Any] | None] = {
        "raw": functools.partial(prog, raw_wrap),
        "ft-ind": torch.compile(functools.partial(prog, ft.wrap_triton), fullgraph=True),
        "ft-rp": torch.compile(
            functools.partial(prog, ft.wrap_triton), backend="functional_triton", fullgraph=True
        ),
        "torch": None,
        "raw-ind": None,
    }
    if gpu:  # PyTorch's paths cannot trace under the interpreter
        out["torch"] = torch.compile(functools.partial(prog, torch.library.wrap_triton))
        out["raw-ind"] = torch.compile(functools.partial(prog, raw_wrap))
    return out


def training_variants(gpu: bool) -> dict[str, Callable[..., Any] | None]:
    return {
        key: None if fn is None else functools.partial(train_step, fn)
        for key, fn in compiled_variants(train_loss, gpu).items()
    }


def _same(make: Callable[[], tuple[Any, ...]], raw: Callable[..., Any], fn: Callable[..., Any]) -> bool:
    """One call of each on fresh inputs: same result and same inputs afterwards, bit for bit."""
    a, b = make(), make()
    ra, rb = raw(*a), fn(*b)
    pairs = [(ra, rb), *zip(a, b)] if isinstance(ra, torch.Tensor) else list(zip(a, b))
    return all(torch.equal(p.detach(), q.detach()) for p, q in pairs)


def measure(
    name: str,
    prog: Callable[..., Any],
    make: Callable[[], tuple[Any, ...]],
    gpu: bool,
    reps: int,
    no_grad: bool,
) -> tuple[dict[str, dict[str, float | None]], list[str]]:
    tables: dict[str, dict[str, float | None]] = {"synchronised": {}, "queued": {}, "host us per call": {}}
    failures = []
    variants = training_variants(gpu) if prog is train_loss else compiled_variants(prog, gpu)
    for key, fn in variants.items():
        for table in tables.values():
            table[key] = None
        if fn is None:
            continue
        try:
            with torch.no_grad() if no_grad else torch.enable_grad():
                if key != "raw" and not _same(make, variants["raw"], fn):  # type: ignore[arg-type]
                    raise AssertionError("differs from raw")
                args = make()
                call = functools.partial(fn, *args)
                tables["synchronised"][key] = timed(call, gpu, reps)
                tables["queued"][key] = timed(call, gpu, reps, queued=True)
                tables["host us per call"][key] = host_time(call, reps)
        except Exception as e:  # report, keep measuring the others
            print(f"  {key} failed on {name!r}: {type(e).__name__}: {str(e)[:300]}")
            failures.append(f"{key} on {name!r}")
    return tables, failures


def _one_input(make: Callable[[], torch.Tensor]) -> tuple[torch.Tensor]:
    return (make(),)


def _all_kernels() -> list[Any]:
    import bench_graphs

    return [bench_graphs.add_one_inplace, bench_graphs.add_one_out, bench_graphs.add_one_rows, scale_fwd]


def wrapper_overhead(calls: int) -> None:
    """Per-call Python time with the kernel launches stubbed (``--wrapper``; see the docstring)."""
    import time

    def per_call(fn: Callable[[], Any]) -> float:
        for _ in range(20):
            fn()
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            best = min(best, (time.perf_counter() - t0) / calls)
        return best * 1e6

    torch.set_num_threads(1)  # Inductor's C++ kernels: no thread pool waking up inside the timing

    def python_calls(fn: Callable[[], Any]) -> int:
        """Python function calls (and C functions called from Python) in one call: deterministic."""
        count = 0

        def profile(frame: Any, event: str, arg: Any) -> None:
            nonlocal count
            if event in ("call", "c_call"):
                count += 1

        sys.setprofile(profile)
        try:
            fn()
        finally:
            sys.setprofile(None)
        return count - 1  # the setprofile(None) call itself

    empty = torch.compile(lambda x: x, fullgraph=True)
    print(f"torch {torch.__version__}: us per call, launches stubbed, best of 5 x {calls} calls, 1 thread")
    print(f"{'case':42s} {'raw':>9s} {'ft-ind':>9s} {'ft-rp':>9s} {'empty-ind':>9s}")
    for name, prog, make in cases(False):
        torch._dynamo.reset()
        variants = compiled_variants(prog, False)
        x = make()
        with torch.no_grad():
            for fn in variants.values():
                if fn is not None:
                    fn(x)  # compile (and check nothing) before stubbing
            stubbed = {k: k.run for k in _all_kernels()}
            try:
                for k in stubbed:
                    k.run = lambda *a, **kw: None
                fns = {k: functools.partial(fn, x) for k, fn in variants.items() if fn is not None}
                fns["empty-ind"] = functools.partial(empty, x)
                row = {k: per_call(fn) for k, fn in fns.items()}
                calls_row = {k: python_calls(fn) for k, fn in fns.items()}
            finally:
                for k, run in stubbed.items():
                    k.run = run
        keys = ("raw", "ft-ind", "ft-rp", "empty-ind")
        print(f"{name:42s} " + " ".join(f"{row[k]:9.1f}" for k in keys))
        print(f"{'  Python calls per call':42s} " + " ".join(f"{calls_row[k]:9d}" for k in keys))

    # The training step, against the same Function with torch ops in place of the kernels
    # (ops-*): what AOTAutograd's training runtime costs without any launch.
    torch._dynamo.reset()
    n = 1 << 12
    x, w = torch.linspace(-1, 1, n), torch.linspace(0.5, 1.5, n).requires_grad_()
    steps = {k: fn for k, fn in training_variants(False).items() if fn is not None}
    steps["ops-eager"] = functools.partial(train_step, _torch_ops_loss)
    steps["ops-ind"] = functools.partial(train_step, torch.compile(_torch_ops_loss, fullgraph=True))
    steps["ops-rp"] = functools.partial(
        train_step, torch.compile(_torch_ops_loss, backend="functional_triton", fullgraph=True)
    )
    for fn in steps.values():
        fn(x, w)  # compile before stubbing
    stubbed = {k: k.run for k in _all_kernels()}
    try:
        for k in stubbed:
            k.run = lambda *a, **kw: None
        fns = {k: functools.partial(fn, x, w) for k, fn in steps.items()}
        row = {k: per_call(fn) for k, fn in fns.items()}
        calls_row = {k: python_calls(fn) for k, fn in fns.items()}
    finally:
        for k, run in stubbed.items():
            k.run = run
    print(f"\n{'training step (ops-*: torch ops, no kernel)':42s} " + " ".join(f"{k:>9s}" for k in row))
    print(f"{'  us per step':42s} " + " ".join(f"{row[k]:9.1f}" for k in row))
    print(f"{'  Python calls per step':42s} " + " ".join(f"{calls_row[k]:9d}" for k in row))


class _TorchOpsScale(torch.autograd.Function):
    """The training step's Function with torch ops in place of its kernels (``--wrapper``)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, w = ctx.saved_tensors
        return grad * w, grad * x


def _torch_ops_loss(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return _TorchOpsScale.apply(x, w)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--wrapper", action="store_true", help="CPU: per-call Python cost, launches stubbed")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    if args.wrapper:
        wrapper_overhead(args.calls)
        return
    gpu = not SMOKE
    reps = args.reps if gpu else 2
    dev = "cuda" if gpu else "cpu"
    print(
        f"torch {torch.__version__}, triton {triton.__version__}, "
        f"{torch.cuda.get_device_name() if gpu else 'CPU interpreter (smoke check, no figures)'}"
    )
    n_train = (1 << 24) if gpu else 4096
    workloads: list[tuple[str, Callable[..., Any], Callable[[], tuple[Any, ...]], bool]] = [
        (name, prog, functools.partial(_one_input, make), True) for name, prog, make in cases(gpu)
    ]
    workloads.append(
        (
            f"training step, {n_train} elements",
            train_loss,
            lambda: (
                torch.linspace(-1, 1, n_train, device=dev),
                torch.linspace(1, 2, n_train, device=dev, requires_grad=True),
            ),
            False,
        )
    )
    lines: dict[str, list[str]] = {"synchronised": [], "queued": [], "host us per call": []}
    failures: list[str] = []
    for name, prog, make, no_grad in workloads:
        torch._dynamo.reset()
        tables, failed = measure(name, prog, make, gpu, reps, no_grad)
        failures += [f for f in failed if f.startswith("ft")]
        for table, row in tables.items():
            lines[table].append(table_row(table, name, row, KEYS))
        if gpu:
            torch.cuda.empty_cache()
    print_tables(lines, KEYS)
    if failures:
        print("\nfunctional_triton variants that failed: " + ", ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
