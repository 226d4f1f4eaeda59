"""Bad input: the exception type and message (naming the argument) in eager, make_fx and aot_function.

Every user error must be a builtin exception other than AssertionError (pytest.raises with a specific
type already rejects AssertionError), and its wording is pinned with `match`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from functorch.compile import aot_function
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from functional_triton.launch_spec import kernel_info, make_launch_spec
from tests import kernels as K
from tests.helpers import nop

pytestmark = pytest.mark.filterwarnings("ignore::functional_triton.functionalize.AnalysisWarning")

N = 8
MODES = ("eager", "make_fx", "aot_function")


def run_in(mode: str, prog: Callable[..., Any], *inputs: torch.Tensor) -> Any:
    """Trace (where the mode traces) and run ``prog`` on ``inputs``."""
    if mode == "eager":
        return prog(*inputs)
    if mode == "make_fx":
        return make_fx(prog)(*inputs)(*inputs)
    if mode == "make_fx_fake_then_run":
        return make_fx(prog, tracing_mode="fake")(*inputs)(*inputs)
    if mode == "aot_function":
        return aot_function(prog, fw_compiler=nop, bw_compiler=nop)(*inputs)
    raise ValueError(mode)


def inplace_with(grid: Any, *args: Any, **kwargs: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    def prog(x: torch.Tensor) -> torch.Tensor:
        ft.wrap_triton(K.add_one_inplace)[grid](x, *args, **kwargs)
        return x + 0

    return prog


def x8() -> torch.Tensor:
    return torch.arange(N, dtype=torch.float32)


# --- wrap_triton --------------------------------------------------------------------------------------


def plain_function(x_ptr, n):
    pass


def test_wrap_plain_function_says_missing_jit() -> None:
    with pytest.raises(TypeError, match=r"got function 'plain_function' \(missing @triton\.jit\?\)"):
        ft.wrap_triton(plain_function)


def test_wrap_lambda_says_missing_jit() -> None:
    with pytest.raises(TypeError, match=r"missing @triton\.jit"):
        ft.wrap_triton(lambda x: x)


@pytest.mark.parametrize(
    "obj, what",
    [(3, "int"), (None, "NoneType"), ("add_kernel", "str"), (torch.zeros(1), "Tensor")],
    ids=["int", "None", "str", "tensor"],
)
def test_wrap_non_kernel_names_what_arrived(obj: Any, what: str) -> None:
    with pytest.raises(TypeError, match=rf"wrap_triton\(\) expects a @triton\.jit.*got {what}") as info:
        ft.wrap_triton(obj)
    assert "missing @triton.jit" not in str(info.value)


def test_wrap_raw_python_function_behind_jit_is_refused() -> None:
    # K.add_kernel.fn is the undecorated Python function.
    with pytest.raises(TypeError, match=r"got function 'add_kernel' \(missing @triton\.jit\?\)"):
        ft.wrap_triton(K.add_kernel.fn)


# --- grids --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("grid", [(), (1, 1, 1, 1)], ids=["len0", "len4"])
def test_grid_wrong_length(mode: str, grid: tuple[int, ...]) -> None:
    with pytest.raises(
        ValueError,
        match=r"grid must have 1 to 3 entries, got " + re.escape(repr(grid)),
    ):
        run_in(mode, inplace_with(grid, N, BLOCK=8), x8())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "grid, what",
    [((1.0,), "float 1.0"), (("1",), "str '1'"), ((1, 2.5), "float 2.5")],
    ids=["float", "str", "second-float"],
)
def test_grid_non_int_entry(mode: str, grid: tuple[Any, ...], what: str) -> None:
    with pytest.raises(TypeError, match=rf"grid entries must be ints or SymInts, got {what}"):
        run_in(mode, inplace_with(grid, N, BLOCK=8), x8())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("grid", [3, None, "1", {0: 1}], ids=["int", "None", "str", "dict"])
def test_grid_neither_tuple_nor_callable(mode: str, grid: Any) -> None:
    with pytest.raises(TypeError, match=r"grid must be a tuple of 1 to 3 ints or a callable"):
        run_in(mode, inplace_with(grid, N, BLOCK=8), x8())


@pytest.mark.parametrize("mode", MODES + ("make_fx_fake_then_run",))
@pytest.mark.parametrize(
    "returned, exc, pattern",
    [
        ((), ValueError, r"grid must have 1 to 3 entries, got \(\)"),
        ((1, 1, 1, 1), ValueError, r"grid must have 1 to 3 entries"),
        ((1.5,), TypeError, r"grid entries must be ints or SymInts, got float 1\.5"),
        (3, TypeError, r"grid callable must return a tuple of 1 to 3 ints, got int 3"),
        (None, TypeError, r"grid callable must return a tuple of 1 to 3 ints, got NoneType"),
    ],
    ids=["len0", "len4", "float", "int", "None"],
)
def test_grid_callable_returning_bad_grid(mode: str, returned: Any, exc: type, pattern: str) -> None:
    with pytest.raises(exc, match=pattern):
        run_in(mode, inplace_with(lambda meta: returned, N, BLOCK=8), x8())


# --- arguments ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_missing_argument(mode: str) -> None:
    with pytest.raises(TypeError, match=r"add_one_inplace\(\) missing a required argument: 'n'"):
        run_in(mode, inplace_with((1,), BLOCK=8), x8())


@pytest.mark.parametrize("mode", MODES)
def test_missing_constexpr_argument(mode: str) -> None:
    with pytest.raises(TypeError, match=r"add_one_inplace\(\) missing a required argument: 'BLOCK'"):
        run_in(mode, inplace_with((1,), N), x8())


@pytest.mark.parametrize("mode", MODES)
def test_unknown_keyword(mode: str) -> None:
    with pytest.raises(TypeError, match=r"add_one_inplace\(\) got an unexpected keyword argument 'FOO'"):
        run_in(mode, inplace_with((1,), N, BLOCK=8, FOO=1), x8())


@pytest.mark.parametrize("mode", MODES)
def test_duplicate_argument(mode: str) -> None:
    with pytest.raises(TypeError, match=r"add_one_inplace\(\) multiple values for argument 'n'"):
        run_in(mode, inplace_with((1,), N, BLOCK=8, n=N), x8())


@pytest.mark.parametrize("mode", MODES)
def test_too_many_positional_arguments(mode: str) -> None:
    with pytest.raises(TypeError, match=r"add_one_inplace\(\) too many positional arguments"):
        run_in(mode, inplace_with((1,), N, 8, 9), x8())


@pytest.mark.parametrize("mode", MODES)
def test_tensor_for_constexpr(mode: str) -> None:
    def prog(x: torch.Tensor) -> torch.Tensor:
        ft.wrap_triton(K.add_one_inplace)[(1,)](x, N, BLOCK=x)
        return x + 0

    with pytest.raises(TypeError, match=r"argument 'BLOCK' of add_one_inplace is a tl\.constexpr"):
        run_in(mode, prog, x8())


def test_data_dependent_symint_for_constexpr_under_symbolic_tracing() -> None:
    # A shape-derived constexpr is specialised with a guard (tests/unit/test_constexpr_guards.py);
    # a data-dependent one has no value to specialise on.
    def prog(x: torch.Tensor) -> torch.Tensor:
        ft.wrap_triton(K.add_one_inplace)[(1,)](x, N, BLOCK=(x > -1).sum().item())
        return x + 0

    message = r"'BLOCK' of add_one_inplace is a tl\.constexpr and got a data-dependent"
    with pytest.raises(TypeError, match=message):
        make_fx(prog, tracing_mode="symbolic")(x8())


@pytest.mark.parametrize("mode", MODES)
def test_run_without_grid(mode: str) -> None:
    def prog(x: torch.Tensor) -> torch.Tensor:
        ft.wrap_triton(K.add_one_inplace).run(x, N, BLOCK=8)
        return x + 0

    with pytest.raises(TypeError, match=r"add_one_inplace\.run\(\) needs a grid"):
        run_in(mode, prog, x8())


# --- devices ------------------------------------------------------------------------------------------


def test_cpu_tensor_for_compiled_kernel_names_argument() -> None:
    info = dataclasses.replace(kernel_info(K.add_kernel), interpreted=False)
    x, y, out = (torch.zeros(N, device="cpu") for _ in range(3))
    with pytest.raises(ValueError, match=r"argument 'x_ptr' is on cpu, but add_kernel runs on cuda") as err:
        make_launch_spec(K.add_kernel, info, (1,), (x, y, out, N), {"BLOCK": 8})
    assert "TRITON_INTERPRET=1" in str(err.value)


def test_cpu_tensor_by_keyword_for_compiled_kernel_names_argument() -> None:
    info = dataclasses.replace(kernel_info(K.add_kernel), interpreted=False)
    with pytest.raises(ValueError, match=r"argument 'out_ptr' is on cpu.*TRITON_INTERPRET=1"):
        make_launch_spec(
            K.add_kernel,
            info,
            (1,),
            (),
            {
                "n": N,
                "out_ptr": torch.zeros(N, device="cpu"),
                "BLOCK": 8,
                "y_ptr": torch.zeros(N, device="meta"),
                "x_ptr": torch.zeros(N, device="meta"),
            },
        )


@pytest.mark.skipif(not kernel_info(K.add_kernel).interpreted, reason="needs TRITON_INTERPRET=1 (CPU run)")
def test_interpreted_kernel_accepts_cpu_tensors() -> None:
    info = kernel_info(K.add_kernel)
    assert info.interpreted
    spec = make_launch_spec(
        K.add_kernel, info, (1,), (torch.zeros(N), torch.zeros(N), torch.zeros(N), N), {"BLOCK": 8}
    )
    assert set(spec.tensors) == {"x_ptr", "y_ptr", "out_ptr"}
    assert spec.constants == {"n": N, "BLOCK": 8}


@pytest.mark.skipif(
    not kernel_info(K.add_kernel).interpreted,
    reason="needs TRITON_INTERPRET=1: a compiled kernel refuses the CPU tensor before comparing devices",
)
def test_tensors_on_several_devices() -> None:
    info = kernel_info(K.add_kernel)
    with pytest.raises(ValueError, match=r"several devices.*'x_ptr' on cpu.*'y_ptr' on meta"):
        make_launch_spec(
            K.add_kernel,
            info,
            (1,),
            (torch.zeros(N, device="cpu"), torch.zeros(N, device="meta"), torch.zeros(N, device="cpu"), N),
            {"BLOCK": 8},
        )


# --- grid callables must not write ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_grid_callable_that_writes_a_tensor(mode: str) -> None:
    def prog(x: torch.Tensor) -> torch.Tensor:
        def grid(meta: dict[str, Any]) -> tuple[int]:
            x.add_(1)
            return (1,)

        ft.wrap_triton(K.add_one_inplace)[grid](x, N, BLOCK=8)
        return x + 0

    with pytest.raises(
        RuntimeError, match=r"the grid callable wrote to tensor 'x_ptr'; a grid must not mutate"
    ):
        run_in(mode, prog, x8())


# --- the kernel's own errors are not swallowed ---------------------------------------------------------


@triton.jit
def failing_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.static_assert(BLOCK > 100, "BLOCK too small for failing_kernel")
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


def test_kernel_error_propagates_eagerly_like_raw() -> None:
    with pytest.raises(Exception) as raw_err:  # noqa: B017 - the raw kernel decides the type
        failing_kernel[(1,)](x8(), BLOCK=8)
    with pytest.raises(type(raw_err.value)) as ours:
        ft.wrap_triton(failing_kernel)[(1,)](x8(), BLOCK=8)
    assert not isinstance(ours.value, AssertionError) or isinstance(raw_err.value, AssertionError)
    assert "BLOCK too small" in str(ours.value) or "BLOCK too small" in repr(ours.value.__cause__)


# --- grids that raw triton treats inconsistently ---------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_bool_grid_entry_is_refused_everywhere(mode: str) -> None:
    with pytest.raises(TypeError, match=r"grid entries must be ints or SymInts, got bool True"):
        run_in(mode, inplace_with((True,), N, BLOCK=8), x8())


@pytest.mark.parametrize("mode", ("eager", "aot_function"))
def test_list_grid_launches_like_a_tuple(mode: str) -> None:
    expected = x8()
    K.add_one_inplace[(1,)](expected, N, BLOCK=8)
    assert torch.equal(run_in(mode, inplace_with([1], N, BLOCK=8), x8()), expected)


@pytest.mark.parametrize("mode", ("make_fx", "aot_function", "make_fx_fake_then_run"))
def test_grid_callable_is_checked_while_tracing(mode: str) -> None:
    calls = []

    def grid(meta: dict[str, Any]) -> tuple[int]:
        calls.append(meta["BLOCK"])
        return (1,)

    run_in(mode, inplace_with(grid, N, BLOCK=8), x8())
    assert calls and calls[0] == 8


# --- tensors the traced function did not receive (Note [tensors functionalization does not hold]) ----

TRACERS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "aot_function": lambda f: aot_function(f, fw_compiler=nop, bw_compiler=nop),
    "functionalize": torch.func.functionalize,
    "make_fx(functionalize)": lambda f: make_fx(torch.func.functionalize(f)),
    "make_fx(functionalize), fake": lambda f: make_fx(torch.func.functionalize(f), tracing_mode="fake"),
}


@pytest.mark.parametrize("tracer", TRACERS)
def test_write_to_a_tensor_from_outside_next_to_traced_ones_names_it(tracer: str) -> None:
    outside = torch.zeros(N)

    def prog(x: torch.Tensor) -> torch.Tensor:
        ft.wrap_triton(K.add_kernel)[(1,)](x, x, outside, N, BLOCK=8)
        return x + 0

    with pytest.raises(
        ValueError, match=r"argument 'out_ptr' of add_kernel, which the kernel may write, is a tensor the "
    ):
        TRACERS[tracer](prog)(x8())
    assert torch.equal(outside, torch.zeros(N)), "refused before the kernel ran"


@pytest.mark.parametrize("tracer", TRACERS)
def test_reading_a_tensor_from_outside_is_a_constant(tracer: str) -> None:
    outside = x8() * 3

    def prog(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        ft.wrap_triton(K.add_kernel)[(1,)](outside, x, out, N, BLOCK=8)
        return out

    traced = TRACERS[tracer](prog)
    expected = torch.empty(N)
    K.add_kernel[(1,)](outside.clone(), x8(), expected, N, BLOCK=8)
    result = traced(x8())
    if isinstance(result, torch.fx.GraphModule):
        result = result(x8())
    assert torch.equal(result, expected)


@pytest.mark.parametrize("tracer", TRACERS)
def test_a_launch_on_outside_tensors_alone_runs_as_in_eager(tracer: str) -> None:
    """No functional argument: the launch goes on below functionalization, like an aten operator on
    such a tensor (in place under functionalize; a mutation of the graph's constant when traced)."""
    outside = x8()

    def prog(x: torch.Tensor) -> torch.Tensor:
        ft.wrap_triton(K.add_one_inplace)[(1,)](outside, N, BLOCK=8)
        return x + 0

    expected = x8()
    traced = TRACERS[tracer](prog)
    result = traced(x8())
    if isinstance(result, torch.fx.GraphModule):
        result(x8())
        runs = 1 if "fake" in tracer else 2  # make_fx ran it while tracing in real mode, not fake
    else:
        traced(x8())
        runs = 2
    for _ in range(runs):
        K.add_one_inplace[(1,)](expected, N, BLOCK=8)
    assert torch.equal(outside, expected)


@triton.jit
def copy_through_int_opaque(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Its store goes through an int made from out_ptr: the analysis cannot tell what it writes (its
    own kernel here: the analysis warns once per kernel, and other tests wait for that warning)."""
    offs = tl.arange(0, BLOCK)
    addr = out_ptr.to(tl.int64, bitcast=True) + 0
    dst = addr.to(tl.pointer_type(tl.float32), bitcast=True)
    tl.store(dst + offs, tl.load(x_ptr + offs))


@pytest.mark.parametrize("tracer", TRACERS)
def test_an_outside_tensor_counted_as_written_where_the_analysis_is_unsure_says_so(tracer: str) -> None:
    outside = x8()

    def prog(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        ft.wrap_triton(copy_through_int_opaque)[(1,)](outside, out, N, BLOCK=8)  # reads outside
        return out

    with pytest.raises(
        ValueError,
        match=r"argument 'x_ptr' of copy_through_int_opaque, which the kernel may write \(the analysis",
    ):
        TRACERS[tracer](prog)(x8())
    assert torch.equal(outside, x8())
