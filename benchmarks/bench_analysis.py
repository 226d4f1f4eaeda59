"""Mutation analysis cost: cold (TTIR generated) and cached analysis time per kernel.

    TRITON_INTERPRET=1 python benchmarks/bench_analysis.py   # kernels are InterpretedFunctions
    python benchmarks/bench_analysis.py                       # kernels are JITFunctions (no GPU needed)

"first" is the first analysis in the process (includes building the backend), "cold" the median over
repeats with the result cache emptied each time, "cached" the median of a repeated identical call.
"""

from __future__ import annotations

import statistics
import sys
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from functional_triton import _compat, mutation  # noqa: E402


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((64, 2), (128, 4), (256, 4), (512, 8))],
    key=["n"],
)
@triton.jit
def autotuned_scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * scale, mask=m)


@triton.jit
def _accumulate(acc_ptr, offs, val, mask):
    tl.atomic_add(acc_ptr + offs, val, mask=mask)


@triton.jit
def _row_sum(ptr, offs, mask):
    return tl.sum(tl.load(ptr + offs, mask=mask, other=0.0), 0)


@triton.jit
def helpers_kernel(x_ptr, acc_ptr, sums_ptr, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    for i in range(ITERS):
        _accumulate(acc_ptr, offs, tl.load(x_ptr + offs, mask=m) * i, m)
    tl.store(sums_ptr + tl.program_id(0), _row_sum(x_ptr, offs, m))


def meta(n: int = 1024) -> torch.Tensor:
    return torch.empty(n, device="meta")


CASES: list[tuple[str, Any, dict[str, object]]] = [
    (
        "simple add",
        add_kernel,
        {"x_ptr": meta(), "y_ptr": meta(), "out_ptr": meta(), "n": 1024, "BLOCK": 128},
    ),
    (
        "autotune, 4 configs",
        autotuned_scale_kernel,
        {"x_ptr": meta(), "out_ptr": meta(), "n": 1024, "scale": 2.0},
    ),
    (
        "helpers in a loop",
        helpers_kernel,
        {"x_ptr": meta(), "acc_ptr": meta(), "sums_ptr": meta(), "n": 1024, "ITERS": 4, "BLOCK": 128},
    ),
]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(
    kernel: Any, kwargs: dict[str, object], repeats: int
) -> tuple[float, float, float, frozenset[str] | None]:
    first = timed(lambda: mutation.analyze_writes(kernel, kwargs))
    cold = []
    for _ in range(repeats):
        mutation._CACHE = weakref.WeakKeyDictionary()  # forget every result: the next call is cold
        cold.append(timed(lambda: mutation.analyze_writes(kernel, kwargs)))
    cached = [timed(lambda: mutation.analyze_writes(kernel, kwargs)) for _ in range(200)]
    result = mutation.analyze_writes(kernel, kwargs).written_names
    return first, statistics.median(cold), statistics.median(cached), result


def main() -> None:
    mode = "interpreter" if _compat.interpreter_enabled() else "jit"
    print(f"triton {triton.__version__}, torch {torch.__version__}, kernels: {mode}")
    print(f"{'kernel':<22}{'first ms':>10}{'cold ms':>10}{'cached us':>11}  written")
    for name, kernel, kwargs in CASES:
        first, cold, cached, written = measure(kernel, kwargs, repeats=10)
        names = "unknown" if written is None else sorted(written)
        print(f"{name:<22}{first * 1e3:>10.1f}{cold * 1e3:>10.1f}{cached * 1e6:>11.1f}  {names}")


if __name__ == "__main__":
    main()
