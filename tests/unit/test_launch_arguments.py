"""Launch arguments that tracing must carry exactly: constants by type and bits, tuples, grids.

Every program is checked against the raw kernel run eagerly (tests/harness.py).
"""

from __future__ import annotations

import functools
import itertools
import math
import struct
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from functional_triton import _compat, side_table
from functional_triton.side_table import KernelSideTable
from tests import kernels as K
from tests.harness import ALIASING_MODES, ALL_MODES, check_matches_eager
from tests.helpers import nop

N = 8
# Every mode that replays a trace; "symbolic" traces with dynamic shapes.
MODES = ALL_MODES


@triton.jit
def reciprocal_kernel(out_ptr, c, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1 / (tl.full([BLOCK], 1.0, tl.float32) * c))


@triton.jit
def tuple_scalar_kernel(vals, out_ptr, BLOCK: tl.constexpr):
    """out[:BLOCK] = vals[0] + 1, out[BLOCK:] = vals[0] + vals[0] (u1 wraps: True + True == 0)."""
    offs = tl.arange(0, BLOCK)
    v = vals[0]
    tl.store(out_ptr + offs, tl.zeros([BLOCK], tl.float64) + (v + 1))
    tl.store(out_ptr + BLOCK + offs, tl.zeros([BLOCK], tl.float64) + (v + v))


# --- item 1: constants are told apart by exact type and bits ------------------------------------


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # numpy, inside the interpreter
@pytest.mark.parametrize(
    "first, second",
    [(0.0, -0.0), (-0.0, 0.0), (1.0, 1)],
    ids=["zero-then-negative-zero", "negative-zero-then-zero", "float-then-int"],
)
def test_scalar_constants_that_compare_equal_launch_with_their_own_value(first: Any, second: Any) -> None:
    def prog(wrap: Any, a: torch.Tensor, b: torch.Tensor) -> None:
        wrap(reciprocal_kernel)[(1,)](a, first, BLOCK=N)
        wrap(reciprocal_kernel)[(1,)](b, second, BLOCK=N)

    check_matches_eager(prog, lambda: (torch.zeros(N), torch.zeros(N)), modes=MODES)


# triton 3.6's interpreter cannot take a bool inside a tuple argument; raw launches fail the same way
# ("numpy data itemsize (32 bits) exceeds dtype primitive_bitwidth (1 bits)"); compiled kernels can.
_BOOL_IN_TUPLE_FAILS = _compat.TRITON_VERSION < (3, 7) and _compat.interpreter_enabled()
_BOOL_IN_TUPLE = pytest.mark.xfail(
    _BOOL_IN_TUPLE_FAILS,
    reason="triton 3.6's interpreter refuses a bool in a tuple",
    raises=ValueError,
    strict=True,
)


@pytest.mark.parametrize(
    "first, second",
    [
        ((2**40,), (2.0**40,)),
        ((2.0**40,), (2**40,)),
        pytest.param((1,), (True,), marks=_BOOL_IN_TUPLE),
        pytest.param((True,), (1,), marks=_BOOL_IN_TUPLE),
    ],
    ids=["int-then-float", "float-then-int", "int-then-bool", "bool-then-int"],
)
def test_tuple_constants_that_compare_equal_launch_with_their_own_elements(first: Any, second: Any) -> None:
    def prog(wrap: Any, a: torch.Tensor, b: torch.Tensor) -> None:
        wrap(tuple_scalar_kernel)[(1,)](first, a, BLOCK=N)
        wrap(tuple_scalar_kernel)[(1,)](second, b, BLOCK=N)

    def inputs() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(2 * N, dtype=torch.float64), torch.zeros(2 * N, dtype=torch.float64)

    check_matches_eager(prog, inputs, modes=MODES)


class _Pair(NamedTuple):
    a: Any
    b: Any


_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
_OTHER_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000002))[0]


@pytest.mark.parametrize(
    "a, b",
    [
        (0.0, -0.0),
        (1, 1.0),
        (1, True),
        (0, False),
        (_NAN, _OTHER_NAN),
        ((1, 2), (1, 2.0)),
        ((1, (2, 3)), (1, (2, 3.0))),
        ((1, 2), _Pair(1, 2)),
        (np.float32(0.5), 0.5),
        (np.float32(0.5), np.float64(0.5)),
        (np.int32(3), np.int64(3)),
        (np.int64(3), 3),
        (tl.constexpr(1), tl.constexpr(1.0)),
        (tl.constexpr(1), 1),
    ],
)
def test_exact_key_tells_apart_constants_a_kernel_can_tell_apart(a: Any, b: Any) -> None:
    assert side_table.exact_key(a) != side_table.exact_key(b)
    table = KernelSideTable()
    ia, ib = table.add_constants({"c": a}), table.add_constants({"c": b})
    assert int(ia) != int(ib)
    assert table.get_constants(ib)["c"] is b


@pytest.mark.parametrize("value", [0.0, -0.0, _NAN, (1, 2.0, None), np.float32(0.5), "s", math.inf])
def test_exact_key_shares_identical_constants(value: Any) -> None:
    table = KernelSideTable()
    copy = struct.unpack("<d", struct.pack("<d", value))[0] if isinstance(value, float) else value
    assert int(table.add_constants({"c": value})) == int(table.add_constants({"c": copy}))


# --- item 2: tensors and SymInts inside tuple arguments are traced --------------------------------


@triton.jit
def tuple_copy_kernel(ptrs, n, BLOCK: tl.constexpr):
    """ptrs[1][:n] = 2 * ptrs[0][:n]"""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(ptrs[1] + offs, tl.load(ptrs[0] + offs, mask=m) * 2, mask=m)


@triton.jit
def nested_tuple_kernel(args, BLOCK: tl.constexpr):
    """args = (x, (out, n), scale): out[:n] = x[:n] * scale + 1; x[:n] += 1."""
    offs = tl.arange(0, BLOCK)
    n = args[1][1]
    m = offs < n
    x = tl.load(args[0] + offs, mask=m)
    tl.store(args[1][0] + offs, x * args[2] + 1, mask=m)
    tl.store(args[0] + offs, x + 1, mask=m)


class Pointers(NamedTuple):
    src: Any
    dst: Any


@triton.jit
def named_tuple_kernel(p, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(p.dst + offs, tl.load(p.src + offs, mask=m) + 3, mask=m)


def _vector(seed: int = 0, n: int = N) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.float32) + seed) % 7


def test_tuple_of_tensors_out_of_place() -> None:
    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        wrap(tuple_copy_kernel)[(1,)]((x, out), x.numel(), BLOCK=N)
        return out

    check_matches_eager(prog, lambda: (_vector(),), modes=MODES)


def test_tuple_of_tensors_writes_an_input_and_a_view_of_it() -> None:
    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> None:
        wrap(tuple_copy_kernel)[(1,)]((x, y[1:]), N, BLOCK=N)

    check_matches_eager(prog, lambda: (_vector(), _vector(3, N + 1)), modes=MODES)


def test_tuple_element_aliasing_another_argument() -> None:
    # The kernel reads ptrs[0] = x and writes ptrs[1] = x[...]: one storage, two arguments.
    def prog(wrap: Any, x: torch.Tensor) -> None:
        wrap(tuple_copy_kernel)[(1,)]((x[2:], x[:-2]), N - 2, BLOCK=N)

    # Distinct aliasing arguments are refused under remove="mutations_and_views" (README).
    check_matches_eager(prog, lambda: (_vector(),), modes=(*ALIASING_MODES, "symbolic"))


def test_nested_tuple_with_a_size_and_a_scalar() -> None:
    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        wrap(nested_tuple_kernel)[(1,)]((x, (out, x.numel()), 0.5), BLOCK=N)
        return out

    check_matches_eager(prog, lambda: (_vector(),), modes=MODES)


def test_named_tuple_of_tensors() -> None:
    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        wrap(named_tuple_kernel)[(1,)](Pointers(x, out), x.numel(), BLOCK=N)
        return out

    check_matches_eager(prog, lambda: (_vector(),), modes=MODES)


def test_tuple_holding_a_symint_replays_on_other_sizes() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    import functional_triton as ft

    def prog(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        ft.wrap_triton(nested_tuple_kernel)[(1,)]((x, (out, x.numel()), 2.0), BLOCK=16)
        return out

    gm = make_fx(torch.func.functionalize(prog), tracing_mode="symbolic")(_vector(0, 6))
    for n in (6, 11):
        x = _vector(1, n)
        expected_x, expected = x.clone(), torch.empty_like(x)
        nested_tuple_kernel[(1,)]((expected_x, (expected, n), 2.0), BLOCK=16)
        got = gm(x)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        torch.testing.assert_close(x, expected_x, rtol=0, atol=0)


def test_mutation_analysis_reports_tuple_elements_by_derived_name() -> None:
    from functional_triton.mutation import analyze_writes

    x, out = _vector(), torch.zeros(N)
    result = analyze_writes(tuple_copy_kernel, {"ptrs": (x, out), "n": N, "BLOCK": N})
    assert result.written_names == frozenset({"ptrs[1]"}), result.reason
    result = analyze_writes(nested_tuple_kernel, {"args": (x, (out, N), 0.5), "BLOCK": N})
    assert result.written_names == frozenset({"args[0]", "args[1][0]"}), result.reason
    result = analyze_writes(named_tuple_kernel, {"p": Pointers(x, out), "n": N, "BLOCK": N})
    assert result.written_names == frozenset({"p[1]"}), result.reason


def test_traced_tuple_node_holds_elements_by_derived_name() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    import functional_triton as ft

    def prog(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        ft.wrap_triton(tuple_copy_kernel)[(1,)]((x, out), N, BLOCK=N)
        return out

    gm = make_fx(torch.func.functionalize(prog))(_vector())
    (node,) = [n for n in gm.graph.nodes if n.target is ft.triton_kernel_wrapper_functional]
    assert set(node.kwargs["kwargs"]) == {"ptrs[0]", "ptrs[1]"}
    assert list(node.kwargs["tensors_to_clone"]) == ["ptrs[1]"]


# --- item 15: a pointer parameter rebound in an if/else ------------------------------------------


@triton.jit
def rebind_in_if_kernel(x_ptr, y_ptr, flag, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if flag:
        p = x_ptr + 1
    else:
        p = x_ptr
    tl.store(p + offs, tl.load(y_ptr + offs, mask=offs < n), mask=offs < n)


@pytest.mark.parametrize("flag", [0, 1])
def test_pointer_rebound_in_if_else_is_analysed(flag: int) -> None:
    from functional_triton.mutation import analyze_writes

    args = {"x_ptr": torch.zeros(N + 1), "y_ptr": _vector(), "flag": flag, "n": N, "BLOCK": N}
    result = analyze_writes(rebind_in_if_kernel, args)
    assert result.written_names == frozenset({"x_ptr"}), result.reason

    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> None:
        wrap(rebind_in_if_kernel)[(1,)](x, y, flag, N, BLOCK=N)

    check_matches_eager(prog, lambda: (torch.zeros(N + 1), _vector()), modes=MODES)


# --- item 3: a grid callable under dynamic shapes launches the symbolic grid -----------------------


def _closing_grid_prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    # The Triton tutorials' grid: a closure over a size computed from a traced tensor.
    out = torch.zeros_like(x)
    n = x.numel()
    wrap(K.add_kernel)[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, x, out, n, BLOCK=4)
    return out


def _eager(prog: Any, *inputs: torch.Tensor) -> Any:
    return prog(lambda k: k, *inputs)


def test_grid_callable_closing_over_a_size_replays_on_other_sizes_symbolic() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    import functional_triton as ft

    traced = functools.partial(_closing_grid_prog, ft.wrap_triton)
    gm = make_fx(torch.func.functionalize(traced), tracing_mode="symbolic")(_vector(0, 8))
    for n in (8, 20, 3):
        expected = _eager(_closing_grid_prog, _vector(1, n))
        torch.testing.assert_close(gm(_vector(1, n)), expected, rtol=0, atol=0)


def test_grid_callable_closing_over_a_size_replays_on_other_sizes_aot_dynamic() -> None:
    from functorch.compile import aot_function

    import functional_triton as ft

    for compiler in (nop, ft.reinplace_compiler):
        compiled = aot_function(
            functools.partial(_closing_grid_prog, ft.wrap_triton), fw_compiler=compiler, dynamic=True
        )
        for n in (8, 20, 3):
            got = compiled(_vector(1, n))
            torch.testing.assert_close(got, _eager(_closing_grid_prog, _vector(1, n)), rtol=0, atol=0)


def _second_config_wins() -> Any:
    calls = itertools.count()

    def do_bench(kernel_call: Any, quantiles: Any = None) -> list[float]:
        kernel_call()
        t = 2.0 if next(calls) % 2 == 0 else 1.0  # configs are benchmarked in order: the second wins
        return [t, t, t]

    return do_bench


def _autotuned_add_one() -> Any:
    # A fresh autotuner per test: its cache of chosen configs must not leak between tests.
    @triton.autotune(
        configs=[triton.Config({"BLOCK": 2}), triton.Config({"BLOCK": 8})],
        key=["n"],
        restore_value=["x_ptr"],
        do_bench=_second_config_wins(),
    )
    @triton.jit
    def autotuned_add_one(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)

    return autotuned_add_one


def test_grid_per_autotune_config_launches_the_grid_of_the_config_triton_chose() -> None:
    kernel = _autotuned_add_one()

    def prog(wrap: Any, x: torch.Tensor) -> None:
        n = x.numel()
        # With BLOCK=8 (the config that wins) the first config's grid would be 4x too large: the
        # kernel masks by n, so the answer is the same, but a grid of BLOCK=2 with BLOCK=8 chosen
        # would be caught by the launch-count check below.
        wrap(kernel)[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, n)

    check_matches_eager(prog, lambda: (_vector(0, 16),), modes=MODES)
    seen: list[tuple[int, ...]] = []
    import functional_triton.launch_spec as launch_spec

    real = launch_spec.GridByConfig.chooser

    def spy(self: Any, grids: Any) -> Any:
        choose = real(self, grids)

        def grid_fn(meta: Any) -> Any:
            seen.append(choose(meta))
            return seen[-1]

        return grid_fn

    from torch.fx.experimental.proxy_tensor import make_fx

    import functional_triton as ft

    gm = make_fx(torch.func.functionalize(functools.partial(prog, ft.wrap_triton)), tracing_mode="symbolic")(
        _vector(0, 16)
    )
    (node,) = [n for n in gm.graph.nodes if n.target is ft.triton_kernel_wrapper_functional]
    assert len(node.kwargs["grid"]) == 2, node.kwargs["grid"]  # one grid per config
    try:
        launch_spec.GridByConfig.chooser = spy  # type: ignore[method-assign]
        x = _vector(0, 24)
        gm(x)
    finally:
        launch_spec.GridByConfig.chooser = real  # type: ignore[method-assign]
    # The autotuner benchmarks both configs on the new size (each with its own grid), then
    # launches the one it chose: cdiv(24, 2), cdiv(24, 8), cdiv(24, 8).
    assert seen == [(12,), (3,), (3,)], seen
    torch.testing.assert_close(x, _vector(0, 24) + 1, rtol=0, atol=0)


def test_grid_callable_that_cannot_run_while_tracing_is_kept_for_run_time() -> None:
    from functional_triton.launch_spec import trace_grid

    x = torch.tensor([3.0, 1.0])

    def needs_data(meta: dict[str, Any]) -> tuple[int]:
        raise RuntimeError("data-dependent")  # what a fake tensor's .item() does without a shape env

    assert trace_grid(K.add_one_inplace, needs_data, {"x_ptr": x, "n": 2, "BLOCK": 4}) == (None, needs_data)

    def sized(meta: dict[str, Any]) -> tuple[int]:
        return (meta["x_ptr"].numel(),)

    assert trace_grid(K.add_one_inplace, sized, {"x_ptr": x, "n": 2, "BLOCK": 4}) == ((2,), None)


def test_grid_callable_reading_tensor_data_is_an_unbacked_size_under_dynamic_shapes() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    import functional_triton as ft

    def prog(x: torch.Tensor) -> torch.Tensor:
        grid = lambda meta: (meta["x_ptr"][0].to(torch.int64).item(),)  # noqa: E731 - data, not a size
        ft.wrap_triton(K.add_one_inplace)[grid](x, x.numel(), BLOCK=2)
        return x

    gm = make_fx(torch.func.functionalize(prog), tracing_mode="symbolic")(torch.tensor([2.0, 0, 0, 0]))
    for x in (torch.tensor([1.0, 0, 0, 0]), torch.tensor([2.0, 5, 5, 5])):
        expected = x.clone()
        K.add_one_inplace[(int(expected[0]),)](expected, 4, BLOCK=2)
        torch.testing.assert_close(gm(x.clone()), expected, rtol=0, atol=0)


@triton.jit
def descriptor_pair_add_one(descs, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    v = descs[0].load([pid * BM, 0])
    descs[1].store([pid * BM, 0], v + 1)


def test_tuple_of_host_descriptors() -> None:
    descriptor = pytest.importorskip("triton.tools.tensor_descriptor").TensorDescriptor
    from functional_triton.mutation import analyze_writes

    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        pair = (descriptor.from_tensor(x, [4, 8]), descriptor.from_tensor(y, [4, 8]))
        wrap(descriptor_pair_add_one)[(2,)](pair, BM=4, BN=8)
        return y * 2

    def inputs() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.arange(64, dtype=torch.float32).reshape(8, 8), torch.zeros(8, 8)

    x, y = inputs()
    pair = (descriptor.from_tensor(x, [4, 8]), descriptor.from_tensor(y, [4, 8]))
    result = analyze_writes(descriptor_pair_add_one, {"descs": pair, "BM": 4, "BN": 8})
    assert result.written_names == frozenset({"descs[1]"}), result.reason
    try:
        prog(lambda k: k, *inputs())
    except AssertionError as e:  # triton 3.6's CUDA launcher asserts on a tuple of host descriptors
        pytest.skip(f"this triton's raw launch of a tuple of host descriptors fails too: {e!r}")
    check_matches_eager(prog, inputs)


@pytest.mark.parametrize("mode", ["eager", "make_fx", "aot_function"])
def test_grid_callable_writing_a_tensor_inside_a_tuple_raises(mode: str) -> None:
    from functorch.compile import aot_function
    from torch.fx.experimental.proxy_tensor import make_fx

    import functional_triton as ft

    def prog(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)

        def grid(meta: dict[str, Any]) -> tuple[int]:
            out.add_(1)
            return (1,)

        ft.wrap_triton(tuple_copy_kernel)[grid]((x, out), N, BLOCK=N)
        return out

    with pytest.raises(RuntimeError, match=r"the grid callable wrote to tensor 'ptrs\[1\]'"):
        if mode == "eager":
            prog(_vector())
        elif mode == "make_fx":
            make_fx(prog)(_vector())
        else:
            aot_function(prog, fw_compiler=nop)(_vector())
