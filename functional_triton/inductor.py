"""Inductor: the functional operator is lowered to a fallback call of one custom operator.

Note [Inductor lowering]
Inductor lowers OpOverloads and the higher-order operators it knows; it cannot generate
code for a user kernel launched on the interpreter, and its own Triton path works with
PyTorch's side table, not ours. So a ``triton_kernel_wrapper_functional`` node is lowered
to an extern (fallback) call of ``functional_triton::functional_launch``, a functional
custom operator (it mutates nothing, returns the written arguments' new values):

- the node's arguments are flattened; tensors travel in ``tensors``, symbolic sizes in
  ``symbols`` (so Inductor passes their run-time values) and everything else, with the
  tree structure, in a ``LoweredNode`` registered once per lowering (``spec``);
- at run time it rebuilds the node and runs the functional operator's dense rule, so the
  clones, alias groups, run-time size and stride checks are exactly those of
  ``aot_eager``; its fake rule is the functional operator's, so Inductor sees the same
  output strides.

Copies: the decisions of ``reinplace_compiler`` (Note [reinplacing]) are made once per
graph Inductor lowers, by running the pass itself on a copy of its FX graph, and read back
by node name:
- a node whose every group may be written in place is lowered to
  ``functional_triton::functional_launch_``, which mutates its tensor arguments (Inductor
  orders every later use after it) and runs what ``reinplace_compiler``'s graphs run for a
  launch made in place (``launch_in_place``, Note [in-place launch node]: the run-time size,
  stride and aliasing checks in one pass, the planned launch; arguments of other strides rebuilt
  and written back); the node's outputs are the arguments themselves;
- a node that keeps some clones first copies those groups with
  ``functional_triton::clone_arguments`` (``rebuild_arguments``: the traced layout), then
  launches every group in place, on the copies for those. (A custom operator that mutates
  cannot also return a list of tensors, hence two calls.) Where a kept group has several
  members (their copies would alias each other, which an operator's outputs must not) the
  node is lowered functionally, all of its groups cloned;
- the ``copy_`` and ``*_scatter`` nodes the pass absorbed (they put a value written in place
  back into its own storage) are made no-ops in the graph being lowered: a scatter becomes
  ``alias(base)``, which Inductor lowers to the base itself, and
  ``copy_(dst, new)`` becomes ``copy_(dst, dst)``, which Inductor's ``copy_`` lowering drops.
So Inductor copies what ``reinplace_compiler`` copies on the same graph
(tests/compile/test_inductor_copies.py counts both), with one more condition: Inductor computes
a pointwise or reduction node where a later kernel needs it, and does not see the in-place
launch as a write of its arguments, so a read of a group's storage *before* the launch
(``before = x * 3``, then a launch writing ``x``) could run after it and see the new value.
The pass runs with ``lazy_reads=True`` here: such a group keeps its clone.

Note [Inductor host overhead]
Per call, generated code would call the operator through the dispatcher (the custom
operator's autograd, ADInplaceOrView and backend layers, tens of microseconds in Python)
and rebuild the node with ``tree_unflatten``. Instead, where torch has Inductor's custom
codegen registry (``_compat.register_python_codegen``), a lowered node's call is emitted as
a call of ``runner(op, spec)``, bound once when the compiled module loads: a closure over
the node's template (its constant parts built once, its tensors and symbols filled in per
call) that runs what the operator's body runs, the dense rule with all its run-time checks
(sizes, strides, aliasing). A node launched in place with a grid of ints and tensor arguments
only is bound once more, as ``reinplace_compiler``'s runner binds it (Note [launch sites] in
passes/reinplace.py): the runner calls the site with the tensors as they come. The operators
stay registered for what calls them otherwise (torch without that registry, the C++ wrapper).
``python benchmarks/bench_compile.py --wrapper`` measures the per-call cost with the launch
itself stubbed.

A graph holding this library's higher-order operators is never put in Inductor's FX graph
cache (they are not declared cacheable), so a cached artifact never names a side-table
entry of another process. Lowered nodes are kept for the life of the process: generated
code names them by index and keeps no graph alive.

Private symbols used (checked on torch 2.13.0): ``torch._inductor.lowering.register_lowering``
and ``fallback_handler``, ``torch._inductor.ir.IRNode``, ``torch._inductor.virtualized.V.graph``
(``.module``, ``.current_node``; without them nothing is lowered in place).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ._compat import pytree, register_python_codegen
from .aliasing import ArgLayout, Sharing, functional_outputs, rebuild_arguments
from .dense import functional_dense
from .hops import triton_kernel_wrapper_functional
from .node import FunctionalNode


class LoweredNode(NamedTuple):
    """A functional node's arguments with tensors and symbols taken out, by leaf."""

    treespec: Any
    # per leaf: ("t", i) tensors[i], ("s", i) symbols[i], ("c", value) a constant
    leaves: tuple[tuple[str, Any], ...]
    # per top-level key, how to rebuild it: (key, "c", value) a constant (built once),
    # (key, "d", ((name, leaf), ...)) a dict of leaves, (key, "t", (treespec, leaves)) any tree
    parts: tuple[tuple[str, str, Any], ...]


_lowered: list[LoweredNode] = []
_lowered_lock = threading.Lock()


def _leaf(leaf: tuple[str, Any], tensors: Sequence[Any], symbols: Sequence[Any]) -> Any:
    kind, v = leaf
    return tensors[v] if kind == "t" else symbols[v] if kind == "s" else v


def _build(
    parts: tuple[tuple[str, str, Any], ...], tensors: Sequence[Any], symbols: Sequence[Any]
) -> dict[str, Any]:
    """A lowered node's arguments from this call's tensors and symbols (Note [Inductor lowering])."""
    node: dict[str, Any] = {}
    for key, mode, data in parts:
        if mode == "c":
            node[key] = data
        elif mode == "d":
            node[key] = {n: _leaf(leaf, tensors, symbols) for n, leaf in data}
        else:
            treespec, leaves = data
            node[key] = pytree.tree_unflatten([_leaf(leaf, tensors, symbols) for leaf in leaves], treespec)
    return node


def _node_arguments(
    tensors: Sequence[Tensor | None],
    symbols: Sequence[Any],
    spec: int,
) -> dict[str, Any]:
    return _build(_lowered[spec].parts, tensors, symbols)


@torch.library.custom_op("functional_triton::functional_launch", mutates_args=())
def functional_launch(tensors: list[Tensor | None], symbols: list[int], spec: int) -> list[Tensor]:
    """The functional operator's dense rule on a lowered node (Note [Inductor lowering])."""
    node = _node_arguments(tensors, symbols, spec)
    outputs = functional_dense(FunctionalNode(**node))
    return _distinct([outputs[n] for n in node["tensors_to_clone"]])


def _distinct(values: list[Tensor]) -> list[Tensor]:
    """Outputs that share storage (one alias group's written members) as separate tensors.

    A custom operator's outputs must not alias each other: Inductor may reuse one output's
    buffer for a later in-place computation. In the functional graph they are separate
    values anyway. Each copy keeps its sizes and strides, as the fake rule reports them.
    """
    seen: set[int] = set()
    result = []
    for v in values:
        key = v.untyped_storage().data_ptr() if v.untyped_storage().nbytes() else id(v)
        if key in seen:
            v = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device).copy_(v)
        seen.add(key)
        result.append(v)
    return result


@functional_launch.register_fake
def _functional_launch_fake(tensors: list[Tensor | None], symbols: list[int], spec: int) -> list[Tensor]:
    node = _node_arguments(tensors, symbols, spec)
    outputs = functional_outputs(node["kwargs"], node["tensors_to_clone"], node["layouts"])[1]
    return [outputs[n] for n in node["tensors_to_clone"]]


@torch.library.custom_op("functional_triton::functional_launch_", mutates_args=["tensors"])
def functional_launch_(tensors: list[Tensor], symbols: list[int], spec: int) -> None:
    """A lowered node whose every group is launched in place on ``tensors`` (Note [Inductor lowering])."""
    _launch_in_place(_node_arguments(tensors, symbols, spec))


def _launch_in_place(node: dict[str, Any]) -> None:
    """What ``reinplace_compiler``'s graphs run for a launch made in place (Note [in-place launch node]):
    on plain tensors with the traced geometry, the checks in one pass and the planned launch."""
    from .passes.reinplace import launch_in_place

    launch_in_place(
        kernel_idx=node["kernel_idx"],
        constant_args_idx=node["constant_args_idx"],
        grid=node["grid"],
        kwargs=node["kwargs"],
        layouts=node["layouts"],
    )


@functional_launch_.register_fake
def _functional_launch_inplace_fake(tensors: list[Tensor], symbols: list[int], spec: int) -> None:
    return None


@torch.library.custom_op("functional_triton::clone_arguments", mutates_args=())
def clone_arguments(tensors: list[Tensor], symbols: list[int], spec: int) -> list[Tensor]:
    """Fresh copies of lone written arguments, laid out as the kernel was traced for
    (``rebuild_arguments``): the groups a partly reinplaced node still clones."""
    node = _node_arguments(tensors, symbols, spec)
    new = rebuild_arguments(node["kwargs"], node["layouts"])
    return [new[n] for n in node["layouts"]]


@clone_arguments.register_fake
def _clone_arguments_fake(tensors: list[Tensor], symbols: list[int], spec: int) -> list[Tensor]:
    node = _node_arguments(tensors, symbols, spec)
    new = rebuild_arguments(node["kwargs"], node["layouts"])
    return [new[n] for n in node["layouts"]]


_SCATTERS = frozenset(
    (
        torch.ops.aten.slice_scatter.default,
        torch.ops.aten.select_scatter.default,
        torch.ops.aten.as_strided_scatter.default,
        torch.ops.aten.diagonal_scatter.default,
    )
)


class _Decisions(NamedTuple):
    """What ``reinplace`` decided on a copy of the graph Inductor lowers."""

    # functional node name -> its kwargs after the pass (groups marked in place, fewer clones)
    nodes: dict[str, dict[str, Any]]
    # names of the copy_ / *_scatter nodes the pass absorbed (they only put a value written
    # in place back into its own storage)
    absorbed: frozenset[str]


def _in_place_decisions(gm: Any) -> _Decisions:
    """The ``reinplace`` pass run on a copy of ``gm``'s graph, read back by node name."""
    from torch import fx

    from .passes.reinplace import reinplace

    graph = fx.Graph()
    graph.graph_copy(gm.graph, {})  # same node names; meta shared (the pass reads it only)
    before = {n.name: n for n in gm.graph.nodes}
    after = {n.name: n for n in reinplace(fx.GraphModule(gm, graph), lazy_reads=True).graph.nodes}
    decisions = {}
    for name, node in before.items():
        if node.target is not triton_kernel_wrapper_functional:
            continue
        kw = dict(node.kwargs)
        if name not in after:  # every group in place: the pass made it a launch
            layouts = {n: _launched_in_place(r) for n, r in kw["layouts"].items()}
            decisions[name] = {**kw, "tensors_to_clone": [], "layouts": layouts}
        elif after[name].kwargs["layouts"] != kw["layouts"]:
            decisions[name] = dict(after[name].kwargs)
    absorbed = frozenset(
        name
        for name, node in before.items()
        if (node.target is torch.ops.aten.copy_.default or node.target in _SCATTERS)
        and (name not in after or after[name].target is not node.target)
    )
    return _Decisions(decisions, absorbed)


def _drop_absorbed(gm: Any, absorbed: frozenset[str]) -> None:
    """Make the nodes the pass absorbed no-ops in the graph Inductor is lowering.

    Each only puts a value back into its own storage once the kernel wrote it in place:
    a scatter's result is then its base (``alias(base)``), and ``copy_(dst, new)`` copies
    ``dst`` onto itself (Inductor's ``copy_`` lowering drops ``copy_(dst, dst)``). They all
    follow the functional nodes whose outputs they take, so none is lowered yet.
    """
    for node in list(gm.graph.nodes):
        if node.name not in absorbed:
            continue
        # Rewritten in place, not removed: Inductor's interpreter has counted every node's uses.
        if node.target is torch.ops.aten.copy_.default:
            node.args = (node.args[0], node.args[0], *node.args[2:])
        else:  # aten.alias: Inductor lowers it to its argument itself
            node.target = torch.ops.aten.alias.default
            node.args, node.kwargs = (node.args[0],), {}


def _launched_in_place(raw: Any) -> Any:
    """A cloned group's layout marked as launched in place (other layouts as they are)."""
    layout = ArgLayout.from_tuple(raw)
    return layout.launched_in_place().as_tuple() if layout.sharing is Sharing.CLONED else raw


_decided: weakref.WeakKeyDictionary[Any, _Decisions] = weakref.WeakKeyDictionary()


def _in_place_kwargs(node: dict[str, Any]) -> dict[str, Any] | None:
    """The node being lowered with its in-place groups marked, or None to lower it functionally."""
    from torch._inductor.virtualized import V

    graph = V.graph
    current = getattr(graph, "current_node", None)
    if current is None or getattr(graph, "module", None) is None:
        return None
    if graph not in _decided:
        _decided[graph] = _in_place_decisions(graph.module)
        _drop_absorbed(graph.module, _decided[graph].absorbed)
    decided = _decided[graph].nodes.get(current.name)
    if decided is None:
        return None
    # The decided groups marked on the node's own layouts (Inductor's sizes, not the FX graph's).
    marked = {n for n, raw in decided["layouts"].items() if raw[0] <= -2}
    layouts = {n: (_launched_in_place(raw) if n in marked else raw) for n, raw in node["layouts"].items()}
    to_clone = [n for n in node["tensors_to_clone"] if n not in marked]
    return {**node, "tensors_to_clone": to_clone, "layouts": layouts}


def _is_symbol(value: object) -> bool:
    import sympy

    return isinstance(value, (torch.SymInt, sympy.Expr)) and not isinstance(value, sympy.Integer)


def lower_functional(**node: Any) -> dict[str, Any]:
    """Inductor's lowering of a functional node: one fallback call (Note [Inductor lowering])."""
    from torch._inductor.lowering import fallback_handler

    in_place = _in_place_kwargs(node)
    if in_place is not None and not _lone_clones(in_place["layouts"]):
        in_place = None  # a group of several arguments still cloned: lowered functionally
    if in_place is None:
        op = torch.ops.functional_triton.functional_launch.default
        results = fallback_handler(op, add_to_fallback_set=False)(*_flatten(node))
        return dict(zip(node["tensors_to_clone"], results))
    cloned = [n for n, raw in in_place["layouts"].items() if raw[0] >= 0]
    outputs = {}
    if cloned:  # Note [Inductor lowering]: the groups kept cloned, copied first
        sub = {
            "kwargs": {n: in_place["kwargs"][n] for n in cloned},
            "layouts": {n: in_place["layouts"][n] for n in cloned},
        }
        op = torch.ops.functional_triton.clone_arguments.default
        outputs = dict(zip(cloned, fallback_handler(op, add_to_fallback_set=False)(*_flatten(sub))))
        in_place = {
            **in_place,
            "kwargs": {**in_place["kwargs"], **outputs},
            "layouts": {
                n: (_launched_in_place(raw) if n in outputs else raw)
                for n, raw in in_place["layouts"].items()
            },
            "tensors_to_clone": [],
        }
    op = torch.ops.functional_triton.functional_launch_.default
    fallback_handler(op, add_to_fallback_set=False)(*_flatten(in_place))
    # Groups written in place: their new values are the arguments (or their copies) themselves.
    return {n: outputs.get(n, node["kwargs"][n]) for n in node["tensors_to_clone"]}


def _lone_clones(layouts: dict[str, Any]) -> bool:
    """Whether every group still cloned is a single argument (its copy then aliases no other output)."""
    groups = [raw[0] for raw in layouts.values() if raw[0] >= 0]
    return len(groups) == len(set(groups))


def _flatten(node: dict[str, Any]) -> tuple[list[Any], list[Any], int]:
    """A node's tensors, symbols, and the index of its LoweredNode."""
    from torch._inductor import ir

    tensors: list[Any] = []
    symbols: list[Any] = []
    leaves: list[tuple[str, Any]] = []
    parts: list[tuple[str, str, Any]] = []
    for key, value in node.items():
        flat, treespec = pytree.tree_flatten(value)
        start = len(leaves)
        for leaf in flat:
            if isinstance(leaf, ir.IRNode):
                leaves.append(("t", len(tensors)))
                tensors.append(leaf)
            elif _is_symbol(leaf):
                leaves.append(("s", len(symbols)))
                symbols.append(leaf)
            else:
                leaves.append(("c", int(leaf) if type(leaf).__name__ == "Integer" else leaf))
        mine = tuple(leaves[start:])
        if all(kind == "c" for kind, _ in mine):
            parts.append((key, "c", pytree.tree_unflatten([v for _, v in mine], treespec)))
        elif isinstance(value, dict) and all(pytree.tree_is_leaf(v) for v in value.values()):
            parts.append((key, "d", tuple(zip(value, mine))))
        else:
            parts.append((key, "t", (treespec, mine)))
    with _lowered_lock:
        _lowered.append(LoweredNode(pytree.tree_flatten(node)[1], tuple(leaves), tuple(parts)))
        return tensors, symbols, len(_lowered) - 1


def runner(op: str, spec: int) -> Any:
    """What generated code calls for one lowered node, instead of the operator ``op``
    (Note [Inductor host overhead]): its arguments rebuilt from a template made once."""
    parts = _lowered[spec].parts
    if op == "functional_launch_":
        site = _launch_site(parts)
        if site is not None:  # Note [launch sites], as reinplace_compiler's runner binds them
            launch, slots = site
            if slots == tuple(range(len(slots))):

                def launch_site(tensors: list[Tensor], symbols: list[int]) -> None:
                    launch(*tensors)

            else:

                def launch_site(tensors: list[Tensor], symbols: list[int]) -> None:
                    launch(*[tensors[i] for i in slots])

            return launch_site

        def launch_in_place(tensors: list[Tensor], symbols: list[int]) -> None:
            _launch_in_place(_build(parts, tensors, symbols))

        return launch_in_place
    if op == "functional_launch":

        def launch(tensors: list[Tensor | None], symbols: list[int]) -> list[Tensor]:
            node = _build(parts, tensors, symbols)
            outputs = functional_dense(FunctionalNode(**node))
            return _distinct([outputs[n] for n in node["tensors_to_clone"]])

        return launch
    assert op == "clone_arguments", op

    def clone(tensors: list[Tensor], symbols: list[int]) -> list[Tensor]:
        node = _build(parts, tensors, symbols)
        new = rebuild_arguments(node["kwargs"], node["layouts"])
        return [new[n] for n in node["layouts"]]

    return clone


def _launch_site(parts: tuple[tuple[str, str, Any], ...]) -> tuple[Any, tuple[int, ...]] | None:
    """A lowered in-place node's bound launch and, per tensor it takes, its index in ``tensors``;
    None unless every part but the tensors is a constant (no symbols)."""
    from .passes.reinplace import LaunchSite

    node: dict[str, Any] = {}
    slots: dict[str, int] = {}
    for key, mode, data in parts:
        if mode == "c":
            node[key] = data
        elif key == "kwargs" and mode == "d" and all(kind == "t" for _, (kind, _) in data):
            slots = {name: i for name, (_, i) in data}
        else:
            return None
    if not slots or "layouts" not in node:
        return None
    site = LaunchSite.of(
        node["kernel_idx"], node["constant_args_idx"], node.get("grid"), tuple(slots), node["layouts"]
    )
    if site is None:
        return None
    return site.launch, tuple(slots[n] for n in site.names)


def _direct_call(node: Any, writeline: Any) -> None:
    """Inductor's Python code for one of this module's operators: a call of its ``runner``,
    bound once when the compiled module loads (Note [Inductor host overhead])."""
    from torch._inductor import ir
    from torch._inductor.virtualized import V

    wrapper = V.graph.wrapper_code
    op = node.op_overload._opname
    tensors, symbols, spec = node.codegen_args()
    name = f"_ft_{op}_{int(spec)}"
    wrapper.add_import_once("import functional_triton.inductor")
    wrapper.add_import_once(f"{name} = functional_triton.inductor.runner({op!r}, {int(spec)})")
    call = f"{name}({tensors}, {symbols})"
    if isinstance(node.layout, ir.NoneLayout):
        writeline(f"{wrapper.declare}{call}{wrapper.ending}")
    else:
        writeline(f"{wrapper.declare}{node.get_name()} = {call}{wrapper.ending}")


_registered = False
_DIRECT_CALLS = False  # whether generated code calls runners directly (Note [Inductor host overhead])


def register() -> bool:
    """Register the lowering (once); False where Inductor cannot be imported.

    Importing Inductor takes about a second, so this runs when Dynamo first captures a
    launch (every torch.compile path to Inductor does), or at import when Inductor is
    already loaded; anyone driving Inductor without Dynamo can call it.
    """
    global _registered
    if _registered:
        return True
    try:
        from torch._inductor.lowering import register_lowering
    except ImportError:  # pragma: no cover - a torch built without Inductor
        return False
    register_lowering(triton_kernel_wrapper_functional, type_promotion_kind=None)(lower_functional)
    global _DIRECT_CALLS
    for op in ("functional_launch", "functional_launch_", "clone_arguments"):
        _DIRECT_CALLS = register_python_codegen(f"torch.ops.functional_triton.{op}.default", _direct_call)
    _registered = True
    return True


if "torch._inductor.lowering" in sys.modules:  # already paid for: register now
    register()
