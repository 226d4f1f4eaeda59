"""What is known about a launch before any operator runs: kernel info, argument and grid checks.

``kernel_info`` describes a Triton kernel once (parameters, constexprs, what autotune configs
and heuristics provide); ``make_launch_spec`` binds and checks a launch's arguments and splits
what tracing must see (tensors, SymInts, descriptor bases) from constants; ``trace_grid`` turns
a grid into what a node holds (Note [traced grids]); ``is_plain`` says whether a launch or an
operator call involves anything a dispatcher must see.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import operator
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from ._compat import config_kwargs, dispatch_stack_len, functorch_interpreter
from .descriptors import DESCRIPTORS_KEY, describe, is_descriptor
from .grid_watch import GridWatch
from .tuples import TUPLES_KEY, element_name, flatten, holds_traced

_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
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
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    _KERNEL_TYPES = (JITFunction, Autotuner, Heuristics, InterpretedFunction)
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


class KernelWrapper:
    """The base of ``kernel.TritonKernel``: modules below the launch path (the analysis'
    frontend) recognise a wrapped kernel by it without importing the launch path."""

    __slots__ = ()
    kernel: Any  # the wrapped Triton kernel


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


# Note [kernel keys]
# The cache of kernel descriptions is keyed by ``kernel_key(kernel)``, ``object.__hash__``: the
# object's address (rotated), computed in C whatever hash the kernel's class defines
# (``JITFunction`` hashes its source), and unique among live objects as ``id()`` is. Not ``id()``:
# it raises the ``builtins.id`` audit event, so where an audit hook is installed every call runs
# it (~0.15-0.2 us, measured on the GPU machine, which has one; ``object.__hash__`` ~0.06 us there
# and here). ``wrap_triton`` looks a kernel up on every launch.
kernel_key: Callable[[object], int] = object.__hash__

# kernel_key(kernel) -> (weakref to kernel, info); entries leave with their kernel.
_infos: dict[int, tuple[weakref.ref[Any], KernelInfo]] = {}
_infos_lock = threading.RLock()  # reentrant: its weakref callback may run inside any allocation


def kernel_info(kernel: object) -> KernelInfo:
    """Cached ``KernelInfo`` of a Triton kernel object."""
    key = kernel_key(kernel)
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


class LaunchKind(enum.Enum):
    """How a launch (or an operator call) must run, from one look at the modes and its arguments."""

    PLAIN = "plain"  # no mode, plain tensors: the raw kernel (no dispatcher work)
    UNDER_MODE = "under a mode"  # a dispatch mode or a functorch transform is active: dispatch
    TRACED_VALUES = "traced values"  # no mode, but a tensor subclass, a meta tensor or a SymInt


_PLAIN, _UNDER_MODE, _TRACED_VALUES = LaunchKind.PLAIN, LaunchKind.UNDER_MODE, LaunchKind.TRACED_VALUES


def classify(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> LaunchKind:
    """This runs on every eager launch, so it is only the cheap checks: an active dispatch
    mode (make_fx, FakeTensorMode, FunctionalTensorMode), a functorch transform
    (torch.func.functionalize, vmap, grad), a tensor subclass, a meta tensor, a SymInt.
    A functional tensor that slips through makes the raw launch fail, and the failure
    path routes it to the operator (``kernel._is_traced``).
    """
    if dispatch_stack_len() or functorch_interpreter() is not None:
        return _UNDER_MODE
    # _plain_values inlined for both (one frame per launch instead of three).
    for v in args:
        t = type(v)
        if t is Tensor or t is _Parameter:
            if v.is_meta:
                return _TRACED_VALUES
        elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
            return _TRACED_VALUES
    if kwargs:
        for v in kwargs.values():
            t = type(v)
            if t is Tensor or t is _Parameter:
                if v.is_meta:
                    return _TRACED_VALUES
            elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
                return _TRACED_VALUES
    return _PLAIN


def is_plain(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
    """True when no tracing mode or traced tensor is involved (``classify``): run the raw kernel."""
    return classify(args, kwargs) is _PLAIN


def _plain_values(values: Iterable[Any]) -> bool:
    for v in values:
        t = type(v)
        if t is Tensor or t is _Parameter:
            if v.is_meta:
                return False
        elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
            return False
    return True


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
    written += [
        n for n, v in before.items() if v is not None and _version(tensors[n]) != v and n not in written
    ]
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
    source: Any = dataclasses.field(default=None, repr=False)  # the user's grid callable, for messages

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
        return traced_grid_entries(grid), None
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
    return tuple(grids), GridByConfig(tuple(keys), grid)


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
# graph recomputes it from the real sizes whenever it runs; ``dense.launch_raw`` compares it with
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
