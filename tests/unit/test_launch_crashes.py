"""Launches that a raw kernel runs (or refuses) must run (or be refused, clearly) through the wrapper."""

from __future__ import annotations

import functools
import os
from typing import Any, cast

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from functorch.compile import aot_function
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from tests import kernels as K
from tests.helpers import TracingMode, nop

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

N = 8


def _grid(meta: dict[str, Any]) -> tuple[int]:
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)


def _add_prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    wrap(K.add_kernel)[_grid](x, x, out, x.numel(), BLOCK=4)
    return out


def _traced(mode: str) -> Any:
    prog = lambda x: _add_prog(ft.wrap_triton, x)  # noqa: E731
    if mode == "aot_function":
        return aot_function(prog, fw_compiler=nop)
    return lambda x: make_fx(prog, tracing_mode=cast(TracingMode, mode))(x)(x)


# --- item 9: grid callables and inference tensors (no version counter) ---------------------------


@pytest.mark.parametrize("mode", ["eager", "real", "fake", "symbolic", "aot_function"])
def test_grid_callable_on_inference_tensors_matches_raw(mode: str) -> None:
    with torch.inference_mode():
        x = torch.arange(N, dtype=torch.float32)
        expected = _add_prog(lambda k: k, x)
        got = _add_prog(ft.wrap_triton, x) if mode == "eager" else _traced(mode)(x)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["eager", "real", "fake", "aot_function"])
def test_grid_callable_writing_an_inference_tensor_raises(mode: str) -> None:
    def prog(x: torch.Tensor) -> torch.Tensor:
        def grid(meta: dict[str, Any]) -> tuple[int]:
            x.add_(1)
            return (1,)

        ft.wrap_triton(K.add_one_inplace)[grid](x, x.numel(), BLOCK=N)
        return x

    with torch.inference_mode():
        x = torch.zeros(N)
        with pytest.raises(RuntimeError, match=r"the grid callable wrote to tensor 'x_ptr'"):
            if mode == "eager":
                prog(x)
            elif mode == "aot_function":
                aot_function(prog, fw_compiler=nop)(x)
            else:
                make_fx(prog, tracing_mode=cast(TracingMode, mode))(x)


# --- item 10: triton binds config.all_kwargs(): num_warps / num_stages reach kernel parameters -----


def _same_timing(kernel_call: Any, quantiles: Any = None) -> list[float]:
    kernel_call()
    return [1.0, 1.0, 1.0]


@triton.autotune(
    configs=[triton.Config({"BLOCK": 8}, num_warps=4, num_stages=3)],
    key=["n"],
    restore_value=["out_ptr"],
    do_bench=_same_timing,
)
@triton.jit
def options_as_parameters(out_ptr, n, num_warps: tl.constexpr, num_stages: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], tl.float32) + num_warps * 10 + num_stages, mask=offs < n)


def test_config_launch_options_bound_to_kernel_parameters_match_raw() -> None:
    from tests.harness import ALL_MODES, check_matches_eager

    def prog(wrap: Any, out: torch.Tensor) -> None:
        wrap(options_as_parameters)[lambda meta: (meta["num_warps"] - 3,)](out, out.numel())

    check_matches_eager(prog, lambda: (torch.zeros(N),), modes=ALL_MODES)


def test_analysis_reads_config_launch_options() -> None:
    from functional_triton.mutation import analyze_writes

    result = analyze_writes(options_as_parameters, {"out_ptr": torch.zeros(N), "n": N})
    assert result.written_names == frozenset({"out_ptr"}), result.reason


# --- item 11: numpy integers and 0-d integer tensors as grid entries ------------------------------


@pytest.mark.parametrize("kind", ["static", "callable"])
@pytest.mark.parametrize("entry", [np.int64(2), np.int32(2), np.uint8(2)], ids=["int64", "int32", "uint8"])
def test_numpy_integer_grid_entries_match_raw(kind: str, entry: Any) -> None:
    from tests.harness import ALL_MODES, check_matches_eager

    grid: Any = (entry,) if kind == "static" else (lambda meta: (entry, np.int64(1)))

    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        wrap(K.add_kernel)[grid](x, x, out, x.numel(), BLOCK=4)
        return out

    check_matches_eager(prog, lambda: (torch.arange(N, dtype=torch.float32),), modes=ALL_MODES)


def _tensor_grid_prog(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    programs = (x > 0).sum() // 4  # a 0-d integer tensor: data
    ft.wrap_triton(K.add_kernel)[(programs,)](x, x, out, x.numel(), BLOCK=4)
    return out


def test_tensor_grid_entry_eager_matches_raw() -> None:
    x = torch.tensor([1.0, 1, 1, 1, 1, 1, 0, 0])  # six positive: one program of 4
    out = torch.zeros_like(x)
    K.add_kernel[((x > 0).sum() // 4,)](x, x, out, N, BLOCK=4)
    torch.testing.assert_close(_tensor_grid_prog(x), out, rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["symbolic", "fake"])
def test_tensor_grid_entry_is_a_symbolic_size_where_tracing_gives_one(mode: TracingMode) -> None:
    # make_fx's fake and symbolic modes give .item() an unbacked symbolic size: the graph reads it.
    gm = make_fx(torch.func.functionalize(_tensor_grid_prog), tracing_mode=mode)(torch.ones(N))
    for x in (torch.ones(N), torch.tensor([1.0, 1, 1, 1, 0, 0, 0, 0]), torch.zeros(N)):
        out = torch.zeros_like(x)
        K.add_kernel[((x > 0).sum() // 4,)](x, x, out, N, BLOCK=4)
        torch.testing.assert_close(gm(x), out, rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["real", "aot_function"])
def test_tensor_grid_entry_without_dynamic_shapes_raises_naming_the_entry(mode: str) -> None:
    with pytest.raises(TypeError, match=r"(?s)grid entry 0 of .* is a tensor"):
        if mode == "aot_function":
            aot_function(_tensor_grid_prog, fw_compiler=nop)(torch.ones(N))
        else:
            make_fx(_tensor_grid_prog, tracing_mode=cast(TracingMode, mode))(torch.ones(N))


# --- item 13: an eager launch on meta tensors raises, as the raw launch does -----------------------


@pytest.mark.parametrize("by", ["position", "keyword", "parameter"])
@pytest.mark.parametrize("which", ["all", "one"])
@pytest.mark.parametrize("grid", [(1,), _grid], ids=["static", "callable"])
def test_eager_launch_on_meta_tensors_raises_like_the_raw_launch(which: str, grid: Any, by: str) -> None:
    """By position, by keyword, and as an ``nn.Parameter``: the launch path's checks of each."""

    def args() -> tuple[Any, ...]:
        meta = torch.empty(N, device="meta")
        if by == "parameter":
            meta = torch.nn.Parameter(meta)
        cpu = torch.zeros(N)
        return (meta, meta, meta) if which == "all" else (cpu, meta, cpu)

    def launch(k: Any) -> Any:
        if by == "keyword":
            x, y, out = args()
            return k(x_ptr=x, y_ptr=y, out_ptr=out, n=N, BLOCK=N)
        return k(*args(), N, BLOCK=N)

    named = r"'(x|y)_ptr' (of add_kernel is a meta tensor|on meta)"  # alone, or beside cpu tensors
    if INTERPRETED:
        # Only the interpreter's raw launch raises; a compiled one takes the meta tensors' null
        # data pointers and faults the device, which the wrapped launch must never do.
        with pytest.raises(Exception):  # noqa: B017 - whatever the raw launch raises
            launch(K.add_kernel[grid])
    with pytest.raises(ValueError, match=named):
        launch(ft.wrap_triton(K.add_kernel)[grid])
    with pytest.raises(ValueError, match=named):
        launch(functools.partial(ft.wrap_triton(K.add_kernel).run, grid=grid))


def test_meta_tensors_still_trace() -> None:
    gm = make_fx(lambda x: _add_prog(ft.wrap_triton, x))(torch.empty(N, device="meta"))
    kernel_nodes = [n for n in gm.graph.nodes if n.target is ft.triton_kernel_wrapper_mutation]
    assert len(kernel_nodes) == 1


# --- item 14: torch.func transforms and sparse tensors: a clear error naming the argument ----------


def _sum_prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    wrap(K.add_kernel)[(1,)](x, x, out, N, BLOCK=N)
    return out.sum()


# torch's forward-mode AD scripts a helper on first use, which warns
# (torch 2.13: DeprecationWarning, 2.14: FutureWarning).
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
@pytest.mark.parametrize(
    "transform, name, shape",
    [
        (torch.func.vmap, "vmap", (2, N)),
        (torch.func.grad, "grad", (N,)),
        (torch.func.jacrev, "grad", (N,)),
        (torch.func.jacfwd, "jvp", (N,)),
        (lambda f: lambda x: torch.func.jvp(f, (x,), (x,)), "jvp", (N,)),
    ],
    ids=["vmap", "grad", "jacrev", "jacfwd", "jvp"],
)
def test_torch_func_transform_around_a_launch_names_the_argument(
    transform: Any, name: str, shape: Any
) -> None:
    # The raw launch refuses too: the interpreter with NotImplementedError, a compiled kernel's
    # launcher with "Cannot access data pointer of Tensor that doesn't have storage".
    with pytest.raises(NotImplementedError if INTERPRETED else RuntimeError):
        transform(lambda x: _sum_prog(lambda k: k, x))(torch.ones(shape))
    named = rf"argument 'x_ptr' of add_kernel is a tensor of torch\.func\.{name}"
    with pytest.raises(NotImplementedError, match=named):
        transform(lambda x: _sum_prog(ft.wrap_triton, x))(torch.ones(shape))


@pytest.mark.parametrize("mode", ["eager", "aot_function", "make_fx"])
def test_sparse_tensor_argument_names_the_argument(mode: str) -> None:
    def sparse() -> torch.Tensor:
        return torch.ones(2, 4).to_sparse()

    def prog(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(N)
        ft.wrap_triton(K.add_kernel)[(1,)](x, out, out, N, BLOCK=N)
        return out

    named = r"argument 'x_ptr' of add_kernel is a tensor with layout torch\.sparse_coo"
    with pytest.raises(TypeError, match=named):
        if mode == "eager":
            prog(sparse())
        elif mode == "aot_function":
            aot_function(prog, fw_compiler=nop)(sparse())
        else:
            make_fx(prog)(sparse())


# --- item 16: the AnalysisWarning says when writes may land outside the arguments -------------------


def test_analysis_flags_writes_outside_the_arguments() -> None:
    from functional_triton.mutation import analyze_writes
    from tests import mutation_kernels as MK

    args = {"x_ptr": torch.zeros(16), "out_ptr": torch.zeros(16), "n": 16, "BLOCK": 16}
    made_from_int = analyze_writes(MK.int_to_ptr_opaque, args)
    assert made_from_int.written_names is None and made_from_int.writes_outside_arguments
    asm = analyze_writes(MK.impure_asm_opaque, args)
    assert asm.written_names is None and asm.writes_outside_arguments
    missing = analyze_writes(MK.int_to_ptr_opaque, {"x_ptr": torch.zeros(16)})
    assert missing.written_names is None and not missing.writes_outside_arguments


def _traced_with_warning(kernel: Any) -> list[str]:
    def prog(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        ft.wrap_triton(kernel)[(1,)](x, out, 16, BLOCK=16)
        return out

    with pytest.warns(ft.AnalysisWarning) as record:
        make_fx(torch.func.functionalize(prog), tracing_mode="fake")(torch.zeros(16), torch.zeros(16))
    return [str(w.message) for w in record if issubclass(w.category, ft.AnalysisWarning)]


def test_analysis_warning_says_writes_outside_the_arguments_cannot_be_ordered() -> None:
    from tests import mutation_kernels as MK

    (message,) = _traced_with_warning(MK.int_to_ptr_opaque)
    assert "int_to_ptr_opaque" in message and "outside its arguments" in message
    assert "cannot order such writes" in message and "correct, but" not in message


def test_analysis_warning_for_writes_within_the_arguments_keeps_saying_it_is_correct() -> None:
    def hook(args: Any) -> None:
        args["x_ptr"].data_ptr()  # the analysis cannot follow it: unknown

    @triton.autotune(configs=[triton.Config({}, pre_hook=hook)], key=[], do_bench=_same_timing)
    @triton.jit
    def hooked_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    (message,) = _traced_with_warning(hooked_copy)
    assert "correct, but it clones them all" in message and "outside its arguments" not in message


# --- item 17: no "Exception ignored" from weakref callbacks at interpreter exit --------------------

_EXIT_SCRIPT = """
import os
os.environ.setdefault("TRITON_INTERPRET", "1")
import triton, triton.language as tl
import torch
import functional_triton as ft
import functional_triton.launch_spec as kernel_module

@triton.jit
def kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)

ft.wrap_triton(kernel)
# Teardown sets a module's globals to None (underscored names first, in order), then frees what
# they held: this kernel outlives the module's own cache and lock.
kernel_module._zz_last = [kernel]
del kernel
"""


def test_no_exception_ignored_at_interpreter_exit() -> None:
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr


def test_kernel_info_callback_needs_no_module_globals(monkeypatch: pytest.MonkeyPatch) -> None:
    # What teardown does to the module, done deterministically: its globals become None.
    import gc
    import sys

    import functional_triton.launch_spec as kernel_module

    @triton.jit
    def short_lived(x_ptr, BLOCK: tl.constexpr):
        pass

    kernel_module.kernel_info(short_lived)
    errors: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", errors.append)
    monkeypatch.setattr(kernel_module, "_infos_lock", None)
    monkeypatch.setattr(kernel_module, "_infos", None)
    del short_lived
    gc.collect()
    assert not errors, [e.exc_value for e in errors]


# --- item 18: the analysis does not depend on the caller's warning filters --------------------------


@triton.jit
def where_on_an_int_condition(c_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    c = tl.load(c_ptr + offs)  # int32: triton>=3.9 warns that a non-boolean condition is deprecated
    tl.store(out_ptr + offs, tl.where(c, 1.0, 2.0))


def test_analysis_ignores_the_callers_warning_filters() -> None:
    import warnings

    from functional_triton.mutation import analyze_writes

    args = {"c_ptr": torch.zeros(N, dtype=torch.int32), "out_ptr": torch.zeros(N), "BLOCK": N}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        before = list(warnings.filters)
        result = analyze_writes(where_on_an_int_condition, args)
        assert warnings.filters == before
    assert result.written_names == frozenset({"out_ptr"}), result.reason


@triton.jit
def runtime_bound_loop(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for i in range(n):
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1 + i * 0)


def test_interpreter_loop_failure_of_triton_3_6_with_numpy_2_4_gets_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from functional_triton import _compat

    monkeypatch.setattr(_compat, "INTERPRETER_LOOPS_NEED_OLD_NUMPY", True)
    error = TypeError("only 0-dimensional arrays can be converted to Python scalars")
    _compat.explain_interpreter_failure(error)
    assert any("numpy<2.4" in note for note in getattr(error, "__notes__", []))
    other = TypeError("something else")
    _compat.explain_interpreter_failure(other)
    assert not getattr(other, "__notes__", [])


def test_runtime_bound_loop_matches_raw() -> None:
    # On triton 3.6 with numpy>=2.4 the raw interpreted launch fails: so must the wrapped one, with a note.
    from functional_triton import _compat

    x_raw, x_ft = torch.zeros(N), torch.zeros(N)
    if not (_compat.INTERPRETER_LOOPS_NEED_OLD_NUMPY and _compat.interpreter_enabled()):
        runtime_bound_loop[(1,)](x_raw, 3, BLOCK=N)
        ft.wrap_triton(runtime_bound_loop)[(1,)](x_ft, 3, BLOCK=N)
        torch.testing.assert_close(x_ft, x_raw, rtol=0, atol=0)
        return
    with pytest.raises(Exception, match="0-dimensional"):  # noqa: B017 - the interpreter's own error
        runtime_bound_loop[(1,)](x_raw, 3, BLOCK=N)
    with pytest.raises(Exception, match="0-dimensional") as ours:  # noqa: B017
        ft.wrap_triton(runtime_bound_loop)[(1,)](x_ft, 3, BLOCK=N)
    assert any("numpy<2.4" in note for note in getattr(ours.value, "__notes__", []))
