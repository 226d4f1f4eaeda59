"""Traced graphs vs raw launches: functional_triton (nop compiler, reinplace_compiler) vs PyTorch.

Each case is a program ``prog(wrap, x)``. Columns, all measured in this one run:
  raw       the program run eagerly with raw ``kernel[grid](...)`` launches (the floor)
  ft        aot_function(nop) with functional_triton.wrap_triton (inference graph)
  ft+rp     aot_function(fw_compiler=ft.reinplace_compiler, keep_inference_input_mutations=True)
  torch     aot_function(nop) with torch.library.wrap_triton (PyTorch's own path)
  inductor  torch.compile with torch.library.wrap_triton (where it applies)
Ratios are to raw. GPU: ``python benchmarks/bench_graphs.py --gpu`` (1 GiB inputs).
Without ``--gpu``: a CPU smoke check on the interpreter with tiny sizes (no figures claimed).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

SMOKE = "--gpu" not in sys.argv
# A benchmark script run without --gpu: the interpreter. Imported by the test suite (tests/compile
# imports the cases), the suite has chosen: TRITON_INTERPRET on the CPU, unset on a GPU.
if SMOKE and os.path.basename(sys.argv[0]).startswith("bench_"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from functorch.compile import aot_function, make_boxed_func  # noqa: E402

import functional_triton as ft  # noqa: E402


@triton.jit
def add_one_inplace(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


@triton.jit
def add_one_out(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


@triton.jit
def add_one_rows(x_ptr, cols, stride_r, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = c < cols
    p = x_ptr + r * stride_r + c
    tl.store(p, tl.load(p, mask=m) + 1, mask=m)


BLOCK = 1024


def grid1(n: int) -> tuple[int]:
    return (triton.cdiv(n, BLOCK),)


def inplace_input(wrap: Any, x: torch.Tensor) -> None:
    wrap(add_one_inplace)[grid1(x.numel())](x, x.numel(), BLOCK=BLOCK)


def out_of_place(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    wrap(add_one_out)[grid1(x.numel())](x, out, x.numel(), BLOCK=BLOCK)
    return out


def inplace_tail(wrap: Any, x: torch.Tensor) -> None:
    v = x[1:]
    wrap(add_one_inplace)[grid1(v.numel())](v, v.numel(), BLOCK=BLOCK)


def inplace_half_columns(wrap: Any, x: torch.Tensor) -> None:
    v = x[:, : x.shape[1] // 2]
    grid = (v.shape[0], triton.cdiv(v.shape[1], BLOCK))
    wrap(add_one_rows)[grid](v, v.shape[1], v.stride(0), BLOCK=BLOCK)


def inplace_intermediate(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    wrap(add_one_inplace)[grid1(y.numel())](y, y.numel(), BLOCK=BLOCK)
    return y


def cases(gpu: bool) -> list[tuple[str, Callable[..., Any], Callable[[], torch.Tensor]]]:
    dev = "cuda" if gpu else None  # None: torch's default device (the test suite's, on a GPU run)
    n = (1 << 28) if gpu else 4096  # 1 GiB of float32 on the GPU
    rows, cols = (16384, 8192) if gpu else (16, 64)
    return [
        ("in place, graph input", inplace_input, lambda: torch.zeros(n, device=dev)),
        ("out of place, empty_like", out_of_place, lambda: torch.zeros(n, device=dev)),
        ("in place, x[1:]", inplace_tail, lambda: torch.zeros(n, device=dev)),
        (
            f"in place, x[:, :{cols // 2}] of {rows}x{cols}",
            inplace_half_columns,
            lambda: torch.zeros(rows, cols, device=dev),
        ),
        ("in place, intermediate", inplace_intermediate, lambda: torch.zeros(n, device=dev)),
    ]


def nop(gm: torch.fx.GraphModule, _: Any) -> Any:
    return make_boxed_func(gm.forward)


def timed(fn: Callable[[], Any], gpu: bool, reps: int, queued: bool = False) -> float:
    """Median seconds of one call (CUDA events on the GPU).

    Synchronised (default): the device waits for nothing but this call, so the host's time
    to issue it (Python, AOTAutograd's wrappers, the launch) counts in full. Queued: calls
    are issued back to back with one synchronisation at the end, as in a training loop and
    in ``triton.testing.do_bench``; host time then hides behind the previous call's kernels.
    """
    for _ in range(3):
        fn()
    if gpu and queued:
        torch.cuda.synchronize()
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)
        ]
        for start, end in events:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return statistics.median(start.elapsed_time(end) / 1e3 for start, end in events)
    samples = []
    for _ in range(reps):
        if gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def host_time(fn: Callable[[], Any], reps: int) -> float:
    """Median seconds the host spends issuing one call (no synchronisation inside it)."""
    samples = []
    for _ in range(reps):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def variants(prog: Callable[..., Any], gpu: bool) -> dict[str, Callable[..., Any] | None]:
    out: dict[str, Callable[..., Any] | None] = {
        "raw": functools.partial(prog, lambda k: k),
        "ft": aot_function(functools.partial(prog, ft.wrap_triton), fw_compiler=nop),
        "ft+rp": aot_function(
            functools.partial(prog, ft.wrap_triton),
            fw_compiler=ft.reinplace_compiler,
            keep_inference_input_mutations=True,
        ),
        "torch": None,
        "inductor": None,
    }
    if gpu:  # PyTorch's path cannot trace under the interpreter
        torch_prog = functools.partial(prog, torch.library.wrap_triton)
        out["torch"] = aot_function(torch_prog, fw_compiler=nop)
        out["inductor"] = torch.compile(torch_prog)
    return out


HOST_TABLE = "host us per call"


def table_row(table: str, name: str, row: dict[str, float | None], keys: Sequence[str]) -> str:
    """One printed row: the raw launch's time, then each variant's (host table: microseconds per
    call; device tables: times the raw launch's); ``n/a`` where a variant did not run."""
    raw = row["raw"]
    assert raw is not None
    cells = []
    for k in keys:
        t = row[k]
        if t is None:
            cells.append(f"{'n/a':>9s}")
        else:
            cells.append(f"{t * 1e6:9.1f}" if table == HOST_TABLE else f"{t / raw:8.2f}x")
    first = f"{raw * 1e6:8.1f}" if table == HOST_TABLE else f"{raw * 1e3:8.3f}"
    return f"{name:42s} {first} {' '.join(cells)}"


def print_tables(tables: dict[str, list[str]], keys: Sequence[str]) -> None:
    for table, lines in tables.items():
        unit = "raw us" if table == HOST_TABLE else "raw ms"
        print(f"\n[{table}]")
        print(f"{'case':42s} {unit:>8s} " + " ".join(f"{k:>9s}" for k in keys))
        print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    gpu = not SMOKE
    print(
        f"torch {torch.__version__}, triton {triton.__version__}, "
        f"{torch.cuda.get_device_name() if gpu else 'CPU interpreter (smoke check, no figures)'}"
    )
    keys = ("ft", "ft+rp", "torch", "inductor")
    tables: dict[str, list[str]] = {"synchronised": [], "queued": [], "host us per call": []}
    with torch.no_grad():
        for name, prog, make in cases(gpu):
            x = make()
            times: dict[str, dict[str, float | None]] = {t: {} for t in tables}
            for key, fn in variants(prog, gpu).items():
                for table in tables:
                    times[table][key] = None
                if fn is None:
                    continue
                call = functools.partial(fn, x)
                reps = args.reps if gpu else 2
                try:
                    times["synchronised"][key] = timed(call, gpu, reps)
                    times["queued"][key] = timed(call, gpu, reps, queued=True)
                    times["host us per call"][key] = host_time(call, reps)
                except Exception as e:  # report, keep measuring the others
                    print(f"  {key} failed on {name!r}: {type(e).__name__}: {str(e)[:200]}")
            for table, row in times.items():
                tables[table].append(table_row(table, name, row, keys))
            del x
            if gpu:
                torch.cuda.empty_cache()
    print_tables(tables, keys)


if __name__ == "__main__":
    main()
