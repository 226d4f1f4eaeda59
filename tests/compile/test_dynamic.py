"""dynamic=True / mark_dynamic: symbolic scalars and grids; what the graph cannot serve recompiles."""

from __future__ import annotations

import functools

import pytest
import torch
import triton

import functional_triton as ft
from tests.compile import kernels as k
from tests.harness import compare, raw, run_once


def symbolic_launches(wrap, x, y):
    n = x.numel()
    out = torch.empty_like(x)
    wrap(k.add_kernel)[(triton.cdiv(n, 16),)](x, y, out, n, BLOCK=16)  # a grid tuple of SymInts
    wrap(k.add_one_inplace)[k.grid_of_meta](x, n, BLOCK=8)  # a grid callable of meta
    closes_over_n = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    wrap(k.times_two_inplace)[closes_over_n](out, n, BLOCK=32)
    return out


def sized(n):
    return lambda: (torch.arange(n, dtype=torch.float32), torch.linspace(-1, 1, n))


def _frames() -> int:
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("how", ["dynamic", "mark_dynamic"])
def test_one_graph_serves_every_size(backend: str, how: str) -> None:
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(
        functools.partial(symbolic_launches, ft.wrap_triton),
        backend=backend,
        fullgraph=True,
        dynamic=True if how == "dynamic" else None,
    )

    def call(x, y):
        if how == "mark_dynamic":
            torch._dynamo.mark_dynamic(x, 0)
            torch._dynamo.mark_dynamic(y, 0)
        return compiled(x, y)

    for n in (40, 56, 100):
        expected = run_once(functools.partial(symbolic_launches, raw), sized(n), True)
        compare(run_once(call, sized(n), True), expected, f"{backend} {how} n={n}")
    assert _frames() == 1


def test_constexpr_from_a_size_is_specialised_and_recompiles() -> None:
    def prog(wrap, x):
        n = x.numel()
        wrap(k.add_one_inplace)[(1,)](x, n, BLOCK=triton.next_power_of_2(n))  # BLOCK follows the size
        return x

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(functools.partial(prog, ft.wrap_triton), backend="aot_eager", dynamic=True)
    for n in (40, 56, 100):
        make = functools.partial(lambda size: (torch.arange(size, dtype=torch.float32),), n)
        compare(run_once(compiled, make, True), run_once(functools.partial(prog, raw), make, True), f"n={n}")
    assert _frames() >= 2  # 64 serves 40 and 56; 100 needs BLOCK=128
