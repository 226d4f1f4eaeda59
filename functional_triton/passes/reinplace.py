"""Reinplacing: turn functional kernel calls back into in-place launches where no one can tell.

Note [reinplacing]
A functional node copies every alias group it may write (Note [alias groups]) so that
the values it read stay intact. The copy is needed only if some later node still reads
the old contents of that storage. This pass walks the graph in order and, for each
written group of each functional node, asks: does any node after this one use a value
that shares the group's storage? Uses that only exist to put the new value back are
not reads of the old value and are absorbed:

- ``getitem`` of the node's own outputs (they become the arguments themselves);
- ``slice_scatter`` / ``select_scatter`` / ``as_strided_scatter`` / ``diagonal_scatter``
  of the written view back into its base (AOTAutograd's epilogue for a mutated view):
  once the kernel wrote the view in place, the scatter's result is the base itself;
- ``copy_(input, new_value)`` where the new value is now the input's own storage: the same
  view of it, or any chain of views (``view``, ``t``, ...) that lands on the input's memory
  with the input's sizes, strides, offset and dtype (AOTAutograd's backward copy-back
  ``copy_(primals_1, view(view(new)))``).

A ``keep_alive`` call (Note [keep alive]) reads nothing and never keeps a copy. A use of an
input after an absorbed ``copy_`` into it reads the new value, not the old one (the forward
returning a mutated input as a tensor saved for backward, with its copy-back in the graph).
Everything else (a later read, a graph output such as a tensor saved for backward, a
view created earlier and read later) keeps the copy.

Graph inputs. The graph's own uses are all this pass sees; what else can observe an
in-place write into an input is what AOTAutograd does around the graph:
- A forward (or inference) graph's mutated input whose copy-back is *not* in the graph
  (``keep_inference_input_mutations=False``) is returned, and AOTAutograd copies it into the
  input after the graph. Were that value the input's own memory, the copy would bump the
  version counter of a tensor the backward may have saved (autograd then refuses to run) and
  overlap itself where geometries differ: such groups keep their copy. Two exceptions:
  with the copy-back in the graph (``copy_`` absorbed above) there is no later copy and no
  version bump (a kernel's launch bumps no version counter, and autograd's saved-tensor checks
  only compare versions); and an inference graph (no tensor saved for backward) whose every
  returned value in the group's storage is, once reinplaced, the input's own memory with the
  input's geometry (the program returns what it wrote, or writes through ``x.t()``) makes the
  copy-back a copy of that memory onto itself, as the clone would have bumped the version too.
- A backward graph's inputs are incoming gradients (``tangents_*``) and saved tensors. Eager
  runs the same kernel on the same tensors (the gradient autograd hands the Function, the
  tensors it saved), so writing them in place is what eager does; AOTAutograd copies none of
  them back, and reads of them later in the backward are uses this pass sees. A saved tensor
  that is also a forward output seen by the caller never gets here (Note [backward writes to
  forward tensors] in functionalize.py makes that raise), and a saved view of a forward input
  is written back by AOTAutograd's own ``copy_`` into the input, absorbed above. So backward
  inputs are reinplaced under the same rule as intermediates.

Storages are tracked with a union-find over the fake tensors' storages in
``node.meta["val"]``, merged as groups are reinplaced. A node whose every group is reinplaced
becomes one ``launch_in_place`` call (Note [in-place launch node]). It checks, when the graph
runs, what the pass could only see in fake tensors: sizes (a graph replayed for other sizes
raises instead of launching with stale parameters) and strides (a fake tensor's may differ
from the real one's; an argument that does not match is re-strided, or its group rebuilt and
written back, as the functional operator would).
Groups reinplaced in a node that keeps other clones are marked with ``in_place_group`` and
get the same treatment from the functional operator.

Torch's own ops. ``reinplace_compiler`` then runs ``passes/torch_ops.py`` (Note [reinplacing
torch ops]): AOTAutograd functionalized the program's in-place torch ops too (``addmm_`` ->
``addmm``, ``buf[s:e] = x`` -> ``copy`` + ``slice_scatter`` of all of ``buf``); each becomes
in-place again when the memory it writes holds no graph input, is not another argument of the
call, and is not read later through a value defined before the write (later ops, launches,
outputs, saved tensors), the functionalization's own scatter back into the base excepted. It
runs after this pass, so this pass reasons over the functional graph it was written for; a
launch this pass made reads its arguments, which blocks the torch pass from writing them
before it, and the torch pass writes only memory nothing reads afterwards, so neither
invalidates the other's decisions.
"""

from __future__ import annotations

import keyword
import logging
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import torch
from torch import fx

from .._compat import is_view_op, storage_id, tensor_check
from .._native import modes_active
from ..aliasing import ArgLayout, Sharing, check_untraced_aliasing, rebuild_arguments, write_back
from ..dense import launch_planned, launch_raw
from ..hops import KEEP_ALIVE, triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation
from ..launch_spec import is_plain
from ..node import FunctionalNode, MutationNode, launch_plan
from .boxed import boxed_freeing_inputs
from .forward_copies import remove_dead_forward_copies
from .torch_ops import reinplace_torch_ops
from .views import fold_views

aten = torch.ops.aten
log = logging.getLogger(__name__)

# scatter op -> the view op whose region it writes back, with the same trailing arguments
_SCATTER_TO_VIEW: dict[Any, Any] = {
    aten.slice_scatter.default: aten.slice.Tensor,
    aten.select_scatter.default: aten.select.int,
    aten.as_strided_scatter.default: aten.as_strided.default,
    aten.diagonal_scatter.default: aten.diagonal.default,
}
_VIEW_OPS = frozenset(_SCATTER_TO_VIEW.values()) | {aten.alias.default}


def launch_arguments(kwargs: Mapping[str, Any], layouts: Mapping[str, Sequence[Any]]) -> Mapping[str, Any]:
    """Before an in-place launch: the arguments themselves when they have the traced geometry.

    Otherwise ``rebuild_arguments``: it raises, naming the argument, on sizes the graph was not
    traced for, and re-strides (or, for a group launched in place, rebuilds) arguments whose
    strides differ from the traced ones; ``write_back`` then copies written members back.
    """
    check_untraced_aliasing(kwargs, layouts)  # the pass relied on the traced aliasing too
    for name, raw in layouts.items():
        t, layout = kwargs[name], ArgLayout.from_tuple(raw)
        if t.shape != layout.size or t.stride() != layout.stride:  # torch.Size equals a tuple of ints
            return rebuild_arguments(kwargs, layouts)
    return kwargs


def launch_in_place(
    *,
    kernel_idx: int | str,
    constant_args_idx: int | str,
    grid: Sequence[Any] | None,
    kwargs: dict[str, Any],
    layouts: Mapping[str, Sequence[Any]],
) -> None:
    """A launch the pass made in place (Note [in-place launch node]): one graph node.

    The arguments as the functional node names them, its layouts with the groups marked in place.
    """
    if _launched_as_traced(kwargs, layouts):
        if not launch_planned(launch_plan(kernel_idx, constant_args_idx), grid, kwargs):
            launch_raw(MutationNode(kernel_idx, constant_args_idx, grid, kwargs))
        return
    launched = launch_arguments(kwargs, layouts)
    triton_kernel_wrapper_mutation(
        kernel_idx=kernel_idx, constant_args_idx=constant_args_idx, grid=grid, kwargs=dict(launched)
    )
    write_back(kwargs, launched, layouts)


def _launched_as_traced(kwargs: Mapping[str, Any], layouts: Mapping[str, Sequence[Any]]) -> bool:
    """Whether a launch in place may go ahead on the arguments themselves: no mode, plain tensors
    with the traced sizes and strides (exactly), and the traced aliasing. One pass over the
    tensors does what ``classify``, the layout comparison and ``check_untraced_aliasing`` do.
    """
    if modes_active():
        return False
    if len(kwargs) != len(layouts) and not is_plain((), kwargs):  # symbols among the arguments
        return False
    addresses = []
    for name, raw in layouts.items():
        t = kwargs[name]
        if type(t) not in _PLAIN_TENSOR_TYPES or t.is_meta:
            return False
        if t.shape != raw[1] or t.stride() != raw[2]:  # torch.Size equals a tuple of ints
            return False
        addresses.append(t.untyped_storage().data_ptr())
    if not shared_as_traced(addresses, (raw[0] for raw in layouts.values())):
        check_untraced_aliasing(kwargs, layouts)  # the pass relied on the traced aliasing too
    return True


def shared_as_traced(addresses: Sequence[int], groups: Iterable[Any]) -> bool:
    """Whether tensors at storage ``addresses`` (one per argument) share storages only within the
    alias ``groups`` they were traced in: then no two of distinct groups overlap, and
    ``check_untraced_aliasing`` has nothing to find. (Empty and meta tensors have address 0.)
    ``groups`` is read only where two addresses meet."""
    distinct = len(set(addresses))
    return distinct == len(addresses) or len(set(zip(addresses, groups))) == distinct


_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


# Note [in-place launch node]
# A node the pass launches in place becomes one call of ``launch_in_place``, holding the
# functional node's keywords less ``tensors_to_clone`` (its layouts' groups marked with
# ``in_place_group``). On plain tensors whose sizes and strides are the traced ones (compared
# once, exactly) it checks the aliasing the graph was traced for and launches through the
# node's launch plan (Note [planned launches]); the traced-geometry check of the mutation
# operator (Note [traced geometry]) is then implied. Anything else takes the general path:
# ``launch_arguments`` (sizes that differ raise, strides that differ re-stride or rebuild),
# the mutation operator on what it returns (dispatched under a mode or on traced tensors, so a
# graph traced again records a mutation node), and ``write_back`` of rebuilt members.
torch.fx.node.has_side_effect(launch_in_place)
torch.fx.node.has_side_effect(write_back)


# Note [launch sites]
# ``reinplace_compiler``'s own runner (no ``inner``) binds each simple in-place launch once: a
# ``LaunchSite`` holding what ``launch_in_place`` would look up or rebuild on every call (the
# launch plan's positional template, where each tensor goes, the traced sizes and strides, the
# grid, the launch options), called from the generated code as ``site.launch(t0, t1, ...)``
# through a ``get_attr`` of the module that runs the graph. Its fast path is
# ``launch_in_place``'s, checks included (no mode, plain tensors with the traced sizes and
# strides, the traced aliasing where two share a storage); anything else calls
# ``launch_in_place`` itself, so every other case behaves exactly as before. Simple: a grid of
# ints, tensors only (no symbolic scalars), a plan with a positional template naming exactly
# those tensors. The sites live in the copy of the graph module that runs (passes/boxed.py); the
# caller's ``gm`` keeps its ``launch_in_place`` nodes, as printed and inspected.


class LaunchSite:
    """One in-place launch of a graph, bound once (Note [launch sites])."""

    __slots__ = (
        "kernel",
        "positional",
        "slots",
        "names",
        "groups",
        "shapes",
        "strides",
        "grid",
        "options",
        "node",
        "check",
        "compare_storages",
        "launch",
    )

    def __init__(self, plan: Any, node: dict[str, Any]) -> None:
        layouts = node["layouts"]
        by_name = {name: i for i, name in plan.dynamic}
        self.kernel = plan.kernel
        self.positional = plan.positional
        self.names = tuple(layouts)
        self.slots = tuple(by_name[n] for n in self.names)
        self.groups = tuple(layouts[n][0] for n in self.names)
        self.shapes = tuple(tuple(layouts[n][1]) for n in self.names)
        self.strides = tuple(tuple(layouts[n][2]) for n in self.names)
        self.grid = node["grid"]
        self.options = plan.keyword_constants
        self.node = node  # launch_in_place's keywords less the tensors, for every other case
        self.check: Callable[..., bool] | None = None  # Note [launch site checks]
        self.compare_storages = len(self.names) > 1  # bind_launch_sites may know better
        # launch(t0, t1, ...): the site's launch, a function of its own (Note [site launch code])
        self.launch: Callable[..., None] = _site_launch(self)

    @classmethod
    def of(
        cls,
        kernel_idx: int | str,
        constant_args_idx: int | str,
        grid: Any,
        names: Sequence[str],
        layouts: Mapping[str, Sequence[Any]],
    ) -> LaunchSite | None:
        """The site of an in-place launch of tensors ``names``, or None where it is not simple."""
        if type(grid) is not tuple or any(type(g) is not int for g in grid) or set(names) != set(layouts):
            return None
        for layout in layouts.values():
            if any(type(n) is not int for n in (*layout[1], *layout[2])) or 0 in layout[1]:
                return None  # symbolic or empty: the general path (an empty tensor may have no storage)
        plan = launch_plan(kernel_idx, constant_args_idx)
        if plan.positional is None or {n for _, n in plan.dynamic} != set(names):
            return None
        node = {
            "kernel_idx": kernel_idx,
            "constant_args_idx": constant_args_idx,
            "grid": grid,
            "layouts": layouts,
        }
        return cls(plan, node)

    @classmethod
    def bind(cls, kwargs: Mapping[str, Any]) -> LaunchSite | None:
        """The site of a ``launch_in_place`` node's keywords, or None where it is not simple."""
        tensors = kwargs["kwargs"]
        for v in tensors.values():
            if not (isinstance(v, fx.Node) and isinstance(v.meta.get("val"), torch.Tensor)):
                return None  # a symbolic scalar among the arguments
        indices = kwargs["kernel_idx"], kwargs["constant_args_idx"]
        return cls.of(*indices, kwargs["grid"], tuple(tensors), kwargs["layouts"])

    def plain(self, tensors: tuple[Any, ...]) -> bool:
        """Plain tensors with the traced sizes and strides (compared exactly, in Python)."""
        if len(tensors) != len(self.shapes):
            return False
        for t, shape, stride in zip(tensors, self.shapes, self.strides):
            if type(t) not in _PLAIN_TENSOR_TYPES or t.is_meta or t.shape != shape or t.stride() != stride:
                return False  # (torch.Size equals a tuple of ints)
        if self.check is None:
            self.check = tensor_check(tensors) or _no_check  # Note [launch site checks]
        return True

    def shared_as_traced(self, tensors: tuple[Any, ...]) -> bool:
        """Whether tensors sharing a storage share it as traced (the complete check raises where not)."""
        storages = [t.untyped_storage().data_ptr() for t in tensors]
        if 0 in storages:
            return False  # storage freed (resized to 0): the general path
        n = len(storages)
        # As traced where each storage's tensors are of one alias group (then none of two
        # groups overlap); else the complete check.
        if len(set(storages)) != n and not shared_as_traced(storages, self.groups):
            check_untraced_aliasing(dict(zip(self.names, tensors)), self.node["layouts"])
        return True

    def __deepcopy__(self, memo: Any) -> LaunchSite:
        return self  # holds a kernel and constants only: shared, as the side table's entries are

    def __repr__(self) -> str:
        return f"LaunchSite({getattr(self.kernel, '__name__', self.kernel)!r}, grid={self.grid})"


# Note [site launch code]
# A site's launch is Python made for it when it is bound, so that a launch costs what a direct
# call costs: the tensors as named parameters, the kernel's positional arguments written out in
# order (the tensors and the plan's constants, each constant a closure variable: never its
# repr), the options as keywords. `kernel.run(*args, grid=, **options)` instead builds a tuple
# and a dict and calls through `tp_call`, ~0.3 us a launch on a CPU host. It reads `site.check`
# and `site.compare_storages` on every call (the first launch makes the one, bind_launch_sites
# sets the other), `kernel.run` too (as the raw launch does), and `launch_in_place` and
# `modes_active` as globals of this module. For tensors t0, t1 and a constant c1:
#
#     def launch(t0, t1):
#         if not modes_active():
#             check = site.check
#             if ((check is not None and check(t0, t1)) or site.plain((t0, t1,))) and (
#                     not site.compare_storages or site.shared_as_traced((t0, t1,))):
#                 kernel.run(t0, c1, t1, grid=grid, warmup=False, BLOCK=o0)
#                 return
#         launch_in_place(**node, kwargs=dict(zip(names, (t0, t1,))))
#
# Options whose names are no plain identifiers (or are the launch's own) go through `**options`.
def _site_launch(site: LaunchSite) -> Callable[..., None]:
    """The function ``site.launch`` (Note [site launch code])."""
    params = [f"t{i}" for i in range(len(site.names))]
    values: dict[str, Any] = {"site": site, "kernel": site.kernel, "grid": site.grid}
    values.update(node=site.node, names=site.names, options=site.options)
    at_slot = dict(zip(site.slots, params))
    arguments = []
    for i, constant in enumerate(site.positional):
        if i in at_slot:
            arguments.append(at_slot[i])
        else:
            values[f"c{i}"] = constant
            arguments.append(f"c{i}")
    arguments += ["grid=grid", "warmup=False"]
    if all(
        k.isidentifier() and not keyword.iskeyword(k) and k not in ("grid", "warmup") for k in site.options
    ):
        for j, (name, value) in enumerate(site.options.items()):
            values[f"o{j}"] = value
            arguments.append(f"{name}=o{j}")
    else:
        arguments.append("**options")
    p, tensors = ", ".join(params), "(" + "".join(f"{t}, " for t in params) + ")"
    source = (
        f"def make({', '.join(values)}):\n"
        f"    def launch({p}):\n"
        "        if not modes_active():\n"
        "            check = site.check\n"
        f"            if ((check is not None and check({p})) or site.plain({tensors})) and (\n"
        f"                    not site.compare_storages or site.shared_as_traced({tensors})):\n"
        f"                kernel.run({', '.join(arguments)})\n"
        "                return\n"
        f"        launch_in_place(**node, kwargs=dict(zip(names, {tensors})))\n"
        "    return launch\n"
    )
    made: dict[str, Any] = {}
    exec(compile(source, f"<launch site of {site.kernel!r}>", "exec"), globals(), made)  # noqa: S102
    launch: Callable[..., None] = made["make"](**values)
    return launch


def _no_check(*tensors: Any) -> bool:
    """A site's check where torch has no ``TensorGuards``: every launch runs the Python checks."""
    return False


# Note [launch site checks]
# A site's first launch checks its tensors in Python: plain (``torch.Tensor`` or a Parameter, not
# meta) with the traced sizes and strides. The tensors that passed then make the site's check for
# every later launch, one C++ call (``_compat.tensor_check``, Dynamo's ``TensorGuards``): the same
# Python type, dispatch keys, dtype, device, ``requires_grad``, sizes and strides as those. A match
# implies the Python checks; a mismatch runs them again (a Parameter where a Tensor was, another
# device: still launched in place). ~0.12 us where the Python checks took ~0.4 us per tensor.
# Storages are compared (``shared_as_traced``: as traced, or the complete aliasing check raises)
# only where the tensors lie in the memory of two or more graph inputs: the graph made every other
# value, and a value it allocated meets no other memory than it did when traced (the sites of
# empty tensors, which may have no storage, are not bound). Inductor's sites (inductor.py) compare
# storages wherever there are two tensors.


def bind_launch_sites(gm: fx.GraphModule) -> None:
    """Replace ``gm``'s simple ``launch_in_place`` nodes by calls of bound sites (Note [launch sites])."""
    graph = gm.graph
    storages: _Storages | None = None  # made for a graph with a site only
    bound = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not launch_in_place or node.users:
            continue
        site = LaunchSite.bind(node.kwargs)
        if site is None:
            continue
        if storages is None:
            storages = _Storages(graph)
            inputs = storages.placeholder_classes()
        # Note [launch site checks]: only memory of two graph inputs can meet other than as traced.
        classes = {storages.cls(node.kwargs["kwargs"][n]) for n in site.names}
        site.compare_storages = len(classes & inputs) > 1
        name = f"_ft_launch_site_{bound}"
        bound += 1
        setattr(gm, name, site)
        with graph.inserting_before(node):
            attr = graph.create_node("get_attr", name)  # not get_attr(): it warns on non-module values
            graph.call_method("launch", (attr, *(node.kwargs["kwargs"][n] for n in site.names)))
        graph.erase_node(node)
    if bound:
        gm.recompile()


class _Storages:
    """Union-find over storage ids; values in one class share memory."""

    def __init__(self, graph: fx.Graph) -> None:
        self.parent: dict[int, int] = {}
        self.of_node: dict[fx.Node, int] = {}
        for node in graph.nodes:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                sid = storage_id(val)
                self.of_node[node] = sid
                self.parent.setdefault(sid, sid)

    def placeholder_classes(self) -> set[int]:
        return {self.find(sid) for n, sid in self.of_node.items() if n.op == "placeholder"}

    def find(self, sid: int) -> int:
        while self.parent[sid] != sid:
            self.parent[sid] = self.parent[self.parent[sid]]
            sid = self.parent[sid]
        return sid

    def cls(self, node: Any) -> int | None:
        sid = self.of_node.get(node) if isinstance(node, fx.Node) else None
        return None if sid is None else self.find(sid)

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def _value_key(node: Any, replaced: Mapping[fx.Node, fx.Node]) -> Any:
    """A structural key: equal keys mean equal tensors (same storage, same view of it)."""
    if isinstance(node, fx.Node):
        node = replaced.get(node, node)
        if node.op == "call_function" and node.target in _VIEW_OPS:
            base, *params = node.args
            if node.target is aten.alias.default:
                return _value_key(base, replaced)
            return (node.target, _value_key(base, replaced), tuple(params))
        if node.op == "call_function" and node.target in _SCATTER_TO_VIEW and _absorbed(node, replaced):
            return _value_key(node.args[0], replaced)
        return node
    if isinstance(node, (list, tuple)):
        return tuple(_value_key(n, replaced) for n in node)
    return node


def _absorbed(use: fx.Node, replaced: Mapping[fx.Node, fx.Node], storages: _Storages | None = None) -> bool:
    """Whether ``use`` only writes the (now in-place) new value back into its own storage."""
    if use.op != "call_function":
        return False
    if use.target in _SCATTER_TO_VIEW:
        base, src, *params = use.args
        view_key = (_SCATTER_TO_VIEW[use.target], _value_key(base, replaced), tuple(params))
        return bool(_value_key(src, replaced) == view_key)
    if use.target is aten.copy_.default:
        dst, src = use.args[:2]
        if _value_key(dst, replaced) == _value_key(src, replaced):
            return True
        return storages is not None and _same_memory(dst, src, replaced, storages)
    return False


def _view_root(node: Any, replaced: Mapping[fx.Node, fx.Node]) -> Any:
    """The value ``node`` is a view of, through any chain of aten view ops and replacements."""
    while True:
        while node in replaced:
            node = replaced[node]
        if not (
            isinstance(node, fx.Node)
            and node.op == "call_function"
            and is_view_op(node.target)
            and node.args
            and isinstance(node.args[0], fx.Node)
        ):
            return node
        node = node.args[0]


def _same_memory(a: Any, b: Any, replaced: Mapping[fx.Node, fx.Node], storages: _Storages) -> bool:
    """Whether ``a`` and ``b`` are views of one storage with one geometry and dtype: a copy between
    them changes nothing (AOTAutograd's ``copy_(primal, view(view(new)))`` once ``new`` is the
    primal's own memory)."""
    ra, rb = _view_root(a, replaced), _view_root(b, replaced)
    ca, cb = storages.cls(ra), storages.cls(rb)
    if ca is None or ca != cb:
        return False
    va = a.meta.get("val") if isinstance(a, fx.Node) else None
    vb = b.meta.get("val") if isinstance(b, fx.Node) else None
    if not (isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor)):
        return False
    return (
        va.dtype == vb.dtype
        and tuple(va.size()) == tuple(vb.size())
        and tuple(va.stride()) == tuple(vb.stride())
        and va.storage_offset() == vb.storage_offset()
    )


def _is_keep_alive(node: fx.Node) -> bool:
    """A ``keep_alive`` call (Note [keep alive]), bare or under ``with_effects``: it reads nothing."""
    if node.op != "call_function":
        return False
    return node.target is KEEP_ALIVE or (
        node.target is torch.ops.higher_order.with_effects and KEEP_ALIVE in node.args[:2]
    )


def _later_uses(node: fx.Node, cls: int, storages: _Storages, order: Mapping[fx.Node, int]) -> list[fx.Node]:
    """Users after ``node`` of any value in storage class ``cls`` that may read it."""
    here = order[node]
    return [
        user
        for value, sid in storages.of_node.items()
        if storages.find(sid) == cls
        for user in value.users
        if order[user] > here and not _is_keep_alive(user)
    ]


def _geometry_matches(arg: Any, layout: ArgLayout) -> bool:
    """Whether the argument's traced value has the geometry the kernel was traced for.

    A functional call re-strides an argument whose value's layout differs from the recorded
    one (a replaced input keeps reporting its own strides); launched in place, the kernel
    would write into that temporary copy, so such a group keeps its clone.
    """
    val = arg.meta.get("val") if isinstance(arg, fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return False
    return (
        tuple(val.size()) == layout.size
        and tuple(val.stride()) == layout.stride
        and val.storage_offset() == layout.storage_offset
    )


def _getitems(node: fx.Node) -> dict[str, fx.Node]:
    return {
        u.args[1]: u  # type: ignore[misc]
        for u in node.users
        if u.op == "call_function" and u.target is operator.getitem
    }


def _groups(node: fx.Node) -> dict[int, list[str]]:
    """The node's cloned alias groups: group id -> member names."""
    groups: dict[int, list[str]] = {}
    for name, layout in _functional_node(node).arg_layouts().items():
        if layout.sharing is Sharing.CLONED:
            groups.setdefault(layout.group, []).append(name)
    return groups


def _functional_node(node: fx.Node) -> FunctionalNode:
    return FunctionalNode(**cast(dict[str, Any], node.kwargs))


def _is_backward_graph(graph: fx.Graph) -> bool:
    # AOTAutograd names a backward's incoming gradients tangents_* (its other inputs are saved tensors).
    return any(n.op == "placeholder" and n.name.startswith("tangents") for n in graph.nodes)


def _is_inference_graph(graph: fx.Graph) -> bool:
    # AOTAutograd names an inference graph's inputs arg<i>_1 (a training forward's primals_<i>).
    return any(n.op == "placeholder" and re.fullmatch(r"arg\d+_1", n.name) for n in graph.nodes)


def _returns_input_itself(
    graph: fx.Graph, cls: int, replaced: Mapping[fx.Node, fx.Node], storages: _Storages
) -> bool:
    """Whether every graph output in storage class ``cls`` (once reinplaced) is an input's own
    memory with the input's geometry: AOTAutograd's copy-back after the graph then copies that
    memory onto itself (Note [reinplacing])."""
    inputs = [n for n in graph.nodes if n.op == "placeholder" and storages.cls(n) == cls]
    (output,) = (n for n in graph.nodes if n.op == "output")
    for value in output.all_input_nodes:
        resolved = _value_key(value, replaced)
        root = _view_root(resolved if isinstance(resolved, fx.Node) else value, replaced)
        if storages.cls(root) != cls:
            continue
        if resolved not in inputs and _has_size_one_dim(value):
            # A view's stride in a size-1 dimension is not the fake tensor's for sure (torch's
            # view picks one at run time): the copy-back would then see the same memory with
            # other strides, which torch's copy_ refuses as a partial overlap.
            return False
        if not any(_same_memory(value, p, replaced, storages) for p in inputs):
            return False
    return True


def _has_size_one_dim(node: fx.Node) -> bool:
    val = node.meta.get("val")
    return not isinstance(val, torch.Tensor) or 1 in val.shape


def _is_tracked_view(node: fx.Node, storages: _Storages) -> bool:
    """An aten view op whose result's storage the pass tracks."""
    return (
        node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and node.target.is_view
        and node in storages.of_node
    )


def _reads_old_value(
    use: fx.Node, cls: int, storages: _Storages, order: Mapping[fx.Node, int], copies: Sequence[fx.Node]
) -> bool:
    """Whether ``use`` reads a value of storage class ``cls`` as it was before the kernel.

    A use of an input after the graph's own ``copy_`` into it (AOTAutograd's in-graph copy-back,
    absorbed), or of that ``copy_``'s result, reads the new value: the graph returns an input it
    mutated that way (a tensor saved for backward, or the program returning what it wrote).
    A view op reads nothing: its result is in the same storage class, so its users are among
    the later uses themselves (Inductor's passes rebuild ``slice(input)`` for a copy-back).
    """
    if _is_tracked_view(use, storages):
        return False
    for value in use.all_input_nodes:
        if storages.cls(value) != cls or value in copies:  # a copy_'s result is its new destination
            continue
        if not any(c.args[0] is value and order[c] < order[use] for c in copies):
            return True
    return False


def _try_group(
    node: fx.Node,
    names: list[str],
    storages: _Storages,
    order: Mapping[fx.Node, int],
    replaced: dict[fx.Node, fx.Node],
    backward: bool,
    lazy_reads: bool = False,
) -> bool:
    """Decide one alias group; on success record getitem -> argument replacements."""
    functional = _functional_node(node)
    kwargs, layouts = functional.kwargs, functional.arg_layouts()
    classes = {storages.cls(kwargs[n]) for n in names}
    if len(classes) != 1 or None in classes:
        return _keep(node, names, "its members are not values of one known storage")
    (cls,) = classes
    assert cls is not None
    if not all(_geometry_matches(kwargs[n], layouts[n]) for n in names):
        return _keep(node, names, "an argument's traced value is laid out otherwise than the kernel was told")
    outputs = _getitems(node)
    trial = dict(replaced)
    for name in names:
        if name in outputs:
            trial[outputs[name]] = kwargs[name]
    reason = _later_use_reason(node, cls, storages, order, trial, backward)
    if reason is None and lazy_reads:
        reason = _earlier_read_reason(node, cls, storages, order)
    if reason is not None:
        return _keep(node, names, reason)
    replaced.update(trial)
    for name in names:
        out = outputs.get(name)
        if out is not None and storages.cls(out) is not None:
            storages.union(storages.of_node[out], cls)
    log.debug(
        "%s: clone of %s dropped, launched in place (no later use reads the old value)", node.name, names
    )
    return True


def _earlier_read_reason(
    node: fx.Node, cls: int, storages: _Storages, order: Mapping[fx.Node, int]
) -> str | None:
    """Why an earlier read keeps the clone where reads are computed lazily (Inductor), or None.

    Inductor computes a pointwise or reduction node when a later kernel needs it, not where the
    graph has it, and does not see a launch's in-place write as a write: ``before = x * 3`` ahead
    of a launch writing ``x`` would be fused into a kernel after the launch and read the new
    value (Note [Inductor lowering]). Views read nothing; launches and their outputs' getitems are
    calls Inductor keeps in graph order.
    """
    for other in node.graph.nodes:
        if order[other] >= order[node]:
            return None
        if other.op != "call_function" or _is_tracked_view(other, storages) or _is_keep_alive(other):
            continue
        if other.target in (operator.getitem, triton_kernel_wrapper_functional):
            continue
        if any(storages.cls(v) == cls for v in other.all_input_nodes):
            return f"{other.name} reads it earlier, and Inductor may compute that read after the launch"
    return None


def _keep(node: fx.Node, names: list[str], reason: str) -> bool:
    """Keep the group's clone: log why, and answer False."""
    log.debug("%s: clone of %s kept: %s", node.name, names, reason)
    return False


def _later_use_reason(
    node: fx.Node,
    cls: int,
    storages: _Storages,
    order: Mapping[fx.Node, int],
    trial: Mapping[fx.Node, fx.Node],
    backward: bool,
) -> str | None:
    """Why a later use keeps the clone of the group in storage class ``cls``, or None."""
    later = _later_uses(node, cls, storages, order)
    absorbed = [u for u in later if _absorbed(u, trial, storages)]
    copies = [u for u in absorbed if u.target is aten.copy_.default]
    reader = next(
        (u for u in later if u not in absorbed and _reads_old_value(u, cls, storages, order, copies)), None
    )
    if reader is not None:
        return f"{reader.name} reads the old value later"
    if (
        not backward
        and cls in storages.placeholder_classes()
        and not any(u.target is aten.copy_.default for u in later)
        and not (_is_inference_graph(node.graph) and _returns_input_itself(node.graph, cls, trial, storages))
    ):
        # Without keep_inference_input_mutations AOTAutograd copies the returned new value
        # into the input after the graph: once that value is the input's own memory, the copy
        # bumps the version of a tensor the backward may have saved, or overlaps itself when
        # the geometries differ. Keep the clone there (Note [reinplacing]).
        return "a graph input AOTAutograd copies the new value into after the graph"
    return None


def _rewrite_node(graph: fx.Graph, node: fx.Node, inplace_names: set[str]) -> None:
    """Launch in-place groups on the arguments themselves; a node with no clone left becomes a launch."""
    functional = _functional_node(node)
    layouts = {
        name: layout.launched_in_place().as_tuple() if name in inplace_names else functional.layouts[name]
        for name, layout in functional.arg_layouts().items()
    }
    to_clone = [n for n in functional.tensors_to_clone if n not in inplace_names]
    if to_clone:
        node.kwargs = functional.replace(layouts=layouts, tensors_to_clone=to_clone).as_kwargs()
        return
    launch_node = MutationNode(
        functional.kernel_idx, functional.constant_args_idx, functional.grid, functional.kwargs
    )
    with graph.inserting_before(node):  # Note [in-place launch node]
        launch = graph.call_function(launch_in_place, (), {**launch_node.as_kwargs(), "layouts": layouts})
    launch.meta["val"] = None
    node.replace_all_uses_with(launch)
    graph.erase_node(node)


def _apply_replacements(graph: fx.Graph, replaced: dict[fx.Node, fx.Node], storages: _Storages) -> None:
    """getitems -> arguments, absorbed scatters -> their base, absorbed copy_ -> gone."""
    for node in list(graph.nodes):
        if node in replaced:
            target = replaced[node]
            while target in replaced:  # a later kernel's output replaced by an earlier one's
                target = replaced[target]
            node.replace_all_uses_with(target)
            graph.erase_node(node)
        elif node.op == "call_function" and _absorbed(node, replaced, storages):
            dst = node.args[0]
            assert isinstance(dst, fx.Node)
            while dst in replaced:
                dst = replaced[dst]
            node.replace_all_uses_with(dst)
            replaced[node] = dst  # a later kernel's argument may still name it
            graph.erase_node(node)


def reinplace(gm: fx.GraphModule, *, lazy_reads: bool = False) -> fx.GraphModule:
    """Rewrite ``gm`` in place (Note [reinplacing]); returns it.

    ``lazy_reads``: the graph's reads of a value may be computed after a later launch (Inductor),
    so a group read by any earlier node keeps its clone too.
    """
    graph = gm.graph
    storages = _Storages(graph)
    order = {n: i for i, n in enumerate(graph.nodes)}
    replaced: dict[fx.Node, fx.Node] = {}
    decisions: list[tuple[fx.Node, set[str]]] = []
    backward = _is_backward_graph(graph)
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not triton_kernel_wrapper_functional:
            continue
        inplace: set[str] = set()
        for names in _groups(node).values():
            if _try_group(node, names, storages, order, replaced, backward, lazy_reads):
                inplace.update(names)
        if inplace:
            decisions.append((node, inplace))
    for node, inplace in decisions:
        _rewrite_node(graph, node, inplace)
    _apply_replacements(graph, replaced, storages)
    graph.lint()
    gm.recompile()
    return gm


def reinplace_compiler(
    gm: fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    inner: Callable[[fx.GraphModule, Sequence[Any]], Any] | None = None,
) -> Any:
    """An AOTAutograd compiler that launches kernels in place wherever no one can tell.

    Pass it as ``fw_compiler``, ``bw_compiler`` or ``inference_compiler``. It rewrites
    functional kernel calls back into in-place launches where no later use of any
    overlapping alias can observe the difference (Note [reinplacing]), then hands the
    graph to ``inner`` or, without one, runs it as is. In a backward graph it first removes
    the unused copies of forward random ops that AOTAutograd's default partitioner leaves
    there (Note [dead forward copies]): they ran the op again and drew from the generator.
    Without ``inner``, the graph runs with its repeated and no-op views folded (Note [folding
    views]) and its in-place launches bound once (Note [launch sites]).

    Args:
        gm: the graph AOTAutograd produced.
        example_inputs: its example inputs (passed on to ``inner``).
        inner: another AOTAutograd compiler to run after the rewrite.

    Returns:
        What ``inner`` returns, or a boxed callable running ``gm`` that frees each input
        after its last use (Note [freeing graph inputs]).

    Example:
        >>> compiled = aot_function(f, fw_compiler=ft.reinplace_compiler,  # doctest: +SKIP
        ...                         bw_compiler=ft.reinplace_compiler)
        >>> chained = functools.partial(ft.reinplace_compiler, inner=my_compiler)  # doctest: +SKIP
    """
    remove_dead_forward_copies(gm)  # first: their reads would keep saved tensors from being written
    reinplace(gm)
    reinplace_torch_ops(gm, containers=(launch_arguments,))  # after: Note [reinplacing torch ops]
    if inner is not None:
        return inner(gm, example_inputs)
    return boxed_freeing_inputs(gm, rewrite=_runnable)


def _runnable(gm: fx.GraphModule) -> None:
    """The copy of the graph that runs: views folded (Note [folding views]), launches bound."""
    fold_views(gm)
    bind_launch_sites(gm)
