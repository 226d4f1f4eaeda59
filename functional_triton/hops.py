"""The two higher-order operators (their rules: registrations.py).

Each operator's ``__call__`` takes the node's keywords as API.md fixes them; on plain tensors
it runs the dense rule directly (Note [no dispatch for plain tensors]), else it dispatches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from ._compat import (
    DispatchKey,
    HigherOrderOperator,
    current_dispatch_mode,
    fx_sees_side_effect,
    has_python_key,
    mode_rule_types,
    pop_dispatch_mode,
    register_ordered_effect,
)
from .dense import functional_dense, mutation_dense
from .launch_spec import is_plain
from .node import FunctionalNode, MutationNode


class _TritonKernelWrapper(HigherOrderOperator):
    def _get_overloaded_args(self, args: Any, kwargs: Any) -> Any:
        # Tensors sit inside the `kwargs` dict: let their subclasses take part in dispatch.
        overloaded = list(super()._get_overloaded_args(args, kwargs))
        inner = kwargs.get("kwargs")
        if isinstance(inner, dict):
            overloaded.extend(v for v in inner.values() if isinstance(v, Tensor) and has_python_key(v))
        return tuple(overloaded)

    def dispatch(self, /, dispatch_key: Any, *args: Any, **kwargs: Any) -> Any:
        if dispatch_key == DispatchKey.Python:
            mode = current_dispatch_mode()
            rules = mode_rule_types(self)
            if mode is not None and rules is not None and not isinstance(mode, rules):
                return self._step_over_mode(kwargs)
        return super().dispatch(dispatch_key, *args, **kwargs)

    def _step_over_mode(self, kwargs: dict[str, Any]) -> Any:
        """Run under a mode that has no rule here as if it were not there (Note [modes that do not trace])."""
        with pop_dispatch_mode() as mode:
            if getattr(mode, "supports_higher_order_operators", False):
                result = mode.__torch_dispatch__(self, [], (), kwargs)
                if result is not NotImplemented:
                    return result
            return self(**kwargs)


# Note [modes that do not trace]
# A raw launch never reaches the dispatcher, so a TorchDispatchMode that does not trace (a
# flop counter, a profiler, a user's logging mode, selective activation checkpointing,
# checkpoint(debug=True)) never sees it and the kernel runs. A wrapped launch does reach
# these operators' Python key under such a mode: eagerly (the launch path skips the operator
# only when no mode is active), and when a traced graph is replayed. Torch's HOP dispatch
# raises NotImplementedError for a mode without a rule, and for a mode that takes every HOP
# in __torch_dispatch__ returns whatever it answers: the flop counter answers NotImplemented,
# which became the operator's result (the kernel skipped; a functional node's outputs a
# NotImplemented). So a mode that has no rule here is stepped over: one that declares
# ``supports_higher_order_operators`` is asked first (it may count or log the call, running
# it through ``func``), and unless it answers with something else than NotImplemented the
# operator is called again with that mode popped, exactly as if it were not there. Modes that
# trace (ProxyTorchDispatchMode, FakeTensorMode, FunctionalTensorMode) have rules and keep
# them, subclasses of those are left to torch's dispatch, and any mode below a stepped-over
# one still dispatches as usual.


# Note [no dispatch for plain tensors]
# A compiled graph calls these operators on plain tensors with no mode active. Their
# autograd rule is a fallthrough and their dense rule is the only one left, so the
# dispatcher (tens of microseconds per call in Python) would change nothing: call the
# dense rule directly, exactly as the eager launch path skips the operator altogether.
# Anything else (a mode, a functional, fake or meta tensor, a subclass) dispatches.


class TritonKernelWrapperMutation(_TritonKernelWrapper):
    """``triton_kernel_wrapper_mutation(*, kernel_idx, constant_args_idx, grid, kwargs) -> None``."""

    def __init__(self) -> None:
        super().__init__("ft_triton_kernel_wrapper_mutation")

    def __call__(
        self,
        *,
        kernel_idx: int | str,
        constant_args_idx: int | str,
        grid: Sequence[Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
        node = MutationNode(kernel_idx, constant_args_idx, grid, kwargs)
        if is_plain((), kwargs):  # Note [no dispatch for plain tensors]
            return mutation_dense(node)
        return self.dispatch_node(node)

    def dispatch_node(self, node: MutationNode) -> None:
        """Dispatch a call of ``node`` (a caller that knows its tensors are not plain)."""
        super().__call__(**node.as_kwargs())


class TritonKernelWrapperFunctional(_TritonKernelWrapper):
    """``triton_kernel_wrapper_functional(*, ..., tensors_to_clone, layouts) -> dict[str, Tensor]``."""

    def __init__(self) -> None:
        super().__init__("ft_triton_kernel_wrapper_functional")

    def __call__(
        self,
        *,
        kernel_idx: int | str,
        constant_args_idx: int | str,
        grid: Sequence[Any] | None,
        kwargs: dict[str, Any],
        tensors_to_clone: Sequence[str],
        layouts: Mapping[str, Any],
    ) -> dict[str, Tensor]:
        node = FunctionalNode(kernel_idx, constant_args_idx, grid, kwargs, tensors_to_clone, layouts)
        if is_plain((), kwargs):  # Note [no dispatch for plain tensors]
            return functional_dense(node)
        return self.dispatch_node(node)

    def dispatch_node(self, node: FunctionalNode) -> dict[str, Tensor]:
        """Dispatch a call of ``node`` (its rules' calls one level down, subclass tensors)."""
        outputs: dict[str, Tensor] = super().__call__(**node.as_kwargs())
        return outputs


triton_kernel_wrapper_mutation = TritonKernelWrapperMutation()
triton_kernel_wrapper_functional = TritonKernelWrapperFunctional()


# The mutation form writes its arguments by definition: dead-code elimination must keep it.
# The functional form is pure by construction (its effects are its outputs); marking it
# side-effectful would make AOTAutograd's default partitioner keep a copy of it in the
# backward graph too, launching the kernel twice. See Note [keep alive] for the kernels
# whose effects are not all in their outputs.
torch.fx.node.has_side_effect(triton_kernel_wrapper_mutation)
if not fx_sees_side_effect(triton_kernel_wrapper_mutation):  # torch 2.11: only the effects registry
    register_ordered_effect(triton_kernel_wrapper_mutation)


# Note [keep alive]
# A functional node whose kernel may have effects outside its outputs (the analysis could
# not see all its writes, or it prints/asserts) must survive dead-code elimination even
# when nothing reads its outputs. Impurity belongs to an operator, not to one call, so the
# functional operator cannot be marked for some nodes only. Instead functionalization
# follows such a node with a call of ``keep_alive`` on its outputs: an operator that does
# nothing, registered as an ordered effect. Under AOTAutograd it is recorded as
# ``with_effects(token, keep_alive, outputs)``, threaded through the forward (or backward)
# graph's effect tokens, so it is never copied into the other graph by the partitioner
# (its token is not an input there) and never removed; elsewhere (make_fx of
# torch.func.functionalize) it is a plain effectful node, which FX never removes either.
@torch.library.custom_op("functional_triton::keep_alive", mutates_args=())
def keep_alive(values: list[Tensor]) -> None:
    """Does nothing: an effectful use of a kernel's outputs (Note [keep alive])."""


@keep_alive.register_fake
def _keep_alive_fake(values: list[Tensor]) -> None:
    return None


KEEP_ALIVE = torch.ops.functional_triton.keep_alive.default
register_ordered_effect(KEEP_ALIVE)
torch.fx.node.has_side_effect(KEEP_ALIVE)
