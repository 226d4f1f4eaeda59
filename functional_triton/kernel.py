"""``wrap_triton``: one adapter over every kind of Triton kernel, and the launch path.

Eager launches (no tracing mode, plain tensors) go straight to ``kernel[grid](...)``
with no dispatcher work; anything else becomes a ``triton_kernel_wrapper_mutation``
call that tracing modes can record.
"""

from __future__ import annotations

import dataclasses
import inspect
import operator
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from ._compat import call_from_kernel, config_kwargs, explain_interpreter_failure
from .descriptors import DESCRIPTORS_KEY, describe, is_descriptor
from .grid_watch import GridWatch
from .tuples import TUPLES_KEY, element_name, flatten, holds_traced

_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
_PLAIN_TENSOR_TYPES = (Tensor, torch.nn.Parameter)
_Parameter = torch.nn.Parameter
_CONSTANT_TYPES = frozenset({int, float, bool, str, type(None)})
_TRACEABLE_TYPES = (Tensor, *_SYM_TYPES)
GridType = Sequence[Any] | Callable[[dict[str, Any]], Sequence[Any]]


_KERNEL_TYPES: tuple[type, ...] = ()


def _triton_kernel_types() -> tuple[type, ...]:
    global _KERNEL_TYPES
    if _KERNEL_TYPES:
        return _KERNEL_TYPES
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    types: list[type] = [JITFunction, Autotuner, Heuristics]
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every supported triton has it
        pass
    else:
        types.append(InterpretedFunction)
    _KERNEL_TYPES = tuple(types)
    return _KERNEL_TYPES


_LAUNCH_OPTIONS: frozenset[str] = frozenset()


def launch_option_names() -> frozenset[str]:
    """Keywords a launch accepts besides the kernel's parameters (num_warps, num_stages, ...)."""
    global _LAUNCH_OPTIONS
    if _LAUNCH_OPTIONS:
        return _LAUNCH_OPTIONS
    names = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug"}
    for module, cls_name in (
        ("triton.backends.nvidia.compiler", "CUDAOptions"),
        ("triton.backends.amd.compiler", "HIPOptions"),
    ):
        try:
            cls = getattr(__import__(module, fromlist=[cls_name]), cls_name)
            names.update(f.name for f in dataclasses.fields(cls))
        except (ImportError, AttributeError, TypeError):
            continue
    _LAUNCH_OPTIONS = frozenset(names)
    return _LAUNCH_OPTIONS


@dataclasses.dataclass(frozen=True)
class KernelInfo:
    """What the launch path needs to know about a kernel; holds no reference to it."""

    name: str
    fn: Callable[..., Any]
    signature: inspect.Signature
    arg_names: tuple[str, ...]
    constexpr_names: frozenset[str]
    # Parameters that @triton.autotune configs or @triton.heuristics supply.
    provided_names: frozenset[str]
    interpreted: bool
    # Every keyword a launch may pass: parameters and launch options.
    keyword_names: frozenset[str]


def _is_constexpr(annotation: object) -> bool:
    import triton.language as tl

    if annotation is tl.constexpr:
        return True
    return isinstance(annotation, str) and annotation.split(".")[-1] == "constexpr"


def _describe(kernel: object) -> KernelInfo:
    from triton.runtime.autotuner import Autotuner, Heuristics

    provided: set[str] = set()
    inner: Any = kernel
    while isinstance(inner, (Autotuner, Heuristics)):
        if isinstance(inner, Autotuner):
            for config in inner.configs:
                provided.update(config_kwargs(config))  # num_warps etc. too: triton binds them all
        else:
            provided.update(inner.values)
        inner = inner.fn
    fn = inner.fn
    signature = inspect.signature(fn)
    names = tuple(signature.parameters)
    constexprs = frozenset(p.name for p in signature.parameters.values() if _is_constexpr(p.annotation))
    return KernelInfo(
        name=getattr(fn, "__name__", type(kernel).__name__),
        fn=fn,
        signature=signature,
        arg_names=names,
        constexpr_names=constexprs,
        provided_names=frozenset(provided) & frozenset(names),
        interpreted=type(inner).__name__ == "InterpretedFunction",
        keyword_names=frozenset(names) | launch_option_names(),
    )


# id(kernel) -> (weakref to kernel, info); entries leave with their kernel.
_infos: dict[int, tuple[weakref.ref[Any], KernelInfo]] = {}
_infos_lock = threading.RLock()  # reentrant: its weakref callback may run inside any allocation


def kernel_info(kernel: object) -> KernelInfo:
    """Cached ``KernelInfo`` of a Triton kernel object."""
    key = id(kernel)
    hit = _infos.get(key)
    if hit is not None and hit[0]() is kernel:
        return hit[1]
    info = _describe(kernel)
    # The callback may run at interpreter exit, after this module's globals were set to None:
    # it reaches the cache and its lock through its own closure, never through the module.
    infos, lock = _infos, _infos_lock

    def forget(_: weakref.ref[Any]) -> None:
        with lock:
            if infos.get(key, (None,))[0] is ref:
                del infos[key]

    ref = weakref.ref(kernel, forget)
    with _infos_lock:
        _infos[key] = (ref, info)
    return info


_dispatch_stack_len = torch._C._len_torch_dispatch_stack
_functorch_stack = torch._C._functorch.peek_interpreter_stack


def _is_plain(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """True when no tracing mode or traced tensor is involved: launch the raw kernel.

    This runs on every eager launch, so it is only the cheap checks: an active dispatch
    mode (make_fx, FakeTensorMode, FunctionalTensorMode), a functorch transform
    (torch.func.functionalize, vmap, grad), a tensor subclass, a meta tensor, a SymInt.
    A functional tensor that slips through makes the raw launch fail, and the failure
    path routes it to the operator (``_is_traced``).
    """
    if _dispatch_stack_len() or _functorch_stack() is not None:
        return False
    # _plain_values inlined, for both (one frame per launch instead of three).
    for v in args:
        t = type(v)
        if t is Tensor or t is _Parameter:
            if v.is_meta:
                return False
        elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
            return False
    if kwargs:
        for v in kwargs.values():
            t = type(v)
            if t is Tensor or t is _Parameter:
                if v.is_meta:
                    return False
            elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
                return False
    return True


def _plain_values(values: Iterable[Any]) -> bool:
    for v in values:
        t = type(v)
        if t is Tensor or t is _Parameter:
            if v.is_meta:
                return False
        elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
            return False
    return True


def _is_eager(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Like ``_is_plain``, for a user's launch; False also when a meta tensor is among the arguments."""
    if _dispatch_stack_len() or _functorch_stack() is not None:
        return False
    # _plain_values inlined, for both (one frame per launch instead of three).
    for v in args:
        t = type(v)
        if t is Tensor or t is _Parameter:
            if v.is_meta:
                return False
        elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
            return False
    if kwargs:
        for v in kwargs.values():
            t = type(v)
            if t is Tensor or t is _Parameter:
                if v.is_meta:
                    return False
            elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
                return False
    return True


def _refuse_meta(
    kernel: Any, info: KernelInfo, grid: GridType, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """An eager launch (no mode) given a meta tensor: raise naming it, never launch.

    Meta tensors hold no data. The interpreter's raw launch raises on them; a compiled kernel's
    raw launch takes their null data pointer and faults the device (an illegal memory access
    that poisons the CUDA context), so the wrapped launch refuses before launching. Reaching the
    operator's meta rule instead would do nothing, silently.
    """
    if _dispatch_stack_len() or _functorch_stack() is not None:
        return
    meta = [n for n, v in bind_arguments(info, args, kwargs).items() if isinstance(v, Tensor) and v.is_meta]
    if not meta or any(
        isinstance(v, Tensor) and not v.is_meta and type(v) not in (Tensor, _Parameter)
        for v in (*args, *kwargs.values())
    ):
        return  # a tensor subclass (fake, functional) takes the operator's path
    make_launch_spec(kernel, info, grid, args, kwargs)  # mixed devices raise naming the argument
    raise ValueError(
        f"argument '{meta[0]}' of {info.name} is a meta tensor: it holds no data, so the kernel "
        "cannot run on it (trace the program with FakeTensorMode or make_fx to run it without data)"
    )


def _is_traced(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """The slower, complete check: any functional tensor among the arguments."""
    return any(
        isinstance(v, Tensor) and torch._is_functional_tensor(v)
        for values in (args, kwargs.values())
        for v in values
    )


def _is_int_like(g: object) -> bool:
    if isinstance(g, bool):
        return False
    if isinstance(g, (int, torch.SymInt)):
        return True
    # The interpreter hands grid callables its own integer tensors (numpy-backed).
    dtype = getattr(g, "dtype", None)
    if dtype is not None:
        return "int" in str(dtype)
    try:
        operator.index(g)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


def check_grid(grid: object) -> None:
    """Raise if ``grid`` is neither a callable nor a tuple of 1 to 3 ints / SymInts."""
    if callable(grid):
        return
    if not isinstance(grid, (tuple, list)):
        raise TypeError(
            "grid must be a tuple of 1 to 3 ints or a callable meta -> tuple, "
            f"got {type(grid).__name__} {grid!r}"
        )
    if not 1 <= len(grid) <= 3:
        raise ValueError(f"grid must have 1 to 3 entries, got {tuple(grid)!r}")
    for i, g in enumerate(grid):
        if not _is_int_like(g):
            raise TypeError(
                f"grid entries must be ints or SymInts, got {type(g).__name__} {g!r} "
                f"at position {i} of grid {tuple(grid)!r}"
            )


def _version(t: Tensor) -> int | None:
    """The tensor's version counter; None for an inference tensor, which has none."""
    if t.is_inference():
        return None
    return int(t._version)


def _run_grid(
    grid: Callable[..., Any], meta: dict[str, Any], tensors: Mapping[str, Tensor]
) -> tuple[Any, list[str]]:
    """Call a grid callable: its result and the tensors it wrote.

    Version counters see writes; writes to tensors without one (inference tensors) are seen by
    watching the ops the callable runs (Note [grid watch]).
    """
    before = {n: _version(t) for n, t in tensors.items()}
    if None in before.values():
        with GridWatch(tensors) as seen:
            result = grid(meta)
        written = list(seen.written)
    else:
        result, written = grid(meta), []
    written += [n for n, v in before.items() if v is not None and _version(tensors[n]) != v]
    return result, written


def _check_grid_result(result: object, written: Sequence[str]) -> tuple[Any, ...]:
    if written:
        name = written[0]
        raise RuntimeError(f"the grid callable wrote to tensor '{name}'; a grid must not mutate tensors")
    if not isinstance(result, (tuple, list)):
        raise TypeError(
            f"the grid callable must return a tuple of 1 to 3 ints, got {type(result).__name__} {result!r}"
        )
    check_grid(result)
    return tuple(result)


def checked_grid_fn(grid: Callable[..., Any], tensors: Mapping[str, Tensor]) -> Callable[..., Any]:
    """Wrap a grid callable so that a bad result or a tensor write raises, naming the grid.

    Used where the callable runs on real tensors (eager, and graphs whose grid could not be
    evaluated while tracing): a symbolic entry there is a size left over from tracing.
    """

    def grid_fn(meta: dict[str, Any]) -> tuple[Any, ...]:
        result, written = _run_grid(grid, meta, tensors)
        checked = _check_grid_result(result, written)
        stale = [g for g in checked if isinstance(g, torch.SymInt)]
        if stale:
            raise RuntimeError(
                f"the grid callable returned the symbolic size {stale[0]} at run time: it holds a size "
                "from tracing (a closure over a traced tensor's size?); read sizes from the meta "
                "argument or the tensors in it instead"
            )
        return checked

    return grid_fn


_Key = tuple[tuple[str, Any], ...]


def _grid_metas(kernel: Any, bound: Mapping[str, Any]) -> list[tuple[_Key, dict[str, Any]]]:
    """The meta dicts a grid callable will see, one per autotune config, heuristics applied,
    each with the config and heuristic values that tell it apart (in launch order, like triton)."""
    from triton.runtime.autotuner import Autotuner, Heuristics

    params = frozenset(kernel_info(kernel).arg_names)  # triton hands the grid the parameters only
    metas: list[tuple[_Key, dict[str, Any]]] = [((), dict(bound))]
    inner = kernel
    while isinstance(inner, (Autotuner, Heuristics)):
        if isinstance(inner, Autotuner) and inner.configs:
            metas = [
                ((*key, *sorted(values.items())), {**m, **values})
                for key, m in metas
                for c in inner.configs
                for values in [{k: v for k, v in config_kwargs(c).items() if k in params}]
            ]
        elif isinstance(inner, Heuristics):
            metas = [_apply_heuristics(inner, key, m) for key, m in metas]
        inner = inner.fn
    return metas


def _apply_heuristics(heuristics: Any, key: _Key, meta: dict[str, Any]) -> tuple[_Key, dict[str, Any]]:
    found = []
    for name, heuristic in heuristics.values.items():
        try:
            meta[name] = heuristic(meta)
        except Exception:  # noqa: BLE001 - it runs again, for real, at launch time
            continue
        found.append((name, meta[name]))
    return (*key, *found), meta


def _same_grid(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Equal without guarding: symbolic entries are equal only when they are the same object."""
    if len(a) != len(b):
        return False
    return all(x is y or (type(x) is int and type(y) is int and x == y) for x, y in zip(a, b))


def _equal(a: Any, b: Any) -> bool:
    try:  # the interpreter hands non-constexpr parameters to the grid as 1-element arrays
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable: not this config
        return False


@dataclasses.dataclass(frozen=True, eq=False)
class GridByConfig:
    """The grid of a node whose grid callable gave each autotune config its own grid.

    The node's grid is then a tuple of grids, one per key; at launch time the meta triton
    hands the grid holds the values of the config it chose (Note [traced grids]).
    """

    keys: tuple[_Key, ...]

    def chooser(self, grids: Sequence[Sequence[Any]]) -> Callable[[Mapping[str, Any]], tuple[int, ...]]:
        def grid_fn(meta: Mapping[str, Any]) -> tuple[int, ...]:
            for key, grid in zip(self.keys, grids):
                if all(k in meta and _equal(meta[k], v) for k, v in key):
                    return tuple(int(g) for g in grid)
            raise AssertionError(
                f"functional_triton internal error: no traced grid for the launch's config {dict(meta)}"
            )

        return grid_fn


# Note [traced grids]
# A grid callable evaluated while tracing sees the traced sizes: under dynamic shapes its result
# is the symbolic grid (``triton.cdiv(n, meta["BLOCK"])`` with ``n = x.numel()`` a SymInt). That
# result, not the callable, goes into the node: called again when the graph runs, a callable that
# closes over a traced size would only ever see the trace-time value. One grid per autotune
# config (and heuristic value); when they all agree (no config in the grid, or a single config)
# the node holds that one grid, as a static grid would. When they differ, the node holds them
# all and the side table a ``GridByConfig`` that picks, at launch time, the grid of the config
# triton chose (the meta triton hands the grid holds the config's values).
# A grid that reads tensor data gets, under dynamic shapes, an unbacked symbolic size that the
# graph itself computes from the data when it runs. The callable itself is kept, and called at run
# time on the real arguments as in eager, only when it cannot be evaluated while tracing (it
# raised, e.g. reading data a fake tensor lacks); a symbolic entry it returns then raises.


def trace_grid(kernel: Any, grid: GridType, bound: Mapping[str, Any]) -> tuple[tuple[Any, ...] | None, Any]:
    """The node's grid and the side table's grid callable for a traced launch (Note [traced grids]).

    A bad grid, or a grid callable that writes a tensor, raises now: at run time the callable
    would see the graph's tensors, and a write could not be reported against the user's program.
    """
    if not callable(grid):
        return traced_grid_entries(grid), None  # type: ignore[arg-type]
    tensors = _tensors_by_name(bound)
    keys: list[_Key] = []
    grids: list[tuple[Any, ...]] = []
    for key, meta in _grid_metas(kernel, bound):
        try:
            result, written = _run_grid(grid, meta, tensors)
        except Exception:  # noqa: BLE001 - e.g. data a fake tensor lacks: called at launch time
            return None, grid
        checked = _check_grid_result(result, written)
        keys.append(key)
        grids.append(traced_grid_entries(checked))
    if all(_same_grid(g, grids[0]) for g in grids):
        return grids[0], None
    return tuple(grids), GridByConfig(tuple(keys))


def traced_grid_entries(grid: Sequence[Any]) -> tuple[Any, ...]:
    """A grid as an FX node can hold it: ints and SymInts (numpy integers and 0-d tensors converted)."""
    return tuple(_traced_entry(i, g, grid) for i, g in enumerate(grid))


def _traced_entry(position: int, g: Any, grid: Sequence[Any]) -> Any:
    if type(g) is int or isinstance(g, torch.SymInt):
        return g
    if not isinstance(g, Tensor):
        return operator.index(g)  # numpy integers, int subclasses (check_grid refused the rest)
    where = f"grid entry {position} of {tuple(grid)!r}"
    if g.numel() != 1 or g.is_floating_point() or g.is_complex() or g.dtype is torch.bool:
        raise TypeError(f"{where} is a {g.dtype} tensor of {g.numel()} elements; a grid entry must be an int")
    try:
        value = g.item()
    except Exception as e:
        raise TypeError(
            f"{where} is a tensor: its value is data, known only when the graph runs. Trace with "
            "dynamic shapes (make_fx(..., tracing_mode='symbolic')) to make it a symbolic size, or "
            "pass an int"
        ) from e
    if isinstance(value, torch.SymInt):
        return value
    raise TypeError(
        f"{where} is a tensor: a traced graph would launch with the value it holds now ({value}), "
        "not the one it holds when the graph runs; pass int(...) of it if that is intended"
    )


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """One launch, bound and split: what the mutation operator is called with."""

    kernel: Any
    info: KernelInfo
    grid: GridType
    tensors: dict[str, Any]  # tensors and symbolic scalars, by parameter name
    # everything else, by parameter name; DESCRIPTORS_KEY holds TensorDescriptor metadata,
    # TUPLES_KEY the templates of tuple arguments (Note [tuple arguments])
    constants: dict[str, Any]
    # (node grid, side-table grid callable) as trace_grid gives them (Note [traced grids]);
    # None: the grid as given (a tuple in the node, or the callable in the side table)
    traced_grid: tuple[Any, Any] | None = None


def bind_arguments(info: KernelInfo, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Bind a launch's arguments by name, defaults applied; raise naming a bad argument.

    Launch options (``num_warps=...``) are kept as they are, after the parameters.
    """
    params = set(info.arg_names)
    options = {k: v for k, v in kwargs.items() if k not in params and k in info.keyword_names}
    kwargs = {k: v for k, v in kwargs.items() if k not in options}
    try:
        bound = info.signature.bind_partial(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{info.name}() {e}") from None
    bound.apply_defaults()
    missing = [n for n in info.arg_names if n not in bound.arguments and n not in info.provided_names]
    if missing:
        raise TypeError(f"{info.name}() missing a required argument: '{missing[0]}'")
    return {**bound.arguments, **options}


def _device_error(info: KernelInfo, name: str, t: Tensor) -> str | None:
    if info.interpreted or t.device.type != "cpu":
        return None
    return (
        f"argument '{name}' is on cpu, but {info.name} runs on cuda "
        "(move it to a GPU, or set TRITON_INTERPRET=1 before importing triton)"
    )


# Note [constexpr guards]
# A tl.constexpr must be a Python constant when the kernel is compiled, but real kernels compute
# them from shapes (Liger: BLOCK_SIZE = next_power_of_2(n_cols)), which are SymInts under dynamic
# shapes. Such a value is specialised to the int it has for the traced inputs: ``int()`` on it
# installs a guard in the shape environment (torch.compile recompiles when it fails), and the
# symbolic value itself is passed to the operator under ``CONSTEXPR_GUARD_PREFIX + name``, so the
# graph recomputes it from the real sizes whenever it runs; ``hops.launch_raw`` compares it with
# the specialised value (names listed under ``CONSTEXPR_GUARDS_KEY`` in the constants) and raises
# a short ValueError when they differ, instead of launching a kernel compiled for other sizes.
# A data-dependent value (no hint) cannot be specialised and is refused.
CONSTEXPR_GUARD_PREFIX = "constexpr_guard:"  # not an identifier: never a kernel parameter
CONSTEXPR_GUARDS_KEY = "__functional_triton_constexpr_guards__"


def _specialise_constexpr(info: KernelInfo, name: str, value: Any) -> Any:
    """The Python constant a symbolic constexpr has for the traced inputs (guarded)."""
    convert = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(value)]
    try:
        return convert(value)
    except Exception:  # noqa: BLE001 - GuardOnDataDependentSymNode and kin: no value to specialise on
        raise TypeError(
            f"argument '{name}' of {info.name} is a tl.constexpr and got a data-dependent value; "
            "a constexpr must be known when the program is traced"
        ) from None


def make_launch_spec(
    kernel: Any, info: KernelInfo, grid: GridType, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> LaunchSpec:
    """Bind and validate a launch; split tensors and SymInts from constants.

    Tensors, SymInts and descriptors inside tuple arguments are traced too (Note [tuple arguments]).
    """
    check_grid(grid)
    bound = bind_arguments(info, args, kwargs)
    split = _Split(info)
    constants: dict[str, Any] = {}
    templates: dict[str, tuple[Any, ...]] = {}
    for name, value in bound.items():
        if isinstance(value, tuple) and holds_traced(value, _is_traceable_leaf):
            if name in info.constexpr_names:
                raise TypeError(
                    f"argument '{name}' of {info.name} is a tl.constexpr and cannot hold tensors "
                    f"or symbolic values, got {_short(value)}"
                )
            templates[name] = flatten(name, value, split.take)
        elif not split.take(name, value):
            constants[name] = value
    split.check_devices()
    if split.descriptors:
        constants[DESCRIPTORS_KEY] = split.descriptors
    if templates:
        constants[TUPLES_KEY] = templates
    if split.specialised:  # Note [constexpr guards]
        constants.update(split.specialised)
        constants[CONSTEXPR_GUARDS_KEY] = tuple(split.specialised)
    return LaunchSpec(kernel, info, grid, split.tensors, constants)


def _is_traceable_leaf(value: Any) -> bool:
    return isinstance(value, _TRACEABLE_TYPES) or is_descriptor(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Split:
    """Collects a launch's traced arguments (tensors, SymInts, descriptor bases) by name."""

    def __init__(self, info: KernelInfo) -> None:
        self.info = info
        self.tensors: dict[str, Any] = {}
        self.descriptors: dict[str, Any] = {}
        self.devices: set[torch.device] = set()
        self.specialised: dict[str, Any] = {}  # Note [constexpr guards]

    def take(self, name: str, value: Any) -> bool:
        """Record ``value`` if it must be traced; False for a constant."""
        info = self.info
        if is_descriptor(value):
            self.descriptors[name] = describe(name, value)
            value = value.base
        if isinstance(value, Tensor):
            if name in info.constexpr_names:
                raise TypeError(f"argument '{name}' of {info.name} is a tl.constexpr and cannot be a tensor")
            if value.layout != torch.strided:
                raise TypeError(
                    f"argument '{name}' of {info.name} is a tensor with layout {value.layout}; Triton "
                    "kernels take strided tensors (pass .to_dense(), or the sparse tensor's values())"
                )
            message = _device_error(info, name, value)
            if message is not None:
                raise ValueError(message)
            self.devices.add(value.device)
        elif isinstance(value, _SYM_TYPES):
            if name in info.constexpr_names:  # Note [constexpr guards]
                self.specialised[name] = _specialise_constexpr(info, name, value)
                name = CONSTEXPR_GUARD_PREFIX + name
        else:
            return False
        self.tensors[name] = value
        return True

    def check_devices(self) -> None:
        if len(self.devices) > 1:
            raise ValueError(
                f"the tensor arguments of {self.info.name} are on several devices: "
                + ", ".join(f"'{n}' on {t.device}" for n, t in self.tensors.items() if isinstance(t, Tensor))
            )


def _grid_tensors(info: KernelInfo, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Tensor]:
    return _tensors_by_name({**dict(zip(info.arg_names, args)), **kwargs})


def _tensors_by_name(values: Mapping[str, Any]) -> dict[str, Tensor]:
    """The tensors among launch arguments, those inside tuples by their derived names."""
    tensors: dict[str, Tensor] = {}
    for name, value in values.items():
        if isinstance(value, Tensor):
            tensors[name] = value
        elif isinstance(value, tuple):
            tensors.update(_tensors_by_name({element_name(name, i): v for i, v in enumerate(value)}))
    return tensors


def _launch(
    kernel: Any, info: KernelInfo, grid: GridType, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if isinstance(grid, list):  # compiled triton takes lists; its interpreter does not
        grid = tuple(grid)
    if _is_eager(args, kwargs):
        if type(grid) is tuple and 0 < len(grid) < 4:
            for g in grid:  # the common grid, 1 to 3 ints, needs no more checking
                if type(g) is not int:
                    check_grid(grid)
                    break
        else:
            check_grid(grid)
        if kwargs and not info.keyword_names.issuperset(kwargs):  # the interpreter would silently drop it
            bind_arguments(info, args, kwargs)
        if callable(grid):
            grid = checked_grid_fn(grid, _grid_tensors(info, args, kwargs))
        try:
            return kernel.run(*args, grid=grid, warmup=False, **kwargs)  # what kernel[grid](...) runs
        except Exception as e:
            return _after_failure(e, kernel, info, grid, args, kwargs)
    _refuse_meta(kernel, info, grid, args, kwargs)
    return _launch_traced(kernel, info, grid, args, kwargs)


def _after_failure(
    error: Exception,
    kernel: Any,
    info: KernelInfo,
    grid: GridType,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    """A raw launch raised: trace it if a functional tensor slipped through, else explain it."""
    if _is_traced(args, kwargs):
        return _launch_traced(kernel, info, grid, args, kwargs)
    # Name the argument if the launch itself was malformed; else the kernel's own error.
    try:
        spec = make_launch_spec(kernel, info, grid, args, kwargs)
    except (TypeError, ValueError) as ours:
        raise ours from error
    meta = [n for n, t in spec.tensors.items() if isinstance(t, Tensor) and t.is_meta]
    if meta:
        raise ValueError(
            f"argument '{meta[0]}' of {info.name} is a meta tensor: it holds no data, so the kernel "
            "cannot run on it (trace the program with FakeTensorMode or make_fx to run it without data)"
        ) from error
    explain_interpreter_failure(error)
    raise error


def _launch_traced(
    kernel: Any, info: KernelInfo, grid: GridType, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    from .hops import launch_traced

    if isinstance(grid, list):
        grid = tuple(grid)
    spec = make_launch_spec(kernel, info, grid, args, kwargs)
    # Only a grid callable reads the bound arguments (a second bind per traced launch otherwise).
    bound = bind_arguments(info, args, kwargs) if callable(grid) else {}
    launch_traced(dataclasses.replace(spec, traced_grid=trace_grid(kernel, grid, bound)))


_new_object = object.__new__


class _BoundLaunch:
    __slots__ = ("_kernel", "_info", "_grid")

    def __init__(self, kernel: Any, info: KernelInfo, grid: GridType) -> None:
        self._kernel = kernel
        self._info = info
        self._grid = grid

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kernel, info, grid = self._kernel, self._info, self._grid
        # The common eager case, inlined (this runs on every launch): a tuple of 1 to 3 ints,
        # known keywords, no mode, plain tensors; then exactly what kernel[grid](...) runs.
        # Any other value or state takes _launch, which checks everything (_is_eager inlined here).
        if (
            type(grid) is tuple
            and 0 < len(grid) < 4  # type: ignore[arg-type]
            and not _dispatch_stack_len()
            and _functorch_stack() is None
            and (not kwargs or info.keyword_names.issuperset(kwargs))
        ):
            for g in grid:  # type: ignore[union-attr]
                if type(g) is not int:
                    break
            else:
                for v in args:
                    t = type(v)
                    if t is Tensor or t is _Parameter:
                        if v.is_meta:
                            break
                    elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
                        break
                else:
                    for v in kwargs.values():
                        t = type(v)
                        if t is Tensor or t is _Parameter:
                            if v.is_meta:
                                break
                        elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
                            break
                    else:
                        try:
                            return kernel.run(*args, grid=grid, warmup=False, **kwargs)
                        except Exception as e:
                            return _after_failure(e, kernel, info, grid, args, kwargs)
        return _launch(kernel, info, grid, args, kwargs)


# Note [wrapped kernels as callees]
# A wrapped ``@triton.jit`` helper stays callable from other kernels, as the helper itself is:
# replacing a module's ``silu`` by ``wrap_triton(silu)`` must not break the kernels that call
# ``silu(x)``. Three callers look the name up:
#   - the interpreter runs the caller as Python and calls the object: ``__call__`` calls the kernel;
#   - triton's code generator accepts a global that is a JITFunction or a triton builtin, and calls
#     a builtin with its own generator when the signature asks for ``_generator``: ``__call__``
#     then emits the call of the wrapped JITFunction, exactly as for the helper itself
#     (``_compat.call_from_kernel``);
#   - the dependency finder behind a caller's cache key hashes the objects an "aggregate" lists in
#     ``hash_attrs``: the wrapped kernel, so editing the helper still invalidates its callers.
# The wrapper is not a JITFunction subclass on purpose: Dynamo would then take it for a raw
# kernel and route its launches through PyTorch's own operator instead of this library's.


class TritonKernel:
    """A Triton kernel whose launches tracing can see. Made by ``wrap_triton``."""

    __slots__ = ("kernel", "info")
    # Note [wrapped kernels as callees]: the markers triton reads (triton 3.6 and 3.9).
    __triton_builtin__ = True
    __triton_aggregate__ = True
    kernel: Any
    info: KernelInfo

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.info = kernel_info(kernel)

    @property
    def hash_attrs(self) -> tuple[Any, ...]:
        """What a caller's cache key hashes for this object (Note [wrapped kernels as callees])."""
        return (self.kernel,)

    def __call__(self, *args: Any, _generator: Any = None, **kwargs: Any) -> Any:
        """Called from inside another kernel: behave like the wrapped kernel there."""
        if _generator is not None:  # triton's code generator (Note [wrapped kernels as callees])
            return call_from_kernel(_generator, self.kernel, args, kwargs)
        return self.kernel(*args, **kwargs)  # the interpreter; outside a kernel, triton's own error

    def __getitem__(self, grid: GridType) -> Callable[..., Any]:
        return _BoundLaunch(self.kernel, self.info, grid)

    def run(self, *args: Any, grid: GridType | None = None, **kwargs: Any) -> Any:
        """Launch like ``kernel.run(*args, grid=grid, **kwargs)``."""
        if grid is None:
            raise TypeError(f"{self.info.name}.run() needs a grid: pass grid=(n,) or grid=callable")
        kwargs.pop("warmup", None)
        return _launch(self.kernel, self.info, grid, args, kwargs)

    def __repr__(self) -> str:
        return f"wrap_triton({self.info.name})"


def _what(obj: object) -> str:
    name = getattr(obj, "__name__", None)
    kind = type(obj).__name__
    return f"{kind} '{name}'" if name else kind


def wrap_triton(kernel: Any) -> TritonKernel:
    """Make a Triton kernel's launches visible to tracing (make_fx, functionalize, AOTAutograd).

    Args:
        kernel: a ``@triton.jit``, ``@triton.autotune`` or ``@triton.heuristics`` kernel
            (stacked too), or the ``InterpretedFunction`` ``@triton.jit`` returns under
            ``TRITON_INTERPRET=1``.

    Returns:
        A kernel launched as ``wrap_triton(k)[grid](*args)`` or
        ``wrap_triton(k).run(*args, grid=grid)``: in eager exactly ``k[grid](*args)``;
        under tracing a ``triton_kernel_wrapper_mutation`` call.

    Raises:
        TypeError: ``kernel`` is not a Triton kernel.

    Example:
        >>> import functional_triton as ft
        >>> ft.wrap_triton(add_kernel)[(n // 128,)](x, y, out, n, BLOCK=128)  # doctest: +SKIP
    """
    # The per-launch path (``wrap_triton(k)[grid](...)`` made on every call): a kernel described
    # before passed the type check below; a new wrapper is all it costs (none is cached: a cached
    # wrapper would keep its kernel alive).
    hit = _infos.get(id(kernel))
    if hit is not None and hit[0]() is kernel:
        wrapper = _new_object(TritonKernel)
        wrapper.kernel = kernel
        wrapper.info = hit[1]
        return wrapper
    if isinstance(kernel, TritonKernel):
        return kernel
    if not isinstance(kernel, _triton_kernel_types()):
        hint = " (missing @triton.jit?)" if inspect.isfunction(kernel) else ""
        raise TypeError(
            "wrap_triton() expects a @triton.jit, @triton.autotune or @triton.heuristics "
            f"kernel, got {_what(kernel)}{hint}"
        )
    return TritonKernel(kernel)


__all__ = ["wrap_triton", "TritonKernel", "LaunchSpec", "kernel_info"]
