"""functional_triton.mutation: which tensor arguments a kernel may write.

The table pins the analysis for one kernel per construct; the reality test runs each runnable kernel
in the interpreter and checks that every argument whose bytes changed was reported.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import pytest
import torch
import triton
import triton.language as tl
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from functional_triton import _compat, mutation
from functional_triton.mutation import WriteAnalysis, analyze_writes
from tests import mutation_kernels as K

INTERPRETED = _compat.interpreter_enabled()
N = 64  # elements the 1-d kernels cover (grid 4 x BLOCK 16)
SIZE = 128  # elements per 1-d test tensor (store_for_kernel covers 128 with ITERS=2)
GRID = (4,)


def f32(*shape: int) -> torch.Tensor:
    return torch.empty(shape or (SIZE,), dtype=torch.float32)


def i32() -> torch.Tensor:
    return torch.empty(SIZE, dtype=torch.int32)


def i64() -> torch.Tensor:
    return torch.empty(4, dtype=torch.int64)


class Case(NamedTuple):
    kernel: object
    kwargs: dict[str, object]
    expected: frozenset[str] | None  # None: the analysis must answer unknown
    runnable: bool = True  # the interpreter can run it (reality test)


def row(
    id: str,
    kernel: object,
    kwargs: dict[str, object],
    expected: set[str] | None,
    *,
    runnable: bool = True,
    skip: str | None = None,
) -> Any:
    marks = [pytest.mark.skip(reason=skip)] if skip else []
    frozen = None if expected is None else frozenset(expected)
    return pytest.param(Case(kernel, kwargs, frozen, runnable), id=id, marks=marks)


TensorDescriptor: Any = _compat.TENSOR_DESCRIPTOR_TYPE
NO_HOST_DESCRIPTORS = None if TensorDescriptor is not None else "no triton.tools.tensor_descriptor"
NO_BLOCK_PTR = None if _compat.HAS_BLOCK_POINTERS else "block pointers removed in triton>=3.9"
NO_PTR_TO_PTR = None if _compat.HAS_POINTER_TO_POINTER else "pointer-to-pointer types abort in triton>=3.9"


def one_d(**extra: object) -> dict[str, object]:
    return {"x_ptr": f32(), "out_ptr": f32(), "n": N, "BLOCK": 16, **extra}


def atomic(op: str) -> Any:
    kwargs = {"x_ptr": i32(), "out_ptr": i32(), "n": N, "OP": op, "BLOCK": 16}
    return row(f"atomic_{op}", K.atomic_kernel, kwargs, {"out_ptr"})


def select(**extra: object) -> dict[str, object]:
    return {"x_ptr": f32(), "out_ptr": f32(), "y_ptr": f32(), **extra}


def host_descriptors() -> dict[str, object]:
    def desc(t: torch.Tensor) -> Any:
        return TensorDescriptor.from_tensor(t, [16, 16])

    return {
        "in_desc": desc(f32(64, 16)),
        "n": 1,
        "out_desc": desc(f32(64, 16)),
        "spare_desc": desc(f32(64, 16)),
        "BM": 16,
        "BN": 16,
    }


def descriptor(**extra: object) -> dict[str, object]:
    return {"x_ptr": f32(64, 16), "out_ptr": f32(64, 16), "M": 64, "N": 16, "BM": 16, "BN": 16, **extra}


CASES = [
    row("store", K.store_kernel, one_d(), {"out_ptr"}),
    *(atomic(op) for op in ("add", "cas", "xchg", "max", "min", "and", "or", "xor")),
    row("store_under_if", K.store_if_kernel, one_d(flag=1), {"out_ptr"}),
    row("store_under_if_not_taken", K.store_if_kernel, one_d(flag=0), {"out_ptr"}),
    row("store_in_for_loop_carried_ptrs", K.store_for_kernel, one_d(ITERS=2), {"out_ptr"}),
    row("store_in_while", K.store_while_kernel, one_d(), {"out_ptr"}),
    row(
        "store_reductions",
        K.reduce_kernel,
        {"x_ptr": f32(), "sum_ptr": f32(), "max_ptr": f32(), "n": N, "BLOCK": 16},
        {"sum_ptr", "max_ptr"},
    ),
    row("store_scan", K.scan_kernel, one_d(), {"out_ptr"}),
    row("helper_receives_ptr", K.helper_store_kernel, one_d(), {"out_ptr"}),
    row(
        "helpers_in_loop",
        K.helper_loop_kernel,
        {"x_ptr": f32(), "y_ptr": f32(), "out_ptr": f32(), "n": N, "ITERS": 2, "BLOCK": 16},
        {"out_ptr", "y_ptr"},
    ),
    row("helper_returns_ptr", K.helper_returns_ptr_kernel, one_d(), {"out_ptr"}),
    row("helper_via_module_attribute", K.module_helper_kernel, one_d(), {"out_ptr"}),
    # The interpreter's AST rewrite drops closures, so it cannot run this one.
    row("helper_from_closure", K.closure_kernel, one_d(), {"out_ptr"}, runnable=False),
    row(
        "helpers_with_early_return",
        K.early_return_kernel,
        {
            "x_ptr": f32(),
            "a_ptr": f32(),
            "b_ptr": f32(),
            "c_ptr": f32(),
            "d_ptr": f32(),
            "n": N,
            "flag": 1,
            "BLOCK": 16,
        },
        {"a_ptr", "b_ptr", "c_ptr", "d_ptr"},
    ),
    row("ptr_arithmetic", K.ptr_arith_kernel, one_d(), {"out_ptr"}),
    row("ptr_2d_expand_broadcast_reshape", K.ptr_2d_kernel, descriptor(), {"out_ptr"}),
    row(
        "where_between_two_ptrs",
        K.where_ptr_kernel,
        {"a_ptr": f32(), "b_ptr": f32(), "c_ptr": f32(), "n": N, "BLOCK": 16},
        {"a_ptr", "b_ptr"},
    ),
    row("block_ptr_advance", K.block_ptr_kernel, one_d(), {"out_ptr"}, skip=NO_BLOCK_PTR),
    row("tensor_descriptor_store", K.descriptor_kernel, descriptor(), {"out_ptr"}),
    row(
        "tensor_descriptor_atomic_add",
        K.descriptor_update_kernel,
        descriptor(OP="atomic_add"),
        {"out_ptr"},
        runnable=False,  # the interpreter has no descriptor atomics
    ),
    row(
        "host_tensor_descriptors",
        K.host_descriptor_kernel,
        host_descriptors() if TensorDescriptor is not None else {},
        {"out_desc"},
        skip=NO_HOST_DESCRIPTORS,
    ),
    row("tensor_descriptor_scatter", K.descriptor_update_kernel, descriptor(OP="scatter"), {"out_ptr"}),
    row(
        "read_only_args_not_reported",
        K.read_only_kernel,
        {"a_ptr": f32(), "b_ptr": f32(), "mask_ptr": i32(), "out_ptr": f32(), "n": N, "BLOCK": 16},
        {"out_ptr"},
    ),
    row("autotune_non_first_config", K.autotune_kernel, select(n=N, BLOCK=16), {"out_ptr", "y_ptr"}),
    row("heuristics_true", K.heuristics_kernel, select(n=N, BLOCK=16), {"out_ptr", "y_ptr"}),
    row("heuristics_false", K.heuristics_kernel, select(n=48, BLOCK=16), {"out_ptr"}),
    row("autotune_over_heuristics", K.stacked_kernel, select(n=48), {"out_ptr", "y_ptr"}),
    row("autotune_over_heuristics_even", K.stacked_kernel, select(n=N), {"out_ptr"}),
    row("none_arg", K.optional_ptr_kernel, one_d(extra_ptr=None), {"out_ptr"}),
    row("none_arg_from_default", K.optional_ptr_kernel, one_d(), {"out_ptr"}),
    row("optional_arg_given", K.optional_ptr_kernel, one_d(extra_ptr=f32()), {"out_ptr", "extra_ptr"}),
    row("writes_nothing", K.no_write_kernel, {"x_ptr": f32(), "y_ptr": f32(), "n": N, "BLOCK": 16}, set()),
    row("pure_inline_asm", K.pure_asm_kernel, one_d(x_ptr=i32(), out_ptr=i32()), {"out_ptr"}, runnable=False),
    row(
        "loaded_ptr_only_read",
        K.loaded_ptr_read_kernel,
        {"table_ptr": i64(), "out_ptr": f32(), "n": N, "BLOCK": 16},
        {"out_ptr"},
        runnable=False,
        skip=NO_PTR_TO_PTR,
    ),
    # Writes the analysis cannot see: unknown, never a guess.
    row(
        "unknown_int_table_to_ptr",
        K.int_table_opaque,
        {"table_ptr": i64(), "x_ptr": f32(), "n": N, "BLOCK": 16},
        None,
        runnable=False,
    ),
    row(
        "unknown_ptr_loaded_from_memory",
        K.loaded_ptr_opaque,
        {"table_ptr": i64(), "x_ptr": f32(), "n": N, "BLOCK": 16},
        None,
        runnable=False,
        skip=NO_PTR_TO_PTR,
    ),
    row("unknown_int_to_ptr", K.int_to_ptr_opaque, one_d(), None, runnable=False),
    row(
        "unknown_impure_inline_asm",
        K.impure_asm_opaque,
        one_d(x_ptr=i32(), out_ptr=i32()),
        None,
        runnable=False,
    ),
]


def tensor_of(value: object) -> torch.Tensor | None:
    """The memory an argument names: a tensor, or a host-side descriptor's base."""
    if isinstance(value, torch.Tensor):
        return value
    if TensorDescriptor is not None and isinstance(value, TensorDescriptor):
        return value.base
    return None


def with_tensor(value: object, tensor: torch.Tensor) -> object:
    if isinstance(value, torch.Tensor):
        return tensor
    return dataclasses.replace(value, base=tensor)  # type: ignore[type-var]


def on_meta(kwargs: Mapping[str, object]) -> dict[str, object]:
    """The same launch with data-less tensors: the analysis may only look at dtypes."""
    return {k: v if (t := tensor_of(v)) is None else with_tensor(v, t.to("meta")) for k, v in kwargs.items()}


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mutation, "_CACHE", weakref.WeakKeyDictionary())


@pytest.fixture
def ttir_calls(monkeypatch: pytest.MonkeyPatch, fresh_cache: None) -> list[str]:
    """Names of the kernels whose TTIR was generated (a fresh cache, so every test starts cold)."""
    calls: list[str] = []
    real = mutation._generate_ttir

    def counting(leaf: Any, signature: Any, constants: Any) -> Any:
        calls.append(leaf.fn.__name__)
        return real(leaf, signature, constants)

    monkeypatch.setattr(mutation, "_generate_ttir", counting)
    return calls


@pytest.mark.parametrize("case", CASES)
def test_written_names(case: Case) -> None:
    result = analyze_writes(case.kernel, on_meta(case.kwargs))
    assert result.written_names == case.expected, result.reason
    if case.expected is None:
        assert result.opaque_side_effects
        assert result.reason
    else:
        assert result.reason is None
        assert not result.opaque_side_effects


def sentinel(template: torch.Tensor, index: int) -> torch.Tensor:
    """A distinct, recognisable pattern per argument."""
    pattern = torch.arange(template.numel()).reshape(template.shape)
    if template.is_floating_point():
        return (pattern * 0.25 + 10.0 * (index + 1)).to(template.dtype)
    return (pattern * 7 + 100 * (index + 1)).to(template.dtype)


def with_sentinels(kwargs: Mapping[str, object]) -> dict[str, object]:
    return {
        name: value if (t := tensor_of(value)) is None else with_tensor(value, sentinel(t, i))
        for i, (name, value) in enumerate(kwargs.items())
    }


def changed_by_run(kernel: Any, args: dict[str, object]) -> set[str]:
    """Run the raw kernel; the arguments whose memory changed (bytewise)."""
    tensors = {name: t for name, v in args.items() if (t := tensor_of(v)) is not None}
    before = {name: t.clone() for name, t in tensors.items()}
    kernel[GRID](**args)
    return {
        name
        for name, old in before.items()
        if not torch.equal(old.view(torch.uint8), tensors[name].view(torch.uint8))
    }


needs_interpreter = pytest.mark.skipif(
    not INTERPRETED, reason="needs TRITON_INTERPRET=1 to run kernels on the CPU"
)


@needs_interpreter
@pytest.mark.parametrize("case", [c for c in CASES if c.values[0].runnable])
def test_analysis_covers_reality(case: Case) -> None:
    args = with_sentinels(case.kwargs)
    changed = changed_by_run(case.kernel, args)
    analysed = analyze_writes(case.kernel, args).written_names
    assert analysed is not None
    assert changed <= analysed, f"written but not reported: {changed - analysed}"


@needs_interpreter
def test_reality_check_sees_writes() -> None:
    assert changed_by_run(K.store_kernel, with_sentinels(one_d())) == {"out_ptr"}
    assert changed_by_run(
        K.where_ptr_kernel,
        with_sentinels({"a_ptr": f32(), "b_ptr": f32(), "c_ptr": f32(), "n": N, "BLOCK": 16}),
    ) == {"a_ptr", "b_ptr"}


# --- caching ----------------------------------------------------------------------------------


def test_same_specialization_does_no_ttir_work(ttir_calls: list[str]) -> None:
    kwargs = on_meta(one_d())
    first = analyze_writes(K.store_kernel, kwargs)
    assert ttir_calls == ["store_kernel"]
    # Another scalar value of the same type, real instead of meta tensors: the same specialization.
    again = analyze_writes(K.store_kernel, {**one_d(), "n": 1000})
    assert ttir_calls == ["store_kernel"]
    assert again == first == WriteAnalysis(frozenset({"out_ptr"}), None, False)


@pytest.mark.parametrize(
    "change",
    [{"BLOCK": 32}, {"n": 2**40}, {"x_ptr": torch.empty(SIZE, dtype=torch.float16, device="meta")}],
    ids=["constexpr", "i64_scalar", "dtype"],
)
def test_new_specialization_generates_ttir(ttir_calls: list[str], change: dict[str, object]) -> None:
    kwargs = on_meta(one_d())
    analyze_writes(K.store_kernel, kwargs)
    analyze_writes(K.store_kernel, {**kwargs, **change})
    assert ttir_calls == ["store_kernel", "store_kernel"]


def test_autotune_cached_per_config(ttir_calls: list[str]) -> None:
    kwargs = on_meta(select(n=N, BLOCK=16))
    analyze_writes(K.autotune_kernel, kwargs)
    assert len(ttir_calls) == 2  # one per config
    analyze_writes(K.autotune_kernel, kwargs)
    assert len(ttir_calls) == 2


def test_failures_are_cached_too(ttir_calls: list[str]) -> None:
    kwargs = on_meta({"x_ptr": f32(), "out_ptr": f32(), "FAIL": True})
    assert analyze_writes(K.static_assert_kernel, kwargs).written_names is None
    assert analyze_writes(K.static_assert_kernel, kwargs).written_names is None
    assert ttir_calls == ["static_assert_kernel"]


def test_cache_does_not_keep_kernels_alive(fresh_cache: None) -> None:
    kernel = K.make_store_kernel()
    fn_ref = weakref.ref(kernel.fn)
    kwargs = on_meta({"x_ptr": f32(), "out_ptr": f32(), "BLOCK": 16})
    assert analyze_writes(kernel, kwargs).written_names == {"out_ptr"}
    assert len(mutation._CACHE) == 1
    registry = _compat.JIT_FUNCTION_REGISTRY  # triton's own registry keeps JITFunctions alive
    if registry is not None:
        for name in [name for name, value in registry.items() if value is kernel]:
            del registry[name]
    del kernel
    gc.collect()
    assert fn_ref() is None
    assert len(mutation._CACHE) == 0


def test_threads_share_one_cache(ttir_calls: list[str]) -> None:
    results: list[WriteAnalysis] = []
    kwargs = on_meta(one_d())

    def work() -> None:
        for _ in range(3):
            results.append(analyze_writes(K.store_kernel, kwargs))
            results.append(analyze_writes(K.helper_store_kernel, kwargs))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {r.written_names for r in results} == {frozenset({"out_ptr"})}
    assert sorted(ttir_calls) == ["helper_store_kernel", "store_kernel"]


def test_user_objects_are_not_written(fresh_cache: None) -> None:
    # The code generator only ever sees analysis-private JITFunctions built from the python functions.
    objects = [
        K.stacked_kernel,
        K.stacked_kernel.fn,
        K._even_kernel,
        K.helper_loop_kernel,
        K._nested_store_helper,
        K._store_helper,
        K._copy_helper,
    ]
    before = [dict(vars(obj)) for obj in objects]
    kwargs = {"x_ptr": f32(), "y_ptr": f32(), "out_ptr": f32(), "n": N, "ITERS": 2, "BLOCK": 16}
    assert analyze_writes(K.helper_loop_kernel, on_meta(kwargs)).written_names == {"out_ptr", "y_ptr"}
    assert analyze_writes(K.stacked_kernel, on_meta(select(n=48))).written_names == {"out_ptr", "y_ptr"}
    for obj, old in zip(objects, before):
        new = dict(vars(obj))
        assert new.keys() == old.keys(), obj
        assert all(new[name] is old[name] for name in old), obj


# --- arguments -----------------------------------------------------------------------------------


def test_fake_tensor_arguments() -> None:
    with FakeTensorMode():
        kwargs = {"x_ptr": torch.empty(SIZE), "out_ptr": torch.empty(SIZE), "n": N, "BLOCK": 16}
        result = analyze_writes(K.store_kernel, kwargs)
    assert result.written_names == {"out_ptr"}


def unbacked_symint() -> torch.SymInt:
    return ShapeEnv().create_unbacked_symint()


def test_symint_scalar() -> None:
    result = analyze_writes(K.store_kernel, on_meta(one_d(n=unbacked_symint())))
    assert result.written_names == {"out_ptr"}


def test_symint_constexpr_is_unknown() -> None:
    result = analyze_writes(K.store_kernel, on_meta(one_d(BLOCK=unbacked_symint())))
    assert result.written_names is None
    assert result.reason is not None and "'BLOCK' is symbolic" in result.reason


def test_symbolic_heuristic_analyses_both_values() -> None:
    result = analyze_writes(K.heuristics_kernel, on_meta(select(n=unbacked_symint(), BLOCK=16)))
    assert result.written_names == {"out_ptr", "y_ptr"}


def test_heuristic_that_reads_data_is_unknown() -> None:
    kernel = triton.heuristics({"WRITE_Y": lambda a: a["x_ptr"].data_ptr() % 16 == 0})(K._select_store_kernel)
    with FakeTensorMode():
        result = analyze_writes(kernel, select(x_ptr=torch.empty(4), n=N, BLOCK=16))
    assert result.written_names is None
    assert result.reason is not None and result.reason.startswith("heuristic for 'WRITE_Y' failed")
    assert result.opaque_side_effects


def test_missing_argument_is_unknown() -> None:
    kwargs = on_meta(one_d())
    del kwargs["n"]
    result = analyze_writes(K.store_kernel, kwargs)
    assert result == WriteAnalysis(None, "missing a value for parameter 'n'", True)


def test_unsupported_argument_is_unknown() -> None:
    result = analyze_writes(K.store_kernel, on_meta(one_d(n="64")))
    assert result.written_names is None
    assert result.reason == "argument 'n' has unsupported type str"


def test_not_a_kernel_is_unknown() -> None:
    result = analyze_writes(lambda x: x, {})
    assert result == WriteAnalysis(None, "unsupported kernel type function", True)


def test_frontend_failure_reason() -> None:
    kwargs = on_meta({"x_ptr": f32(), "out_ptr": f32(), "FAIL": True})
    result = analyze_writes(K.static_assert_kernel, kwargs)
    assert result.written_names is None
    assert result.reason is not None
    assert result.reason.startswith("TTIR generation failed")
    assert "deliberate frontend failure" in result.reason


def test_print_is_a_side_effect() -> None:
    result = analyze_writes(K.print_kernel, on_meta({"x_ptr": f32(), "n": N, "BLOCK": 16}))
    assert result == WriteAnalysis(frozenset(), None, True)


# --- autotune hooks --------------------------------------------------------------------------------


def autotuned(**options: Any) -> Callable[..., Any]:
    configs = options.pop("configs", [triton.Config({"WRITE_Y": False})])
    return triton.autotune(configs=configs, key=["n"], do_bench=K.same_timing, **options)(
        K._select_store_kernel
    )


def test_reset_to_zero_counts_as_written() -> None:
    kernel = autotuned(reset_to_zero=["y_ptr"])
    result = analyze_writes(kernel, on_meta(select(n=N, BLOCK=16)))
    assert result.written_names == {"out_ptr", "y_ptr"}


@pytest.mark.parametrize(
    "options",
    [
        {"configs": [triton.Config({"WRITE_Y": False}, pre_hook=lambda args: None)]},
        {"pre_hook": lambda args, reset_only=False: None},
    ],
    ids=["config_pre_hook", "autotune_pre_hook"],
)
def test_hooks_that_do_nothing_add_no_writes(options: dict[str, Any]) -> None:
    # Hooks run on stand-ins (tests/unit/test_autotune_hooks.py has the cases that write or give up).
    result = analyze_writes(autotuned(**options), on_meta(select(n=N, BLOCK=16)))
    assert result.written_names == {"out_ptr"}


# --- the interpreter ---------------------------------------------------------------------------------


@needs_interpreter
def test_interpreted_library_is_left_as_it_was(fresh_cache: None) -> None:
    # Running reduce_kernel (x.max(0): an interpreted library function) leaves triton.language.core
    # patched by the interpreter; analysing it then needs the unpatched library and must not undo
    # or add anything for good (Note [interpreter guard]).
    kwargs = {"x_ptr": f32(), "sum_ptr": f32(), "max_ptr": f32(), "n": N, "BLOCK": 16}
    assert changed_by_run(K.reduce_kernel, with_sentinels(kwargs)) == {"sum_ptr", "max_ptr"}
    watched = _compat.interpreter_patched_objects()
    before = [dict(vars(obj)) for obj in watched]
    assert analyze_writes(K.reduce_kernel, on_meta(kwargs)).written_names == {"sum_ptr", "max_ptr"}
    after = [dict(vars(obj)) for obj in watched]
    for old, new in zip(before, after):
        assert old.keys() == new.keys()
        assert all(old[name] is new[name] for name in old)
    assert isinstance(tl.max, triton.runtime.interpreter.InterpretedFunction)


def test_give_up_logs_the_ttir(fresh_cache: None, caplog: pytest.LogCaptureFixture) -> None:
    kwargs = on_meta(one_d(x_ptr=i32(), out_ptr=i32()))
    with caplog.at_level(logging.DEBUG, logger="functional_triton.mutation"):
        assert analyze_writes(K.impure_asm_opaque, kwargs).written_names is None
    messages = [r.getMessage() for r in caplog.records if r.name == "functional_triton.mutation"]
    gave_up = [m for m in messages if "gave up at op tt.elementwise_inline_asm(" in m]
    assert len(gave_up) == 1 and "tt.func public @impure_asm_opaque" in gave_up[0], messages
    result = "write analysis of impure_asm_opaque: unknown (non-pure inline asm"
    assert any(m.startswith(result) for m in messages)


def test_result_is_logged(fresh_cache: None, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="functional_triton.mutation"):
        analyze_writes(K.pure_asm_kernel, on_meta(one_d(x_ptr=i32(), out_ptr=i32())))
    assert "write analysis of pure_asm_kernel: writes ['out_ptr']" in caplog.text
