"""What a @triton.autotune hook writes: the hook, run once on stand-ins for the kernel's arguments.

Triton calls a ``triton.Config(pre_hook=...)`` before every launch with that config (benchmarking and
the real launch), and a user ``autotune(pre_hook=..., post_hook=...)`` around each benchmarking run, each
with the bound arguments as a dict (name -> value, the config's kwargs included). A hook is Python that
may zero an output, set a descriptor's block shape, or do anything at all.

Note [hook stand-ins]
``run_hook`` calls the hook once, with every tensor replaced by a stand-in: a tensor subclass over a
meta tensor of the same sizes, strides, offset and dtype (reporting the real device), named by the
argument it stands for; a host TensorDescriptor becomes a copy over the stand-in of its base. Under a
dispatch mode that sees every tensor op, a write to a stand-in (or to a view of one) adds its argument to
the written set; data reads (``.item()``, ``data_ptr()``, storage access), a write to a tensor that is
not an argument nor made by the hook, a hook that raises, one that assigns a global or nonlocal, and any
symbolic argument (the hook could branch on a value the trace does not fix) make the answer unknown.
Reading or setting descriptor metadata is not a write: the launch sees the new metadata, so the caller
analyses the kernel with the descriptors as the hook left them. Python effects the hook has beyond
these (attributes of other objects, I/O) are not observed, and happen once more at analysis time.
"""

from __future__ import annotations

import copy
import dataclasses
import dis
import types
import weakref
from collections.abc import Mapping
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from . import _compat
from .ttir import Unknown, describe
from .tuples import element_name


@dataclasses.dataclass(frozen=True)
class HookRun:
    """One hook call: the arguments it wrote, and each descriptor argument as it left it."""

    written_names: frozenset[str]
    descriptors: dict[str, object]  # argument name -> the descriptor (or tuple holding some) after the hook


class _Escape(Exception):
    """The hook did something the stand-ins cannot observe or answer."""


def run_hook(hook: object, args: Mapping[str, object], what: str, **extra: object) -> HookRun:
    """Call ``hook(nargs, **extra)`` on stand-ins for `args` (Note [hook stand-ins]).

    `what` names the hook in messages ("a triton.Config pre_hook"). Raises Unknown with the reason when
    the hook cannot be analysed.
    """
    _check_function(hook, what)
    recorder = _Recorder()
    with _compat.outside_tracing():  # stand-ins and the hook's ops must not reach a trace in progress
        nargs = {name: _stand_in(name, value, what, recorder) for name, value in args.items()}
        descriptors = {name: value for name, value in nargs.items() if holds(value)}
        try:
            with recorder:
                hook(nargs, **extra)  # type: ignore[operator]
        except _Escape as exc:
            raise Unknown(f"{what} {exc}") from None
        except Exception as exc:
            raise Unknown(f"{what} failed on stand-in arguments: {describe(exc)}") from None
    if recorder.escape is not None:  # caught and swallowed by the hook: still unobservable
        raise Unknown(f"{what} {recorder.escape}")
    for name, value in descriptors.items():
        _check_bases(name, value, what)
    return HookRun(frozenset(recorder.written), descriptors)


def descriptor_state(value: object) -> object:
    """The launch-relevant metadata of a descriptor argument (or a tuple holding descriptors)."""
    if isinstance(value, tuple):
        return tuple(descriptor_state(v) for v in value)
    if _is_descriptor(value):
        fields = ("shape", "strides", "block_shape", "padding", "round_f32_to_tf32")
        return tuple(_frozen(getattr(value, f, None)) for f in fields)
    return None


def _frozen(value: object) -> object:
    return tuple(value) if isinstance(value, (list, tuple, torch.Size)) else value


# --- what the hook's code may do ------------------------------------------------------------------

_GLOBAL_WRITES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})
_CELL_WRITES = frozenset({"STORE_DEREF", "DELETE_DEREF"})


def _check_function(hook: object, what: str) -> None:
    if not isinstance(hook, types.FunctionType):
        kind = type(hook).__name__
        raise Unknown(f"{what} is a {kind}, not a plain function: its effects cannot be followed")
    outer = frozenset(hook.__code__.co_freevars)
    for code in _code_objects(hook.__code__):
        for instruction in dis.get_instructions(code):
            if instruction.opname in _GLOBAL_WRITES:
                raise Unknown(f"{what} assigns the global '{instruction.argval}'")
            if instruction.opname in _CELL_WRITES and instruction.argval in outer:
                raise Unknown(f"{what} assigns the nonlocal '{instruction.argval}'")


def _code_objects(code: types.CodeType) -> list[types.CodeType]:
    found = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found.extend(_code_objects(const))
    return found


# --- stand-ins ------------------------------------------------------------------------------------


def _is_descriptor(value: object) -> bool:
    return _compat.TENSOR_DESCRIPTOR_TYPE is not None and type(value) is _compat.TENSOR_DESCRIPTOR_TYPE


def holds(value: object) -> bool:
    """Whether the argument is a host descriptor or a tuple holding one."""
    if isinstance(value, tuple):
        return any(holds(v) for v in value)
    return _is_descriptor(value)


def _stand_in(name: str, value: object, what: str, recorder: _Recorder) -> object:
    if isinstance(value, torch.Tensor):
        return _StandIn.of(name, value, what, recorder)
    if _is_descriptor(value):
        desc = copy.copy(value)
        for field in ("shape", "strides", "block_shape"):
            sizes = list(getattr(value, field))
            if not all(isinstance(s, int) for s in sizes):
                raise Unknown(f"{what} gets a descriptor '{name}' with a symbolic {field}")
            setattr(desc, field, sizes)
        desc.base = _StandIn.of(name, value.base, what, recorder)  # type: ignore[attr-defined]
        return desc
    if isinstance(value, tuple):
        parts = [_stand_in(element_name(name, i), v, what, recorder) for i, v in enumerate(value)]
        made: Any = type(value)
        return made(*parts) if hasattr(value, "_fields") else tuple(parts)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise Unknown(f"{what} gets a symbolic value for '{name}'")
    return value


def _check_bases(name: str, value: object, what: str) -> None:
    if isinstance(value, tuple):
        for i, v in enumerate(value):
            _check_bases(element_name(name, i), v, what)
    elif _is_descriptor(value):
        base = value.base  # type: ignore[attr-defined]
        if not (isinstance(base, _StandIn) and base.owner == name):
            raise Unknown(f"{what} replaced the base tensor of descriptor '{name}'")


def _concrete(sizes: Any) -> tuple[int, ...] | None:
    values = tuple(sizes)
    return values if all(isinstance(v, int) for v in values) else None


class _StandIn(torch.Tensor):
    """A tensor argument for a hook: a meta tensor inside, the argument's name (None: made by the hook)."""

    meta: torch.Tensor
    owner: str | None
    recorder: _Recorder

    @staticmethod
    def __new__(
        cls, meta: torch.Tensor, owner: str | None, device: torch.device, recorder: _Recorder
    ) -> _StandIn:
        made = torch.Tensor._make_wrapper_subclass(
            cls,
            meta.size(),
            strides=meta.stride(),
            storage_offset=meta.storage_offset(),
            dtype=meta.dtype,
            device=device,
        )
        return made

    def __init__(
        self, meta: torch.Tensor, owner: str | None, device: torch.device, recorder: _Recorder
    ) -> None:
        self.meta = meta
        self.owner = owner
        self.recorder = recorder

    @classmethod
    def of(cls, name: str, tensor: torch.Tensor, what: str, recorder: _Recorder) -> _StandIn:
        if isinstance(tensor, _StandIn):  # a descriptor an earlier hook run left
            return cls(tensor.meta, name, tensor.device, recorder)
        sizes, strides = _concrete(tensor.size()), _concrete(tensor.stride())
        offset = tensor.storage_offset()
        if sizes is None or strides is None or not isinstance(offset, int):
            raise Unknown(f"{what} gets a tensor '{name}' with a symbolic shape")
        extent = 1 + sum((s - 1) * st for s, st in zip(sizes, strides)) if all(sizes) else 0
        buffer = torch.empty(offset + extent, dtype=tensor.dtype, device="meta")
        return cls(buffer.as_strided(sizes, strides, offset), name, tensor.device, recorder)

    def data_ptr(self) -> int:
        raise self.recorder.refuse("reads a data pointer (data_ptr()), which stand-in arguments do not have")

    def untyped_storage(self) -> torch.UntypedStorage:
        raise self.recorder.refuse("reads a tensor's storage, which stand-in arguments do not have")

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        raise _Escape(f"uses a stand-in argument after the hook returned ({func})")


class _Recorder(_compat.TorchDispatchMode):
    """Sees every tensor op the hook runs: records writes to stand-ins, refuses what it cannot observe."""

    def __init__(self) -> None:
        super().__init__()
        self.written: set[str] = set()
        self.made: dict[int, weakref.ref[torch.Tensor]] = {}  # real tensors the hook created, by id
        self.escape: str | None = None

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        return self._dispatch(func, args, kwargs)

    def refuse(self, reason: str) -> _Escape:
        """The exception to raise for something unobservable; remembered even if the hook catches it."""
        self.escape = self.escape or reason
        return _Escape(reason)

    def _dispatch(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        flat, _ = tree_flatten((args, kwargs))
        stand_ins = [a for a in flat if isinstance(a, _StandIn)]
        if stand_ins and func is torch.ops.aten._local_scalar_dense.default:
            raise self.refuse("reads tensor data (.item(), bool() or similar)")
        self._record_writes(func, args, kwargs)
        if not stand_ins:
            out = func(*args, **kwargs)
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self.made[id(t)] = weakref.ref(t)
            return out
        out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
        device = stand_ins[0].device
        owners = _returned_owners(func, args, kwargs)
        if isinstance(out, (tuple, list)):
            return type(out)(self._wrap(o, owners.get(i), device) for i, o in enumerate(out))
        return self._wrap(out, owners.get(0), device)

    def _wrap(self, value: object, owner: str | None, device: torch.device) -> object:
        return _StandIn(value, owner, device, self) if isinstance(value, torch.Tensor) else value

    def _record_writes(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        for value in _written_arguments(func, args, kwargs):
            if isinstance(value, _StandIn):
                if value.owner is not None:
                    self.written.add(value.owner)
            elif isinstance(value, torch.Tensor) and not self._made(value):
                raise self.refuse(f"writes a tensor that is not one of the kernel's arguments ({func})")

    def _made(self, tensor: torch.Tensor) -> bool:
        ref = self.made.get(id(tensor))
        return ref is not None and ref() is tensor


def _schema_values(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[Any, object]]:
    schema = func._schema
    values = []
    for index, argument in enumerate(schema.arguments):
        if index < len(args):
            values.append((argument, args[index]))
        elif argument.name in kwargs:
            values.append((argument, kwargs[argument.name]))
    return values


def _written_arguments(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[object]:
    found: list[object] = []
    for argument, value in _schema_values(func, args, kwargs):
        if argument.alias_info is not None and argument.alias_info.is_write:
            found.extend(value if isinstance(value, (list, tuple)) else [value])
    return found


def _returned_owners(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[int, str | None]:
    """For each output that aliases an input (a view, an in-place op's self): that input's argument."""
    owners: dict[int, str | None] = {}
    inputs = _schema_values(func, args, kwargs)
    for index, returned in enumerate(func._schema.returns):
        if returned.alias_info is None:
            continue
        sets = set(returned.alias_info.before_set)
        for argument, value in inputs:
            if argument.alias_info is not None and sets & set(argument.alias_info.before_set):
                owners[index] = value.owner if isinstance(value, _StandIn) else None
    return owners


def _unwrap(value: object) -> object:
    if isinstance(value, _StandIn):
        return value.meta
    if isinstance(value, torch.Tensor):  # a real tensor next to stand-ins: only its geometry matters
        return torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device="meta")
    return value
