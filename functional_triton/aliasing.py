"""Alias groups: how the functional operator rebuilds a kernel's tensor arguments.

Note [alias groups]
Kernel arguments may share storage: the same tensor twice, overlapping or disjoint
views of one base, a tensor and its transpose, intermediates. In eager the kernel
sees one memory, so a write through one argument is visible through every argument
that overlaps it, during the launch and after it.

At functionalization time every tensor argument gets an ``ArgLayout``: its sizes,
strides and storage offset as the program saw them when it launched (and so as it passed
them to the kernel), and a group id. They are read before the rule unwraps the arguments:
unwrapping syncs writes made through aliases, after which torch's functionalization may
report other metadata (a strided input written through a full-size view comes back
contiguous, while the kernel was told the old strides). Arguments that share storage with an
argument the kernel may write form one group (id >= 0), read-only ones included;
every other tensor argument gets group -1. The functional operator then:

1. allocates one buffer per group, covering only the bytes from the lowest to the highest
   the members reach (an empty member counts as the point at its offset), with its start
   rounded down to 16 bytes of the storage's numbering, so each member's pointer has the
   alignment it has in eager (what Triton specialises on). Every member keeps its offset
   relative to the others: the buffer's offsets are the storage's minus that start. That is
   all functionalization needs. A replaced view of a base is regenerated from the base
   after the update, with its true offset; a replaced base takes the buffer's offset as its
   value's, exactly as after a torch in-place op on it (whose result starts at offset 0),
   and views made from it later take their offsets from that value, while the base keeps
   reporting its own; when such tensors meet in a later launch, compute_layouts takes the
   group's geometry from the values, which agree among themselves. A 4-element tail of a
   64 MiB tensor gets a 16-byte buffer, not 64 MiB;
2. copies only each member's current elements into a view of that buffer with the
   member's recorded sizes, strides and (rebased) storage offset (nothing between members
   is copied; members whose elements share memory: Note [overlapping arguments]);
3. runs the kernel on those views, so every alias sees every write in order;
4. returns the written members' views, by argument name.

The functionalization rule then replaces every written original with its view, so
the originals, their bases and all their other aliases are updated as if the kernel
had written them in place.

The recorded layout, not the runtime tensor, is the truth: after
``functionalize(remove="mutations_and_views")`` views arrive as contiguous copies,
so read-only arguments outside groups are re-strided too when their strides differ, and a
group's layouts come from its members' view chains (Note [aliasing arguments when views are
copies] in functionalize.py).
A size that differs from the recorded one means the graph is replayed for inputs it
was not traced for, and raises instead of launching with stale sizes.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from ._compat import guard_or_false, storage_id

IntLike = int | torch.SymInt
# How a layout travels inside an FX node: (group, sizes, strides, storage_offset).
LayoutTuple = tuple[int, tuple[IntLike, ...], tuple[IntLike, ...], IntLike]

_ALIGN_BYTES = 16
# Sentinel padding on each side of a buffer under FUNCTIONAL_TRITON_CHECK_BOUNDS=1 (bounds.py).
PAD_BYTES = 4096


class Sharing(enum.Enum):
    """What a layout's group id says about its argument (the id's encoding: ``sharing_of``)."""

    LONE = "lone"  # id -1: shares no storage with a written argument; re-strided if need be
    CLONED = "cloned"  # id >= 0: in a written group the functional operator copies
    IN_PLACE = "in place"  # id <= -2: in a written group launched on the arguments themselves


LONE_GROUP = -1


def sharing_of(group: int) -> Sharing:
    """The state a layout's group id encodes (Note [alias groups], Note [reinplacing])."""
    if group >= 0:
        return Sharing.CLONED
    return Sharing.LONE if group == LONE_GROUP else Sharing.IN_PLACE


@dataclasses.dataclass(frozen=True)
class ArgLayout:
    """Geometry of one tensor argument, and the alias group it belongs to (``sharing``)."""

    group: int  # the group's id as the node holds it; ``sharing`` names its state
    size: tuple[IntLike, ...]
    stride: tuple[IntLike, ...]
    storage_offset: IntLike

    @property
    def sharing(self) -> Sharing:
        return sharing_of(self.group)

    def launched_in_place(self) -> ArgLayout:
        """This cloned member's layout once its group is launched in place (``in_place_group``)."""
        return dataclasses.replace(self, group=in_place_group(self.group))

    def as_tuple(self) -> LayoutTuple:
        return (self.group, self.size, self.stride, self.storage_offset)

    @staticmethod
    def from_tuple(t: Sequence[Any]) -> ArgLayout:
        group, size, stride, offset = t
        return ArgLayout(int(group), tuple(size), tuple(stride), offset)


def storage_key(t: Tensor) -> int:
    """An id shared by exactly the tensors that share storage (functional storage when traced)."""
    return storage_id(t)


Geometry = tuple[tuple[IntLike, ...], tuple[IntLike, ...], IntLike]  # sizes, strides, storage offset


def geometry_of(t: Tensor) -> Geometry:
    return (tuple(t.size()), tuple(t.stride()), t.storage_offset())


# Note [unbacked sizes]
# A size computed from data (``x[x > 2]``, ``nonzero``) is an unbacked symbol: it has no example
# value, and asking whether it is 0, 1 or equal to another size raises
# GuardOnDataDependentSymNode. The layout code decides such questions with ``guard_or_false``
# (backed symbols are decided with a guard, as ``bool()`` would) and reads an open answer in the
# direction that needs more copies, never fewer: strides not known to agree are taken to differ
# (a rebuilt view, or a refusal), a view not known to be free of overlap may overlap, a size not
# known to be 0 or 1 may be longer, and a buffer's extent counts such a size as at least 1 (one
# element too many, never too few). Groups are formed by storage, so whether two members overlap
# is never asked: they share one buffer. Sizes, strides, offsets and the grid stay expressions in
# the graph, so a launch uses the run-time size.


def _strides_agree(size: Sequence[IntLike], a: Sequence[IntLike], b: Sequence[IntLike]) -> bool:
    """Whether two stride lists step through memory alike for a tensor of ``size``.

    Only dimensions longer than 1 of a tensor that has elements are ever stepped through: a
    size-1 dimension's stride is free (the same computation may give it another value when the
    graph runs than when it was traced), and an empty tensor's strides are never used.
    """
    # Note [unbacked sizes]: guard_or_false decides backed symbols as before (with a guard) and
    # answers False where unbacked ones leave it open: not known empty, not known to be 1, strides
    # not known equal. Every caller takes False as the conservative answer (copy, or refuse).
    return any(guard_or_false(s == 0) for s in size) or all(
        guard_or_false(s <= 1) or guard_or_false(x == y) for s, x, y in zip(size, a, b)
    )


def _same_shape(a: Geometry, b: Geometry) -> bool:
    """Same sizes, and same strides wherever a stride matters."""
    same_sizes = len(a[0]) == len(b[0]) and all(guard_or_false(x == y) for x, y in zip(a[0], b[0]))
    return same_sizes and _strides_agree(a[0], a[1], b[1])


def same_shape(a: Geometry, b: Geometry) -> bool:
    """Same sizes, and same strides wherever a stride matters (storage offsets not compared)."""
    return _same_shape(a, b)


def _group_geometry(
    names: list[str], tensors: Mapping[str, Tensor], seen: Mapping[str, Geometry], values: Mapping[str, Any]
) -> dict[str, Geometry]:
    """Where a group's members sit: what the program saw, or their values' geometry (see below)."""
    inner = [v for v in (values.get(n) for n in names) if isinstance(v, Tensor)]
    if len(inner) != len(names) or len({storage_key(v) for v in inner}) != 1:
        return {}
    if all(_same_shape(geometry_of(v), seen[n]) for n, v in zip(names, inner)):
        return {n: geometry_of(v) for n, v in zip(names, inner)}
    if len({id(tensors[n]) for n in names}) == 1:
        return {}  # one tensor (maybe passed twice): its own metadata is what the kernel was told
    raise NotImplementedError(
        f"kernel arguments {', '.join(repr(n) for n in names)} share storage, one is written, and "
        "their traced strides disagree with their values' (torch's functionalization gives views "
        "of a written non-contiguous input contiguous metadata); the aliasing cannot be "
        "reproduced faithfully. Pass .contiguous() inputs, or launch on one of the aliases"
    )


def compute_layouts(
    tensors: Mapping[str, Tensor],
    written_names: frozenset[str],
    values: Mapping[str, Any] | None = None,
    seen: Mapping[str, Geometry] | None = None,
) -> dict[str, LayoutTuple]:
    """Describe every tensor argument; group those sharing storage with a written one.

    ``tensors`` are the traced (functional) tensors: their storages say who aliases whom.
    ``seen`` is their metadata as the program saw it when it launched (what it passed to the
    kernel as strides), read before unwrapping: unwrapping syncs a tensor that an alias wrote,
    and torch's functionalization may then give it different metadata (a strided input
    written through a full-size view comes back contiguous). Default: the tensors' metadata
    now. ``values`` are their current values one level down, when those are real views.
    After a torch in-place op on an input at a nonzero storage offset, the input keeps
    reporting its offset while views made from it later take their value's: the traced
    offsets disagree, the values' agree. So a group takes its geometry from the values when
    sizes and strides agree with the seen ones (only offsets differ); else, for one tensor,
    from what the program saw; else it refuses (``_group_geometry``).
    """
    if seen is None:
        seen = {name: geometry_of(t) for name, t in tensors.items()}
    by_storage: dict[int, list[str]] = {}
    for name, t in tensors.items():
        by_storage.setdefault(storage_key(t), []).append(name)
    group_of: dict[str, int] = {}
    geometry: dict[str, Geometry] = {name: seen[name] for name in tensors}
    written_groups = [ns for ns in by_storage.values() if any(n in written_names for n in ns)]
    for gid, names in enumerate(written_groups):
        for n in names:
            group_of[n] = gid
        if values is not None and len(names) > 1:
            geometry.update(_group_geometry(names, tensors, seen, values))
    return {name: ArgLayout(group_of.get(name, LONE_GROUP), *geometry[name]).as_tuple() for name in tensors}


def _extent(size: Sequence[IntLike], stride: Sequence[IntLike]) -> IntLike:
    """Elements from the first to one past the last element a view reaches (0 if empty).

    A size that may be 0 but is not known to be (unbacked) counts as at least 1: the extent
    may then be one element too large, never too small (Note [unbacked sizes]).
    """
    if any(guard_or_false(s == 0) for s in size):
        return 0
    if all(type(s) is int for s in size):
        return 1 + sum((s - 1) * st for s, st in zip(size, stride))
    extent: IntLike = 1 + sum(torch.sym_max(s - 1, 0) * st for s, st in zip(size, stride))
    return extent


def check_size(name: str, t: Tensor, layout: ArgLayout) -> None:
    """Refuse to launch on a tensor whose sizes differ from those the graph was traced for."""
    if len(t.shape) != len(layout.size) or any(guard_or_false(a != b) for a, b in zip(t.shape, layout.size)):
        raise ValueError(
            f"argument '{name}' has shape {tuple(t.shape)}, but the graph was traced for "
            f"{tuple(layout.size)}; scalar arguments and the grid were fixed at trace time, "
            "so trace again for these inputs (or trace with dynamic shapes)"
        )


# Sizes and strides of a tensor argument as a mutation node records them (Note [traced geometry]);
# None where the value is symbolic: the graph takes that one as an input.
TracedGeometry = tuple[tuple[int | None, ...], tuple[int | None, ...]]


def traced_geometry(t: Tensor) -> TracedGeometry:
    def concrete(values: Sequence[IntLike]) -> tuple[int | None, ...]:
        return tuple(None if isinstance(v, torch.SymInt) else int(v) for v in values)

    return concrete(t.size()), concrete(t.stride())


def check_traced_geometry(name: str, t: Tensor, geometry: TracedGeometry) -> None:
    """Refuse a launch on sizes or strides (where they matter) other than the traced ones."""
    sizes, strides = geometry
    shape = t.shape
    if shape == sizes and t.stride() == strides:  # the common case, all concrete (torch.Size == tuple)
        return
    if len(shape) != len(sizes) or any(b is not None and a != b for a, b in zip(shape, sizes)):
        shown = tuple("s" if b is None else b for b in sizes)
        raise ValueError(
            f"argument '{name}' has shape {tuple(shape)}, but the graph was traced for {shown}; "
            "scalar arguments and the grid were fixed at trace time, so trace again for these "
            "inputs (or trace with dynamic shapes)"
        )
    known = [(s, a, b) for s, a, b in zip(shape, t.stride(), strides) if b is not None]
    if not _strides_agree([s for s, _, _ in known], [a for _, a, _ in known], [b for _, _, b in known]):
        raise ValueError(
            f"argument '{name}' has strides {tuple(t.stride())}, but the graph was traced for "
            f"{tuple('s' if b is None else b for b in strides)}; stride arguments were fixed at "
            "trace time, so trace again for these inputs (or pass a tensor laid out as traced)"
        )


# Note [aliasing the graph was not traced for]
# Alias groups are fixed when the graph is traced: arguments in distinct storages then get
# distinct groups (or none, read-only), each written group its own buffer. A graph called
# with inputs that alias where the traced ones did not (``a is b``, overlapping views of one
# tensor passed as two inputs) would let the kernel read values its own writes should have
# changed, and the graph's other nodes were traced assuming no such aliasing: AOTAutograd
# does not guard that direction. So before a launch, arguments of distinct groups (at least
# one of them written) whose memory overlaps raise, naming them. The check is cheap: one
# storage pointer per argument, and nothing more unless two arguments share a storage; then
# byte ranges, and an exact byte-level test only when neither argument covers its range
# densely (interleaved views such as ``x[::2]`` and ``x[1::2]`` are disjoint and fine).


# Fake, functional and other subclass tensors have no memory to compare (a graph traced again).
_REAL_TENSOR_TYPES = (Tensor, torch.nn.Parameter)


def _byte_range(t: Tensor) -> tuple[int, int]:
    start = t.data_ptr()
    return start, start + int(_extent(t.shape, t.stride())) * t.element_size()


def byte_offsets(t: Tensor, base: int) -> Tensor:
    """Every byte ``t``'s elements occupy, relative to address ``base`` (rare path only)."""
    offsets = torch.zeros((), dtype=torch.int64, device=t.device) + (t.data_ptr() - base)
    for size, stride in zip(t.shape, t.stride()):
        step = torch.arange(size, dtype=torch.int64, device=t.device) * (stride * t.element_size())
        offsets = (offsets.unsqueeze(-1) + step).flatten()
    bytes_ = torch.arange(t.element_size(), dtype=torch.int64, device=t.device)
    return (offsets.reshape(-1, 1) + bytes_).flatten()


def _overlap(a: Tensor, b: Tensor) -> bool:
    """Whether two tensors of one storage share a byte."""
    ra, rb = _byte_range(a), _byte_range(b)
    if ra[0] >= rb[1] or rb[0] >= ra[1]:
        return False
    if any(r[1] - r[0] == t.numel() * t.element_size() for t, r in ((a, ra), (b, rb))):
        return True  # one of them is dense over its range: any intersection is shared memory
    base = min(ra[0], rb[0])
    marks = torch.zeros(max(ra[1], rb[1]) - base, dtype=torch.bool, device=a.device)
    marks[byte_offsets(a, base)] = True
    return bool(marks[byte_offsets(b, base)].any())


def check_untraced_aliasing(kwargs: Mapping[str, Any], layouts: Mapping[str, Sequence[Any]]) -> None:
    """Raise if arguments of distinct alias groups, one written, overlap (Note [aliasing the graph ...])."""
    if len(layouts) < 2:
        return  # nothing to overlap with
    # The common case, every argument in a storage of its own: one storage address each.
    # (A storage's address is unique among live storages; empty storages may share a null one,
    # and meta ones carry none: those take the complete check below, which skips them.)
    addresses = set()
    for name in layouts:
        t = kwargs[name]
        if type(t) in _REAL_TENSOR_TYPES:
            address = t.untyped_storage().data_ptr()
            if address in addresses:
                break
            addresses.add(address)
    else:
        return
    # A storage's address is its first element's minus the offset.
    members = [
        (name, raw[0], t, t.data_ptr() - t.storage_offset() * t.element_size())
        for name, raw in layouts.items()
        if type(t := kwargs[name]) in _REAL_TENSOR_TYPES and not t.is_meta and t.numel() > 0
    ]
    if len({m[3] for m in members}) == len(members):
        return  # the common case: every argument in a storage of its own
    for i, (name_a, group_a, a, storage_a) in enumerate(members):
        for name_b, group_b, b, storage_b in members[i + 1 :]:
            if storage_a != storage_b or group_a == group_b:
                continue
            if _overlap(a, b):
                raise ValueError(
                    f"kernel arguments '{name_a}' and '{name_b}' overlap in memory, but the graph "
                    "was traced with them in distinct storages, and the kernel may write one of "
                    "them: the graph cannot reproduce this aliasing. Trace again with inputs that "
                    f"alias the same way, or pass distinct tensors (e.g. a clone of '{name_b}')"
                )


def _span_bytes(t: Tensor, lay: ArgLayout) -> tuple[IntLike, IntLike]:
    """The bytes of the storage a member reaches; an empty member is the point at its offset."""
    isz = t.element_size()
    start = lay.storage_offset * isz
    return start, start + _extent(lay.size, lay.stride) * isz


def _group_views(members: list[tuple[Tensor, ArgLayout]], fill: int | None = None) -> list[Tensor]:
    """One buffer for a group, covering only what its members reach; each member rebuilt in it.

    ``fill``: a byte to fill the buffer with, and pad it with on both sides, before the members
    are copied in (the bounds check of bounds.py; None: uninitialised and unpadded).
    """
    # Note [alias groups], 1: the buffer covers the members' extent, aligned as their storage is.
    lo, nbytes = _group_span(members, 0 if fill is None else PAD_BYTES)
    device = members[0][0].device
    if fill is None:
        buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
    else:
        buf = torch.full((nbytes,), fill, dtype=torch.uint8, device=device)
    views = []
    for t, lay in members:
        isz = t.element_size()
        view = buf.view(t.dtype).as_strided(lay.size, lay.stride, (lay.storage_offset * isz - lo) // isz)
        copy_into(view, t)
        views.append(view)
    return views


def _surely_no_overlap_symbolic(size: Sequence[IntLike], stride: Sequence[IntLike]) -> bool:
    """``surely_no_overlap`` without guards on unbacked symbols (Note [unbacked sizes])."""
    if any(guard_or_false(s == 0) for s in size):
        return True
    dims = [(s, st) for s, st in zip(size, stride) if not guard_or_false(s == 1)]
    dims.sort(key=lambda p: (type(p[1]) is not int, p[1] if type(p[1]) is int else 0))  # concrete first
    reach: IntLike = 1
    for s, st in dims:  # each dimension must step past all that the ones before it reach
        if not guard_or_false(st >= reach):
            return False
        reach = reach + torch.sym_max(s - 1, 0) * st
    return True


def surely_no_overlap(size: Sequence[IntLike], stride: Sequence[IntLike]) -> bool:
    """True when no two elements of a view share memory (False: they may)."""
    if any(isinstance(v, torch.SymInt) for v in (*size, *stride)):
        return _surely_no_overlap_symbolic(size, stride)
    reach: IntLike = 1
    for s, st in sorted(((s, st) for s, st in zip(size, stride) if s != 1), key=lambda p: p[1]):
        if s == 0:
            return True
        if st < reach:
            return False
        reach = reach + (s - 1) * st
    return True


def _scatter_copy(dst: Tensor, src: Tensor) -> None:
    """``dst.copy_(src)`` for a ``dst`` whose elements share memory: one write per element."""
    storage = dst.as_strided((dst.untyped_storage().nbytes() // dst.element_size(),), (1,), 0)
    offsets = torch.full((), int(dst.storage_offset()), dtype=torch.int64, device=dst.device)
    for size, stride in zip(dst.shape, dst.stride()):
        offsets = offsets.unsqueeze(-1) + torch.arange(size, device=dst.device) * stride
    storage.index_put_((offsets.reshape(-1),), src.expand(dst.shape).reshape(-1).to(dst.dtype))


# Note [overlapping arguments]
# A kernel argument may have elements that share memory: a stride of 0 (``b.expand(4, 8)``,
# broadcasting) or overlapping strides (``as_strided``). A raw launch writes that memory as
# is. Rebuilding such an argument in a group's buffer (or copying a rebuilt one back) with
# ``copy_`` fails in torch ("more than one element of the written-to tensor refers to a
# single memory location"). Elements that share memory hold one value, so one write per
# memory location suffices: dimensions of stride 0 are narrowed to their first index, and
# what still may overlap is written element by element through the storage (index_put_;
# which duplicate lands is irrelevant, they are equal). Symbolic geometry is copied as it is:
# deciding overlap would guard on the symbols. How functionalization carries such a
# write back to the tensor the view broadcasts is Note [written broadcast views].


def copy_into(dst: Tensor, src: Tensor) -> None:
    """``dst.copy_(src)``, also where elements of ``dst`` share memory (Note [overlapping arguments])."""
    if any(isinstance(v, torch.SymInt) for v in (*dst.shape, *dst.stride())):
        dst.copy_(src)  # symbolic: no guards for this (torch cannot tell overlap there either)
        return
    if surely_no_overlap(dst.shape, dst.stride()):
        dst.copy_(src)
        return
    for dim, (size, stride) in enumerate(zip(dst.shape, dst.stride())):
        if stride == 0 and size > 1:  # every index of this dimension is the same memory
            dst, src = dst.narrow(dim, 0, 1), src.narrow(dim, 0, 1)
    if surely_no_overlap(dst.shape, dst.stride()):
        dst.copy_(src)
    else:
        _scatter_copy(dst, src)


def _strides_match(t: Tensor, lay: ArgLayout) -> bool:
    """Whether ``t`` (of the recorded sizes) steps through memory as recorded."""
    return _strides_agree(t.shape, t.stride(), lay.stride)


def _restride(t: Tensor, lay: ArgLayout) -> Tensor:
    """``t`` itself when it already has the recorded strides, else a copy that has them."""
    if _strides_match(t, lay):
        return t
    return _group_views([(t, dataclasses.replace(lay, storage_offset=0))])[0]


def in_place_group(group: int) -> int:
    """The layout group id of a cloned group ``group`` that a reinplaced launch writes in place.

    Note [reinplacing]: group ids >= 0 are cloned, -1 is a lone read-only argument, and
    ids <= -2 are groups launched on the arguments themselves (``Sharing``). Their strides are checked
    when the graph runs, since a fake tensor's strides can differ from the real one's
    (an op on a non-dense input): a group that does not match is rebuilt like a cloned
    one and ``write_back`` copies the written members back after the launch.
    """
    return -2 - group


# The copies are part of the opaque kernel (autograd.py) and must record no autograd history.
# With grad mode on and an input that requires grad (the fake rule in a training graph),
# copy_ would give each rebuilt view a grad_fn; as views of a buffer the proxy mode never saw,
# autograd would later regenerate that grad_fn by replaying as_strided on the buffer (when
# functionalization scatters an alias's update into a view), and the trace would record the
# fake buffer as a graph constant ("Unexpected fake buffer _tensor_constant0").
def rebuild_arguments(
    kwargs: Mapping[str, Any], layouts: Mapping[str, Sequence[Any]], fills: Mapping[int, int] | None = None
) -> dict[str, Any]:
    """The kernel's arguments with every cloned alias group moved into its own fresh buffer.

    Lone arguments are re-strided where needed; groups launched in place stay themselves
    when their strides match the recorded ones (see ``in_place_group``). ``fills``: the
    sentinel byte of each cloned group's padded buffer (bounds.py), for groups it names.
    """
    if torch.is_grad_enabled():  # (a compiled graph runs with it off: no context per call)
        with torch.no_grad():
            return _rebuild_arguments(kwargs, layouts, fills)
    return _rebuild_arguments(kwargs, layouts, fills)


def _rebuild_arguments(
    kwargs: Mapping[str, Any], layouts: Mapping[str, Sequence[Any]], fills: Mapping[int, int] | None
) -> dict[str, Any]:
    new_kwargs = dict(kwargs)
    groups: dict[int, list[str]] = {}
    for name, raw in layouts.items():
        lay = ArgLayout.from_tuple(raw)
        check_size(name, kwargs[name], lay)
        if lay.sharing is Sharing.LONE:
            new_kwargs[name] = _restride(kwargs[name], lay)
        else:
            groups.setdefault(lay.group, []).append(name)
    for group, names in groups.items():
        members = [(kwargs[n], ArgLayout.from_tuple(layouts[n])) for n in names]
        if sharing_of(group) is Sharing.IN_PLACE and all(_strides_match(t, lay) for t, lay in members):
            continue
        fill = fills.get(group) if fills is not None else None
        for name, view in zip(names, _group_views(members, fill)):
            new_kwargs[name] = view
    return new_kwargs


def write_back(
    kwargs: Mapping[str, Any], launched: Mapping[str, Any], layouts: Mapping[str, Sequence[Any]]
) -> None:
    """After a launch: copy members of in-place groups that had to be rebuilt back into the originals."""
    if launched is kwargs:  # every replayed in-place launch whose arguments have the traced geometry
        return
    rebuilt = [
        n
        for n, raw in layouts.items()
        if sharing_of(raw[0]) is Sharing.IN_PLACE and launched[n] is not kwargs[n]
    ]
    if rebuilt:
        with torch.no_grad():  # only around copies: a decorator would cost every launch node
            for name in rebuilt:
                copy_into(kwargs[name], launched[name])


# Note [fake outputs]
# Under FakeTensorMode and for meta tensors the functional operator's outputs need only what
# a tensor's metadata says: sizes, strides, storage offset, dtype, and which outputs share a
# storage. The dense rule's buffer per group is a uint8 allocation viewed in each member's
# dtype, with each member's elements copied in: on fake tensors every one of those is a full
# dispatch and computes nothing anyone reads. So the fake rule allocates one buffer per
# written group of the same bytes (``_group_span``: the same start, rounded down, and end), in
# the members' dtype when they share one, and makes each written member a view of it with the
# sizes, strides and storage offset the dense rule gives it; nothing is copied. Members of one
# group share that storage, groups have storages of their own, as in the dense rule
# (tests/unit/test_fake_outputs.py compares the two on real tensors).


def _group_span(members: list[tuple[Tensor, ArgLayout]], pad: int) -> tuple[IntLike, IntLike]:
    """A group's buffer: ``nbytes`` of the storage from byte ``lo`` (Note [alias groups], 1).

    Counted in 16-byte blocks, so that a symbolic size is visibly a multiple of every element
    size (``view(dtype)`` checks that; unbacked sizes cannot be guarded, Note [unbacked sizes]).
    """
    spans = [_span_bytes(t, lay) for t, lay in members]
    pad_blocks = pad // _ALIGN_BYTES
    lo_block = functools.reduce(torch.sym_min, (a for a, _ in spans)) // _ALIGN_BYTES - pad_blocks
    hi_block = -(-functools.reduce(torch.sym_max, (b for _, b in spans)) // _ALIGN_BYTES) + pad_blocks
    return lo_block * _ALIGN_BYTES, (hi_block - lo_block) * _ALIGN_BYTES


def fake_outputs(
    kwargs: Mapping[str, Any], tensors_to_clone: Sequence[str], layouts: Mapping[str, Sequence[Any]]
) -> dict[str, Tensor]:
    """``functional_outputs``' written tensors, built without copying (Note [fake outputs])."""
    groups: dict[int, list[str]] = {}
    for name, raw in layouts.items():
        lay = ArgLayout.from_tuple(raw)
        check_size(name, kwargs[name], lay)  # as the dense rule refuses them
        if lay.sharing is Sharing.CLONED:
            groups.setdefault(lay.group, []).append(name)
    written = set(tensors_to_clone)
    views: dict[str, Tensor] = {}
    for names in groups.values():
        if written.isdisjoint(names):
            continue
        members = [(kwargs[n], ArgLayout.from_tuple(layouts[n])) for n in names]
        lo, nbytes = _group_span(members, 0)
        device = members[0][0].device
        dtypes = {t.dtype for t, _ in members}
        if len(dtypes) == 1:
            isz = members[0][0].element_size()
            buf = torch.empty_strided((nbytes // isz,), (1,), dtype=dtypes.pop(), device=device)
        else:  # members of several dtypes: a byte buffer, viewed in each member's
            buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
        for name, (t, lay) in zip(names, members):
            if name in written:
                isz = t.element_size()
                base = buf if buf.dtype == t.dtype else buf.view(t.dtype)
                views[name] = base.as_strided(lay.size, lay.stride, (lay.storage_offset * isz - lo) // isz)
    if not written.issubset(views):  # a written argument outside the cloned groups: the dense rule's way
        return functional_outputs(kwargs, tensors_to_clone, layouts)[1]
    return {name: views[name] for name in tensors_to_clone}


def functional_outputs(
    kwargs: Mapping[str, Any], tensors_to_clone: Sequence[str], layouts: Mapping[str, Sequence[Any]]
) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """The rebuilt kernel arguments (Note [alias groups]) and the written ones by name."""
    new_kwargs = rebuild_arguments(kwargs, layouts)
    return new_kwargs, {name: new_kwargs[name] for name in tensors_to_clone}
