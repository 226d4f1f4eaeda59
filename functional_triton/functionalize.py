"""Functionalization: every mutation call becomes a functional call plus updates.

See Note [alias groups] in aliasing.py for how arguments that share storage are
cloned once and rebuilt, so that aliasing arguments see each other's writes.
"""

from __future__ import annotations

import logging
import threading
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor, fx
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.fx.experimental.proxy_tensor import (
    disable_proxy_modes_tracing,
    get_proxy_mode,
    track_tensor_tree,
)

from ._compat import (
    FunctionalizeContext,
    backward_leaf_copy_back_fails,
    functionalize_reapplies_views,
    guard_or_false,
    in_backward_pass,
    inner_as_strided_in_view_chain,
    is_functional_tensor,
    is_view_op,
    known_equal,
    pytree,
    replay_views,
    thread_effect_token,
    threads_effect_tokens,
    view_chain,
    view_meta_args,
    view_meta_name,
)
from .aliasing import (
    ArgLayout,
    LayoutTuple,
    Sharing,
    compute_layouts,
    geometry_of,
    same_shape,
    surely_no_overlap,
)
from .hops import KEEP_ALIVE, triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation
from .launch_spec import kernel_info
from .node import FunctionalNode, MutationNode, kernel_arguments

log = logging.getLogger(__name__)


class AnalysisWarning(UserWarning):
    """Mutation analysis was unsure; every tensor argument is treated as written."""


_warned: weakref.WeakSet[Any] = weakref.WeakSet()
_warned_lock = threading.Lock()


def _warn_once(fn: Any, name: str, reason: str, outside: bool = False) -> None:
    with _warned_lock:
        if fn in _warned:
            return
        _warned.add(fn)
    if outside:  # cloning every argument does not cover these writes: say so
        consequence = (
            "treating every tensor argument as written. It may also write memory outside its "
            "arguments (through a pointer loaded from memory or made from an integer): the graph "
            "cannot order such writes against other operations, and they are not functionalized"
        )
    else:
        consequence = "treating every tensor argument as written (correct, but it clones them all)"
    warnings.warn(
        f"functional_triton could not tell which arguments {name} writes ({reason}); {consequence}",
        AnalysisWarning,
        stacklevel=3,
    )


class Analysis(NamedTuple):
    """What functionalization needs to know about one launch."""

    written: frozenset[str]  # the tensor arguments the kernel may write
    exact: bool  # False: the analysis could not tell, every tensor argument is assumed written
    keep: bool  # the kernel may have effects beyond its outputs (Note [keep alive])


def analyze(node: MutationNode) -> Analysis:
    """The launch's writes; every tensor argument (with one warning per kernel) if unsure.

    A kernel with effects its outputs do not carry that provably writes none of its
    arguments still counts every tensor argument as written, so that its node has
    outputs to keep alive.
    """
    from .mutation import analyze_writes  # at first use: it loads triton's compiler frontend

    plan = node.plan
    tensor_names = frozenset(n for n, v in node.kwargs.items() if isinstance(v, Tensor))
    info = kernel_info(plan.kernel)
    analysis = analyze_writes(plan.kernel, kernel_arguments(plan, node.kwargs, checked=False))
    if analysis.written_names is None:
        _warn_once(info.fn, info.name, analysis.reason or "unknown reason", analysis.writes_outside_arguments)
        return Analysis(tensor_names, False, True)
    written = analysis.written_names & tensor_names
    if analysis.opaque_side_effects and not written:
        return Analysis(tensor_names, True, True)
    return Analysis(written, True, analysis.opaque_side_effects)


def keep_node_alive(ctx: FunctionalizeContext, outputs: Mapping[str, Tensor]) -> None:
    """Record an effectful use of a functional node's outputs (Note [keep alive])."""
    values = list(outputs.values())
    if not values:
        return  # no tensor written: a launch without functional tensors never gets here
    mode = getattr(ctx, "mode", None)
    if mode is not None and threads_effect_tokens(mode):  # FunctionalTensorMode: thread a token
        thread_effect_token(mode, KEEP_ALIVE, (ctx.wrap_tensors(values),))
        return
    with ctx.redispatch_to_next():
        KEEP_ALIVE(values)


def views_are_copies(ctx: FunctionalizeContext) -> bool:
    """True under ``functionalize(remove="mutations_and_views")``: views arrive as copies."""
    interpreter = getattr(ctx, "interpreter", None)
    if interpreter is not None:  # torch.func.functionalize
        return not interpreter.functionalize_add_back_views()
    if type(ctx).__name__ == "CppFunctionalizeAPI":
        return not functionalize_reapplies_views()
    return False  # FunctionalTensorMode (AOTAutograd) always keeps views


# Note [aliasing arguments when views are copies]
# Under ``functionalize(remove="mutations_and_views")`` every view is a ``*_copy``: the program
# sees (and passes to the kernel) each view's materialised copy, whose metadata is the copy's
# (contiguous, storage offset 0), and the unwrapped values share no memory. What survives is
# the functional tensors' storage (who aliases whom) and each one's chain of views from its
# storage's base (``ViewMeta``s). The base itself is not reachable from Python, so a group of
# distinct aliasing arguments is rebuilt around a *root*: a member whose chain is a prefix of
# every member's chain (the base itself, or a view the others are views of). Each member's
# layout is the rest of its chain replayed as real views on the root's value, so the members
# sit in one buffer as they sit in the root, and the kernel sees every alias's writes. That is
# eager's aliasing when
#   - the root's own elements are distinct memory in eager, as its copy's are: its chain holds
#     no view that repeats elements (``expand``, an overlapping ``as_strided``, ``unfold`` with a
#     step below its size): such a root, or one whose view ops are not known here, raises;
#   - each member's replayed strides agree with its copy's (what the kernel is told, and indexes
#     with): a slice of rows or a narrowing of a vector does, a transpose or a column slice does
#     not, and raises naming the argument (eager's kernel would be told other strides);
#   - no member's chain has ``as_strided`` after the root (copies number its offsets from the
#     copy, eager from the storage): raises.
# Members without a root among the arguments (two slices of a tensor not passed itself) raise
# too, naming them: their relation is the base's layout, which is not available.

# Views whose elements are distinct memory when their input's are (checked again for as_strided,
# unfold); names as ``view_meta_name`` gives them.
_DISTINCT_ELEMENT_VIEWS = frozenset(
    {
        "alias",
        "detach",
        "detach_",
        "diagonal",
        "lift_fresh",
        "permute",
        "select_int",
        "slice_Tensor",
        "split_Tensor",
        "split_with_sizes",
        "squeeze",
        "squeeze_",
        "squeeze_dim",
        "squeeze__dim",
        "squeeze_dims",
        "squeeze__dims",
        "t",
        "t_",
        "transpose_int",
        "transpose_",
        "unbind_int",
        "unsqueeze",
        "unsqueeze_",
        "view",
        "_reshape_alias",
        "_unsafe_view",
    }
)


def _keeps_elements_distinct(meta: Any) -> bool:
    name, args = view_meta_name(meta), view_meta_args(meta)
    if name in _DISTINCT_ELEMENT_VIEWS:
        return True
    if name == "as_strided":
        size, stride = args[0], args[1]
        return surely_no_overlap(size, stride)
    if name == "unfold":  # (dimension, size, step): windows overlap when the step is shorter
        step_covers: bool = guard_or_false(args[2] >= args[1])
        return step_covers
    return False


def _same_view(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if view_meta_name(a) != view_meta_name(b):
        return False
    xs, ys = view_meta_args(a), view_meta_args(b)
    return len(xs) == len(ys) and all(_same_value(x, y) for x, y in zip(xs, ys))


def _same_value(x: Any, y: Any) -> bool:
    if isinstance(x, (list, tuple)) or isinstance(y, (list, tuple)):
        return (
            isinstance(x, (list, tuple))
            and isinstance(y, (list, tuple))
            and len(x) == len(y)
            and all(_same_value(a, b) for a, b in zip(x, y))
        )
    if isinstance(x, torch.SymInt) or isinstance(y, torch.SymInt):
        return known_equal(x, y)
    return bool(x == y)


def copied_views_layouts(
    ctx: FunctionalizeContext,
    tensors: Mapping[str, Tensor],
    unwrapped: Mapping[str, Any],
    layouts: Mapping[str, LayoutTuple],
) -> dict[str, LayoutTuple]:
    """The layouts of distinct aliasing arguments when views are copies (Note [aliasing ... copies])."""
    by_group: dict[int, list[str]] = {}
    for name, raw in layouts.items():
        layout = ArgLayout.from_tuple(raw)
        if layout.sharing is Sharing.CLONED:
            by_group.setdefault(layout.group, []).append(name)
    result = dict(layouts)
    for gid, names in by_group.items():
        if len({id(tensors[n]) for n in names}) > 1:
            result.update(_group_from_root(ctx, gid, names, tensors, unwrapped, layouts))
    return result


def _refuse_copied_views(names: Sequence[str], why: str) -> NotImplementedError:
    return NotImplementedError(
        f"kernel arguments {', '.join(repr(n) for n in names)} share storage and the kernel may write "
        f"one of them; under functionalize(remove='mutations_and_views') views are copies, and {why}. "
        "Use remove='mutations' (the default) or aot_function"
    )


def _group_from_root(
    ctx: FunctionalizeContext,
    gid: int,
    names: Sequence[str],
    tensors: Mapping[str, Tensor],
    unwrapped: Mapping[str, Any],
    layouts: Mapping[str, LayoutTuple],
) -> dict[str, LayoutTuple]:
    chains = {n: view_chain(tensors[n]) for n in names}
    if any(c is None for c in chains.values()):
        raise _refuse_copied_views(names, "this torch does not tell which views they are")
    known = {n: c for n, c in chains.items() if c is not None}
    root = min(names, key=lambda n: len(known[n]))
    prefix = known[root]
    for n in names:
        if not all(_same_view(a, b) for a, b in zip(prefix, known[n])):
            raise _refuse_copied_views(
                names,
                "neither their storage's base nor a view all of them are views of is among the "
                f"kernel's arguments ('{n}' is no view of '{root}'), so where they sit relative to each "
                "other is unknown. Pass that base (or such a view) to the kernel too",
            )
    if not all(_keeps_elements_distinct(m) for m in prefix):
        ops = ", ".join(view_meta_name(m) for m in prefix)
        raise _refuse_copied_views(
            names,
            f"'{root}' (views {ops} of its storage's base) may repeat elements in eager, where its copy "
            "does not",
        )
    result: dict[str, LayoutTuple] = {}
    root_value = unwrapped[root]
    with ctx.redispatch_to_next(), disable_proxy_modes_tracing():
        for n in names:
            rest = known[n][len(prefix) :]
            if any(view_meta_name(m) == "as_strided" for m in rest):
                raise _refuse_copied_views(
                    names,
                    f"'{n}' is made with as_strided() from '{root}': a copy counts its offset from "
                    "the copy, eager from the storage",
                )
            view = replay_views(root_value, rest) if rest else root_value
            group_geometry = geometry_of(view)
            told = layouts[n][1:]
            if not same_shape(group_geometry, (told[0], told[1], told[2])):
                raise _refuse_copied_views(
                    names,
                    f"'{n}' has strides {tuple(told[1])} as a copy (what the kernel is told) but "
                    f"{tuple(group_geometry[1])} as a view of '{root}' (as in eager): the kernel "
                    "would be told other strides than in eager",
                )
            result[n] = ArgLayout(gid, *group_geometry).as_tuple()
    return result


# Note [backward writes to forward tensors]
# A Function's backward may launch a kernel that writes a tensor its forward created and saved.
# Eagerly, whoever holds that tensor sees the write once backward has run; when the tensor is an
# output of the traced program, that is the caller (pytorch#174124). AOTAutograd traces one joint
# graph, where functionalization makes the post-backward value the forward output; the partitioner
# cannot compute it in the forward graph (it depends on the backward), and AOTAutograd carries a
# backward's writes back into graph *inputs* only. Since pytorch#174132 (in torch 2.13) the
# partitioner answers a forward output ``getitem(hop, k)``, or a view or reshape of one, with
# ``hop.kwargs["kwargs"][k]``, the value before the write: for this operator a silent wrong
# result, the caller's tensor keeps its forward value. No torch API can carry the write to the
# caller (a copy_ into a non-input fails AOTAutograd's functional-graph check), so it must raise.
#
# Whether the written value reaches a forward output is known only once the joint graph is
# complete, in the partitioner: while the backward is traced, a forward tensor the caller will
# hold and one it never sees (an intermediate, a preallocated gradient buffer) look the same. So
# the rule makes the partitioner refuse exactly the visible case. When a kernel inside a backward
# is known to write a tensor (or a view of one) computed by the joint graph's forward, not a graph
# input (AOTAutograd copies written inputs back itself), the new value goes through an
# ``aten.alias`` node that
#   - the partitioner's remap does not look through, and
#   - is tagged "must_be_in_backward", so that a kernel reading no gradient is not moved into the
#     forward graph either (the caller would see the write before backward ran).
# A forward output that reaches it is "invalid" to the partitioner, which raises
# ``AssertionError: Node <arg>_written_in_backward_by_<kernel> was invalid, but is output`` (the
# node's name is the only text of ours in that message; through a view of the output it names
# the view). Where no forward output reaches it, it is a free view in the backward graph, or dead.
# "Computed by the forward" is read from the tags AOTAutograd's create_joint puts on every node
# traced before the backward ("partitioner_tag": "is_forward"); without them (no joint graph, no
# partitioner) nothing is done. Writes the analysis could not establish (every argument assumed
# written, AnalysisWarning) are left alone, or a read-only forward output would raise.

_PARTITIONER_TAG = "partitioner_tag"  # written by AOTAutograd's create_joint, read by its partitioners


def _traced_node(mode: Any, t: Tensor) -> fx.Node | None:
    """The graph node ``t`` is the value of, or None when the tracer does not track it."""
    proxy = mode.tracer.unwrap_proxy(t)
    return proxy.node if isinstance(proxy, fx.Proxy) else None


def _created_in_forward(node: fx.Node) -> bool:
    """Whether ``node`` (or the tensor it views) was computed by the forward of a joint graph."""
    while (
        node.op == "call_function"
        and is_view_op(node.target)
        and node.args
        and isinstance(node.args[0], fx.Node)
    ):
        node = node.args[0]
    return node.op != "placeholder" and node.meta.get(_PARTITIONER_TAG) == "is_forward"


def _backward_write_barrier(mode: Any, value: Tensor, arg: str, kernel_name: str) -> Tensor:
    """``value`` through a named alias node the partitioner keeps in the backward graph.

    Called below functionalization (inner tensors); builds the node itself to choose its name.
    """
    tracer = mode.tracer
    with disable_proxy_modes_tracing():
        out = torch.ops.aten.alias.default(value)
    proxy = tracer.create_proxy(
        "call_function",
        torch.ops.aten.alias.default,
        (tracer.unwrap_proxy(value),),
        {},
        name=f"{arg}_written_in_backward_by_{kernel_name}",
    )
    proxy.node.meta[_PARTITIONER_TAG] = "must_be_in_backward"
    track_tensor_tree(out, proxy, constant=None, tracer=tracer)
    aliased: Tensor = out
    return aliased


def _forward_tensors_written_in_backward(
    unwrapped: Mapping[str, Any], names: Sequence[str]
) -> tuple[Any, set[str]]:
    """The proxy mode, and the ``names`` whose tensors the joint graph's forward computed.

    Empty outside a backward pass (Note [backward writes to forward tensors]).
    """
    if not in_backward_pass():
        return None, set()
    mode = get_proxy_mode()
    if mode is None:
        return None, set()
    found = set()
    for name in names:
        node = _traced_node(mode, unwrapped[name])
        if node is not None and _created_in_forward(node):
            found.add(name)
    return mode, found


# Note [backward writes to leaf inputs]
# A Function's backward may launch a kernel that writes a tensor it saved which is (a view of) a
# forward graph input that requires grad: Liger's swiglu / geglu overwrite their saved inputs with
# the gradients. Eagerly the raw launch writes the leaf's memory, unseen by autograd. Committed as
# a functional update, the write becomes an input mutation found in the backward, which
# AOTAutograd replays as ``primal.copy_(new)`` at the end of the joint trace. torch 2.13 does that
# copy under no_grad (pytorch#178622); torch 2.11 does it with grad mode on, and autograd refuses
# an in-place op on a leaf that requires grad ("a leaf Variable that requires grad is being used
# in an in-place operation"), whatever the program. Where that copy fails
# (``_compat.backward_leaf_copy_back_fails``, a behavioural probe; ``LEAF_WRITES_IN_PLACE`` chooses
# for tests), such a launch is not functionalized: the kernel is recorded as a
# ``triton_kernel_wrapper_mutation`` node on the unwrapped tensors (the saved primal, or views
# of it), so functionalization sees no mutation and AOTAutograd copies nothing back. At run time
# the backward graph launches the kernel on the saved input itself, which is the caller's tensor,
# exactly as eager does (a launch bumps no version counter, as a raw one does not). The node
#   - is side-effectful (hops.py), so dead-code elimination keeps it, and ordered by the graph:
#     reads of the input traced before it come before it, later ones after it, as in eager; and
#   - is tagged "must_be_in_backward", so the partitioner never copies it into the forward graph.
# "A leaf input that requires grad" is read from both levels: the argument (or the tensor it
# views, ``_base``: a view made in the backward, under no_grad, does not require grad) requires
# grad, and the unwrapped tensor's graph node is, through view ops only, a placeholder (a primal:
# not a value the program computed, nor one written before in a way functionalization tracked).
# Every primal of a joint graph is a leaf there (the copy-back's ``before`` is the placeholder's
# tensor), so these are exactly the writes whose copy-back fails. (The FunctionalTensor the
# backward unpacks is not a leaf on torch 2.13, so leafness is read from the graph, not from it.)
# The launch's other written arguments are written in place too (one launch writes them all, as
# eagerly); a written tensor the forward computed (Note [backward writes to forward
# tensors]) cannot be, and raises. The partitioner must keep the joint graph's order for the
# backward: AOTAutograd's default partitioner (aot_function, aot_module, the functional_triton
# backend) does. One that recomputes forward ops in the backward and reorders them
# (min_cut_rematerialization_partition, which torch.compile's "aot_eager" and "inductor" use)
# builds the backward from its first use of an incoming gradient onwards, placing earlier nodes
# only where a later one needs them: a read of the input traced before the launch can land after
# it, and a launch before any use of a gradient is dropped (no node uses its result). So under
# torch.compile the path runs only inside the "functional_triton" backend (which sets
# ``_ORDER_KEEPING``); elsewhere under Dynamo such a launch raises NotImplementedError naming the
# kernel and the ways out, never a silent wrong result. Plain aot_function / aot_module (no
# Dynamo tracing context) use the default partitioner unless the caller passes another one.

# None: in place exactly where AOTAutograd's copy-back fails; True / False force a path (tests).
LEAF_WRITES_IN_PLACE: bool | None = None

# Set while the "functional_triton" torch.compile backend traces (its partitioner keeps the order).
_ORDER_KEEPING = threading.local()


def _order_keeping_partitioner() -> bool:
    """Whether the graph being traced is partitioned in the joint graph's order.

    Note [backward writes to leaf inputs].
    """
    if getattr(_ORDER_KEEPING, "active", False):
        return True
    from torch._guards import TracingContext

    return TracingContext.try_get() is None  # not under Dynamo: aot_function / aot_module


def _leaf_writes_in_place() -> bool:
    if LEAF_WRITES_IN_PLACE is not None:
        return LEAF_WRITES_IN_PLACE
    return backward_leaf_copy_back_fails()


def _requires_grad(t: Tensor) -> bool:
    """Whether ``t`` or the tensor it views requires grad (a view made under no_grad does not)."""
    return bool(t.requires_grad or (t._base is not None and t._base.requires_grad))


def _placeholder_through_views(node: fx.Node) -> bool:
    while (
        node.op == "call_function"
        and is_view_op(node.target)
        and node.args
        and isinstance(node.args[0], fx.Node)
    ):
        node = node.args[0]
    return node.op == "placeholder"


def _leaf_inputs_written(
    ctx: FunctionalizeContext, kwargs: Mapping[str, Any], unwrapped: Mapping[str, Any], names: Sequence[str]
) -> tuple[Any, list[str]]:
    """The proxy mode, and the written ``names`` that are (views of) leaf graph inputs requiring grad."""
    if getattr(ctx, "mode", None) is None or not in_backward_pass():  # AOTAutograd's backward only
        return None, []
    mode = get_proxy_mode()
    if mode is None:
        return None, []
    found = []
    for name in names:
        if not _requires_grad(kwargs[name]):
            continue
        traced = _traced_node(mode, unwrapped[name])
        if traced is not None and _placeholder_through_views(traced):
            found.append(name)
    if found and not _leaf_writes_in_place():
        return None, []
    return mode, found


def _launch_in_place_on_leaf_inputs(
    ctx: FunctionalizeContext,
    node: MutationNode,
    unwrapped: Mapping[str, Any],
    to_clone: Sequence[str],
    barred: set[str],
) -> bool:
    """Launch in place if it writes a leaf input in a backward (Note [backward writes to leaf inputs])."""
    mode, leaves = _leaf_inputs_written(ctx, node.kwargs, unwrapped, to_clone)
    if not leaves:
        return False
    kernel_name = node.kernel_name
    if barred:
        raise NotImplementedError(
            f"{kernel_name} writes, in a backward, the leaf input(s) {', '.join(map(repr, leaves))} and "
            f"the tensor(s) {', '.join(map(repr, sorted(barred)))} that the forward computed; on this torch "
            "version a leaf input written in backward is launched on in place, and a tensor the forward "
            "computed cannot be written in place in the backward (Note [backward writes to forward "
            "tensors]). Launch the kernel twice, or write a fresh buffer instead of the latter"
        )
    if not _order_keeping_partitioner():
        raise NotImplementedError(
            f"{kernel_name} writes, in a backward, the leaf input(s) {', '.join(map(repr, leaves))} that "
            f"require grad. torch {torch.__version__} cannot copy that write back (pytorch#178622), so it is "
            "launched in place in the backward graph, which is exact only with a partitioner that keeps the "
            "traced order; torch.compile's aot_eager and inductor backends reorder it (Note [backward writes "
            'to leaf inputs]). Use torch.compile(backend="functional_triton"), torch >= 2.13, or clone the '
            "saved tensor in the backward before the kernel writes it"
        )
    tracer = mode.tracer
    kwargs = pytree.tree_map(
        tracer.unwrap_proxy,
        MutationNode(node.kernel_idx, node.constant_args_idx, node.grid, dict(unwrapped)).as_kwargs(),
    )
    proxy = tracer.create_proxy(
        "call_function", triton_kernel_wrapper_mutation, (), kwargs, name=f"{kernel_name}_on_leaf_inputs"
    )
    proxy.node.meta[_PARTITIONER_TAG] = "must_be_in_backward"
    log.debug("%s: launched in place on leaf inputs %s in backward", kernel_name, leaves)
    return True


def mutation_functionalize(ctx: FunctionalizeContext, node: MutationNode) -> None:
    """A mutation call becomes a functional call, and every written original is updated."""
    kwargs = node.kwargs
    tensors = {n: v for n, v in kwargs.items() if isinstance(v, Tensor)}
    if not any(map(_is_functional, tensors.values())):
        # Note [tensors functionalization does not hold]
        with ctx.redispatch_to_next():
            triton_kernel_wrapper_mutation(**node.as_kwargs())
        return
    written, exact, keep = analyze(node)
    _refuse_writes_to_outside_tensors(node, tensors, written, exact)
    # Before unwrapping: that syncs pending writes through aliases, which may re-stride a
    # tensor after the program read its strides (see compute_layouts).
    seen = {n: geometry_of(t) for n, t in tensors.items()}
    unwrapped = ctx.unwrap_tensors(kwargs)
    copies = views_are_copies(ctx)
    layouts = compute_layouts(tensors, written, None if copies else unwrapped, seen)
    if copies:  # Note [aliasing arguments when views are copies]
        layouts = copied_views_layouts(ctx, tensors, unwrapped, layouts)
    to_clone = [n for n in kwargs if n in written]
    functional = FunctionalNode(
        node.kernel_idx, node.constant_args_idx, node.grid, unwrapped, to_clone, layouts
    )
    _log_groups(functional)
    mode, barred = _forward_tensors_written_in_backward(unwrapped, to_clone) if exact else (None, set())
    if _launch_in_place_on_leaf_inputs(ctx, node, unwrapped, to_clone, barred):
        return  # Note [backward writes to leaf inputs]
    with ctx.redispatch_to_next():
        outputs = triton_kernel_wrapper_functional(**functional.as_kwargs())
        if barred:  # Note [backward writes to forward tensors]
            kernel_name = functional.kernel_name
            outputs = {
                n: _backward_write_barrier(mode, v, n, kernel_name) if n in barred else v
                for n, v in outputs.items()
            }
    if keep:
        keep_node_alive(ctx, outputs)
    _commit_writes(ctx, kwargs, unwrapped, outputs, to_clone, seen)


def _is_functional(t: Tensor) -> bool:
    """A tensor functionalization holds: AOTAutograd's FunctionalTensor or torch.func's wrapper."""
    return isinstance(t, FunctionalTensor) or is_functional_tensor(t)


# Note [tensors functionalization does not hold]
# A traced function can launch a kernel on a tensor it did not receive: a global, a closure's,
# a module attribute that is no parameter or buffer. Functionalization holds no value for such a
# tensor, so it cannot give it a new one. Where no argument of the launch is functional, the
# launch has nothing to do with functionalization and goes on below it unchanged, as an aten
# operator on such tensors does: under torch.func.functionalize it runs in place, and a tracer
# below records it (make_fx: a mutation of a constant). Where the launch also takes functional
# tensors, the kernel's reads see their traced values, and a write to the outside tensor could
# not be replayed: that raises, naming the argument. Reading an outside tensor is fine (it is a
# constant of the graph).


def _refuse_writes_to_outside_tensors(
    node: MutationNode, tensors: Mapping[str, Tensor], written: frozenset[str], exact: bool
) -> None:
    for name in written:
        t = tensors.get(name)
        if t is not None and not _is_functional(t):
            unsure = "" if exact else " (the analysis could not tell which arguments it writes)"
            raise ValueError(
                f"argument '{name}' of {node.kernel_name}, which the kernel may write{unsure}, is a tensor "
                "the traced function did not receive (a global, a closure's or a module attribute that "
                "is no parameter or buffer): a traced program cannot write it. Pass it as an input, or "
                "register it as a buffer (Note [tensors functionalization does not hold])"
            )


def _log_groups(node: FunctionalNode) -> None:
    """Debug: which alias groups the functional node clones (Note [alias groups])."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    groups: dict[int, list[str]] = {}
    for name, layout in node.arg_layouts().items():
        if layout.sharing is Sharing.CLONED:
            groups.setdefault(layout.group, []).append(name)
    log.debug(
        "%s: functional node clones %s (writes %s)",
        node.kernel_name,
        ", ".join(f"group {g} {names}" for g, names in groups.items()) or "no group",
        list(node.tensors_to_clone),
    )


def _commit_writes(
    ctx: FunctionalizeContext,
    kwargs: Mapping[str, Any],
    unwrapped: Mapping[str, Any],
    outputs: Mapping[str, Tensor],
    to_clone: Sequence[str],
    seen: Mapping[str, Any],
) -> None:
    """Replace every written original with its new value, and sync its aliases."""
    done: set[int] = set()
    for name in to_clone:
        original = kwargs[name]
        if id(original) in done:  # the same tensor passed twice: one update suffices
            continue
        done.add(id(original))
        target, value = original, outputs[name]
        if broadcast_dims(seen[name][0], seen[name][1]):  # Note [written broadcast views]
            target, value = _broadcast_write(ctx, name, original, unwrapped[name], value)
        elif _needs_base_update(ctx, original):  # Note [writes through as_strided view chains]
            target, value = _as_strided_chain_write(ctx, name, original, value)
        ctx.replace(target, value)
        ctx.mark_mutation_hidden_from_autograd(target)
        ctx.commit_update(target)
        ctx.sync(target)
        if target is not original:
            ctx.sync(original)


# Note [written broadcast views]
# A kernel may write a view with a stride of 0 in a dimension longer than 1 (``b.expand(4, 8)``):
# every index of that dimension is the same memory, so in eager the last write wins, and the
# base ``b`` holds it. The functional operator reproduces that in its buffer (copy_into), but
# committing the new value through the view would be wrong: functionalization inverts
# ``expand`` as a gradient would, adding up the changes of every broadcast copy (``b + 4 * (new
# - b)``), and even with the other copies unchanged ``b + (new - b)`` is not bit-exact. So the
# base is updated instead: the view's new elements, one per broadcast dimension, are scattered
# into the base's value (``as_strided_scatter``, exact), the base is replaced and committed, and
# the view is synced from it. Under AOTAutograd (FunctionalTensorMode) the view's base is its
# ``_base``. torch.func.functionalize's tensors carry no base, and a view that overlaps itself
# in other ways (``as_strided`` with overlapping strides) cannot be scattered: those raise.


def _is_graph_input(inner: Tensor) -> bool:
    mode = get_proxy_mode()
    node = _traced_node(mode, inner) if mode is not None else None
    return node is not None and node.op == "placeholder"


def broadcast_dims(size: Sequence[Any], stride: Sequence[Any]) -> list[int]:
    """Dimensions of stride 0 not known to have size 1: every index is the same memory.

    Only a literal 0 stride counts, and a symbolic size is taken as possibly longer than 1:
    comparing symbols would add guards (or fail, for unbacked sizes). An empty tensor has no
    elements to share (torch gives empty tensors arbitrary strides, 0 among them).
    """
    if any(type(n) is int and n == 0 for n in size):
        return []
    return [
        d
        for d, (n, st) in enumerate(zip(size, stride))
        if type(st) is int and st == 0 and not (type(n) is int and n == 1)
    ]


def _broadcast_write(
    ctx: FunctionalizeContext, name: str, original: Tensor, inner: Tensor, new: Tensor
) -> tuple[Tensor, Tensor]:
    """What to replace, and with what, for a written broadcast view (Note [written broadcast views])."""
    aot = getattr(ctx, "mode", None) is not None  # FunctionalTensorMode: tensors know their base
    base = original._base if aot else None
    shown = f"shape {tuple(original.shape)}, strides {tuple(original.stride())}"
    if base is None and aot and not _is_graph_input(inner):
        return original, new  # not a view: its own value is the overlapping one
    if base is None and aot:
        raise NotImplementedError(
            f"argument '{name}' is a graph input that the kernel writes and that has a stride of 0 in "
            f"a dimension longer than 1 ({shown}); AOTAutograd copies a written input back with copy_, "
            "which torch refuses for a tensor whose elements share memory. Pass the tensor it "
            "broadcasts and expand it inside the traced function"
        )
    if base is None:
        raise NotImplementedError(
            f"argument '{name}' is written and has a stride of 0 in a dimension longer than 1 (a "
            f"broadcast view such as b.expand(...), {shown}); torch.func.functionalize cannot carry "
            "that write back to the tensor it views exactly. Use aot_function / aot_module, or pass "
            "the base tensor itself and a stride of 0 as the kernel's stride argument"
        )
    dims = broadcast_dims(inner.shape, inner.stride())
    for d in dims:
        new = new.narrow(d, 0, 1)
    size = [1 if d in dims else n for d, n in enumerate(inner.shape)]
    if base.dtype != inner.dtype or not surely_no_overlap(size, inner.stride()):
        raise NotImplementedError(
            f"argument '{name}' is written and its elements overlap in memory ({shown}) in a way "
            "that cannot be carried back to the tensor it views; pass that tensor itself"
        )
    return base, _scatter_into_base(ctx, name, base, new, size, inner.stride(), inner.storage_offset(), shown)


# Note [writes through as_strided view chains]
# torch's functionalization refuses to commit a mutation through a view whose chain of views
# from its base has an ``as_strided`` after the first step (``x.narrow(0, 0, 4).as_strided(...)``,
# ``x.t().as_strided(...)``, ``x.as_strided(...).as_strided(...)``): as_strided's offsets count
# from the storage, not from the view it is applied to, so its inverse is not compositional.
# auto_functionalized_v2 avoids this by updating the *bases* of mutated arguments, and so does
# this rule: the written view's new elements are scattered into its base's current value with
# the view's own sizes, strides and storage offset (``as_strided_scatter``, exact: both are
# values one level down, in one storage numbering), the base is replaced and committed (a chain
# of length 0), and the view and everything else viewing the base regenerate from it when next
# read. Under AOTAutograd (FunctionalTensorMode) the base is the view's ``_base``;
# torch.func.functionalize's tensors carry no base, so there the write raises, naming the
# argument. A view whose elements overlap (``as_strided`` with overlapping strides) cannot be
# scattered exactly and raises as well. Only chains torch would refuse take this path: the
# others keep the plain commit (and their graphs).


def _needs_base_update(ctx: Any, original: Tensor) -> bool:
    """Whether committing a write through ``original`` needs its base (Note [writes through ...])."""
    chained = inner_as_strided_in_view_chain(original)
    if chained is None:  # the chain cannot be read: through the base whenever there is one
        return getattr(ctx, "mode", None) is not None and original._base is not None
    return chained


def _as_strided_chain_write(ctx: Any, name: str, original: Tensor, new: Tensor) -> tuple[Tensor, Tensor]:
    """The base to replace, and its new value, for a write through an as_strided view chain."""
    base = original._base if getattr(ctx, "mode", None) is not None else None
    shown = (
        f"shape {tuple(original.shape)}, strides {tuple(original.stride())}, "
        f"storage offset {original.storage_offset()}"
    )
    if base is None and getattr(ctx, "mode", None) is not None:  # detach() dropped the base
        raise NotImplementedError(
            f"argument '{name}' is written and is a detach() of a view made with as_strided() after "
            f"another view ({shown}); detach() leaves it no base to carry the write back to. Write "
            "the view itself, not a detach() of it"
        )
    if base is None:
        raise NotImplementedError(
            f"argument '{name}' is written and is a view made with as_strided() after another view "
            f"({shown}); torch.func.functionalize cannot carry a write through such a view chain "
            "back to its base, and gives no access to the base. Use aot_function / aot_module (or "
            "torch.compile), or make the view with a single as_strided() call on the base"
        )
    if inner_as_strided_in_view_chain(base):  # a detached as_strided chain: no base to commit to
        raise NotImplementedError(
            f"argument '{name}' is written and is a view of a detached view made with as_strided() "
            f"after another view ({shown}); the write cannot be carried back to the tensor both view. "
            "Make the views of the tensor itself, not of a detach() of such a view"
        )
    if base.dtype != original.dtype or not surely_no_overlap(original.shape, original.stride()):
        raise NotImplementedError(
            f"argument '{name}' is written, is a view made with as_strided() after another view, and "
            f"its elements may overlap in memory or view another dtype ({shown}); the write cannot be "
            "carried back to the tensor it views exactly. Pass the base tensor itself, or a view "
            "whose elements do not overlap"
        )
    inner = ctx.unwrap_tensors(original)
    offset = inner.storage_offset()
    return base, _scatter_into_base(ctx, name, base, new, inner.shape, inner.stride(), offset, shown)


# Note [scattering into a base]
# ``as_strided_scatter(base, new, size, stride, offset)`` reads ``offset`` and ``stride`` in the
# coordinates of ``base``'s own storage. The functional value of a storage's root (a graph input,
# an intermediate: an empty view chain) keeps the real storage's layout, so the view's own offset
# and strides place its elements exactly. A base that is itself a view -- the ``_base`` of a view
# made from a ``detach()`` of another view, which autograd records as a base of its own -- has a
# functional value whose storage is not the real one, and the same call writes the wrong elements
# or fails (fake tensors refuse it as out of bounds). There the view is placed relative to the
# base: when the base's elements fill one span of memory (non-overlapping and dense, any order of
# dimensions), they are laid out in memory order (a permutation, then a contiguous copy), the
# view's elements are scattered at their offsets from the base's first element, and the order is
# undone (also where torch has no binding to read the view chain and the base is dense: exact for
# a root too). A view that reaches memory outside the base's elements (possible through
# ``as_strided``), or a base that is not dense, raises naming the argument: the write belongs to
# a tensor that ``detach()`` cut off.


def _scatter_into_base(
    ctx: Any,
    name: str,
    base: Tensor,
    new: Tensor,
    size: Sequence[Any],
    stride: Sequence[Any],
    offset: Any,
    shown: str,
) -> Tensor:
    """``base``'s new value: the view ``(size, stride, offset)`` of its memory replaced by ``new``."""
    base_inner: Tensor = ctx.unwrap_tensors(base)
    chain = view_chain(base)
    order = _memory_order(base.shape, base.stride())
    if chain == [] or (chain is None and order is None):  # a root (or unknown, as before)
        with ctx.redispatch_to_next():
            return torch.as_strided_scatter(base_inner, new, size, stride, offset)
    start = offset - base.storage_offset()
    reach = sum((n - 1) * st for n, st in zip(size, stride))
    if any(n == 0 for n in size):
        return base_inner  # nothing written
    if order is None or start < 0 or start + reach >= base.numel():
        raise NotImplementedError(
            f"argument '{name}' is written and is a view ({shown}) of a tensor made with detach() from "
            "another view, and it reaches memory outside that tensor's elements or that tensor's "
            "elements do not fill one span of memory; detach() leaves no base to carry the write back "
            "to. Make the view from the tensor itself, not from a detach() of a view of it"
        )
    inverse = sorted(range(len(order)), key=order.__getitem__)
    with ctx.redispatch_to_next():
        permuted = base_inner.permute(order)
        flat = permuted.clone(memory_format=torch.contiguous_format).view(-1)
        flat = torch.as_strided_scatter(flat, new, size, stride, start)
        return flat.view(permuted.shape).permute(inverse)


def _memory_order(size: Sequence[Any], stride: Sequence[Any]) -> list[int] | None:
    """The permutation that makes a non-overlapping, dense layout contiguous; None if it is neither."""
    order = sorted(range(len(size)), key=lambda d: (stride[d], size[d]), reverse=True)
    expected = 1
    for d in reversed(order):
        if size[d] != 1 and stride[d] != expected:
            return None
        expected = expected * size[d]
    return order


def functional_functionalize(ctx: FunctionalizeContext, node: FunctionalNode) -> dict[str, Tensor]:
    """A functional call (a graph traced again): the same call on the unwrapped tensors."""
    unwrapped = ctx.unwrap_tensors(node.kwargs)
    with ctx.redispatch_to_next():
        outputs = triton_kernel_wrapper_functional(**node.replace(kwargs=unwrapped).as_kwargs())
    wrapped: dict[str, Tensor] = ctx.wrap_tensors(outputs)
    return wrapped
