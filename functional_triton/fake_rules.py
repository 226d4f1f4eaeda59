"""FakeTensorMode / Meta and ProxyTorchDispatchMode rules for both operators.

The fake rule is one function per operator, registered for FakeTensorMode (run with the
mode entered, so the rebuilt arguments are fake tensors) and for DispatchKey.Meta
(registrations.py).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor
from torch.fx.experimental.proxy_tensor import (
    ProxyTorchDispatchMode,
    disable_proxy_modes_tracing,
    track_tensor_tree,
)

from ._compat import HigherOrderOperator, pytree
from .aliasing import functional_outputs
from .hops import triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation
from .node import FunctionalNode, MutationNode


def _trace(mode: ProxyTorchDispatchMode, hop: HigherOrderOperator, node: MutationNode) -> Any:
    """Run ``hop`` below the proxy mode for its value, and record it as one graph node."""
    node_args = node.as_kwargs()
    with disable_proxy_modes_tracing():
        out = hop(**node_args)
    tracer: Any = mode.tracer
    proxy_args = pytree.tree_map(tracer.unwrap_proxy, node_args)
    out_proxy = tracer.create_proxy("call_function", hop, (), proxy_args, name=hop.__name__)
    return track_tensor_tree(out, out_proxy, constant=None, tracer=tracer)


def mutation_fake(node: MutationNode) -> None:
    """FakeTensorMode and Meta: a launch computes nothing fake tensors could hold."""
    return None


def mutation_proxy(mode: ProxyTorchDispatchMode, node: MutationNode) -> None:
    _trace(mode, triton_kernel_wrapper_mutation, node)


def functional_fake(node: FunctionalNode) -> dict[str, Tensor]:
    """FakeTensorMode and Meta: the written arguments' new values, with their layouts."""
    return functional_outputs(node.kwargs, node.tensors_to_clone, node.layouts)[1]


def functional_proxy(mode: ProxyTorchDispatchMode, node: FunctionalNode) -> dict[str, Tensor]:
    outputs: dict[str, Tensor] = _trace(mode, triton_kernel_wrapper_functional, node)
    return outputs
