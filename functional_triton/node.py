"""The node contract: a launch node's arguments as one type, and what its side-table entries hold.

An FX node of either operator holds keyword arguments only, as API.md fixes them:
``kernel_idx, constant_args_idx, grid, kwargs`` (the functional form adds ``tensors_to_clone``
and ``layouts``). ``MutationNode`` and ``FunctionalNode`` are how Python code reads and writes
them: every rule receives one, and ``as_kwargs()`` is what a node (or an operator call) holds.
``layouts`` stay tuples in the graph (``aliasing.LayoutTuple``); ``FunctionalNode.arg_layouts``
reads them as ``ArgLayout``s, whose ``sharing`` names the state the group id encodes.

The constants of a launch carry reserved keys besides the kernel's own constant arguments
(descriptor metadata, tuple templates, the traced geometry, constexpr guards). ``launch_plan``
decodes a node's side-table entries once, and this module is the only place that does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from .aliasing import ArgLayout, LayoutTuple, TracedGeometry
from .descriptors import DESCRIPTORS_KEY, with_descriptors
from .launch_spec import CONSTEXPR_GUARD_PREFIX, CONSTEXPR_GUARDS_KEY, kernel_info
from .portable import resolve
from .side_table import kernel_side_table
from .tuples import TUPLES_KEY, with_tuples

# A side-table index, or while exporting a portable reference (Note [portable references]).
TableRef = int | str

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


@dataclasses.dataclass(slots=True)
class MutationNode:
    """``triton_kernel_wrapper_mutation(*, kernel_idx, constant_args_idx, grid, kwargs)``.

    Read-only by convention (``FunctionalNode.replace`` makes a changed copy); not frozen, since
    every operator call on plain tensors builds one and a frozen dataclass costs several times more.
    """

    kernel_idx: TableRef
    constant_args_idx: TableRef
    grid: Sequence[Any] | None  # None: the side table holds a grid callable
    kwargs: dict[str, Any]  # the kernel's tensor and symbolic arguments by parameter name

    def as_kwargs(self) -> dict[str, Any]:
        """The node's keyword arguments, as the graph holds them."""
        return {
            "kernel_idx": self.kernel_idx,
            "constant_args_idx": self.constant_args_idx,
            "grid": self.grid,
            "kwargs": self.kwargs,
        }

    @property
    def plan(self) -> LaunchPlan:
        return launch_plan(self.kernel_idx, self.constant_args_idx)

    @property
    def kernel_name(self) -> str:
        return kernel_info(self.plan.kernel).name


@dataclasses.dataclass(slots=True)
class FunctionalNode(MutationNode):
    """``triton_kernel_wrapper_functional(*, ..., tensors_to_clone, layouts) -> dict[str, Tensor]``."""

    tensors_to_clone: Sequence[str]  # the arguments the kernel may write: the outputs, by name
    layouts: Mapping[str, LayoutTuple]  # every tensor argument's geometry and group (Note [alias groups])

    def as_kwargs(self) -> dict[str, Any]:
        return {
            **MutationNode.as_kwargs(self),
            "tensors_to_clone": self.tensors_to_clone,
            "layouts": self.layouts,
        }

    def arg_layouts(self) -> dict[str, ArgLayout]:
        return {name: ArgLayout.from_tuple(raw) for name, raw in self.layouts.items()}

    def replace(self, **changes: Any) -> FunctionalNode:
        return dataclasses.replace(self, **changes)


class LaunchPlan(NamedTuple):
    """What a replayed launch needs, decoded once per (kernel, constants) pair."""

    kernel: Any
    grid_fn: Any
    arg_names: tuple[str, ...]
    constants: dict[str, Any]  # the kernel's own constant arguments, reserved keys removed
    descriptors: dict[str, Any]
    geometry: tuple[tuple[str, TracedGeometry], ...]  # Note [traced geometry]
    tuples: dict[str, Any]  # Note [tuple arguments]
    guarded_names: tuple[str, ...]  # constexprs specialised from symbolic values (Note [constexpr guards])
    # Note [planned launches]: every parameter in order, its constant or None where it comes
    # from the node's kwargs (``dynamic``: those, by position); the constants that are no
    # parameter (launch options). ``positional`` is None where the launch is not a simple one
    # (a grid callable, descriptors, tuples, guards).
    positional: tuple[Any, ...] | None
    dynamic: tuple[tuple[int, str], ...]
    keyword_constants: dict[str, Any]


# Note [planned launches]
# A replayed launch binds its arguments the way ``kernel[grid](...)`` is called: the kernel's
# parameters positionally, in order, as far as they are given (constants and the node's kwargs
# merged), the rest by keyword. For a simple launch (static grid, no descriptors, tuples or
# constexpr guards) which parameter comes from where depends only on the node's side-table
# entries, so ``_plan`` decides it once: the launch then fills the node's tensors and symbols
# into that order (``dense.launch_planned``), with no dict merged per call.


def _plan(entry: tuple[Any, Any], constants: Mapping[str, Any]) -> LaunchPlan:
    """The one decoder of the reserved constants keys."""
    kernel, grid_fn = entry
    constants = dict(constants)
    descriptors = constants.pop(DESCRIPTORS_KEY, {})
    geometry = constants.pop(GEOMETRY_KEY, ())
    tuples = constants.pop(TUPLES_KEY, {})
    guarded = constants.pop(CONSTEXPR_GUARDS_KEY, ())
    arg_names = tuple(kernel_info(kernel).arg_names)
    simple = grid_fn is None and not (descriptors or tuples or guarded)
    positional = tuple(constants.get(name) for name in arg_names) if simple else None
    dynamic = tuple((i, name) for i, name in enumerate(arg_names) if name not in constants)
    keyword_constants = {k: v for k, v in constants.items() if k not in arg_names}
    return LaunchPlan(
        kernel,
        grid_fn,
        arg_names,
        constants,
        descriptors,
        geometry,
        tuples,
        guarded,
        positional,
        dynamic,
        keyword_constants,
    )


def launch_plan(kernel_idx: TableRef, constant_args_idx: TableRef) -> LaunchPlan:
    """The kernel, grid callable, constants and descriptors a node names (do not mutate them)."""
    if isinstance(kernel_idx, str) or isinstance(constant_args_idx, str):  # Note [portable references]
        kernel_idx, constant_args_idx = resolve(kernel_idx, constant_args_idx)
    plan: LaunchPlan = kernel_side_table.derived(kernel_idx, constant_args_idx, _plan)
    return plan


def check_constexpr_guards(plan: LaunchPlan, values: dict[str, Any]) -> None:
    """Pop each guarded constexpr's recomputed value from ``values``; raise if it changed."""
    for name in plan.guarded_names:
        actual = values.pop(CONSTEXPR_GUARD_PREFIX + name)
        if actual != values[name]:
            raise ValueError(
                f"argument '{name}' of {kernel_info(plan.kernel).name} is a tl.constexpr specialised to "
                f"{values[name]!r} when the graph was traced; these inputs give {actual!r}: "
                "trace again for them"
            )


def kernel_arguments(plan: LaunchPlan, kwargs: Mapping[str, Any], *, checked: bool = True) -> dict[str, Any]:
    """Every kernel argument by parameter name: constants, descriptors and tuples rebuilt.

    ``checked=False`` builds descriptors over traced tensors (see ``descriptors.rebuild``).
    """
    values = {**plan.constants, **kwargs}
    if plan.descriptors:
        values = with_descriptors(values, plan.descriptors, checked=checked)
    if plan.tuples:
        values = with_tuples(values, plan.tuples)
    return values
