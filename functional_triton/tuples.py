"""Tuple arguments: traced element by element.

Note [tuple arguments]
Triton takes (possibly nested) tuples as kernel arguments, and a tuple may hold tensors,
SymInts and host-side descriptors as well as constants. A traced launch cannot keep such a
tuple among its constants: the tensors in it would be the trace-time ones, and the kernel's
writes through them would never reach the graph. So every traceable element becomes a
tensor argument of the node of its own, under a derived name that no Python parameter can
have (``ptrs[0]``, ``ptrs[1][0]``), and the constants keep a template of the tuple with a
``TupleSlot`` where each traced element was. Every rule sees these elements as ordinary
named arguments (the analysis reports writes through them by the same names, layouts and
clones are per name); only the launch, and the analysis, rebuild the tuple (``with_tuples``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

# Reserved key of the constants dict that holds {parameter name: tuple template}.
TUPLES_KEY = "__functional_triton_tuples__"


@dataclasses.dataclass(frozen=True)
class TupleSlot:
    """Where a traced element sat in a tuple argument: the node argument that holds it."""

    name: str


def element_name(name: str, index: int) -> str:
    """The node argument name of element ``index`` of tuple argument ``name``."""
    return f"{name}[{index}]"


def holds_traced(value: Any, is_traced: Callable[[Any], bool]) -> bool:
    """Whether a (nested) tuple holds a value that must be traced."""
    return any(holds_traced(v, is_traced) if isinstance(v, tuple) else is_traced(v) for v in value)


def flatten(name: str, value: tuple[Any, ...], take: Callable[[str, Any], bool]) -> tuple[Any, ...]:
    """The template of tuple ``value``: each element that ``take(element name, element)`` claims
    becomes a ``TupleSlot``; everything else stays as it is."""
    items: list[Any] = []
    for i, v in enumerate(value):
        sub = element_name(name, i)
        if isinstance(v, tuple):
            items.append(flatten(sub, v, take))
        elif take(sub, v):
            items.append(TupleSlot(sub))
        else:
            items.append(v)
    return _like(value, items)


def _like(original: tuple[Any, ...], items: list[Any]) -> tuple[Any, ...]:
    if type(original) is tuple:
        return tuple(items)
    return type(original)(*items)  # a namedtuple


def rebuild(template: tuple[Any, ...], values: Mapping[str, Any]) -> tuple[Any, ...]:
    """The tuple a template stands for, with each slot filled from ``values``."""
    items: list[Any] = []
    for v in template:
        if isinstance(v, tuple):
            items.append(rebuild(v, values))
        elif isinstance(v, TupleSlot):
            items.append(values[v.name])
        else:
            items.append(v)
    return _like(template, items)


def slot_names(template: tuple[Any, ...]) -> list[str]:
    """The node argument names a template's slots refer to, in order."""
    names: list[str] = []
    for v in template:
        if isinstance(v, tuple):
            names.extend(slot_names(v))
        elif isinstance(v, TupleSlot):
            names.append(v.name)
    return names


def with_tuples(values: Mapping[str, Any], templates: Mapping[str, tuple[Any, ...]]) -> dict[str, Any]:
    """``values`` with each tuple argument rebuilt and its elements' derived names removed."""
    out = dict(values)
    for name, template in templates.items():
        out[name] = rebuild(template, values)
        for sub in slot_names(template):
            out.pop(sub, None)
    return out
