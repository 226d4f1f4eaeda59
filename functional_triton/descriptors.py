"""Host-side ``TensorDescriptor`` arguments: traced as their base tensor plus metadata.

A descriptor is not a tensor, so tracing cannot see it; its ``base`` is. A traced launch
passes the base among the tensor arguments (so functionalization clones and updates it
like any written tensor) and keeps the descriptor's shape, strides, block shape and
padding among the constants; the launch rebuilds the descriptor over whatever tensor
the graph hands it (the clone, in a functional call).

Note [symbolic descriptors]
Under dynamic shapes a descriptor made by ``TensorDescriptor.from_tensor(x, block)`` has the
base's symbolic sizes and strides as its shape and strides. Like PyTorch's own path
(``triton_kernel_wrap``, which records only the block shape of a "stable" descriptor and
calls ``from_tensor`` again on the base), such an entry is recorded as ``None``: "the base's
own size (or stride) in this dimension", read from the tensor the launch gets, so a graph
run on other sizes describes the tensor it has, never the traced sizes. An entry is taken
to be the base's only when it provably is (``statically_known_true``: no guard, unbacked
sizes included); a symbolic entry that is something else (``x.shape[0] // 2``) is refused,
naming the argument and the field. The block shape is compiled into the kernel and must be
a constant. Concrete entries stay as they are, as in eager.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ._compat import TENSOR_DESCRIPTOR_TYPE, statically_known_true

# Reserved key of the constants dict that holds {argument name: descriptor metadata}.
DESCRIPTORS_KEY = "__functional_triton_descriptors__"

# shape, strides, block shape, padding, round_f32_to_tf32; a None entry of shape or strides is
# the base's own size or stride in that dimension (Note [symbolic descriptors]).
DescriptorMeta = tuple[tuple[int | None, ...], tuple[int | None, ...], tuple[int, ...], str, bool]


def descriptor_type() -> type | None:
    """triton's host-side ``TensorDescriptor`` (``_compat.TENSOR_DESCRIPTOR_TYPE``)."""
    return TENSOR_DESCRIPTOR_TYPE


def is_descriptor(value: object) -> bool:
    cls = descriptor_type()
    return cls is not None and isinstance(value, cls)


def _entries(name: str, field: str, values: Any, base_values: Any) -> tuple[int | None, ...]:
    """One field's entries; a symbolic one must be the base's own (Note [symbolic descriptors])."""
    out: list[int | None] = []
    for i, v in enumerate(values):
        if not isinstance(v, torch.SymInt):
            out.append(int(v))
        elif i < len(base_values) and statically_known_true(v == base_values[i]):
            out.append(None)
        else:
            raise TypeError(
                f"argument '{name}' is a TensorDescriptor whose {field}[{i}] is the symbolic value {v}, "
                f"which is not its base tensor's {field}[{i}]; under dynamic shapes a descriptor's "
                "shape and strides must be its base's (TensorDescriptor.from_tensor(base, block_shape)) "
                "or constants. Make the descriptor over a view of that shape, or mark the size static"
            )
    return tuple(out)


def describe(name: str, desc: Any) -> DescriptorMeta:
    """The metadata that rebuilds ``desc`` over another base (Note [symbolic descriptors])."""
    if any(isinstance(v, torch.SymInt) for v in desc.block_shape):
        raise TypeError(
            f"argument '{name}' is a TensorDescriptor with a symbolic block shape "
            f"{list(desc.block_shape)}; the block shape is compiled into the kernel and must be constant"
        )
    base = desc.base
    return (
        _entries(name, "shape", desc.shape, tuple(base.shape)),
        _entries(name, "strides", desc.strides, tuple(base.stride())),
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
        shape=[base.size(i) if v is None else v for i, v in enumerate(shape)],
        strides=[base.stride(i) if v is None else v for i, v in enumerate(strides)],
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
