"""Watching a grid callable for writes to tensors that have no version counter.

Note [grid watch]
A grid callable must not write tensors: a traced graph cannot replay the write. Version
counters catch writes cheaply, but inference tensors have none. So where some kernel argument
has no version counter, the callable runs under this dispatch mode, which sees every ATen op it
runs: an op that writes (its schema marks the argument written) a tensor that shares storage
with a kernel argument is a write to that argument. The mode only watches; every op runs as it
would. Only then: a dispatch mode costs time on every op, and tracers (Dynamo) may not follow it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from ._compat import TorchDispatchMode, storage_id


def _storage_id(t: Tensor) -> int | None:
    try:
        return storage_id(t)
    except Exception:  # no storage (sparse, some subclasses): compared by identity only
        return None


class GridWatch(TorchDispatchMode):
    """Records the kernel arguments a grid callable writes."""

    def __init__(self, tensors: Mapping[str, Tensor]) -> None:
        super().__init__()
        self.tensors = dict(tensors)
        self.storages = {n: _storage_id(t) for n, t in tensors.items()}
        self.written: list[str] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        schema = func._schema
        for i, arg in enumerate(schema.arguments):
            info = arg.alias_info
            if info is None or not info.is_write:
                continue
            value = kwargs.get(arg.name, args[i] if i < len(args) and not arg.kwarg_only else None)
            for t in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(t, Tensor):
                    self._note_write(t)
        return func(*args, **kwargs)

    def _note_write(self, t: Tensor) -> None:
        storage = _storage_id(t)
        for name, original in self.tensors.items():
            same = t is original or (storage is not None and storage == self.storages[name])
            if same and name not in self.written:
                self.written.append(name)


__all__ = ["GridWatch"]
