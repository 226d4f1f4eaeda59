"""FakeTensorMode / Meta and ProxyTorchDispatchMode rules for both operators.

The fake rule is one function per operator, registered for FakeTensorMode (run with the
mode entered, so the rebuilt arguments are fake tensors) and for DispatchKey.Meta
(registrations.py).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor
from torch.fx import Proxy
from torch.fx.experimental.proxy_tensor import (
    ProxyTorchDispatchMode,
    disable_proxy_modes_tracing,
    track_tensor_tree,
)

from ._compat import HigherOrderOperator, pytree
from .aliasing import fake_outputs
from .hops import triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation
from .node import FunctionalNode, MutationNode


class _NotANodeArgument(Exception):
    """A leaf that only ``create_proxy``'s general path can turn into a node argument."""


_LEAVES = (int, float, bool, str, type(None))


def _node_arguments(tracer: Any, value: Any) -> Any:
    """``value`` as ``create_proxy`` would store it: each traced tensor or symbol by its node.

    The node's keywords are dicts, tuples and lists of those and of plain constants (side-table
    indices kept as they are: Note [side-table lifetime]); anything else (a tensor or symbol
    that the tracer has no proxy for) raises ``_NotANodeArgument``.
    """
    if isinstance(value, _LEAVES):
        return value
    kind = type(value)
    if kind is dict:
        return {k: _node_arguments(tracer, v) for k, v in value.items()}
    if kind is tuple or kind is list:
        return kind(_node_arguments(tracer, v) for v in value)
    proxy = tracer.unwrap_proxy(value)
    if isinstance(proxy, Proxy):
        return proxy.node
    raise _NotANodeArgument


def _trace(mode: ProxyTorchDispatchMode, hop: HigherOrderOperator, node: MutationNode) -> Any:
    """Run ``hop`` below the proxy mode for its value, and record it as one graph node.

    The node's arguments are mapped in one pass (``_node_arguments``) where they allow it, instead
    of ``tree_map(unwrap_proxy)`` and ``create_proxy``'s ``create_arg``, each a walk of the whole
    structure per traced launch; the node made is the same.
    """
    node_args = node.as_kwargs()
    with disable_proxy_modes_tracing():
        out = hop(**node_args)
    tracer: Any = mode.tracer
    try:
        arguments = _node_arguments(tracer, node_args)
    except _NotANodeArgument:
        proxy_args = pytree.tree_map(tracer.unwrap_proxy, node_args)
        out_proxy = tracer.create_proxy("call_function", hop, (), proxy_args, name=hop.__name__)
    else:
        out_proxy = tracer.proxy(tracer.create_node("call_function", hop, (), arguments, hop.__name__))
    return track_tensor_tree(out, out_proxy, constant=None, tracer=tracer)


def mutation_fake(node: MutationNode) -> None:
    """FakeTensorMode and Meta: a launch computes nothing fake tensors could hold."""
    return None


def mutation_proxy(mode: ProxyTorchDispatchMode, node: MutationNode) -> None:
    _trace(mode, triton_kernel_wrapper_mutation, node)


def functional_fake(node: FunctionalNode) -> dict[str, Tensor]:
    """FakeTensorMode and Meta: the written arguments' new values, laid out (Note [fake outputs])."""
    return fake_outputs(node.kwargs, node.tensors_to_clone, node.layouts)


def functional_proxy(mode: ProxyTorchDispatchMode, node: FunctionalNode) -> dict[str, Tensor]:
    outputs: dict[str, Tensor] = _trace(mode, triton_kernel_wrapper_functional, node)
    return outputs
