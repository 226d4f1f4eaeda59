"""Which tensor arguments a user Triton kernel may write.

The kernel is lowered to TTIR with Triton's own frontend for a fixed target (no GPU or driver needed),
and a taint analysis over the TTIR follows every pointer argument through pointer arithmetic, control
flow, reductions and calls to the ops that write memory. Anything the analysis cannot follow makes the
answer unknown (``written_names is None``): callers must then treat every tensor argument as written.

Note [taint]
Every pointer-typed SSA value carries a set of *origins*: the indices of the function parameters its
address may derive from, plus negative ids for addresses the analysis cannot trace (loaded from memory,
made from an integer). Only pointer-typed values carry origins: an integer can become a pointer again
only through ``tt.int_to_ptr``, which is itself an untraceable origin. A write op adds the origins of its
pointer operands to the written set; a function's summary (written origins, origins of each returned
value) is applied at every ``tt.call``. Origins only grow, so each function is iterated to a fixpoint,
which handles loop-carried pointers without unrolling anything.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import inspect
import re
import struct
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import torch
import triton.language as tl
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction, KernelParam, type_canonicalisation_dict

from . import _compat
from .kernel import TritonKernel
from .tuples import element_name


@dataclasses.dataclass(frozen=True)
class WriteAnalysis:
    """What a kernel launch may write.

    written_names: tensor arguments the kernel may write; None when unknown.
    reason: why the answer is unknown (short, human readable), else None.
    opaque_side_effects: the kernel may have effects not visible through its tensor arguments
        (writes through untraceable pointers, inline asm, prints/asserts): never dead-code eliminate it.
    writes_outside_arguments: the kernel may write memory that no argument's address leads to (through a
        pointer loaded from memory or made from an integer, or non-pure inline asm): no graph can order
        such writes, cloning the arguments does not cover them.
    """

    written_names: frozenset[str] | None
    reason: str | None
    opaque_side_effects: bool
    writes_outside_arguments: bool = False


class _Unknown(Exception):
    """The analysis cannot give a safe answer; the message says why."""


class _Uncacheable(Exception):
    """A specialization value that cannot be part of a cache key."""


_MISSING = object()


def _unknown(reason: str) -> WriteAnalysis:
    return WriteAnalysis(written_names=None, reason=reason, opaque_side_effects=True)


def analyze_writes(kernel: object, args: Mapping[str, object]) -> WriteAnalysis:
    """The tensor arguments `kernel` may write when launched with `args`, or unknown with a reason.

    `kernel` is a @triton.jit function (or its interpreter version), possibly under @triton.autotune and
    @triton.heuristics; `args` maps the launch's parameter names to values. Tensor values are only
    inspected for their dtype. Never raises for a kernel it cannot analyse: it answers unknown.
    """
    try:
        plan = _expand(kernel, dict(args))
        written: set[str] = set(plan.reset_names)
        side_effects = False
        for leaf, leaf_args in plan.launches:
            result = _analyze_leaf(leaf, leaf_args)
            if result.written_names is None:
                return result
            written |= result.written_names
            side_effects = side_effects or result.opaque_side_effects
        return WriteAnalysis(frozenset(written), None, side_effects)
    except _Unknown as exc:
        return _unknown(str(exc))
    except Exception as exc:  # a bug here must not break a trace: unknown is always a safe answer
        return _unknown(f"mutation analysis failed: {_describe(exc)}")


# --- the decorator stack -> concrete launches -------------------------------------------------------

# Autotune x heuristics products beyond this are refused rather than analysed for minutes.
_MAX_LAUNCHES = 256


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Every (jit function, full argument dict) a launch may run, plus arguments zeroed by autotuning."""

    launches: tuple[tuple[object, dict[str, object]], ...]
    reset_names: frozenset[str]


def _expand(kernel: object, args: dict[str, object]) -> _Plan:
    if isinstance(kernel, Autotuner):
        return _expand_autotuner(kernel, args)
    if isinstance(kernel, Heuristics):
        return _expand_heuristics(kernel, args)
    if isinstance(kernel, (JITFunction, InterpretedFunction)):
        return _Plan(((kernel, args),), frozenset())
    raise _Unknown(f"unsupported kernel type {type(kernel).__name__}")


def _merge(plans: Iterable[_Plan]) -> _Plan:
    launches: list[tuple[object, dict[str, object]]] = []
    reset: set[str] = set()
    for plan in plans:
        launches.extend(plan.launches)
        reset |= plan.reset_names
        if len(launches) > _MAX_LAUNCHES:
            raise _Unknown(f"more than {_MAX_LAUNCHES} autotune/heuristic specializations")
    return _Plan(tuple(launches), frozenset(reset))


def _expand_autotuner(tuner: Autotuner, args: dict[str, object]) -> _Plan:
    # Any config may be chosen at run time, so the answer is the union over all of them (not configs[0]).
    # User hooks run python on the real arguments around benchmarking: they may write anything.
    if getattr(tuner, "user_defined_pre_hook", False) or getattr(tuner, "user_defined_post_hook", False):
        raise _Unknown("@triton.autotune pre_hook/post_hook may write any argument")
    plans = []
    for config in tuner.configs:
        if getattr(config, "pre_hook", None) is not None:
            raise _Unknown("a triton.Config pre_hook may write any argument")
        # Triton launches with config.all_kwargs(): num_warps / num_stages may be kernel parameters.
        plans.append(_expand(tuner.fn, {**args, **_compat.config_kwargs(config)}))
    # reset_to_zero arguments are zeroed while benchmarking: a write the kernel text does not show.
    zeroed = _Plan((), frozenset(n for n in tuner.reset_to_zero if isinstance(args.get(n), torch.Tensor)))
    return _merge([*plans, zeroed])


def _expand_heuristics(heuristics: Heuristics, args: dict[str, object]) -> _Plan:
    # Like Heuristics.run: in order, each heuristic sees the arguments and the earlier heuristics.
    variants = [args]
    for name, heuristic in heuristics.values.items():
        expanded: list[dict[str, object]] = []
        for variant in variants:
            try:
                value = heuristic(dict(variant))
            except Exception as exc:
                raise _Unknown(f"heuristic for '{name}' failed: {_describe(exc)}") from None
            expanded.extend({**variant, name: choice} for choice in _heuristic_choices(name, value))
        variants = expanded
    return _merge(_expand(heuristics.fn, variant) for variant in variants)


def _heuristic_choices(name: str, value: object) -> list[object]:
    # A symbolic boolean (e.g. n % 16 == 0 on a SymInt) may go either way: analyse both branches
    # instead of guarding on it.
    if isinstance(value, torch.SymBool):
        return [True, False]
    if isinstance(value, (torch.SymInt, torch.SymFloat)):
        raise _Unknown(f"heuristic for '{name}' returned a symbolic {type(value).__name__}")
    return [value]


# --- one jit function, one specialization -----------------------------------------------------------

# Results per underlying python function (weakly held, so kernels can be collected) and specialization.
_CACHE: weakref.WeakKeyDictionary[Callable[..., Any], dict[Hashable, WriteAnalysis]] = (
    weakref.WeakKeyDictionary()
)
_PARAMS: weakref.WeakKeyDictionary[Callable[..., Any], tuple[KernelParam, ...]] = weakref.WeakKeyDictionary()
# Guards both caches and serialises TTIR generation (the frontend is not documented as thread-safe).
_LOCK = threading.RLock()

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


class _TtirArg(NamedTuple):
    """What one argument of the TTIR kernel function should be."""

    name: str  # the kernel parameter it comes from (a tuple element's derived name, Note [tuple arguments])
    pointer: bool  # a pointer or tensor descriptor (a tensor or descriptor parameter's first argument)
    head: bool  # the parameter's own argument, not one a descriptor adds (shape/stride scalars)
    ttir_name: str = ""  # the name triton gives the argument ("ptrs.0" for ptrs[0]); "" means `name`


@dataclasses.dataclass(frozen=True)
class _Spec:
    """The TTIR-relevant facts of one launch."""

    key: Hashable | None  # None: some constexpr value cannot be a cache key
    signature: dict[str, str]
    constants: dict[tuple[int, ...], object]
    ttir_args: tuple[_TtirArg, ...]  # constexpr and None parameters have none


def _analyze_leaf(leaf: object, args: Mapping[str, object]) -> WriteAnalysis:
    fn = leaf.fn  # type: ignore[attr-defined]  # JITFunction and InterpretedFunction both have .fn
    spec = _specialize(fn, args)
    with _LOCK:
        per_fn = _CACHE.get(fn)
        if spec.key is not None and per_fn is not None and spec.key in per_fn:
            return per_fn[spec.key]
        result = _analyze_spec(leaf, spec)
        if spec.key is not None:
            _CACHE.setdefault(fn, {})[spec.key] = result
    return result


def _kernel_params(fn: Callable[..., Any]) -> tuple[KernelParam, ...]:
    # triton's own KernelParam decides constexpr-ness and annotated types, the way the launcher does.
    with _LOCK:
        params = _PARAMS.get(fn)
        if params is None:
            parameters = inspect.signature(fn).parameters.values()
            params = tuple(KernelParam(i, p, False, False) for i, p in enumerate(parameters))
            _PARAMS[fn] = params
    return params


def _specialize(fn: Callable[..., Any], args: Mapping[str, object]) -> _Spec:
    signature: dict[str, str] = {}
    constants: dict[tuple[int, ...], object] = {}
    ttir_args: list[_TtirArg] = []
    key: list[Hashable] | None = []
    for index, param in enumerate(_kernel_params(fn)):
        name, value = param.name, _argument(param, args)
        if param.is_constexpr or value is None:
            if isinstance(value, _SYMBOLIC):
                raise _Unknown(f"constexpr argument '{name}' is symbolic ({type(value).__name__})")
            signature[name] = "constexpr"
            constants[(index,)] = value
            key = _extend_key(key, value)
        elif isinstance(value, tuple) and not param.annotation_type:
            # Note [tuple arguments]: one TTIR argument per non-constexpr element, in order.
            found: dict[tuple[int, ...], object] = {}
            signature[name] = _tuple_signature(name, name, value, (index,), found, ttir_args)  # type: ignore[assignment]
            constants.update(found)
            key = None if key is None else [*key, ("tuple", repr(signature[name]))]
            for part in found.values():
                key = _extend_key(key, part)
        else:
            # Scalars are never value-specialised here: the TTIR keeps every branch on them, which can
            # only add writes. Their type still follows triton (i32/i64/u64 by range, fp32, u1).
            signature[name] = param.annotation_type or _value_type(name, value)
            ttir_args.extend(_ttir_args(name, value))
            key = None if key is None else [*key, ("arg", signature[name])]
    frozen_key = None if key is None else tuple(key)
    return _Spec(frozen_key, signature, constants, tuple(ttir_args))


def _ttir_args(name: str, value: object, ttir_name: str = "") -> list[_TtirArg]:
    if _is_descriptor(value):
        extra = _compat.DESCRIPTOR_SCALARS_PER_DIM * len(value.block_shape)  # type: ignore[attr-defined]
        return [_TtirArg(name, True, True, ttir_name), *(_TtirArg(name, False, False) for _ in range(extra))]
    return [_TtirArg(name, isinstance(value, torch.Tensor), True, ttir_name)]


def _tuple_signature(
    name: str,
    ttir_name: str,
    value: tuple[object, ...],
    path: tuple[int, ...],
    constants: dict[tuple[int, ...], object],
    ttir_args: list[_TtirArg],
) -> tuple[object, ...]:
    """Triton's signature of a tuple argument (a tuple of type strings, nested, namedtuples kept).

    Constexpr elements (None, tl.constexpr, strings, dtypes, functions) go to ``constants`` by path;
    every other element becomes a TTIR argument named as tuples.element_name names it.
    """
    fields = getattr(value, "_fields", None)
    sig: list[object] = []
    for i, element in enumerate(value):
        sub, sub_path = element_name(name, i), (*path, i)
        sub_ttir = f"{ttir_name}.{fields[i] if fields else i}"
        if isinstance(element, tuple):
            sig.append(_tuple_signature(sub, sub_ttir, element, sub_path, constants, ttir_args))
        elif _is_constexpr_element(element):
            sig.append("constexpr")
            constants[sub_path] = element
        else:
            sig.append(_value_type(sub, element))
            ttir_args.extend(_ttir_args(sub, element, sub_ttir))
    return type(value)(*sig) if fields else tuple(sig)  # type: ignore[arg-type]


def _is_constexpr_element(value: object) -> bool:
    if isinstance(value, (torch.Tensor, bool, int, float, *_SYMBOLIC)) or _is_descriptor(value):
        return False
    return True  # None, tl.constexpr, str, dtypes, jit functions: triton specialises them


def _is_descriptor(value: object) -> bool:
    # Exactly triton's host-side TensorDescriptor: subclasses (im2col) lower differently.
    return _compat.TENSOR_DESCRIPTOR_TYPE is not None and type(value) is _compat.TENSOR_DESCRIPTOR_TYPE


def _extend_key(key: list[Hashable] | None, value: object) -> list[Hashable] | None:
    if key is None:
        return None
    try:
        part = _freeze(value)
        hash(part)
    except (_Uncacheable, TypeError):
        return None  # still analysed, just not cached
    return [*key, ("constexpr", part)]


def _argument(param: KernelParam, args: Mapping[str, object]) -> object:
    if param.name in args:
        return args[param.name]
    if param.has_default:
        return param.default
    raise _Unknown(f"missing a value for parameter '{param.name}'")


def _value_type(name: str, value: object) -> str:
    """Triton's signature type for a runtime argument."""
    if isinstance(value, torch.Tensor):
        return "*" + _dtype_name(name, value.dtype)
    if _is_descriptor(value):
        # Only the base's dtype and the block shape reach the signature (its base may be a traced tensor).
        block = value.block_shape  # type: ignore[attr-defined]
        if not all(isinstance(size, int) for size in block):
            raise _Unknown(f"argument '{name}' is a TensorDescriptor with a non-integer block shape")
        base_dtype = _dtype_name(name, value.base.dtype)  # type: ignore[attr-defined]
        return f"tensordesc<{base_dtype}[{', '.join(str(size) for size in block)}]>"
    if isinstance(value, (bool, torch.SymBool)):  # before int: bool is an int
        return "u1"
    if isinstance(value, torch.SymInt):
        return "i32"  # a representative size; only the type matters (see _specialize)
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return "i32"
        if -(2**63) <= value < 2**63:
            return "i64"
        if 2**63 <= value < 2**64:
            return "u64"
        raise _Unknown(f"argument '{name}' = {value} does not fit in 64 bits")
    if isinstance(value, (float, torch.SymFloat)):
        return "fp32"
    raise _Unknown(f"argument '{name}' has unsupported type {type(value).__name__}")


def _dtype_name(name: str, dtype: torch.dtype) -> str:
    text = str(dtype).removeprefix("torch.")
    if text not in type_canonicalisation_dict:
        raise _Unknown(f"argument '{name}' has dtype {dtype}, which triton does not support")
    canonical: str = type_canonicalisation_dict[text]
    return canonical


def _freeze(value: object) -> Hashable:
    """A cache-key form of a constexpr value, keeping no user function alive."""
    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, float):  # by bits: -0.0 and 0.0 (and NaN payloads) are different constexprs
        return (type(value).__name__, struct.pack("<d", value))
    if value is None or isinstance(value, (bool, int, str)):
        return (type(value).__name__, value)  # True and 1 are different constexprs
    if isinstance(value, tuple):
        return ("tuple", tuple(_freeze(v) for v in value))
    if isinstance(value, (tl.dtype, torch.dtype)):
        return ("dtype", str(value))
    fn = getattr(value, "fn", None)
    if isinstance(value, (JITFunction, InterpretedFunction)) and callable(fn):
        return ("jit", weakref.ref(fn))
    raise _Uncacheable(type(value).__name__)


def _describe(exc: BaseException) -> str:
    """One short line for an exception, preferring the root cause (frontend errors wrap the real one)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _analyze_spec(leaf: object, spec: _Spec) -> WriteAnalysis:
    try:
        module = _generate_ttir(leaf, spec.signature, spec.constants)
    except Exception as exc:
        return _unknown(f"TTIR generation failed: {_describe(exc)}")
    try:
        program = _read_module(module)
        _check_arguments(program, spec)
        summary = _TaintAnalysis(program).summary(program.entry)
    except _Unknown as exc:
        return _unknown(str(exc))
    except Exception as exc:  # a TTIR shape the reader does not expect: unknown, never fewer writes
        return _unknown(f"TTIR analysis failed: {_describe(exc)}")
    if summary.unknown is not None:
        return dataclasses.replace(_unknown(summary.unknown), writes_outside_arguments=summary.anywhere)
    untraced = sorted(origin for origin in summary.written if origin < 0)
    if untraced:
        reason = f"writes through a {summary.origins[untraced[0]]}"
        return dataclasses.replace(_unknown(reason), writes_outside_arguments=True)
    names = frozenset(spec.ttir_args[i].name for i in summary.written)
    return WriteAnalysis(names, None, summary.side_effects)


def _check_arguments(program: _Program, spec: _Spec) -> None:
    # constexpr and None parameters are not TTIR arguments; every other parameter is one (a host-side
    # descriptor several), in order. Check count, pointer-ness and (where triton exposes them) names
    # before trusting the mapping.
    entry = program.functions[program.entry][0]
    if len(entry.args) != len(spec.ttir_args):
        raise _Unknown(f"the TTIR kernel has {len(entry.args)} arguments, expected {len(spec.ttir_args)}")
    for value, expected, arg_name in zip(entry.args, spec.ttir_args, entry.arg_names):
        if (value in program.pointers) != expected.pointer:
            raise _Unknown(
                f"TTIR argument for '{expected.name}' does not match its value (pointer vs scalar)"
            )
        wanted = expected.ttir_name or expected.name
        if expected.head and arg_name and arg_name != wanted:
            raise _Unknown(f"TTIR argument '{arg_name}' is where '{wanted}' was expected")


# --- TTIR generation ------------------------------------------------------------------------------


def _generate_ttir(leaf: object, signature: dict[str, str], constants: dict[tuple[int, ...], object]) -> Any:
    """Triton's frontend for GPUTarget("cuda", 80, 32): the TTIR module, before any pass runs."""
    from triton._C.libtriton import ir
    from triton.compiler.compiler import ASTSource

    backend, options, target = _backend()
    memo: dict[int, object] = {}
    interpreted = _compat.interpreter_enabled() or isinstance(leaf, InterpretedFunction)
    # The frontend's warnings (deprecations: tl.make_block_ptr on triton 3.7, a non-boolean tl.where
    # condition) are about the kernel, and its real compilation says them again; here they must not
    # turn into errors under the caller's filters (pytest's filterwarnings=error) and fail the analysis.
    with warnings.catch_warnings(), _interpreter_guard(memo) if interpreted else contextlib.nullcontext():
        warnings.simplefilter("ignore")
        fn = _analysis_jit(leaf.fn, memo)  # type: ignore[attr-defined]
        constants = {path: _for_codegen(value, memo) for path, value in constants.items()}
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        source = ASTSource(fn, signature, constants, {})
        codegen_fns = backend.get_codegen_implementation(options)
        if _compat.MAKE_IR_TAKES_TARGET:
            return source.make_ir(target, options, codegen_fns, backend.get_module_map(), context)
        return source.make_ir(options, codegen_fns, backend.get_module_map(), context)


_BACKEND: tuple[Any, Any, Any] | None = None


def _backend() -> tuple[Any, Any, Any]:
    global _BACKEND
    if _BACKEND is None:
        from triton.backends.compiler import GPUTarget
        from triton.compiler.compiler import make_backend

        target = GPUTarget("cuda", 80, 32)
        backend = make_backend(target)
        # An explicit fp-fusion value: triton 3.9 warns when it is left unset (it does not affect TTIR).
        _BACKEND = (backend, backend.parse_options({"enable_fp_fusion": False}), target)
    return _BACKEND


class _AnalysisJITFunction(JITFunction):
    """A JITFunction over a user's python function, built for code generation only.

    The code generator is never handed the user's objects (it would memoise hashes on them), and
    under TRITON_INTERPRET=1 kernels and helpers are InterpretedFunction objects that it would call
    as plain python. This class's capture scope (globals plus closure) swaps every JITFunction and
    InterpretedFunction, also behind module attributes, for more of its own instances.
    """

    scope_memo: dict[int, object]

    def get_capture_scope(self) -> dict[str, Any]:
        scope = super().get_capture_scope()
        return {name: _for_codegen(value, self.scope_memo) for name, value in scope.items()}

    @property
    def cache_key(self) -> str:
        # The code generator hashes callees (dict lookups); triton's cache_key would walk the real
        # globals, meet InterpretedFunctions and refuse them. Only a stable hash is needed here.
        return f"functional_triton.analysis:{self.__module__}:{self.__qualname__}:{id(self.fn)}"


_Attributes = list[tuple[object, dict[str, object]]]


def _attributes(objects: Iterable[object]) -> _Attributes:
    return [(obj, dict(vars(obj))) for obj in objects]


# triton.language as it was when this module was imported, normally before any interpreted kernel ran
# (Note [interpreter guard]).
_PRISTINE: dict[int, dict[str, object]] = {
    id(obj): attrs for obj, attrs in _attributes(_compat.interpreter_patched_objects())
}


@contextlib.contextmanager
def _interpreter_guard(memo: dict[int, object]) -> Iterator[None]:
    """Under TRITON_INTERPRET=1, give triton's code generator the library it expects, then put back.

    Note [interpreter guard]
    With the interpreter on, triton.language's own @jit functions (tl.sum, tl.max, tl.zeros, ...) are
    InterpretedFunctions, and tensor methods such as `x.max()` are wrappers around them, which the
    code generator would call as python. Worse, the interpreter leaves triton.language.core patched
    for good after running any kernel that uses one of those functions: each call into one patches the
    modules in *its* globals and never restores them, and the kernel's own restore only covers `tl`.
    Code generation against a patched core fails. So, for the duration of code generation (under
    _LOCK): interpreter patches are replaced by the attributes found at import (or the originals the
    patches wrap), tensor methods that wrap interpreted functions by JITFunctions (what triton
    installs without the interpreter), and afterwards every attribute is put back exactly as it was,
    leaked patches included: this module changes nothing for good. If code generation changed any of
    them (it ran interpreted code), the answer is unknown. An interpreted kernel running in another
    thread at the same moment is not protected against (the interpreter itself is not thread-safe).
    """
    objects = _compat.interpreter_patched_objects()
    saved = _attributes(objects)
    try:
        for obj, attrs in saved:
            _install_codegen_attributes(obj, attrs, memo)
        during = _attributes(objects)
        yield
        changed = _first_patch(during)
    finally:
        _put_back(saved)
    if changed:
        raise _Unknown(f"code generation ran interpreted code, which changed triton.language.{changed}")


def _install_codegen_attributes(obj: object, attrs: dict[str, object], memo: dict[int, object]) -> None:
    pristine = _PRISTINE.get(id(obj), {})
    for name, value in attrs.items():
        wanted = _unpatched(value, pristine.get(name, _MISSING))
        interpreted = _wrapped_interpreted(wanted) if isinstance(obj, type) else None
        if interpreted is not None:
            wanted = _analysis_jit(interpreted.fn, memo)
        if wanted is _MISSING:
            delattr(obj, name)
        elif wanted is not value:
            setattr(obj, name, wanted)


def _unpatched(value: object, recorded: object) -> object:
    """The attribute without interpreter patches: as recorded at import, or the original it wraps."""
    if not _from_interpreter(value):
        return value
    if not _from_interpreter(recorded):
        return recorded  # _MISSING when the attribute did not exist: the patch added it
    # runtime.interpreter._patch_attr keeps the original as the lambda's `member` keyword default.
    while _from_interpreter(value) and "member" in (getattr(value, "__kwdefaults__", None) or {}):
        value = value.__kwdefaults__["member"]  # type: ignore[attr-defined]
    return value


def _from_interpreter(value: object) -> bool:
    if value is _MISSING or isinstance(value, InterpretedFunction):
        return False  # InterpretedFunctions are the library itself, not patches
    if value is builtins.print:  # the interpreter's static_print
        return True
    for part in (value, getattr(value, "func", None), getattr(value, "fget", None)):  # partial, property
        if getattr(part, "__module__", None) == "triton.runtime.interpreter":
            return True
    return False


def _wrapped_interpreted(value: object) -> InterpretedFunction | None:
    # triton.language.core._tensor_member_fn installs `wrapper` closures around the free function.
    if not isinstance(value, types.FunctionType):
        return None
    for cell in value.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(contents, InterpretedFunction):
            return contents
    return None


def _first_patch(expected: _Attributes) -> str:
    """The first attribute that an interpreter patch replaced since `expected` was taken, if any."""
    for obj, attrs in expected:
        for name, value in vars(obj).items():
            if value is not attrs.get(name, _MISSING) and _from_interpreter(value):
                return name
    return ""


def _put_back(saved: _Attributes) -> None:
    for obj, attrs in saved:
        now = dict(vars(obj))
        for name in now.keys() - attrs.keys():
            delattr(obj, name)
        for name, value in attrs.items():
            if now.get(name, _MISSING) is not value:
                setattr(obj, name, value)


def _analysis_jit(fn: Callable[..., Any], memo: dict[int, object]) -> _AnalysisJITFunction:
    cached = memo.get(id(fn))
    if isinstance(cached, _AnalysisJITFunction):
        return cached
    # triton 3.9 registers each JITFunction by name; put back what was there so the user's kernel
    # stays the registered one and this short-lived copy is not kept alive.
    registry = _compat.JIT_FUNCTION_REGISTRY
    name = f"{fn.__module__}:{fn.__qualname__}"
    previous = registry.get(name, _MISSING) if registry is not None else _MISSING
    jit = _AnalysisJITFunction(fn)
    if registry is not None:
        if previous is _MISSING:
            registry.pop(name, None)
        else:
            registry[name] = previous
    jit.scope_memo = memo
    memo[id(fn)] = jit
    return jit


def _for_codegen(value: object, memo: dict[int, object]) -> object:
    if isinstance(value, TritonKernel):  # a wrapped helper (Note [wrapped kernels as callees])
        value = value.kernel
    if isinstance(value, (JITFunction, InterpretedFunction)) and not isinstance(value, _AnalysisJITFunction):
        return _analysis_jit(value.fn, memo)
    if isinstance(value, types.ModuleType):
        return _module_proxy(value, memo)
    return value


def _module_proxy(module: types.ModuleType, memo: dict[int, object]) -> types.ModuleType:
    # A real ModuleType (the code generator checks `type(v) is ModuleType`) whose attribute reads go to
    # the real module through _for_codegen (PEP 562 module __getattr__). triton.language is proxied
    # too: its @jit functions are interpreted as well (Note [interpreter guard]). The proxy keeps the
    # module's name, so the backend's module_map (libdevice) still applies to it.
    cached = memo.get(id(module))
    if isinstance(cached, types.ModuleType):
        return cached
    proxy = types.ModuleType(module.__name__)

    def __getattr__(name: str) -> object:
        return _for_codegen(getattr(module, name), memo)

    proxy.__getattr__ = __getattr__  # type: ignore[method-assign]
    memo[id(module)] = proxy
    return proxy


# --- TTIR -> a small python model ----------------------------------------------------------------


@dataclasses.dataclass
class _Block:
    args: tuple[int, ...]
    arg_names: tuple[str, ...]  # from argument locations where triton exposes them, else ""
    ops: list[_Op]


@dataclasses.dataclass
class _Op:
    name: str
    operands: tuple[int, ...]
    results: tuple[int, ...]
    regions: tuple[tuple[_Block, ...], ...]
    callee: str | None
    pure: bool


@dataclasses.dataclass
class _Program:
    functions: dict[str, tuple[_Block, ...]]  # blocks of each tt.func body, entry block first
    entry: str
    pointers: set[int]  # ids of every value of pointer, block-pointer or tensor-descriptor type


def _is_pointer_type(text: str) -> bool:
    # !tt.ptr<f32>, tensor<16x!tt.ptr<f32>>, !tt.ptr<tensor<16xf32>> (block pointer),
    # !tt.tensordesc<...> (device-side tensor descriptor).
    return "!tt.ptr" in text or "tensordesc" in text


class _ModuleReader:
    """Builds the model from triton's post-order MLIR walk: a block's ops arrive in order, and every
    op nested in a region arrives before the op that owns the region."""

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.region_blocks: dict[int, list[int]] = {}
        self.functions: dict[str, tuple[_Block, ...]] = {}
        self.pointers: set[int] = set()
        self.error: BaseException | None = None

    def visit(self, op: Any) -> None:
        if self.error is not None:
            return
        try:
            self._visit(op)
        except BaseException as exc:  # never let an exception unwind through the C++ walk
            self.error = exc

    def _visit(self, op: Any) -> None:
        name = op.get_name()
        if name == "builtin.module":
            return
        regions = tuple(
            tuple(self.blocks.pop(b) for b in self.region_blocks.pop(op.get_region(i).id(), []))
            for i in range(op.get_num_regions())
        )
        if name == "tt.func":
            self.functions[op.get_str_attr("sym_name")] = regions[0] if regions else ()
            return
        record = _Op(
            name=name,
            operands=tuple(self._value(op.get_operand(i)) for i in range(op.get_num_operands())),
            results=tuple(self._value(op.get_result(i)) for i in range(op.get_num_results())),
            regions=regions,
            callee=op.get_flat_symbol_ref_attr("callee") if name == "tt.call" else None,
            pure=bool(op.get_bool_attr("pure")) if name == "tt.elementwise_inline_asm" else False,
        )
        self._block(op.get_block()).ops.append(record)

    def _value(self, value: Any) -> int:
        vid: int = value.id()
        if _is_pointer_type(str(value.get_type())):
            self.pointers.add(vid)
        return vid

    def _block(self, block: Any) -> _Block:
        bid = block.id()
        if bid not in self.blocks:
            count = block.get_num_arguments()
            args = tuple(self._value(block.get_argument(i)) for i in range(count))
            names = tuple(_argument_name(block.get_argument(i)) for i in range(count))
            self.blocks[bid] = _Block(args, names, [])
            self.region_blocks.setdefault(block.get_parent().id(), []).append(bid)
        return self.blocks[bid]


# A name location prints as loc("outer"("inner"("file":line:col))); each `"name"(` opens one.
_NAME_LOC = re.compile(r'"((?:[^"\\]|\\.)*)"\(')


def _argument_name(value: Any) -> str:
    """The name triton bound a kernel argument to: the innermost name of its location.

    The code generator wraps a value's location in another name each time the value is bound to a
    variable (``if c: p = x_ptr + 1 else: p = x_ptr`` names the argument "p" around "x_ptr"), so
    ``get_name()`` gives the last binding; the parameter's own name is the first.
    """
    if not _compat.HAS_LOCATION_NAME:
        return ""
    try:
        loc = value.get_loc()
        names = _NAME_LOC.findall(str(loc))
        return names[-1] if names else str(loc.get_name() or "")
    except Exception:  # not a named location: no name to check against
        return ""


def _read_module(module: Any) -> _Program:
    reader = _ModuleReader()
    module.walk(reader.visit)
    if reader.error is not None:
        raise reader.error
    entry = module.get_entry_func_name()
    if entry not in reader.functions or not reader.functions[entry]:
        raise _Unknown(f"TTIR has no body for the kernel function '{entry}'")
    return _Program(reader.functions, entry, reader.pointers)


# --- the taint analysis (Note [taint]) -------------------------------------------------------------

_Origins = frozenset[int]
_NONE: _Origins = frozenset()

# Ops that write memory through their pointer operands. Every pointer operand counts (for tt.store
# the stored value may itself be a pointer in triton<=3.6): more writes, never fewer.
_WRITE_OPS = frozenset(
    {
        "tt.store",
        "tt.atomic_rmw",
        "tt.atomic_cas",
        "tt.atomic_store",
        "tt.descriptor_store",
        "tt.descriptor_reduce",
        "tt.descriptor_scatter",
        "tt.experimental_descriptor_store",
        "tt.experimental_tensormap_create",
    }
)
# Ops that read memory: a pointer they produce came from memory and cannot be traced.
_READ_OPS = frozenset(
    {
        "tt.load",
        "tt.atomic_load",
        "tt.atomic_poll",
        "tt.descriptor_load",
        "tt.descriptor_gather",
        "tt.experimental_descriptor_load",
        "tt.reinterpret_tensor_descriptor",
    }
)
# Ops whose pointer results derive only from their operands (base pointers; offsets carry nothing).
_DERIVE_OPS = frozenset(
    {
        "tt.addptr",
        "tt.splat",
        "tt.unsplat",
        "tt.broadcast",
        "tt.expand_dims",
        "tt.reshape",
        "tt.trans",
        "tt.cat",
        "tt.join",
        "tt.split",
        "tt.gather",
        "tt.bitcast",
        "arith.select",
        "tt.make_tensor_ptr",
        "tt.advance",
        "tt.make_tensor_descriptor",
    }
)
# Ops that touch pointers without producing or writing through one (terminators are read by their
# parent op; cf branches are handled per region; ub.poison is an undefined value).
_INERT_OPS = frozenset(
    {
        "tt.ptr_to_int",
        "ub.poison",
        "tt.return",
        "scf.yield",
        "scf.condition",
        "tt.reduce.return",
        "tt.scan.return",
        "cf.br",
        "cf.cond_br",
    }
)
# Observable without writing a tensor argument: the node must not be dead-code eliminated.
_EFFECT_OPS = frozenset({"tt.print", "tt.assert"})
_WRITE_WORDS = ("store", "atomic", "scatter", "write")
_MAX_PASSES = 100


@dataclasses.dataclass(frozen=True)
class _Summary:
    written: _Origins  # parameter indices (and negative untraced origins) that may be written
    returns: tuple[_Origins, ...]  # origins of each returned value
    unknown: str | None  # a possible write no origin describes (impure asm, unmodelled pointer op)
    side_effects: bool
    origins: Mapping[int, str]  # what each negative origin is, for messages
    anywhere: bool = False  # `unknown` is a write to any memory (non-pure inline asm), not only arguments


@dataclasses.dataclass
class _State:
    """One function's analysis in progress."""

    env: dict[int, _Origins] = dataclasses.field(default_factory=dict)
    written: set[int] = dataclasses.field(default_factory=set)
    returns: list[_Origins] = dataclasses.field(default_factory=list)
    unknown: str | None = None
    anywhere: bool = False  # see _Summary.anywhere
    side_effects: bool = False
    changed: bool = False

    def of(self, values: Iterable[int]) -> _Origins:
        found: set[int] = set()
        for value in values:
            found |= self.env.get(value, _NONE)
        return frozenset(found)

    def add(self, value: int, origins: _Origins) -> None:
        old = self.env.get(value, _NONE)
        if not origins <= old:
            self.env[value] = old | origins
            self.changed = True

    def write(self, origins: _Origins) -> None:
        if not origins <= self.written:
            self.written |= origins
            self.changed = True

    def add_return(self, index: int, origins: _Origins) -> None:
        while len(self.returns) <= index:
            self.returns.append(_NONE)
        if not origins <= self.returns[index]:
            self.returns[index] |= origins
            self.changed = True

    def fail(self, reason: str) -> None:
        if self.unknown is None:
            self.unknown = reason


class _TaintAnalysis:
    def __init__(self, program: _Program) -> None:
        self.program = program
        self.summaries: dict[str, _Summary] = {}
        self.active: set[str] = set()
        self.origins: dict[int, str] = {}  # negative origin -> description
        self.origin_of_op: dict[int, int] = {}  # id(_Op) -> its negative origin (stable per op)
        self.handlers: dict[str, Callable[[_Op, _State], None]] = {
            "scf.for": self._visit_for,
            "scf.while": self._visit_while,
            "scf.if": self._visit_if,
            "tt.reduce": self._visit_reduce,
            "tt.scan": self._visit_reduce,
            "tt.call": self._visit_call,
        }

    def summary(self, name: str) -> _Summary:
        if name in self.summaries:
            return self.summaries[name]
        if name in self.active:
            return _Summary(_NONE, (), f"recursive call to '{name}'", True, self.origins)
        blocks = self.program.functions.get(name)
        if not blocks:
            return _Summary(_NONE, (), f"call to '{name}', which has no body", True, self.origins)
        self.active.add(name)
        try:
            result = self._run(blocks)
        finally:
            self.active.discard(name)
        self.summaries[name] = result
        return result

    def _run(self, blocks: tuple[_Block, ...]) -> _Summary:
        state = _State()
        for index, arg in enumerate(blocks[0].args):
            if arg in self.program.pointers:
                state.add(arg, frozenset({index}))
        for _ in range(_MAX_PASSES):
            state.changed = False
            self._visit_region(blocks, state)
            if not state.changed:
                break
        else:
            state.fail("the analysis did not converge")
        return _Summary(
            frozenset(state.written),
            tuple(state.returns),
            state.unknown,
            state.side_effects,
            self.origins,
            state.anywhere,
        )

    def _untraced(self, op: _Op, what: str) -> _Origins:
        if id(op) not in self.origin_of_op:
            origin = -1 - len(self.origins)
            self.origin_of_op[id(op)] = origin
            self.origins[origin] = what
        return frozenset({self.origin_of_op[id(op)]})

    def _visit_region(self, blocks: Sequence[_Block], state: _State) -> None:
        if len(blocks) > 1:
            # Unstructured control flow (an `if` that returns): successors are not exposed, so every
            # non-entry block argument may receive any value a branch in this region passes.
            passed = state.of(
                v
                for block in blocks
                for op in block.ops
                if op.name in ("cf.br", "cf.cond_br")
                for v in op.operands
            )
            for block in blocks[1:]:
                for arg in block.args:
                    if arg in self.program.pointers:
                        state.add(arg, passed)
        for block in blocks:
            for op in block.ops:
                self._visit_op(op, state)

    def _visit_op(self, op: _Op, state: _State) -> None:
        handler = self.handlers.get(op.name)
        if handler is not None:
            handler(op, state)
        elif op.name in _WRITE_OPS:
            state.write(state.of(v for v in op.operands if v in self.program.pointers))
            self._results_untraced(op, state, f"pointer returned by {op.name}")
        elif op.name in _READ_OPS:
            self._results_untraced(op, state, f"pointer loaded from memory ({op.name})")
        elif op.name in _DERIVE_OPS:
            origins = state.of(op.operands)
            for result in op.results:
                if result in self.program.pointers:
                    state.add(result, origins)
        elif op.name == "tt.int_to_ptr":
            self._results_untraced(op, state, "pointer made from an integer (tt.int_to_ptr)")
        elif op.name == "tt.return":
            for index, value in enumerate(op.operands):
                state.add_return(index, state.of([value]))
        else:
            self._visit_other(op, state)

    def _visit_other(self, op: _Op, state: _State) -> None:
        if op.name == "tt.elementwise_inline_asm":
            if not op.pure:
                state.fail("non-pure inline asm (tt.elementwise_inline_asm) may write any memory")
                state.anywhere = True
            self._results_untraced(op, state, "pointer returned by inline asm")
        elif op.name in _EFFECT_OPS:
            state.side_effects = True
        elif op.name in _INERT_OPS:
            pass
        elif op.regions:
            self._visit_unknown_region_op(op, state)
        elif any(word in op.name for word in _WRITE_WORDS):
            state.fail(f"unknown op {op.name} may write memory")
        elif self._touches_pointers(op):
            state.fail(f"unknown op {op.name} handles pointers")

    def _results_untraced(self, op: _Op, state: _State, what: str) -> None:
        for result in op.results:
            if result in self.program.pointers:
                state.add(result, self._untraced(op, what))

    def _touches_pointers(self, op: _Op) -> bool:
        return any(v in self.program.pointers for v in (*op.operands, *op.results))

    def _visit_unknown_region_op(self, op: _Op, state: _State) -> None:
        # Writes inside are still seen (regions read outer values directly); only pointers flowing
        # through the op's own operands, block arguments or terminators are beyond the model.
        carried = [*op.operands, *op.results]
        for region in op.regions:
            for block in region:
                carried.extend(block.args)
                if block.ops:
                    carried.extend(block.ops[-1].operands)
        if any(v in self.program.pointers for v in carried):
            state.fail(f"op {op.name} carries pointers through its regions")
        for region in op.regions:
            self._visit_region(region, state)

    def _visit_call(self, op: _Op, state: _State) -> None:
        if op.callee is None:
            state.fail("tt.call without a callee")
            return
        callee = self.summary(op.callee)
        if callee.unknown is not None:
            state.fail(callee.unknown)
            state.anywhere = state.anywhere or callee.anywhere
        state.side_effects = state.side_effects or callee.side_effects
        state.write(self._at_call(callee.written, op, state))
        for index, result in enumerate(op.results):
            if index < len(callee.returns):
                state.add(result, self._at_call(callee.returns[index], op, state))

    @staticmethod
    def _at_call(origins: _Origins, op: _Op, state: _State) -> _Origins:
        """Callee origins in terms of the caller: parameter i becomes the origins of operand i."""
        mapped: set[int] = set()
        for origin in origins:
            if origin < 0:
                mapped.add(origin)
            elif origin < len(op.operands):
                mapped |= state.of([op.operands[origin]])
        return frozenset(mapped)

    def _visit_for(self, op: _Op, state: _State) -> None:
        # scf.for %iv = lb to ub step s iter_args(%a = init...): body args (iv, a...), yield -> a / results
        body = _single_block(op, 0)
        inits, carried = op.operands[3:], body.args[1:]
        yielded = _terminator(body, "scf.yield")
        if not len(inits) == len(carried) == len(yielded) == len(op.results):
            raise _Unknown("unexpected scf.for form")
        for init, arg, out in zip(inits, carried, yielded):
            state.add(arg, state.of([init, out]))
        self._visit_region([body], state)
        for arg, out, result in zip(carried, yielded, op.results):
            state.add(result, state.of([arg, out]))

    def _visit_while(self, op: _Op, state: _State) -> None:
        # before(args <- inits | after's yield) -> scf.condition(c, fwd...) -> after(args) and results
        before, after = _single_block(op, 0), _single_block(op, 1)
        forwarded = _terminator(before, "scf.condition")[1:]
        yielded = _terminator(after, "scf.yield")
        if not (
            len(before.args) == len(op.operands) == len(yielded)
            and len(forwarded) == len(after.args) == len(op.results)
        ):
            raise _Unknown("unexpected scf.while form")
        for arg, init, out in zip(before.args, op.operands, yielded):
            state.add(arg, state.of([init, out]))
        self._visit_region([before], state)
        for value, arg, result in zip(forwarded, after.args, op.results):
            state.add(arg, state.of([value]))
            state.add(result, state.of([value]))
        self._visit_region([after], state)

    def _visit_if(self, op: _Op, state: _State) -> None:
        for index, region in enumerate(op.regions):
            if not region:
                continue  # an `if` without else and without results
            block = _single_block(op, index)
            self._visit_region([block], state)
            yielded = _terminator(block, "scf.yield")
            if len(yielded) != len(op.results):
                raise _Unknown("unexpected scf.if form")
            for value, result in zip(yielded, op.results):
                state.add(result, state.of([value]))

    def _visit_reduce(self, op: _Op, state: _State) -> None:
        # The combine region gets (accumulated..., current...) for the N operands, returns N values.
        body = _single_block(op, 0)
        count = len(op.operands)
        returned = _terminator(body, op.name + ".return")
        if len(body.args) != 2 * count or len(returned) != count or len(op.results) != count:
            raise _Unknown(f"unexpected {op.name} form")
        for index, arg in enumerate(body.args):
            state.add(arg, state.of([op.operands[index % count], returned[index % count]]))
        self._visit_region([body], state)
        for operand, value, result in zip(op.operands, returned, op.results):
            state.add(result, state.of([operand, value]))


def _single_block(op: _Op, region: int) -> _Block:
    if region >= len(op.regions) or len(op.regions[region]) != 1:
        raise _Unknown(f"unexpected {op.name} form (region {region} is not a single block)")
    return op.regions[region][0]


def _terminator(block: _Block, name: str) -> tuple[int, ...]:
    if not block.ops or block.ops[-1].name != name:
        raise _Unknown(f"a block does not end in {name}")
    return block.ops[-1].operands
