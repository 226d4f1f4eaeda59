"""FakeTensorMode, Meta and ProxyTorchDispatchMode rules for both operators."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch import Tensor
from torch._C import DispatchKey
from torch._ops import HigherOrderOperator
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import (
    ProxyTorchDispatchMode,
    disable_proxy_modes_tracing,
    track_tensor_tree,
)
from torch.utils import _pytree as pytree

from .hops import (
    functional_outputs,
    triton_kernel_wrapper_functional,
    triton_kernel_wrapper_mutation,
)


def _trace(mode: ProxyTorchDispatchMode, hop: HigherOrderOperator, node_args: dict[str, Any]) -> Any:
    """Run ``hop`` below the proxy mode for its value, and record it as one graph node."""
    with disable_proxy_modes_tracing():
        out = hop(**node_args)
    tracer: Any = mode.tracer
    proxy_args = pytree.tree_map(tracer.unwrap_proxy, node_args)
    out_proxy = tracer.create_proxy("call_function", hop, (), proxy_args, name=hop.__name__)
    return track_tensor_tree(out, out_proxy, constant=None, tracer=tracer)


@triton_kernel_wrapper_mutation.py_impl(FakeTensorMode)
def mutation_fake(
    mode: FakeTensorMode,
    *,
    kernel_idx: int,
    constant_args_idx: int,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
) -> None:
    return None


@triton_kernel_wrapper_mutation.py_impl(DispatchKey.Meta)
def mutation_meta(
    *,
    kernel_idx: int,
    constant_args_idx: int,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
) -> None:
    return None


@triton_kernel_wrapper_mutation.py_impl(ProxyTorchDispatchMode)
def mutation_proxy(
    mode: ProxyTorchDispatchMode,
    *,
    kernel_idx: int,
    constant_args_idx: int,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
) -> None:
    _trace(
        mode,
        triton_kernel_wrapper_mutation,
        dict(kernel_idx=kernel_idx, constant_args_idx=constant_args_idx, grid=grid, kwargs=kwargs),
    )
    return None


@triton_kernel_wrapper_functional.py_impl(FakeTensorMode)
def functional_fake(
    mode: FakeTensorMode,
    *,
    kernel_idx: int,
    constant_args_idx: int,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
    tensors_to_clone: Sequence[str],
    layouts: Mapping[str, Sequence[Any]],
) -> dict[str, Tensor]:
    with mode:
        return functional_outputs(kwargs, tensors_to_clone, layouts)[1]


@triton_kernel_wrapper_functional.py_impl(DispatchKey.Meta)
def functional_meta(
    *,
    kernel_idx: int,
    constant_args_idx: int,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
    tensors_to_clone: Sequence[str],
    layouts: Mapping[str, Sequence[Any]],
) -> dict[str, Tensor]:
    return functional_outputs(kwargs, tensors_to_clone, layouts)[1]


@triton_kernel_wrapper_functional.py_impl(ProxyTorchDispatchMode)
def functional_proxy(
    mode: ProxyTorchDispatchMode,
    *,
    kernel_idx: int,
    constant_args_idx: int,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
    tensors_to_clone: Sequence[str],
    layouts: Mapping[str, Sequence[Any]],
) -> dict[str, Tensor]:
    return _trace(  # type: ignore[no-any-return]
        mode,
        triton_kernel_wrapper_functional,
        dict(
            kernel_idx=kernel_idx,
            constant_args_idx=constant_args_idx,
            grid=grid,
            kwargs=kwargs,
            tensors_to_clone=tensors_to_clone,
            layouts=layouts,
        ),
    )
