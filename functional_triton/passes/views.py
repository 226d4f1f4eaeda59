"""Fold the views a replayed graph computes twice or that change nothing.

Note [folding views]
AOTAutograd's graphs carry views that eager code does not make: functionalization replays a
view from its base at every use (``view(base, s)`` once per chunk of a loop), the partitioner
rebuilds views in the backward from saved tensors (``view(view(x, [-1, h]), [n, h])``,
``t(t(w))``, three ``transpose`` of one pair of dims), and reinplacing leaves ``alias`` nodes
where a written value had a name. Each is an aten call of ~1 us of host time when the graph
runs; Liger's decoder block (16 chunks of its loss) calls ~80 more views per step than eager,
the difference in host time between the two. In the copy of the graph that
``reinplace_compiler`` runs (never the caller's ``gm``), ``fold_views``:

- replaces a view whose result has the dtype, sizes, strides and storage offset of a value
  it is a chain of views of (the chain's start included) by that value;
- replaces a view computed again from the same value with the same arguments by the first;
- erases views that are then unused.

Views share their base's storage, so the data every later node reads is the same memory either
way; what could tell the two apart is the tensor's metadata, which is compared exactly (fake
tensors in ``node.meta["val"]``, concrete sizes only), or a change to a base's metadata between
the two views (``t_``, ``resize_``, ``set_``: ops tagged ``inplace_view``; the pass does nothing
to a graph with one). Graph outputs keep their own node: AOTAutograd regenerates outputs that
alias inputs or intermediates from what it traced, so which node an output is stays as traced.
Only plain views are folded (``view``, ``t``, ``transpose``, ``permute``, ``alias``, ``slice``,
``squeeze``, ``unsqueeze``, ``expand``, ``as_strided``); ``detach``, conjugate and negative views,
and views to other dtypes are left as they are. Storages, and so the aliasing the launches
check, do not change.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

aten = torch.ops.aten

_PLAIN_VIEWS = frozenset(
    {
        aten.view.default,
        aten._reshape_alias.default,
        aten.t.default,
        aten.transpose.int,
        aten.permute.default,
        aten.alias.default,
        aten.slice.Tensor,
        aten.squeeze.default,
        aten.squeeze.dim,
        aten.squeeze.dims,
        aten.unsqueeze.default,
        aten.expand.default,
        aten.as_strided.default,
    }
)


def _layout(node: Any) -> tuple[Any, ...] | None:
    """A value's dtype, device, sizes, strides and storage offset, when all are concrete."""
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    if not isinstance(val, torch.Tensor) or val.layout is not torch.strided or val.is_conj() or val.is_neg():
        return None
    sizes, strides, offset = tuple(val.shape), tuple(val.stride()), val.storage_offset()
    if any(type(s) is not int for s in (*sizes, *strides, offset)):
        return None
    return val.dtype, val.device, sizes, strides, offset


def _is_plain_view(node: Any) -> bool:
    return (
        isinstance(node, fx.Node)
        and node.op == "call_function"
        and node.target in _PLAIN_VIEWS
        and bool(node.args)
        and isinstance(node.args[0], fx.Node)
    )


def _key(value: Any) -> Any:
    """A hashable stand-in for a node's arguments (nodes by identity)."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", *((k, _key(v)) for k, v in value.items()))
    if isinstance(value, fx.Node):
        return ("node", id(value))
    return (type(value).__name__, value)


def _replace_uses(node: fx.Node, by: fx.Node) -> None:
    """Point every user of ``node`` but the graph's output at ``by``."""
    node.replace_all_uses_with(by, delete_user_cb=lambda user: user.op != "output")


def fold_views(gm: fx.GraphModule) -> int:
    """Fold ``gm``'s views that change nothing or repeat (Note [folding views]); the number erased."""
    graph = gm.graph
    for node in graph.nodes:
        if node.op in ("call_method", "call_module"):
            return 0
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            if torch.Tag.inplace_view in node.target.tags:
                return 0
    seen: dict[Any, fx.Node] = {}
    for node in list(graph.nodes):
        if not _is_plain_view(node):
            continue
        layout = _layout(node)
        if layout is None:
            continue
        source, same = node.args[0], None
        while isinstance(source, fx.Node):  # the earliest value of the chain with this layout
            if _layout(source) == layout:
                same = source
            if not _is_plain_view(source):
                break
            source = source.args[0]
        if same is None:
            key = (node.target, _key(node.args), _key(node.kwargs))
            same = seen.setdefault(key, node)
            if same is node:
                continue
        _replace_uses(node, same)
    erased = 0
    for node in reversed(list(graph.nodes)):
        if _is_plain_view(node) and not node.users:
            graph.erase_node(node)
            erased += 1
    if erased:
        gm.recompile()
    return erased
