"""backend="inductor": the functional operator lowered to one fallback call; copies counted."""

from __future__ import annotations

import functools
import re

import pytest
import torch
import triton
from torch._dynamo.backends.common import aot_autograd
from torch._inductor.utils import run_and_get_code

import functional_triton as ft
from functional_triton import inductor
from functional_triton.passes.reinplace import launch_in_place
from tests.compile import kernels as k
from tests.harness import check_compiled, raw, run_once
from tests.helpers import Capture, targets

N = 40


def in_and_out_of_place(wrap, x, y):
    out = torch.empty_like(x)
    wrap(k.add_kernel)[(triton.cdiv(N, 16),)](x, y, out, N, BLOCK=16)  # out of place
    wrap(k.add_one_inplace)[k.grid_of_meta](x, N, BLOCK=16)  # in place on a graph input
    return out * 2


def inputs():
    return torch.arange(N, dtype=torch.float32), torch.linspace(-1, 1, N)


def _copies(code: str) -> int:
    """Copies Inductor itself emits: copy/clone kernels (C++ or Triton), aten copy_/clone calls."""
    return len(re.findall(r"fused_\w*(?:copy|clone)\w*|aten\.copy_|\.clone\(|aten\.clone", code))


def test_inductor_matches_eager_and_copies_nothing_reinplace_would_not() -> None:
    expected = run_once(functools.partial(in_and_out_of_place, raw), inputs, True)
    torch._dynamo.reset()
    compiled = torch.compile(functools.partial(in_and_out_of_place, ft.wrap_triton), fullgraph=True)
    with torch.no_grad():
        x, y = inputs()
        out, codes = run_and_get_code(compiled, x, y)
    for actual, wanted in zip([out, x, y], expected["outputs"] + expected["inputs"]):
        torch.testing.assert_close(actual, wanted, rtol=0, atol=0)
    code = "\n".join(codes)
    # reinplace_compiler launches both in place (test below); so does Inductor: no clone inside
    # the launches, and AOTAutograd's epilogue copy_(x, new x) is a copy onto itself, dropped.
    # Each launch is one direct call of its runner (Note [Inductor host overhead]), or where
    # torch has no custom codegen registry, of the operator.
    direct = inductor._DIRECT_CALLS
    in_place = r"_ft_functional_launch__\d+\(" if direct else r"functional_launch_\.default\("
    assert len(re.findall(in_place, code)) == 2, code
    assert not re.search(r"_ft_functional_launch_\d+\(|functional_launch\.default\(", code), code
    assert _copies(code) == 0


def test_functional_triton_backend_reinplaces_every_launch() -> None:
    check_compiled(in_and_out_of_place, inputs, backends=("functional_triton",))
    kept = Capture()
    backend = aot_autograd(
        fw_compiler=functools.partial(ft.reinplace_compiler, inner=kept.fw_compiler),
        keep_inference_input_mutations=True,
    )
    graphs = kept.fw
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(functools.partial(in_and_out_of_place, ft.wrap_triton), backend=backend)(*inputs())
    assert ft.triton_kernel_wrapper_functional not in targets(graphs[0])
    assert targets(graphs[0]).count(launch_in_place) == 2  # Note [in-place launch node]
    assert torch.ops.aten.copy_.default not in targets(graphs[0])


def test_registered_backend_is_aot_with_reinplace_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.compile(backend="functional_triton") runs reinplace_compiler on its graphs, with the
    input mutations in the graph: both launches in place, no functional node, no copy_ left."""
    from functional_triton.passes import reinplace

    kept = Capture()
    monkeypatch.setattr(
        reinplace,
        "reinplace_compiler",
        functools.partial(reinplace.reinplace_compiler, inner=kept.fw_compiler),
    )
    torch._dynamo.reset()
    with torch.no_grad():
        x, y = inputs()
        torch.compile(functools.partial(in_and_out_of_place, ft.wrap_triton), backend="functional_triton")(
            x, y
        )
    (graph,) = kept.fw
    assert ft.triton_kernel_wrapper_functional not in targets(graph)
    assert targets(graph).count(launch_in_place) == 2
    assert torch.ops.aten.copy_.default not in targets(graph)


def test_graphs_with_the_operators_bypass_inductors_fx_graph_cache() -> None:
    """A cached compiled graph would name side-table entries of the process that compiled it:
    Inductor must not cache graphs holding these operators (higher-order operators that are not
    cacheable), nor serve one from its cache."""
    from torch._dynamo.utils import counters
    from torch._inductor import config

    assert not ft.triton_kernel_wrapper_functional.cacheable()
    assert not ft.triton_kernel_wrapper_mutation.cacheable()
    counters.clear()
    with config.patch(fx_graph_cache=True, force_disable_caches=False), torch.no_grad():
        for _ in range(2):
            torch._dynamo.reset()
            torch.compile(functools.partial(in_and_out_of_place, ft.wrap_triton), fullgraph=True)(*inputs())
    assert counters["inductor"]["fxgraph_cache_bypass"] >= 2
    assert counters["inductor"]["fxgraph_cache_hit"] == 0


def _scale(wrap, x):
    out = torch.empty_like(x)
    wrap(k.scale_kernel)[(3,)](x, out, N, 1.5, BLOCK=16)
    return out


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _scale(ft.wrap_triton, x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return _scale(ft.wrap_triton, grad) + x * 0


class _RawScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _scale(raw, x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return _scale(raw, grad) + x * 0


def test_inductor_training_step_matches_eager() -> None:
    def prog(wrap, x):
        fn = _Scale if wrap is ft.wrap_triton else _RawScale
        return fn.apply(x * 2)

    make = lambda: (torch.linspace(-2, 2, N, requires_grad=True),)  # noqa: E731
    check_compiled(prog, make, backends=("inductor",), no_grad=(False,))


def test_direct_calls_keep_the_run_time_size_checks() -> None:
    inductor.register()  # sets _DIRECT_CALLS (Dynamo's first capture does it otherwise)
    if not inductor._DIRECT_CALLS:
        pytest.skip("this torch has no Inductor custom codegen registry: generated code calls the operator")
    torch._dynamo.reset()

    def prog(x):
        ft.wrap_triton(k.add_one_inplace)[k.grid_of_meta](x, N, BLOCK=16)
        return x * 2

    with torch.no_grad():
        _, codes = run_and_get_code(torch.compile(prog, fullgraph=True), torch.zeros(N))
    (spec,) = re.findall(r"_ft_functional_launch__(\d+)\(\[\w+\], \[\]\)", "\n".join(codes))
    launch = inductor.runner("functional_launch_", int(spec))
    x = torch.zeros(N)
    launch([x], [])  # what the generated code does: the kernel runs in place
    torch.testing.assert_close(x, torch.ones(N), rtol=0, atol=0)
    with pytest.raises(ValueError, match="'x_ptr' has shape"):
        launch([torch.zeros(N + 8)], [])  # a graph replayed for other sizes raises, naming the argument


def _read_then_write(wrap, x):
    before = x * 3  # read before the launch: the old value
    wrap(k.add_one_inplace)[(3,)](x, N, BLOCK=16)
    return before + x


def test_inductor_does_not_move_an_earlier_read_after_an_in_place_launch() -> None:
    """Inductor computes ``x * 3`` where a later kernel needs it, after a launch written in place on
    ``x`` unless the group keeps its clone: the read saw the new value (x.grad off by 3 in the
    training case, found by a test of the leaf-write path)."""
    check_compiled(_read_then_write, lambda: (torch.arange(N, dtype=torch.float32),), backends=("inductor",))
    # The training case (a backward reading its saved input, then writing it): test_leaf_writes.py.


def test_direct_calls_of_simple_launches_go_through_bound_sites() -> None:
    """Note [launch sites]: a lowered in-place launch with a grid of ints and tensor arguments only
    is bound once; other sizes still raise naming the argument, other strides run as before."""
    inductor.register()  # sets _DIRECT_CALLS (Dynamo's first capture does it otherwise)
    if not inductor._DIRECT_CALLS:
        pytest.skip("this torch has no Inductor custom codegen registry: generated code calls the operator")
    torch._dynamo.reset()

    def prog(x):
        ft.wrap_triton(k.add_one_inplace)[(3,)](x, N, BLOCK=16)
        return x * 2

    with torch.no_grad():
        _, codes = run_and_get_code(torch.compile(prog, fullgraph=True), torch.zeros(N))
    (spec,) = re.findall(r"_ft_functional_launch__(\d+)\(\[\w+\], \[\]\)", "\n".join(codes))
    launch = inductor.runner("functional_launch_", int(spec))
    assert launch.__name__ == "launch_site"
    x = torch.zeros(N)
    launch([x], [])
    torch.testing.assert_close(x, torch.ones(N), rtol=0, atol=0)
    strided = torch.zeros(2 * N)[::2]  # traced contiguous: re-strided, launched, written back
    launch([strided], [])
    torch.testing.assert_close(strided, torch.ones(N), rtol=0, atol=0)
    with pytest.raises(ValueError, match="'x_ptr' has shape"):
        launch([torch.zeros(N + 8)], [])
