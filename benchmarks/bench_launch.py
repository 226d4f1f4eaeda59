"""Eager launch overhead and tracing cost, measured side by side in one run.

  eager launch: raw ``kernel[grid](...)`` vs ``ft.wrap_triton(kernel)[grid](...)`` vs
                ``torch.library.wrap_triton(kernel)[grid](...)`` (GPU only: PyTorch's
                wrapper cannot launch under the interpreter), small tensors, launch-bound.
  tracing:      aot_function compile time for graphs of 10, 100 and 200 launches
                (time per launch should stay flat: linear in the launches).
GPU: ``python benchmarks/bench_launch.py --gpu``. Without ``--gpu``: CPU smoke check.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

GPU = "--gpu" in sys.argv
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from functorch.compile import aot_function, make_boxed_func  # noqa: E402

import functional_triton as ft  # noqa: E402


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def per_call(fn: Callable[[], Any], n: int, rounds: int = 7) -> float:
    """Median over rounds of the mean seconds per call (n calls per round)."""
    for _ in range(max(n // 10, 1)):
        fn()
    if GPU:
        torch.cuda.synchronize()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if GPU:
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def eager_launches() -> None:
    dev = "cuda" if GPU else "cpu"
    x, y, out = (torch.ones(4096, device=dev) for _ in range(3))
    grid = (4,)
    n = 2000 if GPU else 50
    w = ft.wrap_triton(add_kernel)
    results = {
        "raw kernel[grid](...)": per_call(lambda: add_kernel[grid](x, y, out, 4096, BLOCK=1024), n),
        "ft.wrap_triton(k)[grid](...)": per_call(
            lambda: ft.wrap_triton(add_kernel)[grid](x, y, out, 4096, BLOCK=1024), n
        ),
        "w[grid](...) (wrapper kept)": per_call(lambda: w[grid](x, y, out, 4096, BLOCK=1024), n),
    }
    if GPU:
        results["torch.library.wrap_triton(k)[grid](...)"] = per_call(
            lambda: torch.library.wrap_triton(add_kernel)[grid](x, y, out, 4096, BLOCK=1024), n
        )
    raw = results["raw kernel[grid](...)"]
    print("eager launch (us per launch, ratio to raw):")
    for name, t in results.items():
        print(f"  {name:42s} {t * 1e6:8.2f} us  {t / raw:5.2f}x")


def tracing_cost() -> None:
    dev = "cuda" if GPU else "cpu"

    def prog(launches: int) -> Callable[..., Any]:
        def f(x: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
            for _ in range(launches):
                out = torch.empty_like(x)
                ft.wrap_triton(add_kernel)[(1,)](x, zero, out, x.numel(), BLOCK=64)
                x = out
            return x

        return f

    def nop(gm: torch.fx.GraphModule, _: Any) -> Any:
        return make_boxed_func(gm.forward)

    print("tracing (aot_function compile, first call, excluding the kernel run):")
    x, zero = torch.ones(64, device=dev), torch.zeros(64, device=dev)
    aot_function(prog(1), fw_compiler=nop)(x, zero)  # warm the analysis cache for this specialization
    for launches in (10, 100, 200):
        compiled = aot_function(prog(launches), fw_compiler=nop)
        t0 = time.perf_counter()
        compiled(x, zero)  # compiles, then runs
        total = time.perf_counter() - t0
        t1 = time.perf_counter()
        compiled(x, zero)
        run = time.perf_counter() - t1
        trace = total - run
        print(
            f"  {launches:4d} launches: {trace * 1e3:8.1f} ms  ({trace / launches * 1e3:6.2f} ms per launch)"
        )


def main() -> None:
    print(
        f"torch {torch.__version__}, triton {triton.__version__}, "
        f"{torch.cuda.get_device_name() if GPU else 'CPU interpreter (smoke check, no figures)'}"
    )
    eager_launches()
    tracing_cost()


if __name__ == "__main__":
    main()
