"""The two higher-order operators and their dense (eager) rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch._C import DispatchKey
from torch._ops import HigherOrderOperator

from ._compat import (
    current_dispatch_mode,
    fx_sees_side_effect,
    mode_rule_types,
    pop_dispatch_mode,
    register_ordered_effect,
)
from .aliasing import (
    TracedGeometry,
    check_traced_geometry,
    check_untraced_aliasing,
    rebuild_arguments,
    traced_geometry,
    write_back,
)
from .bounds import checking_bounds, launch_checked_bounds
from .descriptors import DESCRIPTORS_KEY, with_descriptors
from .kernel import (
    CONSTEXPR_GUARD_PREFIX,
    CONSTEXPR_GUARDS_KEY,
    GridByConfig,
    LaunchSpec,
    _is_plain,
    checked_grid_fn,
    kernel_info,
)
from .portable import exported_grid, node_indices, resolve
from .side_table import kernel_side_table
from .tuples import TUPLES_KEY, with_tuples


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

    def __call__(  # type: ignore[override]
        self,
        *,
        kernel_idx: int,
        constant_args_idx: int,
        grid: Sequence[Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
        if _is_plain((), kwargs):  # Note [no dispatch for plain tensors]
            return launch_checked(kernel_idx, constant_args_idx, grid, kwargs)
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


# Note [traced geometry]
# A mutation node launches with the scalars (sizes, strides, numel) and the grid of the
# launch it was traced from. Replayed on tensors of other sizes or strides (a plain make_fx
# graph has no other guard), it would launch with stale values and raise nothing. So the
# launch records each tensor argument's sizes and strides among its constants (under a
# reserved key: the node's signature stays as API.md fixes it), and the mutation rule
# compares them with the tensors it is given before launching, raising ValueError naming
# the argument. Symbolic entries are recorded as None (the graph computes those), and only
# strides that matter are compared (_strides_agree). The functional form checks its layouts
# instead (rebuild_arguments), so its launch of rebuilt views skips this check.
GEOMETRY_KEY = "__functional_triton_geometry__"


def launch_traced(spec: LaunchSpec) -> None:
    """Record a launch as a mutation-operator call (tracing modes take it from here)."""
    if spec.traced_grid is not None:  # Note [traced grids]
        grid, grid_fn = spec.traced_grid
    else:
        exported = exported_grid(spec)  # Note [portable references]
        grid, grid_fn = (None, exported) if callable(exported) else (tuple(exported), None)
    geometry = tuple(
        (name, traced_geometry(t)) for name, t in spec.tensors.items() if isinstance(t, Tensor)
    )  # Note [traced geometry]
    kernel_idx, constant_args_idx = node_indices(
        spec.kernel, grid_fn, {**spec.constants, GEOMETRY_KEY: geometry}
    )
    triton_kernel_wrapper_mutation(
        kernel_idx=kernel_idx,
        constant_args_idx=constant_args_idx,
        grid=grid,
        kwargs=dict(spec.tensors),
    )


class _LaunchPlan(NamedTuple):
    """What a replayed launch needs, computed once per (kernel, constants) pair."""

    kernel: Any
    grid_fn: Any
    arg_names: tuple[str, ...]
    constants: dict[str, Any]
    descriptors: dict[str, Any]
    geometry: tuple[tuple[str, TracedGeometry], ...]  # Note [traced geometry]
    tuples: dict[str, Any]  # Note [tuple arguments]
    guarded_names: tuple[str, ...]  # constexprs specialised from symbolic values (Note [constexpr guards])


def _plan(entry: tuple[Any, Any], constants: Mapping[str, Any]) -> _LaunchPlan:
    kernel, grid_fn = entry
    constants = dict(constants)
    descriptors = constants.pop(DESCRIPTORS_KEY, {})
    geometry = constants.pop(GEOMETRY_KEY, ())
    tuples = constants.pop(TUPLES_KEY, {})
    guarded = constants.pop(CONSTEXPR_GUARDS_KEY, ())
    arg_names = tuple(kernel_info(kernel).arg_names)
    return _LaunchPlan(kernel, grid_fn, arg_names, constants, descriptors, geometry, tuples, guarded)


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
    if isinstance(kernel_idx, str) or isinstance(constant_args_idx, str):  # Note [portable references]
        kernel_idx, constant_args_idx = resolve(kernel_idx, constant_args_idx)
    return kernel_side_table.derived(kernel_idx, constant_args_idx, _plan)  # type: ignore[no-any-return]


def kernel_arguments(plan: _LaunchPlan, kwargs: Mapping[str, Any], *, checked: bool = True) -> dict[str, Any]:
    """Every kernel argument by parameter name: constants, descriptors and tuples rebuilt.

    ``checked=False`` builds descriptors over traced tensors (see ``descriptors.rebuild``).
    """
    values = {**plan.constants, **kwargs}
    if plan.descriptors:
        values = with_descriptors(values, plan.descriptors, checked=checked)
    if plan.tuples:
        values = with_tuples(values, plan.tuples)
    return values


def launch_raw(
    kernel_idx: int, constant_args_idx: int, grid: Sequence[Any] | None, kwargs: Mapping[str, Any]
) -> None:
    """Launch the registered kernel on real tensors, exactly as ``kernel[grid](...)``."""
    _launch_planned(launch_plan(kernel_idx, constant_args_idx), grid, kwargs)


def _launch_planned(plan: _LaunchPlan, grid: Sequence[Any] | None, kwargs: Mapping[str, Any]) -> None:
    """``launch_raw`` with its plan looked up (replayed launch nodes run this on every call)."""
    values = {**plan.constants, **kwargs}
    if plan.guarded_names:
        check_constexpr_guards(plan, values)
    if plan.descriptors or plan.tuples:
        values = kernel_arguments(plan, values)
    if isinstance(plan.grid_fn, GridByConfig):  # Note [traced grids]
        assert grid is not None, "functional_triton internal error: per-config node without grids"
        launch_grid: Any = plan.grid_fn.chooser(grid)
    elif plan.grid_fn is not None:
        tensors = {n: v for n, v in kwargs.items() if isinstance(v, Tensor)}
        launch_grid = checked_grid_fn(plan.grid_fn, tensors)
    else:
        assert grid is not None, "functional_triton internal error: node without a grid"
        launch_grid = grid  # the graph's code passes a tuple of ints: nothing to convert
        if type(grid) is not tuple:
            launch_grid = tuple(int(g) for g in grid)
        else:
            for g in grid:
                if type(g) is not int:
                    launch_grid = tuple(int(g) for g in grid)
                    break
    # Positional where possible: some triton versions drop keyword arguments in hooks.
    args = []
    for name in plan.arg_names:
        if name not in values:
            break
        args.append(values.pop(name))
    plan.kernel.run(*args, grid=launch_grid, warmup=False, **values)


def launch_checked(
    kernel_idx: int, constant_args_idx: int, grid: Sequence[Any] | None, kwargs: Mapping[str, Any]
) -> None:
    """``launch_raw`` after checking the tensors' sizes and strides (Note [traced geometry])."""
    plan = launch_plan(kernel_idx, constant_args_idx)  # once: launch_raw would look it up again
    for name, geometry in plan.geometry:
        t = kwargs.get(name)
        if isinstance(t, Tensor):
            check_traced_geometry(name, t, geometry)
    _launch_planned(plan, grid, kwargs)


@triton_kernel_wrapper_mutation.py_impl(DispatchKey.CompositeExplicitAutograd)
def mutation_dense(
    *,
    kernel_idx: int,
    constant_args_idx: int,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
) -> None:
    launch_checked(kernel_idx, constant_args_idx, grid, kwargs)


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
    check_untraced_aliasing(kwargs, layouts)
    if checking_bounds():  # Note [kernels stay within their arguments]
        name = kernel_info(launch_plan(kernel_idx, constant_args_idx).kernel).name
        new_kwargs = launch_checked_bounds(
            lambda args: launch_raw(kernel_idx, constant_args_idx, grid, args),
            name,
            kwargs,
            layouts,
            tensors_to_clone,
        )
        outputs = {n: new_kwargs[n] for n in tensors_to_clone}
    else:
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
