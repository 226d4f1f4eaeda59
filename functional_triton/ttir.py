"""Triton's frontend, for the write analysis: a launch's TTIR as a small, version-independent program.

Everything here is coupled to Triton's versions: which values become TTIR arguments (a launch's
*specialization*), generating TTIR with Triton's own frontend for a fixed target (no GPU or driver needed),
under TRITON_INTERPRET=1 the guard that gives the code generator the library it expects, and the reader
that turns the MLIR module into a ``Program`` of plain python objects. ``mutation.py`` analyses a
``Program`` and knows nothing of Triton's IR bindings; the analysis tests build programs by hand.

A failure here raises ``Unknown``: the caller must then treat every tensor argument as written.
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
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import torch
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction, KernelParam, type_canonicalisation_dict

from . import _compat
from .launch_spec import KernelWrapper
from .tuples import element_name


class Unknown(Exception):
    """The analysis cannot give a safe answer; the message says why."""


class _Uncacheable(Exception):
    """A specialization value that cannot be part of a cache key."""


_MISSING = object()


# --- the program representation ----------------------------------------------------------------------


@dataclasses.dataclass
class Block:
    """A block: its arguments (value ids) and its ops in order."""

    args: tuple[int, ...]
    ops: list[Op] = dataclasses.field(default_factory=list)
    arg_names: tuple[str, ...] = ()  # from argument locations where triton exposes them, else ""


@dataclasses.dataclass
class Op:
    """One MLIR operation: its name ("tt.store"), value ids in and out, nested regions."""

    name: str
    operands: tuple[int, ...] = ()
    results: tuple[int, ...] = ()
    regions: tuple[tuple[Block, ...], ...] = ()
    callee: str | None = None  # tt.call's callee
    pure: bool = False  # tt.elementwise_inline_asm's `pure` attribute


@dataclasses.dataclass
class Program:
    """A TTIR module: the blocks of each tt.func body (entry block first) and which values are pointers."""

    functions: dict[str, tuple[Block, ...]]
    entry: str
    pointers: set[int]  # ids of every value of pointer, block-pointer or tensor-descriptor type


# --- one launch -> its specialization ----------------------------------------------------------------

_PARAMS: weakref.WeakKeyDictionary[Callable[..., Any], tuple[KernelParam, ...]] = weakref.WeakKeyDictionary()
# Guards the parameter cache (and the analysis cache in mutation.py) and serialises TTIR generation
# (the frontend is not documented as thread-safe).
LOCK = threading.RLock()

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


class TtirArg(NamedTuple):
    """What one argument of the TTIR kernel function should be."""

    name: str  # the kernel parameter it comes from (a tuple element's derived name, Note [tuple arguments])
    pointer: bool  # a pointer or tensor descriptor (a tensor or descriptor parameter's first argument)
    head: bool  # the parameter's own argument, not one a descriptor adds (shape/stride scalars)
    ttir_name: str = ""  # the name triton gives the argument ("ptrs.0" for ptrs[0]); "" means `name`


@dataclasses.dataclass(frozen=True)
class Spec:
    """The TTIR-relevant facts of one launch."""

    key: Hashable | None  # None: some constexpr value cannot be a cache key
    signature: dict[str, str]
    constants: dict[tuple[int, ...], object]
    ttir_args: tuple[TtirArg, ...]  # constexpr and None parameters have none


def _kernel_params(fn: Callable[..., Any]) -> tuple[KernelParam, ...]:
    # triton's own KernelParam decides constexpr-ness and annotated types, the way the launcher does.
    with LOCK:
        params = _PARAMS.get(fn)
        if params is None:
            parameters = inspect.signature(fn).parameters.values()
            params = tuple(KernelParam(i, p, False, False) for i, p in enumerate(parameters))
            _PARAMS[fn] = params
    return params


def specialize(fn: Callable[..., Any], args: Mapping[str, object]) -> Spec:
    signature: dict[str, str] = {}
    constants: dict[tuple[int, ...], object] = {}
    ttir_args: list[TtirArg] = []
    key: list[Hashable] | None = []
    for index, param in enumerate(_kernel_params(fn)):
        name, value = param.name, _argument(param, args)
        if param.is_constexpr or value is None:
            if isinstance(value, _SYMBOLIC):
                raise Unknown(f"constexpr argument '{name}' is symbolic ({type(value).__name__})")
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
    return Spec(frozen_key, signature, constants, tuple(ttir_args))


def _ttir_args(name: str, value: object, ttir_name: str = "") -> list[TtirArg]:
    if _is_descriptor(value):
        extra = _compat.DESCRIPTOR_SCALARS_PER_DIM * len(value.block_shape)  # type: ignore[attr-defined]
        return [TtirArg(name, True, True, ttir_name), *(TtirArg(name, False, False) for _ in range(extra))]
    return [TtirArg(name, isinstance(value, torch.Tensor), True, ttir_name)]


def _tuple_signature(
    name: str,
    ttir_name: str,
    value: tuple[object, ...],
    path: tuple[int, ...],
    constants: dict[tuple[int, ...], object],
    ttir_args: list[TtirArg],
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
    raise Unknown(f"missing a value for parameter '{param.name}'")


def _value_type(name: str, value: object) -> str:
    """Triton's signature type for a runtime argument."""
    if isinstance(value, torch.Tensor):
        return "*" + _dtype_name(name, value.dtype)
    if _is_descriptor(value):
        # Only the base's dtype and the block shape reach the signature (its base may be a traced tensor).
        block = value.block_shape  # type: ignore[attr-defined]
        if not all(isinstance(size, int) for size in block):
            raise Unknown(f"argument '{name}' is a TensorDescriptor with a non-integer block shape")
        base_dtype = _dtype_name(name, value.base.dtype)  # type: ignore[attr-defined]
        return f"tensordesc<{base_dtype}[{', '.join(str(size) for size in block)}]>"
    if isinstance(value, (bool, torch.SymBool)):  # before int: bool is an int
        return "u1"
    if isinstance(value, torch.SymInt):
        return "i32"  # a representative size; only the type matters (see specialize)
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return "i32"
        if -(2**63) <= value < 2**63:
            return "i64"
        if 2**63 <= value < 2**64:
            return "u64"
        raise Unknown(f"argument '{name}' = {value} does not fit in 64 bits")
    if isinstance(value, (float, torch.SymFloat)):
        return "fp32"
    raise Unknown(f"argument '{name}' has unsupported type {type(value).__name__}")


def _dtype_name(name: str, dtype: torch.dtype) -> str:
    text = str(dtype).removeprefix("torch.")
    if text not in type_canonicalisation_dict:
        raise Unknown(f"argument '{name}' has dtype {dtype}, which triton does not support")
    return str(type_canonicalisation_dict[text])


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


def describe(exc: BaseException) -> str:
    """One short line for an exception, preferring the root cause (frontend errors wrap the real one)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def check_arguments(program: Program, spec: Spec) -> None:
    # constexpr and None parameters are not TTIR arguments; every other parameter is one (a host-side
    # descriptor several), in order. Check count, pointer-ness and (where triton exposes them) names
    # before trusting the mapping.
    entry = program.functions[program.entry][0]
    if len(entry.args) != len(spec.ttir_args):
        raise Unknown(f"the TTIR kernel has {len(entry.args)} arguments, expected {len(spec.ttir_args)}")
    for value, expected, arg_name in zip(entry.args, spec.ttir_args, entry.arg_names):
        if (value in program.pointers) != expected.pointer:
            raise Unknown(f"TTIR argument for '{expected.name}' does not match its value (pointer vs scalar)")
        wanted = expected.ttir_name or expected.name
        if expected.head and arg_name and arg_name != wanted:
            raise Unknown(f"TTIR argument '{arg_name}' is where '{wanted}' was expected")


# --- TTIR generation ------------------------------------------------------------------------------


def generate_ttir(leaf: object, signature: dict[str, str], constants: dict[tuple[int, ...], object]) -> Any:
    """Triton's frontend for GPUTarget("cuda", 80, 32): the TTIR module, before any pass runs."""
    from triton._C.libtriton import ir
    from triton.compiler.compiler import ASTSource

    backend, options, target = analysis_backend()
    memo: dict[int, object] = {}
    interpreted = _compat.interpreter_enabled() or isinstance(leaf, InterpretedFunction)
    # The frontend's warnings (deprecations: tl.make_block_ptr on triton 3.7, a non-boolean tl.where
    # condition) are about the kernel, and its real compilation says them again; here they must not
    # turn into errors under the caller's filters (pytest's filterwarnings=error) and fail the analysis.
    with warnings.catch_warnings(), interpreter_guard(memo) if interpreted else contextlib.nullcontext():
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


def analysis_backend() -> tuple[Any, Any, Any]:
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
def interpreter_guard(memo: dict[int, object]) -> Iterator[None]:
    """Under TRITON_INTERPRET=1, give triton's code generator the library it expects, then put back.

    Note [interpreter guard]
    With the interpreter on, triton.language's own @jit functions (tl.sum, tl.max, tl.zeros, ...) are
    InterpretedFunctions, and tensor methods such as `x.max()` are wrappers around them, which the
    code generator would call as python. Worse, the interpreter leaves triton.language.core patched
    for good after running any kernel that uses one of those functions: each call into one patches the
    modules in *its* globals and never restores them, and the kernel's own restore only covers `tl`.
    Code generation against a patched core fails. So, for the duration of code generation (under
    LOCK): interpreter patches are replaced by the attributes found at import (or the originals the
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
        raise Unknown(f"code generation ran interpreted code, which changed triton.language.{changed}")


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
    if isinstance(value, KernelWrapper):  # a wrapped helper (Note [wrapped kernels as callees])
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


# --- TTIR -> Program ---------------------------------------------------------------------------------


def _is_pointer_type(text: str) -> bool:
    # !tt.ptr<f32>, tensor<16x!tt.ptr<f32>>, !tt.ptr<tensor<16xf32>> (block pointer),
    # !tt.tensordesc<...> (device-side tensor descriptor).
    return "!tt.ptr" in text or "tensordesc" in text


class _ModuleReader:
    """Builds the model from triton's post-order MLIR walk: a block's ops arrive in order, and every
    op nested in a region arrives before the op that owns the region."""

    def __init__(self) -> None:
        self.blocks: dict[int, Block] = {}
        self.region_blocks: dict[int, list[int]] = {}
        self.functions: dict[str, tuple[Block, ...]] = {}
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
        record = Op(
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

    def _block(self, block: Any) -> Block:
        bid = block.id()
        if bid not in self.blocks:
            count = block.get_num_arguments()
            args = tuple(self._value(block.get_argument(i)) for i in range(count))
            names = tuple(_argument_name(block.get_argument(i)) for i in range(count))
            self.blocks[bid] = Block(args, [], names)
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


def read_module(module: Any) -> Program:
    reader = _ModuleReader()
    module.walk(reader.visit)
    if reader.error is not None:
        raise reader.error
    entry = module.get_entry_func_name()
    if entry not in reader.functions or not reader.functions[entry]:
        raise Unknown(f"TTIR has no body for the kernel function '{entry}'")
    return Program(reader.functions, entry, reader.pointers)


def module_text(module: Any) -> str:
    """The TTIR module as text (for debug logs)."""
    try:
        return str(module.str())
    except Exception as exc:  # a log line must not fail the analysis
        return f"<TTIR text unavailable: {describe(exc)}>"
