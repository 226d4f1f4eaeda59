"""Host-side ``TensorDescriptor`` arguments: traced as their base tensor plus metadata.

A descriptor is not a tensor, so tracing cannot see it; its ``base`` is. A traced launch
passes the base among the tensor arguments (so functionalization clones and updates it
like any written tensor) and keeps the descriptor's shape, strides, block shape and
padding among the constants; the launch rebuilds the descriptor over whatever tensor
the graph hands it (the clone, in a functional call).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ._compat import TENSOR_DESCRIPTOR_TYPE

# Reserved key of the constants dict that holds {argument name: descriptor metadata}.
DESCRIPTORS_KEY = "__functional_triton_descriptors__"

DescriptorMeta = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], str, bool]


def descriptor_type() -> type | None:
    """triton's host-side ``TensorDescriptor`` (``_compat.TENSOR_DESCRIPTOR_TYPE``)."""
    return TENSOR_DESCRIPTOR_TYPE


def is_descriptor(value: object) -> bool:
    cls = descriptor_type()
    return cls is not None and isinstance(value, cls)


def describe(name: str, desc: Any) -> DescriptorMeta:
    """The metadata that rebuilds ``desc`` over another base; symbolic sizes are refused."""
    fields = (desc.shape, desc.strides, desc.block_shape)
    if any(isinstance(v, torch.SymInt) for f in fields for v in f):
        raise TypeError(
            f"argument '{name}' is a TensorDescriptor with symbolic shape or strides; "
            "functional_triton traces descriptors with static shapes only"
        )
    return (
        tuple(int(v) for v in desc.shape),
        tuple(int(v) for v in desc.strides),
        tuple(int(v) for v in desc.block_shape),
        str(getattr(desc, "padding", "zero")),
        bool(getattr(desc, "round_f32_to_tf32", False)),
    )


def rebuild(base: torch.Tensor, meta: DescriptorMeta, *, checked: bool = True) -> Any:
    """A TensorDescriptor over ``base`` with the recorded metadata.

    ``checked=False`` skips the descriptor's own validation, which reads the base's
    data pointer: needed when the base is a traced tensor (for mutation analysis).
    """
    cls = descriptor_type()
    assert cls is not None, "functional_triton internal error: descriptors without triton support"
    shape, strides, block_shape, padding, round_tf32 = meta
    fields = dict(
        base=base,
        shape=list(shape),
        strides=list(strides),
        block_shape=list(block_shape),
        padding=padding,
    )
    if "round_f32_to_tf32" in getattr(cls, "__dataclass_fields__", {}):
        fields["round_f32_to_tf32"] = round_tf32
    if checked:
        return cls(**fields)
    desc: Any = object.__new__(cls)
    for key, value in fields.items():
        object.__setattr__(desc, key, value)
    return desc


def with_descriptors(
    values: Mapping[str, Any], descriptors: Mapping[str, DescriptorMeta], *, checked: bool = True
) -> dict[str, Any]:
    """``values`` with each descriptor argument's base replaced by its rebuilt descriptor."""
    out = dict(values)
    for name, meta in descriptors.items():
        out[name] = rebuild(values[name], meta, checked=checked)
    return out
