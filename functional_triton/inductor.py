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
graph Inductor lowers, on a copy of its FX graph; a node whose every group may be written
in place is lowered to ``functional_triton::functional_launch_`` instead, which mutates its
tensor arguments (Inductor orders every later use after it) and runs the dense rule with
the groups marked in place (``in_place_group``: run-time stride checks and write-back
included), and the node's outputs are the arguments themselves. (A node that keeps some
clones is lowered functionally: such an operator cannot also return tensors.)
AOTAutograd's epilogue ``copy_(input, new value)`` then copies a buffer onto
itself, which Inductor's ``copy_`` lowering drops. So Inductor copies what
``reinplace_compiler`` copies, no more, except for nodes that keep some clones
(tests/compile/test_inductor.py counts them).

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

from ._compat import pytree
from .aliasing import ArgLayout, Sharing, functional_outputs
from .dense import functional_dense
from .hops import triton_kernel_wrapper_functional
from .node import FunctionalNode
from .passes.reinplace import reinplace


class LoweredNode(NamedTuple):
    """A functional node's arguments with tensors and symbols taken out, by leaf."""

    treespec: Any
    # per leaf: ("t", i) tensors[i], ("s", i) symbols[i], ("c", value) a constant
    leaves: tuple[tuple[str, Any], ...]


_lowered: list[LoweredNode] = []
_lowered_lock = threading.Lock()


def _node_arguments(tensors: Sequence[Tensor | None], symbols: Sequence[Any], spec: int) -> dict[str, Any]:
    lowered = _lowered[spec]
    leaves = [tensors[v] if kind == "t" else symbols[v] if kind == "s" else v for kind, v in lowered.leaves]
    return pytree.tree_unflatten(leaves, lowered.treespec)  # type: ignore[no-any-return]


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
    functional_dense(FunctionalNode(**_node_arguments(tensors, symbols, spec)))


@functional_launch_.register_fake
def _functional_launch_inplace_fake(tensors: list[Tensor], symbols: list[int], spec: int) -> None:
    return None


def _in_place_decisions(gm: Any) -> dict[str, dict[str, Any]]:
    """functional node name -> its kwargs after ``reinplace`` (on a copy of ``gm``'s graph)."""
    from torch import fx

    graph = fx.Graph()
    graph.graph_copy(gm.graph, {})  # same node names; meta shared (the pass reads it only)
    before = {n.name: n for n in gm.graph.nodes if n.target is triton_kernel_wrapper_functional}
    after = {n.name: n for n in reinplace(fx.GraphModule(gm, graph)).graph.nodes}
    decisions = {}
    for name, node in before.items():
        kw = dict(node.kwargs)
        if name not in after:  # every group in place: the pass made it a launch
            layouts = {n: _launched_in_place(r) for n, r in kw["layouts"].items()}
            decisions[name] = {**kw, "tensors_to_clone": [], "layouts": layouts}
        elif after[name].kwargs["layouts"] != kw["layouts"]:
            decisions[name] = dict(after[name].kwargs)
    return decisions


def _launched_in_place(raw: Any) -> Any:
    layout = ArgLayout.from_tuple(raw)
    return layout.launched_in_place().as_tuple() if layout.sharing is Sharing.CLONED else raw


_decided: weakref.WeakKeyDictionary[Any, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()


def _in_place_kwargs(node: dict[str, Any]) -> dict[str, Any] | None:
    """The node being lowered with its in-place groups marked, or None to lower it functionally."""
    from torch._inductor.virtualized import V

    graph = V.graph
    current = getattr(graph, "current_node", None)
    if current is None or getattr(graph, "module", None) is None:
        return None
    if graph not in _decided:
        _decided[graph] = _in_place_decisions(graph.module)
    decided = _decided[graph].get(current.name)
    # Only a node with no clone left: an auto-functionalizable custom op (what Inductor can
    # lower with mutations) cannot also return tensors. A node keeping some clones is lowered
    # functionally, all of its groups cloned (correct, and what aot_eager does).
    if decided is None or decided["tensors_to_clone"]:
        return None
    return {**node, "tensors_to_clone": decided["tensors_to_clone"], "layouts": decided["layouts"]}


def _is_symbol(value: object) -> bool:
    import sympy

    return isinstance(value, (torch.SymInt, sympy.Expr)) and not isinstance(value, sympy.Integer)


def lower_functional(**node: Any) -> dict[str, Any]:
    """Inductor's lowering of a functional node: one fallback call (Note [Inductor lowering])."""
    from torch._inductor.lowering import fallback_handler

    in_place = _in_place_kwargs(node)
    lowered = node if in_place is None else in_place
    tensors, symbols, spec = _flatten(lowered)
    if in_place is None:
        op = torch.ops.functional_triton.functional_launch.default
    else:
        op = torch.ops.functional_triton.functional_launch_.default
    results = fallback_handler(op, add_to_fallback_set=False)(tensors, symbols, spec)
    outputs = dict(zip(lowered["tensors_to_clone"], results or ()))
    # Groups written in place: their new values are the arguments themselves.
    return {n: outputs[n] if n in outputs else node["kwargs"][n] for n in node["tensors_to_clone"]}


def _flatten(node: dict[str, Any]) -> tuple[list[Any], list[Any], int]:
    """A node's tensors, symbols, and the index of its LoweredNode."""
    from torch._inductor import ir

    flat, treespec = pytree.tree_flatten(node)
    tensors: list[Any] = []
    symbols: list[Any] = []
    leaves: list[tuple[str, Any]] = []
    for leaf in flat:
        if isinstance(leaf, ir.IRNode):
            leaves.append(("t", len(tensors)))
            tensors.append(leaf)
        elif _is_symbol(leaf):
            leaves.append(("s", len(symbols)))
            symbols.append(leaf)
        else:
            leaves.append(("c", int(leaf) if type(leaf).__name__ == "Integer" else leaf))
    with _lowered_lock:
        _lowered.append(LoweredNode(treespec, tuple(leaves)))
        return tensors, symbols, len(_lowered) - 1


_registered = False


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
    _registered = True
    return True


if "torch._inductor.lowering" in sys.modules:  # already paid for: register now
    register()
