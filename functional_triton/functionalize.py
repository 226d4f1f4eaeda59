"""Functionalization: every mutation call becomes a functional call plus updates.

See Note [alias groups] in aliasing.py for how arguments that share storage are
cloned once and rebuilt, so that aliasing arguments see each other's writes.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from .aliasing import compute_layouts, geometry_of
from .descriptors import DESCRIPTORS_KEY, with_descriptors
from .hops import KEEP_ALIVE, triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation
from .kernel import kernel_info
from .side_table import kernel_side_table


class AnalysisWarning(UserWarning):
    """Mutation analysis was unsure; every tensor argument is treated as written."""


_warned: weakref.WeakSet[Any] = weakref.WeakSet()
_warned_lock = threading.Lock()


def _warn_once(fn: Any, name: str, reason: str) -> None:
    with _warned_lock:
        if fn in _warned:
            return
        _warned.add(fn)
    warnings.warn(
        f"functional_triton could not tell which arguments {name} writes ({reason}); "
        "treating every tensor argument as written (correct, but it clones them all)",
        AnalysisWarning,
        stacklevel=3,
    )


def written_names(kernel_idx: int, constant_args_idx: int, kwargs: Mapping[str, Any]) -> frozenset[str]:
    """The tensor arguments the kernel may write; all of them (with a warning) if unsure."""
    return analyze(kernel_idx, constant_args_idx, kwargs)[0]


def analyze(
    kernel_idx: int, constant_args_idx: int, kwargs: Mapping[str, Any]
) -> tuple[frozenset[str], bool]:
    """(the tensor arguments the kernel may write, whether it may have effects beyond them).

    Unsure: every tensor argument, with one warning per kernel. A kernel with effects the
    outputs do not carry (Note [keep alive]) that provably writes none of its arguments
    still counts every tensor argument as written, so that its node has outputs to keep.
    """
    kernel, _ = kernel_side_table.get_kernel(kernel_idx)
    constants = dict(kernel_side_table.get_constants(constant_args_idx))
    descriptors = constants.pop(DESCRIPTORS_KEY, {})
    tensor_names = frozenset(n for n, v in kwargs.items() if isinstance(v, Tensor))
    info = kernel_info(kernel)
    try:
        from .mutation import analyze_writes
    except ImportError:
        _warn_once(info.fn, info.name, "mutation analysis is not available")
        return tensor_names, True
    analysis = analyze_writes(kernel, with_descriptors({**constants, **kwargs}, descriptors, checked=False))
    if analysis.written_names is None:
        _warn_once(info.fn, info.name, analysis.reason or "unknown reason")
        return tensor_names, True
    written = analysis.written_names & tensor_names
    if analysis.opaque_side_effects and not written:
        return tensor_names, True
    return written, analysis.opaque_side_effects


def keep_node_alive(ctx: Any, outputs: Mapping[str, Tensor]) -> None:
    """Record an effectful use of a functional node's outputs (Note [keep alive])."""
    values = list(outputs.values())
    if not values:
        return  # a kernel without tensor arguments: nothing to hang it on
    mode = getattr(ctx, "mode", None)
    if mode is not None and hasattr(mode, "_tokens"):  # FunctionalTensorMode: thread a token
        from torch._higher_order_ops.effects import handle_effects

        handle_effects(mode._allow_token_discovery, mode._tokens, KEEP_ALIVE, (ctx.wrap_tensors(values),), {})
        return
    with ctx.redispatch_to_next():
        KEEP_ALIVE(values)


def views_are_copies(ctx: Any) -> bool:
    """True under ``functionalize(remove="mutations_and_views")``: views arrive as copies."""
    interpreter = getattr(ctx, "interpreter", None)
    if interpreter is not None:  # torch.func.functionalize
        return not interpreter.functionalize_add_back_views()
    if type(ctx).__name__ == "CppFunctionalizeAPI":
        return not torch._C._functionalization_reapply_views_tls()
    return False  # FunctionalTensorMode (AOTAutograd) always keeps views


def check_aliasing_supported(tensors: Mapping[str, Tensor], layouts: Mapping[str, Sequence[Any]]) -> None:
    """Refuse distinct aliasing arguments when views are copies: their true geometry is gone."""
    by_group: dict[int, list[str]] = {}
    for name, layout in layouts.items():
        if layout[0] >= 0:
            by_group.setdefault(layout[0], []).append(name)
    for names in by_group.values():
        distinct = {id(tensors[n]) for n in names}
        if len(distinct) > 1:
            raise NotImplementedError(
                f"kernel arguments {', '.join(repr(n) for n in names)} share storage and the kernel "
                "may write one of them; under functionalize(remove='mutations_and_views') views "
                "are copies whose strides and offsets differ from eager, so their aliasing cannot "
                "be reproduced. Use remove='mutations' (the default) or aot_function."
            )


@triton_kernel_wrapper_mutation.py_functionalize_impl
def mutation_functionalize(
    ctx: Any,
    *,
    kernel_idx: int,
    constant_args_idx: int,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
) -> None:
    written, keep = analyze(kernel_idx, constant_args_idx, kwargs)
    tensors = {n: v for n, v in kwargs.items() if isinstance(v, Tensor)}
    # Before unwrapping: that syncs pending writes through aliases, which may re-stride a
    # tensor after the program read its strides (see compute_layouts).
    seen = {n: geometry_of(t) for n, t in tensors.items()}
    unwrapped = ctx.unwrap_tensors(kwargs)
    copies = views_are_copies(ctx)
    layouts = compute_layouts(tensors, written, None if copies else unwrapped, seen)
    if copies:
        check_aliasing_supported(tensors, layouts)
    to_clone = [n for n in kwargs if n in written]
    with ctx.redispatch_to_next():
        outputs = triton_kernel_wrapper_functional(
            kernel_idx=kernel_idx,
            constant_args_idx=constant_args_idx,
            grid=grid,
            kwargs=unwrapped,
            tensors_to_clone=to_clone,
            layouts=layouts,
        )
    if keep:
        keep_node_alive(ctx, outputs)
    done: set[int] = set()
    for name in to_clone:
        original = kwargs[name]
        if id(original) in done:  # the same tensor passed twice: one update suffices
            continue
        done.add(id(original))
        ctx.replace(original, outputs[name])
        ctx.mark_mutation_hidden_from_autograd(original)
        ctx.commit_update(original)
        ctx.sync(original)


@triton_kernel_wrapper_functional.py_functionalize_impl
def functional_functionalize(
    ctx: Any,
    *,
    kernel_idx: int,
    constant_args_idx: int,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
    tensors_to_clone: Sequence[str],
    layouts: Mapping[str, Sequence[Any]],
) -> dict[str, Tensor]:
    unwrapped = ctx.unwrap_tensors(kwargs)
    with ctx.redispatch_to_next():
        outputs = triton_kernel_wrapper_functional(
            kernel_idx=kernel_idx,
            constant_args_idx=constant_args_idx,
            grid=grid,
            kwargs=unwrapped,
            tensors_to_clone=tensors_to_clone,
            layouts=layouts,
        )
    return ctx.wrap_tensors(outputs)  # type: ignore[no-any-return]
