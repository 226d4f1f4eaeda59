"""Reinplacing torch's own ops: functional aten ops back into the in-place ones the program ran.

Note [reinplacing torch ops]
AOTAutograd functionalizes the program's own in-place torch ops too: ``buf.addmm_(a, b)``
becomes ``new = addmm(buf, a, b)`` (a new buffer), and ``buf[s:e] = x`` becomes
``new = slice_scatter(buf, copy(slice(buf, s, e), x), s, e)`` (a copy of all of ``buf``).
Inductor would reinplace those; a graph run as is pays for every copy. After the kernel pass
(Note [reinplacing]) this pass walks the graph in order and rewrites

- ``r = op(self, ...)`` into ``op_(self, ...)`` (``_compat.inplace_variant``: same argument
  types, writes ``self`` only), and
- ``r = <view>_scatter(base, src, *params)`` into ``copy_(<view>(base, *params), src)``, its
  result being ``base``,

when no one can observe the write. Values are grouped by the memory they may share: the fake
tensors' storages in ``meta["val"]``, merged along every edge that can alias at run time (an
aliasing schema: views and in-place ops; ``getitem`` of a kernel node or of ``launch_arguments``
with the argument of that name; any other Python or higher-order callee with all its inputs,
which is conservative). The group of the written tensor (``self``, ``base``) must

1. hold no graph input: this pass never writes one (an input's writes and its copy-back are the
   kernel pass's and AOTAutograd's business; the saved tensors and gradients a backward receives
   are inputs too);
2. not be read after the rewritten node through a value defined at or before it (the old
   contents): no later op, kernel launch (``launch_arguments`` / functional node), ``write_back``
   or graph output (a forward output, a tensor saved for backward, AOTAutograd's regenerated
   aliases) may use such a value; a view created later from an old value counts as a read.
   ``keep_alive`` counts too (conservative). Values defined after the node are the new contents;
3. not be another argument of the same call (``mul(a, a)``, ``copy(x[:2], x[2:])``: overlap).

One later use is allowed: ``<view>_scatter(base, r, *params)`` where ``self`` is
``<view>(base, *params)`` (functionalization's write-back of a mutated view): once ``op_``
wrote the view, the scatter's result is ``base`` itself, and it is replaced by ``base``.
The rewrite must also keep what later ops see: the result has ``self``'s sizes and dtype (no
broadcast or type promotion), and its strides (matmul-like ops may pick other kernels, so
other bits, for other layouts); only a ``copy`` whose sole user is its absorbed scatter may
write a view of other strides. Without an absorbed scatter ``self`` must span its whole
storage: the in-place result of a view would keep the whole base alive (a gradient returned
that way would hold its buffer), where the out-of-place one frees it; for the same reason a
scatter is replaced by its base only when the base spans its whole storage. Random-number ops are
left alone.

Why after the kernel pass: that pass sees the purely functional graph it reasons about, and
its decisions stay true here, since a rewritten op writes only memory nothing later reads
through an old value (a kernel launch after it that reads that memory is a read and blocks it);
the launches it made are conservative reads here, and its replaced ``getitem`` s are aliases
through the graph's own edges. So the two never write memory the other still needs.
"""

from __future__ import annotations

import collections
import operator
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import fx

from .._compat import inplace_variant, known_equal
from ..aliasing import write_back
from ..hops import KEEP_ALIVE, triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation

aten = torch.ops.aten

# scatter op -> the view op whose region it writes back, with the same trailing arguments
SCATTER_TO_VIEW: dict[Any, Any] = {
    aten.slice_scatter.default: aten.slice.Tensor,
    aten.select_scatter.default: aten.select.int,
    aten.as_strided_scatter.default: aten.as_strided.default,
    aten.diagonal_scatter.default: aten.diagonal.default,
}
# callees whose result is None: uses of their inputs, never aliases of them
_RETURNS_NOTHING = frozenset({triton_kernel_wrapper_mutation, write_back, KEEP_ALIVE})


class _Aliases:
    """Union-find over nodes; nodes in one class may share memory at run time."""

    def __init__(self, graph: fx.Graph, containers: tuple[Any, ...]) -> None:
        self.parent: dict[fx.Node, fx.Node] = {}
        by_storage: dict[int, fx.Node] = {}
        for node in graph.nodes:
            self.parent[node] = node
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                self.union(node, by_storage.setdefault(val.untyped_storage()._cdata, node))
            for other in _alias_edges(node, containers):
                self.union(node, other)

    def find(self, node: fx.Node) -> fx.Node:
        root = node
        while self.parent[root] is not root:
            root = self.parent[root]
        while self.parent[node] is not root:
            self.parent[node], node = root, self.parent[node]
        return root

    def union(self, a: fx.Node, b: fx.Node) -> None:
        self.parent.setdefault(a, a)
        self.parent.setdefault(b, b)
        self.parent[self.find(a)] = self.find(b)


def _nodes_in(value: Any) -> list[fx.Node]:
    out: list[fx.Node] = []
    fx.node.map_arg(value, out.append)
    return out


def _alias_edges(node: fx.Node, containers: tuple[Any, ...]) -> Iterable[fx.Node]:
    """The inputs whose memory ``node``'s result may share."""
    if node.op != "call_function" or node.target in _RETURNS_NOTHING or node.target in containers:
        return []  # a container's members are reached through its getitems
    if node.target is operator.getitem:
        source, key = node.args[0], node.args[1]
        if isinstance(source, fx.Node) and source.target in containers:
            members: Mapping[Any, Any] = source.kwargs["kwargs"]  # type: ignore[assignment]
            return _nodes_in(members.get(key))
        return _nodes_in(source)
    if isinstance(node.target, torch._ops.OpOverload):
        schema = node.target._schema
        if all(r.alias_info is None for r in schema.returns):
            return []
        bound = _bind(node)
        return [n for a in schema.arguments if a.alias_info is not None for n in _nodes_in(bound.get(a.name))]
    return node.all_input_nodes


def _bind(node: fx.Node) -> dict[str, Any]:
    """``node``'s arguments by schema name, defaults filled in."""
    schema = node.target._schema  # type: ignore[union-attr]
    bound: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            bound[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            bound[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
    return bound


def _trailing(node: fx.Node, skip: int) -> tuple[Any, ...]:
    """The schema arguments of ``node`` after the first ``skip``, defaults filled in."""
    names = [a.name for a in node.target._schema.arguments[skip:]]  # type: ignore[union-attr]
    bound = _bind(node)
    return tuple(bound.get(n) for n in names)


def _val(node: Any) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _same_geometry(a: torch.Tensor, b: torch.Tensor, strides: bool) -> bool:
    if a.dtype != b.dtype or a.dim() != b.dim():
        return False
    pairs = list(zip(a.shape, b.shape)) + (list(zip(a.stride(), b.stride())) if strides else [])
    return all(known_equal(x, y) for x, y in pairs)


class _Pass:
    def __init__(self, gm: fx.GraphModule, containers: tuple[Any, ...]) -> None:
        self.graph = gm.graph
        self.aliases = _Aliases(self.graph, (triton_kernel_wrapper_functional, *containers))
        self.order = {n: i for i, n in enumerate(self.graph.nodes)}
        self.placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        self.erased: set[fx.Node] = set()
        self.rewritten: collections.Counter[str] = collections.Counter()

    def writable(self, target: Any, others: Iterable[Any]) -> fx.Node | None:
        """The class of ``target`` if this pass may write it: no input in it, not among ``others``."""
        if not isinstance(target, fx.Node) or _val(target) is None:
            return None
        cls = self.aliases.find(target)
        if any(self.aliases.find(n) is cls for n in (*self.placeholders, *others)):
            return None
        return cls

    def old_reads(self, node: fx.Node, cls: fx.Node) -> list[fx.Node]:
        """Nodes after ``node`` that use a value of class ``cls`` defined at or before it."""
        here = self.order[node]
        return [
            user
            for value in self.graph.nodes
            if self.order[value] <= here and self.aliases.find(value) is cls
            for user in value.users
            if self.order[user] > here
        ]

    def absorbed_scatter(self, node: fx.Node, reads: list[fx.Node]) -> fx.Node | None:
        """The one later read allowed: ``<view>_scatter(base, node, *p)`` with ``self = <view>(base, *p)``."""
        if len(reads) != 1 or reads[0].target not in SCATTER_TO_VIEW:
            return None
        scatter, view = reads[0], node.args[0]
        if scatter.args[1] is not node or not isinstance(view, fx.Node):
            return None
        if view.target is not SCATTER_TO_VIEW[scatter.target] or view.args[0] is not scatter.args[0]:
            return None
        if not _same_params(_trailing(view, 1), _trailing(scatter, 2)):
            return None
        base, result = _val(scatter.args[0]), _val(scatter)
        if base is None or result is None or not _same_geometry(base, result, strides=True):
            return None
        return scatter if _whole_storage(base) else None  # base stands for the scatter's fresh result

    def try_op(self, node: fx.Node, inplace: Any) -> None:
        self_arg = node.args[0] if node.args else None
        cls = self.writable(self_arg, _nodes_in((node.args[1:], node.kwargs)))
        old, new = _val(self_arg), _val(node)
        if cls is None or old is None or new is None or not _same_geometry(old, new, strides=False):
            return
        reads = self.old_reads(node, cls)
        scatter = self.absorbed_scatter(node, reads) if reads else None
        if reads and scatter is None:
            return
        only_scatter = scatter is not None and set(node.users) == {scatter}
        if not _same_geometry(old, new, strides=True) and not (
            node.target is aten.copy.default and only_scatter
        ):
            return
        if scatter is None and not _whole_storage(old):
            return  # the result would keep all of self's storage alive, not just its own elements
        node.target = inplace
        alias = _fake_call(aten.alias.default, old, ())  # the result shares self's storage
        node.meta["val"] = new if alias is None else alias
        assert isinstance(self_arg, fx.Node)
        self.aliases.union(node, self_arg)
        self.rewritten[str(inplace)] += 1
        if scatter is not None:
            self.drop_scatter(scatter)

    def drop_scatter(self, scatter: fx.Node) -> None:
        base = scatter.args[0]
        assert isinstance(base, fx.Node)
        self.aliases.union(scatter, base)  # values viewed from the scatter's result now view base
        scatter.replace_all_uses_with(base)
        self.graph.erase_node(scatter)
        self.erased.add(scatter)
        self.rewritten[f"{scatter.target} (absorbed)"] += 1

    def try_scatter(self, scatter: fx.Node) -> None:
        base, src = scatter.args[0], scatter.args[1]
        cls = self.writable(base, _nodes_in(src))
        old, new, value = _val(base), _val(scatter), _val(src)
        if cls is None or old is None or new is None or value is None or value.dtype != old.dtype:
            return
        if not scatter.users or not _same_geometry(old, new, strides=True) or not _whole_storage(old):
            return
        if self.old_reads(scatter, cls):
            return
        assert isinstance(base, fx.Node)
        view_op = SCATTER_TO_VIEW[scatter.target]
        params = _trailing(scatter, 2)
        with self.graph.inserting_before(scatter):
            view = self.graph.call_function(view_op, (base, *params))
            copy = self.graph.call_function(aten.copy_.default, (view, src))
        view.meta["val"] = copy.meta["val"] = _fake_call(view_op, old, params)
        for n in (view, copy):
            self.order[n] = self.order[scatter]
            self.aliases.union(n, base)
        self.aliases.union(scatter, base)  # values viewed from the scatter's result now view base
        scatter.replace_all_uses_with(base)
        self.graph.erase_node(scatter)
        self.erased.add(scatter)
        self.rewritten[str(scatter.target)] += 1

    def run(self) -> collections.Counter[str]:
        for node in list(self.graph.nodes):
            if node.op != "call_function" or node in self.erased:
                continue
            if node.target in SCATTER_TO_VIEW:
                self.try_scatter(node)
                continue
            inplace = inplace_variant(node.target)
            if inplace is not None:
                self.try_op(node, inplace)
        return self.rewritten


def _whole_storage(val: torch.Tensor) -> bool:
    """Whether ``val`` spans its whole storage from offset 0 (known for every shape)."""
    size = val.untyped_storage().nbytes()
    return known_equal(val.storage_offset(), 0) and known_equal(val.numel() * val.element_size(), size)


def _same_params(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Equal view parameters; SymInts must be equal for every shape (no guard added)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, (int, torch.SymInt)) and isinstance(y, (int, torch.SymInt)):
            if not known_equal(x, y):
                return False
        elif isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
            if not _same_params(tuple(x), tuple(y)):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def _fake_call(op: Any, val: torch.Tensor, params: tuple[Any, ...]) -> Any:
    """``op(val, *params)`` on the fake tensor ``val`` (a value for a new node's ``meta["val"]``)."""
    mode = getattr(val, "fake_mode", None)
    if mode is None:
        return None
    with mode:
        return op(val, *params)


def reinplace_torch_ops(gm: fx.GraphModule, containers: tuple[Any, ...] = ()) -> Mapping[str, int]:
    """Rewrite ``gm`` in place (Note [reinplacing torch ops]); returns how many nodes of each op changed.

    ``containers``: callees besides the functional kernel operator whose result is a dict of their
    ``kwargs`` argument's tensors, read by ``getitem`` (``launch_arguments``).
    """
    rewritten = _Pass(gm, containers).run()
    if rewritten:
        gm.graph.lint()
        gm.recompile()
    return dict(rewritten)


def out_of_place_ops(gm: fx.GraphModule) -> dict[str, int]:
    """How many functional torch ops with an in-place form (and scatters) ``gm`` holds, by op."""
    counts: collections.Counter[str] = collections.Counter()
    for node in gm.graph.nodes:
        if node.op == "call_function" and (node.target in SCATTER_TO_VIEW or inplace_variant(node.target)):
            counts[str(node.target)] += 1
    return dict(counts)
