"""Watching a grid callable: which tensors it writes, whether it reads tensor data.

Note [grid watch]
A grid callable must not write tensors (a traced graph cannot replay the write), and a grid
that reads tensor data (``int(t.sum())``) is data, not a size, so a traced graph must call the
callable again at run time rather than record its result (Note [traced grids] in kernel.py).
Version counters catch writes cheaply, but inference tensors have none. So where versions
cannot tell, and always while tracing, the callable runs under this dispatch mode, which sees
every ATen op it runs: an op that writes (its schema marks the argument written) a tensor that
shares storage with a kernel argument is a write to that argument, and ``_local_scalar_dense``
(``.item()``, ``int(t)``) is a data read. The mode only watches; every op runs as it would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from ._compat import TorchDispatchMode

_DATA_READS = frozenset({"aten::_local_scalar_dense", "aten::item", "aten::equal", "aten::is_nonzero"})


def _storage_id(t: Tensor) -> int | None:
    try:
        return int(t.untyped_storage()._cdata)
    except Exception:  # no storage (sparse, some subclasses): compared by identity only
        return None


class GridWatch(TorchDispatchMode):  # type: ignore[misc, valid-type]
    """Records the kernel arguments a grid callable writes, and whether it reads tensor data."""

    def __init__(self, tensors: Mapping[str, Tensor]) -> None:
        super().__init__()
        self.tensors = dict(tensors)
        self.storages = {n: _storage_id(t) for n, t in tensors.items()}
        self.written: list[str] = []
        self.reads_data = False

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        schema = func._schema
        if schema.name in _DATA_READS:
            self.reads_data = True
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


__all__ = ["GridWatch", "torch"]
