"""aliasing.py on real tensors: alias groups, rebuilt arguments, refusals, copies into overlapping views.

The end-to-end behaviour (traced launches equal to eager on aliased arguments) is tests/aliasing/;
these pin the functions it is built from (Note [alias groups]).
"""

from __future__ import annotations

import pytest
import torch

from functional_triton import aliasing as A
from tests.helpers import assert_same


def _group(layouts: dict[str, A.LayoutTuple], name: str) -> int:
    return A.ArgLayout.from_tuple(layouts[name]).group


def test_storage_key_is_shared_by_views_only() -> None:
    x = torch.arange(8.0)
    assert A.storage_key(x) == A.storage_key(x[2:]) == A.storage_key(x.view(2, 4).t())
    assert A.storage_key(x) != A.storage_key(x.clone())


def test_layouts_group_arguments_sharing_storage_with_a_written_one() -> None:
    base = torch.arange(16.0)
    other = torch.zeros(4)
    tensors = {"a": base[:8], "b": base[8:], "c": other, "d": torch.ones(2)}
    layouts = A.compute_layouts(tensors, frozenset({"b", "d"}))
    # a is read-only but shares b's storage: one group; c is alone and read-only; d is written alone.
    assert _group(layouts, "a") == _group(layouts, "b") >= 0
    assert _group(layouts, "d") >= 0 and _group(layouts, "d") != _group(layouts, "a")
    assert _group(layouts, "c") == -1
    b = A.ArgLayout.from_tuple(layouts["b"])
    assert (b.size, b.stride, b.storage_offset) == ((8,), (1,), 8)


def test_layouts_take_what_the_program_saw() -> None:
    x = torch.arange(12.0).reshape(3, 4)
    seen = {"x": ((4, 3), (1, 4), 0)}
    (layout,) = A.compute_layouts({"x": x}, frozenset({"x"}), seen=seen).values()
    assert layout[1:] == ((4, 3), (1, 4), 0)


def test_check_size_names_the_argument() -> None:
    layout = A.ArgLayout(0, (4,), (1,), 0)
    A.check_size("x_ptr", torch.zeros(4), layout)
    message = r"argument 'x_ptr' has shape \(5,\), but the graph was traced for \(4,\)"
    with pytest.raises(ValueError, match=message):
        A.check_size("x_ptr", torch.zeros(5), layout)


def test_traced_geometry_checks_sizes_and_strides_that_matter() -> None:
    x = torch.zeros(3, 4)
    geometry = A.traced_geometry(x)
    assert geometry == ((3, 4), (4, 1))
    A.check_traced_geometry("x", torch.zeros(3, 4), geometry)
    A.check_traced_geometry("x", torch.zeros(12).as_strided((3, 1), (4, 7)), ((3, 1), (4, 1)))  # size-1 dim
    with pytest.raises(ValueError, match=r"argument 'x' has shape \(4, 4\)"):
        A.check_traced_geometry("x", torch.zeros(4, 4), geometry)
    with pytest.raises(ValueError, match=r"argument 'x' has strides \(1, 3\)"):
        A.check_traced_geometry("x", torch.zeros(4, 3).t(), geometry)
    # A symbolic size recorded as None accepts any size there.
    A.check_traced_geometry("x", torch.zeros(5, 4), ((None, 4), (4, 1)))


@pytest.mark.parametrize(
    ("size", "stride", "disjoint"),
    [
        ((4, 8), (8, 1), True),
        ((4, 8), (1, 4), True),  # a transpose
        ((4, 8), (0, 1), False),  # expand
        ((3, 3), (1, 1), False),  # overlapping windows
        ((1, 8), (0, 1), True),  # a size-1 dimension's stride is never stepped
        ((0, 8), (0, 1), True),  # empty
    ],
)
def test_surely_no_overlap(size: tuple[int, ...], stride: tuple[int, ...], disjoint: bool) -> None:
    assert A.surely_no_overlap(size, stride) is disjoint


def test_copy_into_a_view_whose_elements_share_memory() -> None:
    # expand: every row is the same memory, so one row's values stand for all.
    dst = torch.zeros(8).expand(4, 8)
    src = torch.arange(8.0).expand(4, 8)
    A.copy_into(dst, src)
    assert_same(dst, src)
    # overlapping windows written element by element (equal values where they overlap).
    storage = torch.zeros(5)
    windows = storage.as_strided((3, 3), (1, 1))
    A.copy_into(windows, torch.arange(5.0).as_strided((3, 3), (1, 1)))
    assert_same(storage, torch.arange(5.0))


def test_rebuilt_group_is_a_fresh_buffer_with_the_members_relative_offsets() -> None:
    base = torch.arange(64.0)
    kwargs = {"head": base[:4], "tail": base[60:], "alone": torch.ones(3)}
    layouts = A.compute_layouts(kwargs, frozenset({"tail"}))
    rebuilt = A.rebuild_arguments(kwargs, layouts)
    head, tail = rebuilt["head"], rebuilt["tail"]
    assert rebuilt["alone"] is kwargs["alone"]  # lone, read-only, strides as recorded: itself
    assert A.storage_key(head) == A.storage_key(tail) != A.storage_key(base)
    assert_same(head, base[:4])
    assert_same(tail, base[60:])
    assert tail.data_ptr() - head.data_ptr() == 60 * base.element_size()
    assert head.data_ptr() % 16 == base.data_ptr() % 16
    tail.fill_(-1)  # the copies are the kernel's, not the program's
    assert_same(base[60:], torch.arange(60.0, 64.0))


def test_rebuilt_tail_of_a_large_tensor_is_small() -> None:
    base = torch.zeros(1 << 20)
    kwargs = {"x": base[-4:]}
    rebuilt = A.rebuild_arguments(kwargs, A.compute_layouts(kwargs, frozenset({"x"})))
    assert rebuilt["x"].untyped_storage().nbytes() <= 32


def test_lone_argument_is_restrided_to_the_recorded_strides() -> None:
    x = torch.arange(12.0).reshape(3, 4).contiguous()
    layouts = {"x": A.ArgLayout(-1, (3, 4), (1, 3), 0).as_tuple()}
    (y,) = A.rebuild_arguments({"x": x}, layouts).values()
    assert y.stride() == (1, 3)
    assert_same(y, x)


def test_rebuild_refuses_stale_sizes() -> None:
    layouts = {"x": A.ArgLayout(0, (4,), (1,), 0).as_tuple()}
    with pytest.raises(ValueError, match="argument 'x' has shape"):
        A.rebuild_arguments({"x": torch.zeros(8)}, layouts)


def test_in_place_group_is_launched_on_the_argument_and_written_back_only_when_rebuilt() -> None:
    gid = A.in_place_group(0)
    assert gid <= -2 and A.in_place_group(1) != gid
    x = torch.arange(8.0)
    layouts = {"x": A.ArgLayout(gid, (8,), (1,), 0).as_tuple()}
    kwargs = {"x": x}
    launched = A.rebuild_arguments(kwargs, layouts)
    assert launched["x"] is x
    # Strides that differ from the recorded ones: rebuilt, and write_back copies the launch's writes.
    t = torch.arange(8.0).reshape(2, 4).t()
    layouts = {"t": A.ArgLayout(gid, (4, 2), (2, 1), 0).as_tuple()}
    launched = A.rebuild_arguments({"t": t}, layouts)
    assert launched["t"] is not t and launched["t"].stride() == (2, 1)
    launched["t"].add_(100)
    A.write_back({"t": t}, launched, layouts)
    assert_same(t, torch.arange(8.0).reshape(2, 4).t() + 100)


def test_untraced_aliasing_raises_naming_both_arguments() -> None:
    x = torch.arange(8.0)
    layouts = {"a": A.ArgLayout(0, (8,), (1,), 0).as_tuple(), "b": A.ArgLayout(1, (8,), (1,), 0).as_tuple()}
    A.check_untraced_aliasing({"a": x, "b": x.clone()}, layouts)
    with pytest.raises(ValueError, match="kernel arguments 'a' and 'b' overlap in memory"):
        A.check_untraced_aliasing({"a": x, "b": x}, layouts)


def test_untraced_aliasing_allows_interleaved_and_read_only_views() -> None:
    x = torch.arange(8.0)
    half = {"a": A.ArgLayout(0, (4,), (2,), 0).as_tuple(), "b": A.ArgLayout(1, (4,), (2,), 1).as_tuple()}
    A.check_untraced_aliasing({"a": x[::2], "b": x[1::2]}, half)  # disjoint bytes
    lone = A.ArgLayout(-1, (8,), (1,), 0).as_tuple()
    read_only = {"a": lone, "b": lone}
    A.check_untraced_aliasing({"a": x, "b": x}, read_only)


def test_byte_offsets_lists_every_byte_of_the_elements() -> None:
    x = torch.zeros(8, dtype=torch.int16)
    offsets = A.byte_offsets(x[1::3], x.data_ptr())
    assert offsets.tolist() == [2, 3, 8, 9, 14, 15]
