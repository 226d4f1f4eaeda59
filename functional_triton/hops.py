"""The two higher-order operators and their dense (eager) rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch._C import DispatchKey
from torch._ops import HigherOrderOperator

from ._compat import fx_sees_side_effect, register_ordered_effect
from .aliasing import rebuild_arguments, write_back
from .descriptors import DESCRIPTORS_KEY, with_descriptors
from .kernel import (
    CONSTEXPR_GUARD_PREFIX,
    CONSTEXPR_GUARDS_KEY,
    LaunchSpec,
    _is_plain,
    checked_grid_fn,
    kernel_info,
)
from .side_table import kernel_side_table


class _TritonKernelWrapper(HigherOrderOperator):
    def _get_overloaded_args(self, args: Any, kwargs: Any) -> Any:
        # Tensors sit inside the `kwargs` dict: let their subclasses take part in dispatch.
        overloaded = list(super()._get_overloaded_args(args, kwargs))
        inner = kwargs.get("kwargs")
        if isinstance(inner, dict):
            overloaded.extend(
                v
                for v in inner.values()
                if isinstance(v, Tensor) and torch._C._dispatch_keys(v).has("Python")
            )
        return tuple(overloaded)


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

    def __call__(  # type: ignore[override]
        self,
        *,
        kernel_idx: int,
        constant_args_idx: int,
        grid: Sequence[Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
        if _is_plain((), kwargs):  # Note [no dispatch for plain tensors]
            return launch_raw(kernel_idx, constant_args_idx, grid, kwargs)
        return super().__call__(  # type: ignore[no-any-return]
            kernel_idx=kernel_idx,
            constant_args_idx=constant_args_idx,
            grid=grid,
            kwargs=kwargs,
        )


class TritonKernelWrapperFunctional(_TritonKernelWrapper):
    """``triton_kernel_wrapper_functional(*, ..., tensors_to_clone, layouts) -> dict[str, Tensor]``."""

    def __init__(self) -> None:
        super().__init__("ft_triton_kernel_wrapper_functional")

    def __call__(  # type: ignore[override]
        self,
        *,
        kernel_idx: int,
        constant_args_idx: int,
        grid: Sequence[Any] | None,
        kwargs: dict[str, Any],
        tensors_to_clone: Sequence[str],
        layouts: Mapping[str, Sequence[Any]],
    ) -> dict[str, Tensor]:
        if _is_plain((), kwargs):  # Note [no dispatch for plain tensors]
            return functional_dense(
                kernel_idx=kernel_idx,
                constant_args_idx=constant_args_idx,
                grid=grid,
                kwargs=kwargs,
                tensors_to_clone=tensors_to_clone,
                layouts=layouts,
            )
        return super().__call__(  # type: ignore[no-any-return]
            kernel_idx=kernel_idx,
            constant_args_idx=constant_args_idx,
            grid=grid,
            kwargs=kwargs,
            tensors_to_clone=tensors_to_clone,
            layouts=layouts,
        )


triton_kernel_wrapper_mutation = TritonKernelWrapperMutation()
triton_kernel_wrapper_functional = TritonKernelWrapperFunctional()


def launch_traced(spec: LaunchSpec) -> None:
    """Record a launch as a mutation-operator call (tracing modes take it from here)."""
    grid_fn = spec.grid if callable(spec.grid) else None
    kernel_idx = kernel_side_table.add_kernel(spec.kernel, grid_fn)
    constant_args_idx = kernel_side_table.add_constants(spec.constants)
    triton_kernel_wrapper_mutation(
        kernel_idx=kernel_idx,
        constant_args_idx=constant_args_idx,
        grid=None if grid_fn is not None else tuple(spec.grid),  # type: ignore[arg-type]
        kwargs=dict(spec.tensors),
    )


class _LaunchPlan(NamedTuple):
    """What a replayed launch needs, computed once per (kernel, constants) pair."""

    kernel: Any
    grid_fn: Any
    arg_names: tuple[str, ...]
    constants: dict[str, Any]
    descriptors: dict[str, Any]
    guarded_names: tuple[str, ...]  # constexprs specialised from symbolic values (Note [constexpr guards])


def _plan(entry: tuple[Any, Any], constants: Mapping[str, Any]) -> _LaunchPlan:
    kernel, grid_fn = entry
    constants = dict(constants)
    descriptors = constants.pop(DESCRIPTORS_KEY, {})
    guarded = constants.pop(CONSTEXPR_GUARDS_KEY, ())
    return _LaunchPlan(kernel, grid_fn, tuple(kernel_info(kernel).arg_names), constants, descriptors, guarded)


def check_constexpr_guards(plan: _LaunchPlan, values: dict[str, Any]) -> None:
    """Pop each guarded constexpr's recomputed value from ``values``; raise if it changed."""
    for name in plan.guarded_names:
        actual = values.pop(CONSTEXPR_GUARD_PREFIX + name)
        if actual != values[name]:
            raise ValueError(
                f"argument '{name}' of {kernel_info(plan.kernel).name} is a tl.constexpr specialised to "
                f"{values[name]!r} when the graph was traced; these inputs give {actual!r}: "
                "trace again for them"
            )


def launch_plan(kernel_idx: int, constant_args_idx: int) -> _LaunchPlan:
    """The kernel, grid callable, constants and descriptors a node names (do not mutate them)."""
    return kernel_side_table.derived(kernel_idx, constant_args_idx, _plan)  # type: ignore[no-any-return]


def launch_raw(
    kernel_idx: int, constant_args_idx: int, grid: Sequence[Any] | None, kwargs: Mapping[str, Any]
) -> None:
    """Launch the registered kernel on real tensors, exactly as ``kernel[grid](...)``."""
    plan = launch_plan(kernel_idx, constant_args_idx)
    values = {**plan.constants, **kwargs}
    if plan.guarded_names:
        check_constexpr_guards(plan, values)
    if plan.descriptors:
        values = with_descriptors(values, plan.descriptors)
    if plan.grid_fn is not None:
        tensors = {n: v for n, v in kwargs.items() if isinstance(v, Tensor)}
        launch_grid: Any = checked_grid_fn(plan.grid_fn, tensors)
    else:
        assert grid is not None, "functional_triton internal error: node without a grid"
        launch_grid = tuple(int(g) for g in grid)
    # Positional where possible: some triton versions drop keyword arguments in hooks.
    args = []
    for name in plan.arg_names:
        if name not in values:
            break
        args.append(values.pop(name))
    plan.kernel.run(*args, grid=launch_grid, warmup=False, **values)


@triton_kernel_wrapper_mutation.py_impl(DispatchKey.CompositeExplicitAutograd)
def mutation_dense(
    *,
    kernel_idx: int,
    constant_args_idx: int,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
) -> None:
    launch_raw(kernel_idx, constant_args_idx, grid, kwargs)


def functional_outputs(
    kwargs: Mapping[str, Any],
    tensors_to_clone: Sequence[str],
    layouts: Mapping[str, Sequence[Any]],
) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """The rebuilt kernel arguments (Note [alias groups]) and the written ones by name."""
    new_kwargs = rebuild_arguments(kwargs, layouts)
    return new_kwargs, {name: new_kwargs[name] for name in tensors_to_clone}


@triton_kernel_wrapper_functional.py_impl(DispatchKey.CompositeExplicitAutograd)
def functional_dense(
    *,
    kernel_idx: int,
    constant_args_idx: int,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
    tensors_to_clone: Sequence[str],
    layouts: Mapping[str, Sequence[Any]],
) -> dict[str, Tensor]:
    new_kwargs, outputs = functional_outputs(kwargs, tensors_to_clone, layouts)
    launch_raw(kernel_idx, constant_args_idx, grid, new_kwargs)
    write_back(kwargs, new_kwargs, layouts)  # groups a reinplaced node launches in place
    return outputs


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
