"""Lifetime: eager launches add nothing to the side table; traces reuse entries; graphs own kernels."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
import triton
import triton.language as tl
from functorch.compile import aot_function
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from functional_triton.side_table import kernel_side_table
from tests import kernels as K
from tests.helpers import kwarg, nop


def _launch_in_place(x):
    ft.wrap_triton(K.add_one_inplace)[(1,)](x, x.numel(), BLOCK=16)
    return x


def test_eager_launches_never_touch_the_table() -> None:
    x = torch.zeros(16)
    gc.collect()  # graphs of earlier tests freed now, not during the loop
    before = len(kernel_side_table)
    for _ in range(300):  # the interpreter makes each launch ~1 ms; the GPU test runs 10**5
        ft.wrap_triton(K.add_one_inplace)[(1,)](x, 16, BLOCK=16)
    assert len(kernel_side_table) == before
    assert torch.equal(x, torch.full((16,), 300.0))


@pytest.mark.gpu
def test_eager_launches_never_touch_the_table_1e5() -> None:
    x = torch.zeros(16, device="cuda")
    before = len(kernel_side_table)
    for _ in range(10**5):
        ft.wrap_triton(K.add_one_inplace)[(1,)](x, 16, BLOCK=16)
    torch.cuda.synchronize()
    assert len(kernel_side_table) == before
    assert torch.equal(x, torch.full((16,), 1e5, device="cuda"))


def test_a_thousand_traces_keep_the_table_flat() -> None:
    x = torch.zeros(16)
    gc.collect()
    before = len(kernel_side_table)
    kept = [make_fx(torch.func.functionalize(_launch_in_place))(x) for _ in range(10)]
    with_ten = len(kernel_side_table)
    for _ in range(990):
        make_fx(torch.func.functionalize(_launch_in_place))(x)
    gc.collect()
    # Equal kernels, grids and constants share one entry, so retained graphs add at most
    # one kernel entry and one constants entry, and discarded ones add nothing.
    assert with_ten - before <= 2
    assert len(kernel_side_table) == with_ten
    del kept
    gc.collect()
    assert len(kernel_side_table) == before


def _factory(payload: torch.Tensor):
    @triton.jit
    def made_in_factory(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        m = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    # The test's own kernel carries the payload, so the payload lives exactly as long as it.
    made_in_factory.payload = payload
    return made_in_factory


def _program(kernel):
    def f(x):
        ft.wrap_triton(kernel)[(1,)](x, x.numel(), BLOCK=16)
        return x + 1

    return f


def _forget_in_triton(kernel) -> None:
    # triton 3.9 keeps every JITFunction in a module-level registry for its own reasons; drop
    # this one so that only functional_triton's references (if any) could keep it alive.
    import triton.runtime.jit as jit

    registry = getattr(jit, "_triton_jit_function_registry", None)
    if isinstance(registry, dict):
        for key in [k for k, v in registry.items() if v is kernel]:
            del registry[key]


def test_graphs_own_their_kernels_and_free_them() -> None:
    payload = torch.zeros(1 << 20)
    payload_ref = weakref.ref(payload)
    kernel = _factory(payload)
    kernel_ref = weakref.ref(kernel)
    del payload
    _forget_in_triton(kernel)

    f = _program(kernel)
    compiled = aot_function(f, fw_compiler=nop)
    assert torch.equal(compiled(torch.ones(16)), torch.full((16,), 3.0))  # traces on first call
    graph = make_fx(torch.func.functionalize(f))(torch.ones(16))
    del kernel, f
    gc.collect()
    assert kernel_ref() is not None, "the graphs must keep the kernel alive"
    assert torch.equal(compiled(torch.ones(16)), torch.full((16,), 3.0))
    assert torch.equal(graph(torch.ones(16)), torch.full((16,), 3.0))
    del compiled, graph
    gc.collect()
    assert kernel_ref() is None and payload_ref() is None


def _program_with_a_data_grid(active: torch.Tensor):
    def grid(meta):
        # One program per active block, read from a tensor the program does not pass: tracing
        # cannot evaluate it, so the graph keeps this callable and calls it when it runs
        # (Note [traced grids]).
        return (int(active.sum()),)

    def f(x):
        ft.wrap_triton(K.add_one_inplace)[grid](x, x.numel(), BLOCK=8)
        return x + 1

    return f, weakref.ref(grid)


def test_graphs_own_their_grid_callables_and_free_them() -> None:
    active = torch.tensor([True, True, False, False])
    f, grid_ref = _program_with_a_data_grid(active)
    graph = make_fx(torch.func.functionalize(f))(torch.ones(32))
    del f
    gc.collect()
    assert grid_ref() is not None, "the graph must keep its grid callable alive"
    (node,) = [n for n in graph.graph.nodes if n.target is ft.triton_kernel_wrapper_functional]
    assert kwarg(node, "grid") is None
    assert kernel_side_table.get_kernel(kwarg(node, "kernel_idx"))[1] is grid_ref()
    del node
    for programs in (2, 3):  # called when the graph runs: one program of 8 elements per active block
        active[:programs] = True
        want = torch.ones(32)
        K.add_one_inplace[(programs,)](want, 32, BLOCK=8)
        x = torch.ones(32)
        assert torch.equal(graph(x), want + 1) and torch.equal(x, want)
    del graph
    gc.collect()
    assert grid_ref() is None
