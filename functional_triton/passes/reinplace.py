"""Reinplacing: turn functional kernel calls back into in-place launches where no one can tell.

Note [reinplacing]
A functional node copies every alias group it may write (Note [alias groups]) so that
the values it read stay intact. The copy is needed only if some later node still reads
the old contents of that storage. This pass walks the graph in order and, for each
written group of each functional node, asks: does any node after this one use a value
that shares the group's storage? Uses that only exist to put the new value back are
not reads of the old value and are absorbed:

- ``getitem`` of the node's own outputs (they become the arguments themselves);
- ``slice_scatter`` / ``select_scatter`` / ``as_strided_scatter`` / ``diagonal_scatter``
  of the written view back into its base (AOTAutograd's epilogue for a mutated view):
  once the kernel wrote the view in place, the scatter's result is the base itself;
- ``copy_(input, new_value)`` where the new value is now the input's own storage.

A ``keep_alive`` call (Note [keep alive]) reads nothing and never keeps a copy.
Everything else (a later read, a graph output such as a tensor saved for backward, a
view created earlier and read later) keeps the copy. So does every group that reaches a
graph input of a training graph (placeholders ``primals_*`` / ``tangents_*``):
AOTAutograd copies a mutated input back after the forward, which bumps the version
counter of a tensor the backward may have saved (it then refuses to run), and a
backward's inputs are saved tensors and incoming gradients that autograd still owns.
Storages are tracked with a union-find over the fake tensors' storages in
``node.meta["val"]``, merged as groups are reinplaced. A node whose every group is reinplaced becomes a
``triton_kernel_wrapper_mutation`` launch between ``launch_arguments`` and ``write_back``.
Those check, when the graph runs, what the pass could only see in fake tensors: sizes (a
graph replayed for other sizes raises instead of launching with stale parameters) and
strides (a fake tensor's may differ from the real one's; an argument that does not match is
re-strided, or its group rebuilt and written back, as the functional operator would).
Groups reinplaced in a node that keeps other clones are marked with ``in_place_group`` and
get the same treatment from the functional operator.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import fx

from ..aliasing import check_untraced_aliasing, in_place_group, rebuild_arguments, write_back
from ..hops import KEEP_ALIVE, triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation

aten = torch.ops.aten

# scatter op -> the view op whose region it writes back, with the same trailing arguments
_SCATTER_TO_VIEW: dict[Any, Any] = {
    aten.slice_scatter.default: aten.slice.Tensor,
    aten.select_scatter.default: aten.select.int,
    aten.as_strided_scatter.default: aten.as_strided.default,
    aten.diagonal_scatter.default: aten.diagonal.default,
}
_VIEW_OPS = frozenset(_SCATTER_TO_VIEW.values()) | {aten.alias.default}


def launch_arguments(kwargs: Mapping[str, Any], layouts: Mapping[str, Sequence[Any]]) -> Mapping[str, Any]:
    """Before an in-place launch: the arguments themselves when they have the traced geometry.

    Otherwise ``rebuild_arguments``: it raises, naming the argument, on sizes the graph was not
    traced for, and re-strides (or, for a group launched in place, rebuilds) arguments whose
    strides differ from the traced ones; ``write_back`` then copies written members back.
    """
    check_untraced_aliasing(kwargs, layouts)  # the pass relied on the traced aliasing too
    for name, raw in layouts.items():
        t = kwargs[name]
        if t.shape != raw[1] or t.stride() != tuple(raw[2]):  # torch.Size equals a tuple of ints
            return rebuild_arguments(kwargs, layouts)
    return kwargs


torch.fx.node.has_side_effect(write_back)


class _Storages:
    """Union-find over storage ids; values in one class share memory."""

    def __init__(self, graph: fx.Graph) -> None:
        self.parent: dict[int, int] = {}
        self.of_node: dict[fx.Node, int] = {}
        for node in graph.nodes:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                sid = val.untyped_storage()._cdata
                self.of_node[node] = sid
                self.parent.setdefault(sid, sid)

    def placeholder_classes(self) -> set[int]:
        return {self.find(sid) for n, sid in self.of_node.items() if n.op == "placeholder"}

    def find(self, sid: int) -> int:
        while self.parent[sid] != sid:
            self.parent[sid] = self.parent[self.parent[sid]]
            sid = self.parent[sid]
        return sid

    def cls(self, node: Any) -> int | None:
        sid = self.of_node.get(node) if isinstance(node, fx.Node) else None
        return None if sid is None else self.find(sid)

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def _value_key(node: Any, replaced: Mapping[fx.Node, fx.Node]) -> Any:
    """A structural key: equal keys mean equal tensors (same storage, same view of it)."""
    if isinstance(node, fx.Node):
        node = replaced.get(node, node)
        if node.op == "call_function" and node.target in _VIEW_OPS:
            base, *params = node.args
            if node.target is aten.alias.default:
                return _value_key(base, replaced)
            return (node.target, _value_key(base, replaced), tuple(params))
        if node.op == "call_function" and node.target in _SCATTER_TO_VIEW and _absorbed(node, replaced):
            return _value_key(node.args[0], replaced)
        return node
    if isinstance(node, (list, tuple)):
        return tuple(_value_key(n, replaced) for n in node)
    return node


def _absorbed(use: fx.Node, replaced: Mapping[fx.Node, fx.Node]) -> bool:
    """Whether ``use`` only writes the (now in-place) new value back into its own storage."""
    if use.op != "call_function":
        return False
    if use.target in _SCATTER_TO_VIEW:
        base, src, *params = use.args
        view_key = (_SCATTER_TO_VIEW[use.target], _value_key(base, replaced), tuple(params))
        return _value_key(src, replaced) == view_key
    if use.target is aten.copy_.default:
        dst, src = use.args[:2]
        return _value_key(dst, replaced) == _value_key(src, replaced)
    return False


def _is_keep_alive(node: fx.Node) -> bool:
    """A ``keep_alive`` call (Note [keep alive]), bare or under ``with_effects``: it reads nothing."""
    if node.op != "call_function":
        return False
    return node.target is KEEP_ALIVE or (
        node.target is torch.ops.higher_order.with_effects and KEEP_ALIVE in node.args[:2]
    )


def _later_uses(node: fx.Node, cls: int, storages: _Storages, order: Mapping[fx.Node, int]) -> list[fx.Node]:
    """Users after ``node`` of any value in storage class ``cls`` that may read it."""
    here = order[node]
    return [
        user
        for value, sid in storages.of_node.items()
        if storages.find(sid) == cls
        for user in value.users
        if order[user] > here and not _is_keep_alive(user)
    ]


def _geometry_matches(arg: Any, layout: Sequence[Any]) -> bool:
    """Whether the argument's traced value has the geometry the kernel was traced for.

    A functional call re-strides an argument whose value's layout differs from the recorded
    one (a replaced input keeps reporting its own strides); launched in place, the kernel
    would write into that temporary copy, so such a group keeps its clone.
    """
    val = arg.meta.get("val") if isinstance(arg, fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return False
    _, size, stride, offset = layout
    return (
        tuple(val.size()) == tuple(size)
        and tuple(val.stride()) == tuple(stride)
        and val.storage_offset() == offset
    )


def _getitems(node: fx.Node) -> dict[str, fx.Node]:
    return {
        u.args[1]: u  # type: ignore[misc]
        for u in node.users
        if u.op == "call_function" and u.target is operator.getitem
    }


def _groups(node: fx.Node) -> dict[int, list[str]]:
    groups: dict[int, list[str]] = {}
    layouts: Any = node.kwargs["layouts"]
    for name, raw in layouts.items():
        if raw[0] >= 0:
            groups.setdefault(raw[0], []).append(name)
    return groups


def _is_training_graph(graph: fx.Graph) -> bool:
    # AOTAutograd names a training forward's inputs primals_*, a backward's tangents_*.
    return any(n.op == "placeholder" and n.name.startswith(("primals", "tangents")) for n in graph.nodes)


def _try_group(
    node: fx.Node,
    names: list[str],
    storages: _Storages,
    order: Mapping[fx.Node, int],
    replaced: dict[fx.Node, fx.Node],
    protected: set[int],
) -> bool:
    """Decide one alias group; on success record getitem -> argument replacements."""
    kwargs: Mapping[str, Any] = node.kwargs["kwargs"]  # type: ignore[assignment]
    classes = {storages.cls(kwargs[n]) for n in names}
    if len(classes) != 1 or None in classes:
        return False
    (cls,) = classes
    assert cls is not None
    if any(storages.find(p) == cls for p in protected):
        return False
    layouts: Any = node.kwargs["layouts"]
    if not all(_geometry_matches(kwargs[n], layouts[n]) for n in names):
        return False
    outputs = _getitems(node)
    trial = dict(replaced)
    for name in names:
        if name in outputs:
            trial[outputs[name]] = kwargs[name]
    later = _later_uses(node, cls, storages, order)
    if any(not _absorbed(u, trial) for u in later):
        return False
    if cls in storages.placeholder_classes() and not any(u.target is aten.copy_.default for u in later):
        # Without keep_inference_input_mutations AOTAutograd copies the returned new value
        # into the input after the graph; once that value aliases the input with another
        # geometry, the copy would overlap itself. Keep the clone there.
        return False
    replaced.update(trial)
    for name in names:
        out = outputs.get(name)
        if out is not None and storages.cls(out) is not None:
            storages.union(storages.of_node[out], cls)
    return True


def _rewrite_node(graph: fx.Graph, node: fx.Node, inplace_names: set[str]) -> None:
    """Launch in-place groups on the arguments themselves; a node with no clone left becomes a launch."""
    kw: dict[str, Any] = dict(node.kwargs)
    layouts = {
        name: ((in_place_group(raw[0]), *raw[1:]) if name in inplace_names else raw)
        for name, raw in kw["layouts"].items()
    }
    to_clone = [n for n in kw["tensors_to_clone"] if n not in inplace_names]
    if to_clone:
        kw.update(layouts=layouts, tensors_to_clone=to_clone)
        node.kwargs = kw
        return
    with graph.inserting_before(node):
        args = graph.call_function(launch_arguments, (), {"kwargs": kw["kwargs"], "layouts": layouts})
        launch = graph.call_function(
            triton_kernel_wrapper_mutation,
            (),
            {
                "kernel_idx": kw["kernel_idx"],
                "constant_args_idx": kw["constant_args_idx"],
                "grid": kw["grid"],
                "kwargs": {
                    n: graph.call_function(operator.getitem, (args, n)) if n in layouts else v
                    for n, v in kw["kwargs"].items()
                },
            },
        )
        graph.call_function(write_back, (), {"kwargs": kw["kwargs"], "launched": args, "layouts": layouts})
    launch.meta["val"] = None
    node.replace_all_uses_with(launch)
    graph.erase_node(node)


def _apply_replacements(graph: fx.Graph, replaced: dict[fx.Node, fx.Node]) -> None:
    """getitems -> arguments, absorbed scatters -> their base, absorbed copy_ -> gone."""
    for node in list(graph.nodes):
        if node in replaced:
            target = replaced[node]
            while target in replaced:  # a later kernel's output replaced by an earlier one's
                target = replaced[target]
            node.replace_all_uses_with(target)
            graph.erase_node(node)
        elif node.op == "call_function" and _absorbed(node, replaced):
            dst = node.args[0]
            assert isinstance(dst, fx.Node)
            while dst in replaced:
                dst = replaced[dst]
            node.replace_all_uses_with(dst)
            replaced[node] = dst  # a later kernel's argument may still name it
            graph.erase_node(node)


def reinplace(gm: fx.GraphModule) -> fx.GraphModule:
    """Rewrite ``gm`` in place (Note [reinplacing]); returns it."""
    graph = gm.graph
    storages = _Storages(graph)
    order = {n: i for i, n in enumerate(graph.nodes)}
    replaced: dict[fx.Node, fx.Node] = {}
    decisions: list[tuple[fx.Node, set[str]]] = []
    protected = (
        {storages.of_node[n] for n in graph.nodes if n.op == "placeholder" and n in storages.of_node}
        if _is_training_graph(graph)
        else set()
    )
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not triton_kernel_wrapper_functional:
            continue
        inplace: set[str] = set()
        for names in _groups(node).values():
            if _try_group(node, names, storages, order, replaced, protected):
                inplace.update(names)
        if inplace:
            decisions.append((node, inplace))
    for node, inplace in decisions:
        _rewrite_node(graph, node, inplace)
    _apply_replacements(graph, replaced)
    graph.lint()
    gm.recompile()
    return gm


def reinplace_compiler(
    gm: fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    inner: Callable[[fx.GraphModule, Sequence[Any]], Any] | None = None,
) -> Any:
    """An AOTAutograd compiler that launches kernels in place wherever no one can tell.

    Pass it as ``fw_compiler``, ``bw_compiler`` or ``inference_compiler``. It rewrites
    functional kernel calls back into in-place launches where no later use of any
    overlapping alias can observe the difference (Note [reinplacing]), then hands the
    graph to ``inner`` or, without one, runs it as is.

    Args:
        gm: the graph AOTAutograd produced.
        example_inputs: its example inputs (passed on to ``inner``).
        inner: another AOTAutograd compiler to run after the rewrite.

    Returns:
        What ``inner`` returns, or a boxed callable running ``gm``.

    Example:
        >>> compiled = aot_function(f, fw_compiler=ft.reinplace_compiler,  # doctest: +SKIP
        ...                         bw_compiler=ft.reinplace_compiler)
        >>> chained = functools.partial(ft.reinplace_compiler, inner=my_compiler)  # doctest: +SKIP
    """
    from functorch.compile import make_boxed_func

    reinplace(gm)
    if inner is not None:
        return inner(gm, example_inputs)
    return make_boxed_func(gm.forward)
