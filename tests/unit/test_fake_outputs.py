"""The fake/meta rule's outputs against the dense rule's (Note [fake outputs] in aliasing.py).

The dense rule builds each written group in a fresh buffer and copies the members in; the fake
rule only allocates and views. For each case below both run on the same arguments (the dense
rule on real tensors, the fake rule on their fake and meta copies, aliasing kept) and every
output must agree in sizes, strides, storage offset, dtype and storage size, and the outputs
must share storages exactly where the dense rule's do (and never with an argument).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
import torch
from torch import Tensor
from torch._subclasses.fake_tensor import FakeTensorMode

from functional_triton._compat import storage_id
from functional_triton.aliasing import compute_layouts, fake_outputs, functional_outputs
from functional_triton.fake_rules import functional_fake
from functional_triton.node import FunctionalNode

Case = Callable[[], tuple[dict[str, Tensor], frozenset[str]]]


def _one_written() -> tuple[dict[str, Tensor], frozenset[str]]:
    return {"x": torch.zeros(4, 6), "y": torch.ones(4, 6)}, frozenset({"x"})


def _transposed_alias() -> tuple[dict[str, Tensor], frozenset[str]]:
    base = torch.zeros(5, 3)
    return {"a": base, "b": base.t(), "c": torch.ones(3)}, frozenset({"a"})


def _overlapping_slices_at_offsets() -> tuple[dict[str, Tensor], frozenset[str]]:
    base = torch.arange(64.0)
    return {"a": base[9:40], "b": base[17:61:2], "n": torch.ones(2)}, frozenset({"a", "b"})


def _two_groups() -> tuple[dict[str, Tensor], frozenset[str]]:
    p, q = torch.zeros(8, 8), torch.zeros(10)
    return {"p0": p[1:3], "p1": p[:, 5], "q0": q[7:], "q1": q[1:4]}, frozenset({"p1", "q0"})


def _same_tensor_twice() -> tuple[dict[str, Tensor], frozenset[str]]:
    x = torch.zeros(6)
    return {"x": x, "y": x}, frozenset({"x", "y"})


def _mixed_dtypes() -> tuple[dict[str, Tensor], frozenset[str]]:
    base = torch.zeros(16)
    return {"f": base[2:10], "i": base.view(torch.int32)[5:14], "h": base.view(torch.int16)[1:7]}, frozenset(
        {"f", "h"}
    )


def _empty_member_and_strided() -> tuple[dict[str, Tensor], frozenset[str]]:
    base = torch.zeros(4, 8, dtype=torch.float64)
    return {"e": base[2:2], "s": base[:, 1::3], "w": base[3]}, frozenset({"s", "w"})


def _broadcast_and_3d() -> tuple[dict[str, Tensor], frozenset[str]]:
    base = torch.zeros(2, 3, 4, dtype=torch.float16)
    return {"v": base.permute(2, 0, 1)[1:], "b": base[1, 2].expand(5, 4)}, frozenset({"v"})


CASES: dict[str, Case] = {
    "one written": _one_written,
    "transposed alias": _transposed_alias,
    "overlapping slices at offsets": _overlapping_slices_at_offsets,
    "two groups": _two_groups,
    "same tensor twice": _same_tensor_twice,
    "mixed dtypes": _mixed_dtypes,
    "empty member and strided": _empty_member_and_strided,
    "broadcast and 3d": _broadcast_and_3d,
}


def describe(outputs: Mapping[str, Tensor], kwargs: Mapping[str, Tensor]) -> dict[str, Any]:
    """What the rules must agree on: each output's metadata, and who shares a storage with whom."""
    names = sorted(outputs)
    ids = {n: storage_id(outputs[n]) for n in names}
    inputs = {storage_id(t) for t in kwargs.values()}
    return {
        "metadata": {
            n: (
                tuple(outputs[n].shape),
                outputs[n].stride(),
                outputs[n].storage_offset(),
                outputs[n].dtype,
                outputs[n].untyped_storage().nbytes(),
            )
            for n in names
        },
        "sharing": {(a, b): ids[a] == ids[b] for a in names for b in names if a < b},
        "aliases an argument": {n: ids[n] in inputs for n in names},
    }


def _layouts_and_clones(
    kwargs: dict[str, Tensor], written: frozenset[str]
) -> tuple[dict[str, Any], list[str]]:
    return compute_layouts(kwargs, written), [n for n in kwargs if n in written]


def _fake_copies(mode: FakeTensorMode, kwargs: dict[str, Tensor]) -> dict[str, Tensor]:
    return {n: mode.from_tensor(t) for n, t in kwargs.items()}  # one converter: aliasing kept


@pytest.mark.parametrize("case", CASES)
def test_fake_outputs_have_the_dense_outputs_metadata_and_sharing(case: str) -> None:
    kwargs, written = CASES[case]()
    layouts, to_clone = _layouts_and_clones(kwargs, written)
    dense = functional_outputs(kwargs, to_clone, layouts)[1]
    expected = describe(dense, kwargs)
    assert expected["aliases an argument"] == {n: False for n in to_clone}

    mode = FakeTensorMode()
    fake_kwargs = _fake_copies(mode, kwargs)
    with mode:
        fake = functional_fake(FunctionalNode(0, 0, (1,), fake_kwargs, to_clone, layouts))
        assert describe(fake, fake_kwargs) == expected
        assert describe(fake_outputs(fake_kwargs, to_clone, layouts), fake_kwargs) == expected


def _meta_copies(kwargs: dict[str, Tensor]) -> dict[str, Tensor]:
    """Meta tensors with the arguments' geometry, views of one meta base per storage."""
    bases: dict[int, Tensor] = {}
    out = {}
    for n, t in kwargs.items():
        sid = storage_id(t)
        if sid not in bases:
            nbytes = t.untyped_storage().nbytes()
            bases[sid] = torch.empty(nbytes, dtype=torch.uint8, device="meta")
        base = bases[sid] if t.dtype == torch.uint8 else bases[sid].view(t.dtype)
        out[n] = base.as_strided(t.shape, t.stride(), t.storage_offset())
    return out


@pytest.mark.parametrize("case", CASES)
def test_meta_outputs_have_the_dense_outputs_metadata(case: str) -> None:
    kwargs, written = CASES[case]()
    layouts, to_clone = _layouts_and_clones(kwargs, written)
    expected = describe(functional_outputs(kwargs, to_clone, layouts)[1], kwargs)["metadata"]
    meta = fake_outputs(_meta_copies(kwargs), to_clone, layouts)
    assert {n: t.device.type for n, t in meta.items()} == {n: "meta" for n in to_clone}
    assert describe(meta, {})["metadata"] == expected


def test_the_comparison_tells_a_wrong_offset_and_lost_sharing_apart() -> None:
    """``describe`` is what the tests compare: it must see the mistakes a fake rule could make."""
    kwargs, written = _overlapping_slices_at_offsets()
    layouts, to_clone = _layouts_and_clones(kwargs, written)
    dense = functional_outputs(kwargs, to_clone, layouts)[1]
    expected = describe(dense, kwargs)
    shifted = dict(dense, a=dense["a"].as_strided(dense["a"].shape, dense["a"].stride(), 0))
    assert describe(shifted, kwargs) != expected
    separate = dict(dense, b=dense["b"].clone())
    assert describe(separate, kwargs) != expected
    assert describe(dict(dense, a=kwargs["a"]), kwargs) != expected


def test_fake_outputs_refuse_sizes_the_graph_was_not_traced_for() -> None:
    kwargs, written = _one_written()
    layouts, to_clone = _layouts_and_clones(kwargs, written)
    with pytest.raises(ValueError, match="argument 'x' has shape"):
        fake_outputs({**kwargs, "x": torch.zeros(4, 7)}, to_clone, layouts)
