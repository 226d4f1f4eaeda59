"""The kernel side table: kernels, grid callables and constant arguments, by index.

An FX graph cannot hold a Python function, so a traced launch refers to its kernel
and to its constant (non-tensor) arguments by integer index.

Note [side-table lifetime]
The table holds its entries weakly. What keeps an entry alive is the index object
itself: ``add_kernel`` and ``add_constants`` return a ``TableIndex``, an ``int`` that
also references its entry. Traced nodes store that object in their kwargs, so an
entry lives exactly as long as some graph (or compiled function holding a graph)
still refers to it; generated code only ever sees the plain integer, which it looks
up while the graph, and so the entry, is alive. Equal registrations share one entry
(same kernel and grid object; equal constants), so repeated traces do not grow the
table, and an eager launch never touches it.
"""

from __future__ import annotations

import itertools
import struct
import threading
import weakref
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np
import triton.language as tl


class _Entry:
    """One registered value; kept alive only by the TableIndex objects that name it."""

    __slots__ = ("index", "key", "value", "derived", "__weakref__")

    def __init__(self, index: int, key: Hashable, value: Any) -> None:
        self.index = index
        self.key = key
        self.value = value
        self.derived: dict[Hashable, Any] = {}  # values computed from this one, dying with it


class TableIndex(int):
    """An index into the side table that keeps its entry alive (Note [side-table lifetime])."""

    _entry: _Entry

    def __new__(cls, entry: _Entry) -> TableIndex:
        obj = super().__new__(cls, entry.index)
        obj._entry = entry
        return obj

    # Graph copies must share the entry, never copy the kernel it holds.
    def __copy__(self) -> TableIndex:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> TableIndex:
        return self

    def __reduce__(self) -> tuple[type[int], tuple[int]]:
        return (int, (int(self),))

    def __repr__(self) -> str:
        return int.__repr__(self)


class KernelSideTable:
    """Thread-safe, weakly held registry of kernels and constant-argument dicts."""

    def __init__(self) -> None:
        # Reentrant: an entry's weakref callback (which takes the lock) can run inside any
        # allocation, including one made while this thread holds the lock in ``_add``, when a
        # garbage collection frees a graph that was the entry's last holder.
        self._lock = threading.RLock()
        self._counter = itertools.count()
        self._by_index: dict[int, weakref.ref[_Entry]] = {}
        self._by_key: dict[Hashable, weakref.ref[_Entry]] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_index)

    def _add(self, key: Hashable, value: Any) -> TableIndex:
        with self._lock:
            ref = self._by_key.get(key)
            entry = ref() if ref is not None else None
            if entry is None:
                entry = _Entry(next(self._counter), key, value)
                ref = weakref.ref(entry, self._remover(entry.index, key))
                self._by_index[entry.index] = ref
                self._by_key[key] = ref
            return TableIndex(entry)

    def _remover(self, index: int, key: Hashable) -> Callable[[weakref.ref[_Entry]], None]:
        def remove(ref: weakref.ref[_Entry]) -> None:
            with self._lock:
                if self._by_index.get(index) is ref:
                    del self._by_index[index]
                if self._by_key.get(key) is ref:
                    del self._by_key[key]

        return remove

    def _entry(self, index: int, what: str) -> _Entry:
        ref = self._by_index.get(index)
        entry = ref() if ref is not None else None
        if entry is None:
            raise AssertionError(
                f"functional_triton internal error: no {what} at side-table index {index}; "
                "the graph that referred to it was freed"
            )
        return entry

    def _get(self, index: int, what: str) -> Any:
        return self._entry(index, what).value

    def derived(self, kernel_idx: int, constant_args_idx: int, build: Callable[[Any, Any], Any]) -> Any:
        """``build(kernel entry, constants)``, computed once per pair and kept with the kernel's entry.

        Indices are never reused, so a pair always names the same two values; the result lives
        exactly as long as the kernel's entry.
        """
        ref = self._by_index.get(kernel_idx)  # _entry inlined: this runs on every replayed launch
        entry = ref() if ref is not None else None
        if entry is None:
            entry = self._entry(kernel_idx, "kernel")  # raises
        try:
            return entry.derived[constant_args_idx]  # a TableIndex hashes and compares as its int
        except KeyError:
            value = build(entry.value, self.get_constants(constant_args_idx))
            entry.derived[int(constant_args_idx)] = value
            return value

    def add_kernel(self, kernel: Any, grid_fn: Callable[..., Any] | None) -> TableIndex:
        """Register a kernel adapter and its grid callable (or None for a static grid)."""
        # Identity key: the entry itself holds both objects, so their ids stay valid.
        return self._add(("kernel", id(kernel), id(grid_fn)), (kernel, grid_fn))

    def get_kernel(self, index: int) -> tuple[Any, Callable[..., Any] | None]:
        """The (kernel adapter, grid callable or None) registered at ``index``."""
        return self._get(index, "kernel")  # type: ignore[no-any-return]

    def add_constants(self, constants: Mapping[str, Any]) -> TableIndex:
        """Register a dict of constant arguments; equal dicts share one entry."""
        frozen = dict(constants)
        try:
            key: Hashable = ("constants", _constant_key(frozen))
            hash(key)
        except TypeError:
            key = ("constants-by-identity", object())
        return self._add(key, frozen)

    def get_constants(self, index: int) -> dict[str, Any]:
        """The constant-argument dict registered at ``index`` (do not mutate it)."""
        return self._get(index, "constant arguments")  # type: ignore[no-any-return]


def _constant_key(constants: Mapping[str, Any]) -> tuple[tuple[str, Hashable], ...]:
    """Equal keys for exactly the constant dicts that launch alike (Note [constant keys])."""
    return tuple((k, exact_key(v)) for k, v in sorted(constants.items(), key=lambda kv: kv[0]))


# Note [constant keys]
# Two traced launches may share a constant-args entry only if the kernel cannot tell their
# constants apart. Python's ``==`` is far coarser than that: ``0.0 == -0.0`` (``1/x`` gives
# +inf or -inf), ``True == 1 == 1.0`` (triton types them u1, i32, fp32),
# ``(2.0**40,) == (2**40,)``, NaNs are never equal to themselves and their payloads differ,
# ``np.float32(0.5) == 0.5``. So a constant is keyed by its exact type and its bits,
# recursively: floats by their IEEE-754 bytes (sign of zero and NaN payloads included), numpy
# scalars by dtype and bytes, tuples element by element with the tuple's own type (a
# namedtuple is not a tuple), ``tl.constexpr`` by what it wraps. Anything else that is
# hashable is keyed by type and value; what is not (lists, dicts) gets a key of its own,
# never shared.
_ATOMS = (int, bool, str, bytes, type(None))


def exact_key(value: Any) -> Hashable:
    """A key equal for two constants exactly when a kernel cannot tell them apart (Note [constant keys])."""
    cls = type(value)
    if cls in _ATOMS:
        return (cls, value)
    if isinstance(value, float):
        return (cls, struct.pack("<d", value))
    if isinstance(value, tuple):
        return (cls, tuple(exact_key(v) for v in value))
    if isinstance(value, np.generic):
        return (cls, value.dtype.str, value.tobytes())
    if isinstance(value, complex):
        return (cls, struct.pack("<dd", value.real, value.imag))
    if isinstance(value, tl.constexpr):
        return (cls, exact_key(value.value))
    hash(value)  # TypeError for unhashable values: the caller keys them by identity
    return (cls, value)


kernel_side_table = KernelSideTable()
