"""wrap_triton: which kernels it accepts, and that launches match raw `kernel[grid](...)` launches.

Every launch is compared bit for bit with the same raw kernel launched eagerly on a copy of the inputs.
"""

from __future__ import annotations

import gc
import operator
from collections.abc import Callable
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from functional_triton.side_table import kernel_side_table
from tests import kernels as K
from tests.helpers import TracingMode, assert_same, kwarg

pytestmark = pytest.mark.filterwarnings("ignore::functional_triton.functionalize.AnalysisWarning")

N = 8


# --- kernels local to this file -----------------------------------------------------------------------


def same_timing(kernel_call: Callable[[], Any], quantiles: Any = None) -> list[float]:
    """Autotuner benchmark stand-in: runs the config once (so restore_value matters); every config ties."""
    kernel_call()
    return [1.0, 1.0, 1.0]


@triton.jit
def record_pids(out_ptr, s0, s1, s2):
    """out[p0, p1, p2] = 100 * p0 + 10 * p1 + p2 + 1: shows exactly which programs ran."""
    p0 = tl.program_id(0)
    p1 = tl.program_id(1)
    p2 = tl.program_id(2)
    tl.store(out_ptr + p0 * s0 + p1 * s1 + p2 * s2, p0 * 100 + p1 * 10 + p2 + 1)


@triton.jit
def axpb_defaults(x_ptr, out_ptr, n, a=3.0, b=1, BLOCK: tl.constexpr = 8):
    """out = a * x + b, with defaults for a scalar, an int and a constexpr."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * a + b, mask=m)


@triton.autotune(
    configs=[triton.Config({"BLOCK": 4}), triton.Config({"BLOCK": 8})],
    key=["n"],
    restore_value=["x_ptr"],
    do_bench=same_timing,
)
@triton.jit
def autotuned_add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
@triton.jit
def heuristic_add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


@triton.autotune(
    configs=[triton.Config({"BLOCK": 2}), triton.Config({"BLOCK": 4})],
    key=["n"],
    restore_value=["x_ptr"],
    do_bench=same_timing,
)
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def stacked_scale(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    """x = 2 * x + 1 when n is a multiple of BLOCK, x = 2 * x + 2 otherwise (tells EVEN apart)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    extra = 1 if EVEN else 2
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2 + extra, mask=m)


# --- helpers ------------------------------------------------------------------------------------------


def arange(n: int = N) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32) * 0.5 - 1.25


def eager_pair(
    launch: Callable[[Any, torch.Tensor], None], make: Callable[[], torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(raw result, wrapped result): ``launch(wrap, x)`` on two copies from ``make``."""
    x_raw, x_ft = make(), make()
    before = x_raw.clone()
    launch(lambda k: k, x_raw)
    launch(ft.wrap_triton, x_ft)
    assert not torch.equal(x_raw, before), "the raw launch changed nothing: the test could not fail"
    return x_ft, x_raw


def kernel_nodes(gm: torch.fx.GraphModule, target: Any) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is target]


# --- what wrap_triton accepts -------------------------------------------------------------------------


@pytest.mark.skipif(
    not ft.wrap_triton(K.add_one_inplace).info.interpreted, reason="needs TRITON_INTERPRET=1 (CPU run)"
)
def test_jit_kernel_is_interpreted_function_under_interpreter() -> None:
    from triton.runtime.interpreter import InterpretedFunction

    assert isinstance(K.add_one_inplace, InterpretedFunction)
    w = ft.wrap_triton(K.add_one_inplace)
    assert w is not K.add_one_inplace


@pytest.mark.parametrize(
    "kernel",
    [K.add_one_inplace, autotuned_add_one, heuristic_add_one, stacked_scale],
    ids=["jit", "autotune", "heuristics", "autotune+heuristics"],
)
def test_wrap_accepts_kernel_kinds(kernel: Any) -> None:
    w = ft.wrap_triton(kernel)
    assert ft.wrap_triton(w) is w


def test_wrap_of_wrapper_is_same_object() -> None:
    w = ft.wrap_triton(K.add_kernel)
    assert ft.wrap_triton(w) is w
    assert ft.wrap_triton(ft.wrap_triton(w)) is w


# --- eager launches match raw launches ----------------------------------------------------------------


def test_eager_positional_matches_raw() -> None:
    def launch(wrap: Any, x: torch.Tensor) -> None:
        wrap(K.add_one_inplace)[(1,)](x, N, 8)

    assert_same(*eager_pair(launch, arange))


def test_eager_keyword_matches_raw() -> None:
    def launch(wrap: Any, x: torch.Tensor) -> None:
        wrap(K.add_one_inplace)[(2,)](BLOCK=4, n=N, x_ptr=x)

    assert_same(*eager_pair(launch, arange))


def test_eager_out_of_place_matches_raw() -> None:
    x, y = arange(), torch.full((N,), 0.25)
    out_raw, out_ft = torch.zeros(N), torch.zeros(N)
    K.add_kernel[(2,)](x, y, out_raw, N, BLOCK=4)
    ft.wrap_triton(K.add_kernel)[(2,)](x, y, out_ft, N, BLOCK=4)
    assert_same(out_ft, out_raw)
    assert not torch.equal(out_raw, torch.zeros(N))
    assert_same(x, arange())  # read-only inputs untouched


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((N,), {}),  # a, b and BLOCK from defaults
        ((N, 0.5), {}),  # a positional, b and BLOCK defaults
        ((N,), {"b": 7}),  # b by keyword, a default
        ((N, -2.0, 4), {"BLOCK": 4}),  # everything given
    ],
    ids=["all-defaults", "a-positional", "b-keyword", "none-default"],
)
def test_eager_default_arguments_match_raw(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    x = arange()
    out_raw, out_ft = torch.zeros(N), torch.zeros(N)
    axpb_defaults[(2,)](x, out_raw, *args, **kwargs)
    ft.wrap_triton(axpb_defaults)[(2,)](x, out_ft, *args, **kwargs)
    assert not torch.equal(out_raw, torch.zeros(N))
    assert_same(out_ft, out_raw)


def test_run_matches_subscript_and_raw() -> None:
    x_raw, x_run, x_run_kw = arange(), arange(), arange()
    K.add_one_inplace[(1,)](x_raw, N, BLOCK=8)
    ft.wrap_triton(K.add_one_inplace).run(x_run, N, grid=(1,), BLOCK=8)
    ft.wrap_triton(K.add_one_inplace).run(x_ptr=x_run_kw, n=N, BLOCK=8, grid=lambda meta: (1,))
    assert not torch.equal(x_raw, arange())
    assert_same(x_run, x_raw)
    assert_same(x_run_kw, x_raw)


def test_run_warmup_compiles_without_launching_like_raw() -> None:
    x_raw, x_ft = arange(), arange()
    got_raw = K.add_one_inplace.run(x_raw, N, grid=(1,), warmup=True, BLOCK=8)
    got_ft = ft.wrap_triton(K.add_one_inplace).run(x_ft, N, grid=(1,), warmup=True, BLOCK=8)
    assert_same(x_raw, arange())  # the raw warmup launched nothing
    assert_same(x_ft, x_raw)
    assert type(got_ft) is type(got_raw)  # the interpreter's None; a compiled kernel on the GPU
    ft.wrap_triton(K.add_one_inplace).run(x_ft, N, grid=(1,), warmup=False, BLOCK=8)
    assert not torch.equal(x_ft, arange())  # warmup=False launches


def _warmup_prog(x: torch.Tensor) -> torch.Tensor:
    y = x + 0
    ft.wrap_triton(K.add_one_inplace).run(y, N, grid=(1,), warmup=True, BLOCK=8)
    ft.wrap_triton(K.add_one_inplace).run(x, N, grid=(1,), warmup=True, BLOCK=8)
    return y


@pytest.mark.parametrize("tracing_mode", ["real", "fake", "symbolic"])
def test_run_warmup_records_no_launch_when_traced(tracing_mode: TracingMode) -> None:
    gm = make_fx(_warmup_prog, tracing_mode=tracing_mode)(arange())
    assert ft.triton_kernel_wrapper_mutation not in [n.target for n in gm.graph.nodes]
    x_eager, x_traced = arange(), arange()
    assert_same(gm(x_traced), _warmup_prog(x_eager))
    assert_same(x_traced, x_eager)
    with pytest.raises(TypeError, match="missing a required argument: 'n'"):
        make_fx(lambda x: ft.wrap_triton(K.add_one_inplace).run(x, grid=(1,), warmup=True, BLOCK=8))(arange())


@pytest.mark.parametrize("grid", [(2,), (2, 3), (2, 3, 4)], ids=["1d", "2d", "3d"])
def test_grid_tuples_match_raw(grid: tuple[int, ...]) -> None:
    shape = (2, 3, 4)
    out_raw = torch.zeros(shape, dtype=torch.int32)
    out_ft = torch.zeros(shape, dtype=torch.int32)
    record_pids[grid](out_raw, *out_raw.stride())
    ft.wrap_triton(record_pids)[grid](out_ft, *out_ft.stride())
    assert int((out_raw != 0).sum()) == torch.Size(grid).numel()
    assert_same(out_ft, out_raw)


@pytest.mark.parametrize("grid", [(2,), (2, 3), (2, 3, 4)], ids=["1d", "2d", "3d"])
def test_grid_callable_matches_raw(grid: tuple[int, ...]) -> None:
    seen: list[dict[str, Any]] = []

    def grid_fn(meta: dict[str, Any]) -> tuple[int, ...]:
        seen.append(dict(meta))
        return grid

    out_raw = torch.zeros((2, 3, 4), dtype=torch.int32)
    out_ft = torch.zeros((2, 3, 4), dtype=torch.int32)
    record_pids[grid_fn](out_raw, *out_raw.stride())
    n_raw = len(seen)
    ft.wrap_triton(record_pids)[grid_fn](out_ft, *out_ft.stride())
    assert n_raw >= 1 and len(seen) > n_raw, "the grid callable was not called"
    assert set(seen[-1]) == set(seen[0]) >= {"out_ptr", "s0", "s1", "s2"}
    assert_same(out_ft, out_raw)


def test_grid_callable_meta_holds_constexpr_and_keyword_args() -> None:
    metas: list[dict[str, Any]] = []

    def grid_fn(meta: dict[str, Any]) -> tuple[int]:
        metas.append(dict(meta))
        return (triton.cdiv(N, meta["BLOCK"]),)

    x_raw, x_ft = arange(), arange()
    K.add_one_inplace[grid_fn](x_raw, N, BLOCK=4)
    ft.wrap_triton(K.add_one_inplace)[grid_fn](x_ft, N, BLOCK=4)
    assert len(metas) == 2
    assert metas[1]["BLOCK"] == 4
    assert set(metas[1]) == set(metas[0])
    assert_same(x_ft, x_raw)


def test_autotune_eager_matches_raw_and_meta_has_config() -> None:
    metas: list[dict[str, Any]] = []

    def grid_fn(meta: dict[str, Any]) -> tuple[int]:
        metas.append(dict(meta))
        return (triton.cdiv(N, meta["BLOCK"]),)

    def launch(wrap: Any, x: torch.Tensor) -> None:
        wrap(autotuned_add_one)[grid_fn](x, N)

    assert_same(*eager_pair(launch, arange))
    assert metas and all("BLOCK" in m for m in metas)


def test_autotune_eager_run_matches_raw() -> None:
    x_raw, x_ft = arange(16), arange(16)
    autotuned_add_one[lambda m: (triton.cdiv(16, m["BLOCK"]),)](x_raw, 16)
    ft.wrap_triton(autotuned_add_one).run(x_ft, 16, grid=lambda m: (triton.cdiv(16, m["BLOCK"]),))
    assert not torch.equal(x_raw, arange(16))
    assert_same(x_ft, x_raw)


def test_heuristics_eager_matches_raw() -> None:
    def launch(wrap: Any, x: torch.Tensor) -> None:
        wrap(heuristic_add_one)[(1,)](x, 6)

    assert_same(*eager_pair(launch, arange))


@pytest.mark.parametrize("n", [8, 7], ids=["even", "odd"])
def test_autotune_plus_heuristics_eager_matches_raw(n: int) -> None:
    def launch(wrap: Any, x: torch.Tensor) -> None:
        wrap(stacked_scale)[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, n)

    assert_same(*eager_pair(launch, arange))


def _same_source_kernel() -> Any:
    @triton.jit
    def add_one_copy(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        m = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)

    return add_one_copy


def test_kernels_equal_in_their_own_hash_are_described_apart() -> None:
    """Note [kernel keys]: a JITFunction hashes its source; the cache is keyed per object."""
    from functional_triton.launch_spec import kernel_key

    first, second = _same_source_kernel(), _same_source_kernel()
    if type(first).__hash__ is not object.__hash__:  # JITFunction (the interpreter's has none)
        assert hash(first) == hash(second)
    assert kernel_key(first) != kernel_key(second)
    for k in (first, second, first):
        assert ft.wrap_triton(k).info.fn is k.fn
        x_raw, x_ft = arange(), arange()
        k[(1,)](x_raw, N, BLOCK=8)
        ft.wrap_triton(k)[(1,)](x_ft, N, BLOCK=8)
        assert_same(x_ft, x_raw)


def test_eager_launch_does_not_touch_side_table(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_add_kernel = kernel_side_table.add_kernel
    real_add_constants = kernel_side_table.add_constants

    def spy_kernel(*a: Any, **k: Any) -> Any:
        calls.append("add_kernel")
        return real_add_kernel(*a, **k)

    def spy_constants(*a: Any, **k: Any) -> Any:
        calls.append("add_constants")
        return real_add_constants(*a, **k)

    monkeypatch.setattr(kernel_side_table, "add_kernel", spy_kernel)
    monkeypatch.setattr(kernel_side_table, "add_constants", spy_constants)
    gc.collect()
    before = len(kernel_side_table)
    x = arange()
    ft.wrap_triton(K.add_one_inplace)[(1,)](x, N, BLOCK=8)
    ft.wrap_triton(K.add_one_inplace)[lambda m: (1,)](x, N, BLOCK=8)
    ft.wrap_triton(K.add_one_inplace).run(x, N, grid=(1,), BLOCK=8)
    ft.wrap_triton(heuristic_add_one)[(1,)](x, N)
    ft.wrap_triton(autotuned_add_one)[lambda m: (triton.cdiv(N, m["BLOCK"]),)](x, N)
    assert len(kernel_side_table) == before
    assert calls == []


# --- tracing ------------------------------------------------------------------------------------------


def _inplace_prog(x: torch.Tensor) -> torch.Tensor:
    ft.wrap_triton(K.add_one_inplace)[(1,)](x, x.shape[0], BLOCK=8)
    return x * 2


def _inplace_eager(x: torch.Tensor) -> torch.Tensor:
    K.add_one_inplace[(1,)](x, x.shape[0], BLOCK=8)
    return x * 2


@pytest.mark.parametrize("tracing_mode", ["real", "fake", "symbolic"])
def test_make_fx_records_mutation_node(tracing_mode: TracingMode) -> None:
    gm = make_fx(_inplace_prog, tracing_mode=tracing_mode)(arange())
    nodes = kernel_nodes(gm, ft.triton_kernel_wrapper_mutation)
    assert len(nodes) == 1
    assert set(nodes[0].kwargs) == {"kernel_idx", "constant_args_idx", "grid", "kwargs"}
    assert nodes[0].kwargs["grid"] == (1,)
    assert set(kwarg(nodes[0], "kwargs")) >= {"x_ptr"}
    assert not kernel_nodes(gm, ft.triton_kernel_wrapper_functional)
    # The graph replays like eager.
    x_graph, x_eager = arange(), arange()
    out_graph = gm(x_graph)
    out_eager = _inplace_eager(x_eager)
    assert_same(out_graph, out_eager)
    assert_same(x_graph, x_eager)


def test_make_fx_symbolic_passes_symint_as_tensor_kwarg() -> None:
    gm = make_fx(_inplace_prog, tracing_mode="symbolic")(arange())
    (node,) = kernel_nodes(gm, ft.triton_kernel_wrapper_mutation)
    n_arg = kwarg(node, "kwargs")["n"]
    assert isinstance(n_arg, torch.fx.Node)
    assert isinstance(n_arg.meta["val"], torch.SymInt)


def test_make_fx_grid_callable_autotune_matches_eager() -> None:
    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        wrap(autotuned_add_one)[lambda m: (triton.cdiv(N, m["BLOCK"]),)](x, N)
        return x + 1

    gm = make_fx(lambda x: prog(ft.wrap_triton, x))(arange())
    (node,) = kernel_nodes(gm, ft.triton_kernel_wrapper_mutation)
    # The configs' grids differ: the node holds one per config (Note [traced grids]).
    configs = autotuned_add_one.configs
    assert node.kwargs["grid"] == tuple((triton.cdiv(N, c.kwargs["BLOCK"]),) for c in configs)
    x_graph, x_eager = arange(), arange()
    assert_same(gm(x_graph), prog(lambda k: k, x_eager))
    assert_same(x_graph, x_eager)


@pytest.mark.parametrize("tracing_mode", ["real", "fake", "symbolic"])
def test_make_fx_functionalize_records_functional_node(tracing_mode: TracingMode) -> None:
    gm = make_fx(torch.func.functionalize(_inplace_prog), tracing_mode=tracing_mode)(arange())
    assert not kernel_nodes(gm, ft.triton_kernel_wrapper_mutation)
    (fnode,) = kernel_nodes(gm, ft.triton_kernel_wrapper_functional)
    assert set(fnode.kwargs) == {
        "kernel_idx",
        "constant_args_idx",
        "grid",
        "kwargs",
        "tensors_to_clone",
        "layouts",
    }
    assert list(kwarg(fnode, "tensors_to_clone")) == ["x_ptr"]
    users = list(fnode.users)
    assert users and all(u.target is operator.getitem for u in users)
    assert {u.args[1] for u in users} == {"x_ptr"}
    (getitem,) = users
    (placeholder,) = [n for n in gm.graph.nodes if n.op == "placeholder"]
    copies = [
        n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.ops.aten.copy_.default
    ]
    assert len(copies) == 1
    assert copies[0].args[0] is placeholder and copies[0].args[1] is getitem
    x_graph, x_eager = arange(), arange()
    assert_same(gm(x_graph), _inplace_eager(x_eager))
    assert_same(x_graph, x_eager)


def test_make_fx_functionalize_out_of_place_has_no_copy() -> None:
    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        wrap(K.add_kernel)[(2,)](x, y, out, N, BLOCK=4)
        return out

    gm = make_fx(torch.func.functionalize(lambda x, y: prog(ft.wrap_triton, x, y)))(arange(), arange())
    (fnode,) = kernel_nodes(gm, ft.triton_kernel_wrapper_functional)
    assert "out_ptr" in kwarg(fnode, "tensors_to_clone")
    assert {u.args[1] for u in fnode.users} == {"out_ptr"}
    assert not [n for n in gm.graph.nodes if n.target is torch.ops.aten.copy_.default]
    x, y = arange(), torch.full((N,), 2.0)
    assert_same(gm(x, y), prog(lambda k: k, x.clone(), y.clone()))
    assert_same(x, arange())


def test_make_fx_launch_options_accepted() -> None:
    """Triton launch options (num_warps) are accepted eagerly by the raw kernel: also when traced."""

    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        wrap(K.add_one_inplace)[(1,)](x, N, BLOCK=8, num_warps=4)
        return x

    x_eager = arange()
    expected = prog(lambda k: k, x_eager).clone()
    x_ft = arange()
    prog(ft.wrap_triton, x_ft)
    assert_same(x_ft, expected)
    gm = make_fx(torch.func.functionalize(lambda x: prog(ft.wrap_triton, x)))(arange())
    x_graph = arange()
    assert_same(gm(x_graph), expected)
    assert_same(x_graph, x_eager)


# --- every kernel kind under every tracing mode, against raw eager launches -----------------------------


def _launch_kind(kind: str, wrap: Any, x: torch.Tensor) -> None:
    if kind == "jit":
        wrap(K.add_one_inplace)[(2,)](x, N, BLOCK=4)
    elif kind == "jit-run":
        if wrap is ft.wrap_triton:
            wrap(K.add_one_inplace).run(x, N, grid=(2,), BLOCK=4)
        else:
            K.add_one_inplace[(2,)](x, N, BLOCK=4)
    elif kind == "autotune":
        wrap(autotuned_add_one)[lambda m: (triton.cdiv(N, m["BLOCK"]),)](x, N)
    elif kind == "heuristics":
        wrap(heuristic_add_one)[(1,)](x, 6)
    elif kind == "autotune+heuristics":
        wrap(stacked_scale)[lambda m: (triton.cdiv(7, m["BLOCK"]),)](x, 7)
    elif kind == "grid-2d":
        wrap(record_pids)[(2, 3)](x, 4, 1, 0)
    else:
        raise ValueError(kind)


@pytest.mark.parametrize(
    "kind", ["jit", "jit-run", "autotune", "heuristics", "autotune+heuristics", "grid-2d"]
)
def test_kernel_kinds_under_tracing_match_eager(kind: str) -> None:
    from tests.harness import check_matches_eager

    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        y = x * 1  # an intermediate, written by the kernel
        _launch_kind(kind, wrap, y)
        _launch_kind(kind, wrap, x)  # and a graph input
        return y + 1

    def make() -> tuple[torch.Tensor]:
        if kind == "grid-2d":
            return (torch.zeros(16, dtype=torch.int32),)
        return (arange(),)

    check_matches_eager(
        prog, make, modes=("aot_function", "functionalize", "make_fx", "symbolic"), no_grad=(True,)
    )
