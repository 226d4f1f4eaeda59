"""The contract on memory a kernel may touch, and a debug mode that checks it.

Note [kernels stay within their arguments]
A functional launch copies each written alias group into a buffer that holds only the
elements its members reach (Note [alias groups]); the rest of the buffer (gaps between
strided elements, nothing below the lowest element, nothing past the highest) is
uninitialised. In eager, a kernel that reads or writes memory of an argument's storage
outside the argument's elements (a stencil on ``x[1:-1]`` that reads ``x[0]``; a kernel
that assumes contiguity and is given ``x[::2]``) touches the real storage; in a traced
graph it would touch that uninitialised memory. Copying whole storages on every launch
would make the clone of ``x[-4:]`` cost the whole tensor, so the contract is:

    a kernel reads and writes only the elements of its tensor arguments (what their
    sizes, strides and storage offsets reach); to touch more of a storage, pass a
    tensor that covers it (the base, plus an offset argument).

``FUNCTIONAL_TRITON_CHECK_BOUNDS=1`` checks it for every functional launch, naming the
arguments: each cloned group's buffer is filled with a sentinel byte and padded with
``PAD_BYTES`` of it on both sides before the members are copied in. After the launch, a
byte outside the members' elements that is no longer the sentinel is a write outside
them. Then the launch is repeated once per group with a different sentinel in that
group's buffer: a written result that changes with it is a read outside the group's
elements. Launches that also write some group in place (a partly reinplaced node) run
once, checking writes only. Accesses further than ``PAD_BYTES`` outside a buffer are not
seen (they may touch other allocations), nor are read-only arguments (they are the real
tensors, as in eager, except where re-strided).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from .aliasing import Sharing, byte_offsets, rebuild_arguments, sharing_of

ENV_VAR = "FUNCTIONAL_TRITON_CHECK_BOUNDS"
SENTINELS = (0xA5, 0x5A)


def checking_bounds() -> bool:
    """Whether the debug mode is on (read on every launch, so tests and users can switch it)."""
    return os.environ.get(ENV_VAR, "") not in ("", "0")


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _check_writes(kernel_name: str, names: Sequence[str], views: Sequence[Tensor], fill: int) -> None:
    """Raise if a byte of the group's buffer outside its members' elements lost the sentinel."""
    storage = views[0].untyped_storage()
    data = torch.empty(0, dtype=torch.uint8, device=views[0].device).set_(storage)
    inside = torch.zeros(data.numel(), dtype=torch.bool, device=data.device)
    for v in views:
        if v.numel():
            inside[byte_offsets(v, storage.data_ptr())] = True
    changed = ((data != fill) & ~inside).nonzero().flatten()
    if changed.numel():
        first = min(v.data_ptr() for v in views) - storage.data_ptr()
        where = int(changed[0]) - first
        raise RuntimeError(
            f"{kernel_name} wrote {changed.numel()} byte(s) outside the elements of its argument(s) "
            f"{_quoted(names)} (the first at byte {where} from the lowest element); in a traced "
            "graph only the arguments' elements are copied, so such writes are lost. A kernel must "
            "touch only its tensor arguments' elements (Note [kernels stay within their arguments])"
        )


def _same_bits(a: Tensor, b: Tensor) -> bool:
    return torch.equal(
        a.reshape(-1).contiguous().view(torch.uint8), b.reshape(-1).contiguous().view(torch.uint8)
    )


def _run(
    launch: Callable[[dict[str, Any]], None],
    kernel_name: str,
    kwargs: Mapping[str, Any],
    layouts: Mapping[str, Sequence[Any]],
    fills: Mapping[int, int],
    names_of: Mapping[int, list[str]],
) -> dict[str, Any]:
    new_kwargs = rebuild_arguments(kwargs, layouts, fills)
    launch(new_kwargs)
    for group, names in names_of.items():
        _check_writes(kernel_name, names, [new_kwargs[n] for n in names], fills[group])
    return new_kwargs


def launch_checked_bounds(
    launch: Callable[[dict[str, Any]], None],
    kernel_name: str,
    kwargs: Mapping[str, Any],
    layouts: Mapping[str, Sequence[Any]],
    tensors_to_clone: Sequence[str],
) -> dict[str, Any]:
    """Launch as the functional operator does, checking Note [kernels stay within their arguments].

    Returns the launched arguments of the first run (the one whose results count).
    """
    names_of: dict[int, list[str]] = {}
    for name, raw in layouts.items():
        if sharing_of(raw[0]) is Sharing.CLONED:
            names_of.setdefault(raw[0], []).append(name)
    base = dict.fromkeys(names_of, SENTINELS[0])
    first = _run(launch, kernel_name, kwargs, layouts, base, names_of)
    if any(sharing_of(raw[0]) is Sharing.IN_PLACE for raw in layouts.values()):
        return first  # some group was written in place: the launch cannot be repeated
    for group, names in names_of.items():
        again = _run(launch, kernel_name, kwargs, layouts, {**base, group: SENTINELS[1]}, names_of)
        changed = [n for n in tensors_to_clone if not _same_bits(first[n], again[n])]
        if changed:
            raise RuntimeError(
                f"{kernel_name} read memory outside the elements of its argument(s) {_quoted(names)}: "
                f"what it wrote to {_quoted(changed)} changed with the contents of that memory. In a "
                "traced graph only the arguments' elements are copied; pass a tensor that covers "
                "what the kernel reads (Note [kernels stay within their arguments])"
            )
    return first
