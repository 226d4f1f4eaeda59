"""Running a node on real tensors: the dense (eager) rule of each operator.

Both operators call these directly on plain tensors (Note [no dispatch for plain tensors]),
and register them for ``DispatchKey.CompositeExplicitAutograd`` (registrations.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from .aliasing import check_traced_geometry, check_untraced_aliasing, functional_outputs, write_back
from .bounds import checking_bounds, launch_checked_bounds
from .launch_spec import GridByConfig, checked_grid_fn
from .node import (
    FunctionalNode,
    LaunchPlan,
    MutationNode,
    check_constexpr_guards,
    kernel_arguments,
)


def launch_raw(node: MutationNode, kwargs: Mapping[str, Any] | None = None) -> None:
    """Launch the node's kernel on real tensors (``kwargs``, default the node's), as ``kernel[grid](...)``."""
    kwargs = node.kwargs if kwargs is None else kwargs
    grid = node.grid
    plan = node.plan
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


def launch_planned(plan: LaunchPlan, grid: Any, kwargs: Mapping[str, Any]) -> bool:
    """Launch as ``launch_raw`` would, binding as ``plan`` decided (Note [planned launches]).

    False, launching nothing, where the plan does not decide it (the caller calls ``launch_raw``).
    """
    positional, dynamic = plan.positional, plan.dynamic
    if positional is None or len(kwargs) != len(dynamic) or type(grid) is not tuple:
        return False
    args = list(positional)
    try:
        for i, name in dynamic:
            args[i] = kwargs[name]
    except KeyError:  # a parameter left to its default: bound as launch_raw binds it
        return False
    for g in grid:
        if type(g) is not int:  # the graph's code passes ints: nothing to convert
            grid = tuple(int(g) for g in grid)
            break
    if plan.keyword_constants:
        plan.kernel.run(*args, grid=grid, warmup=False, **plan.keyword_constants)
    else:
        plan.kernel.run(*args, grid=grid, warmup=False)
    return True


def mutation_dense(node: MutationNode) -> None:
    """``launch_raw`` after checking the tensors' sizes and strides (Note [traced geometry])."""
    plan = node.plan
    for name, geometry in plan.geometry:
        t = node.kwargs.get(name)
        if isinstance(t, Tensor):
            check_traced_geometry(name, t, geometry)
    if not launch_planned(plan, node.grid, node.kwargs):
        launch_raw(node)


def functional_dense(node: FunctionalNode) -> dict[str, Tensor]:
    """Clone the written groups, launch on the clones, return them by name (Note [alias groups])."""
    kwargs, layouts, to_clone = node.kwargs, node.layouts, node.tensors_to_clone
    check_untraced_aliasing(kwargs, layouts)
    if checking_bounds():  # Note [kernels stay within their arguments]
        new_kwargs = launch_checked_bounds(
            lambda args: launch_raw(node, args), node.kernel_name, kwargs, layouts, to_clone
        )
        outputs = {n: new_kwargs[n] for n in to_clone}
    else:
        new_kwargs, outputs = functional_outputs(kwargs, to_clone, layouts)
        if not launch_planned(node.plan, node.grid, new_kwargs):
            launch_raw(node, new_kwargs)
    write_back(kwargs, new_kwargs, layouts)  # groups a reinplaced node launches in place
    return outputs
