"""Remove the unused copies of forward random ops the default partitioner puts in backward graphs.

Note [dead forward copies]
The default partitioner builds the backward graph by copying every node of the joint graph whose
inputs the backward has (saved tensors, tangents), then eliminating dead code. A random op
(``aten.native_dropout``, the attention ops with dropout: tagged ``nondeterministic_seeded``) is
impure to dead-code elimination, so a forward random op whose inputs are all saved is copied into
the backward with no users: it runs again in every backward, computing nothing that is used and
drawing from the generator. Eager draws once: after one traced training step the random stream
differs from eager's (the next step's dropout masks differ), and the copy costs its kernel time
(~0.5 ms per step for a cuDNN attention forward of 8192 tokens on an H100).

A node is such a copy when the graph is a backward graph (it has a tangent placeholder: named
``tangents_<i>``, or tagged ``is_backward``), the node is tagged ``is_forward`` (AOTAutograd tags
every node traced before the backward began), it has no users, and its target is a random aten op.
It is removed, with the pure nodes that fed only it. A random op the backward itself calls is not
tagged ``is_forward`` and stays, used or not, as eager runs it. The tags are read from
``node.meta["partitioner_tag"]`` (checked on torch 2.13 and 2.14); without them nothing is removed.
"""

from __future__ import annotations

import torch
from torch import fx

_TAG = "partitioner_tag"


def _is_random_op(target: object) -> bool:
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags


def _is_tangent(node: fx.Node) -> bool:
    """A backward graph's incoming gradient: AOTAutograd names it ``tangents_<i>`` and (newer torch)
    tags it ``is_backward``; older torch tagged every node of the traced forward, tangents too,
    ``is_forward``."""
    return node.op == "placeholder" and (
        node.meta.get(_TAG) == "is_backward" or node.name.startswith("tangents_")
    )


def remove_dead_forward_copies(gm: fx.GraphModule) -> int:
    """Remove the dead copies of forward random ops from a backward graph; returns how many."""
    graph = gm.graph
    if not any(_is_tangent(n) for n in graph.nodes):
        return 0  # a forward or inference graph: an unused random op there is the program's own
    dead = [
        n
        for n in graph.nodes
        if n.op == "call_function"
        and not n.users
        and n.meta.get(_TAG) == "is_forward"
        and _is_random_op(n.target)
    ]
    for node in dead:
        inputs = node.all_input_nodes
        graph.erase_node(node)
        while inputs:  # what fed only the copy, where dropping it changes nothing else
            n = inputs.pop()
            if n.op == "call_function" and not n.users and not n.is_impure():
                inputs.extend(n.all_input_nodes)
                graph.erase_node(n)
    if dead:
        gm.recompile()
    return len(dead)
