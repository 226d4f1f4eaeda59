"""Launch arguments that tracing must carry exactly: constants by type and bits, tuples, grids.

Every program is checked against the raw kernel run eagerly (tests/harness.py).
"""

from __future__ import annotations

import math
import struct
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from functional_triton import side_table
from functional_triton.side_table import KernelSideTable
from tests.harness import ALL_MODES, check_matches_eager

N = 8
# Every mode that replays a trace; "symbolic" traces with dynamic shapes.
MODES = ALL_MODES


@triton.jit
def reciprocal_kernel(out_ptr, c, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1 / (tl.full([BLOCK], 1.0, tl.float32) * c))


@triton.jit
def tuple_scalar_kernel(vals, out_ptr, BLOCK: tl.constexpr):
    """out[:BLOCK] = vals[0] + 1, out[BLOCK:] = vals[0] + vals[0] (u1 wraps: True + True == 0)."""
    offs = tl.arange(0, BLOCK)
    v = vals[0]
    tl.store(out_ptr + offs, tl.zeros([BLOCK], tl.float64) + (v + 1))
    tl.store(out_ptr + BLOCK + offs, tl.zeros([BLOCK], tl.float64) + (v + v))


# --- item 1: constants are told apart by exact type and bits ------------------------------------


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # numpy, inside the interpreter
@pytest.mark.parametrize(
    "first, second",
    [(0.0, -0.0), (-0.0, 0.0), (1.0, 1)],
    ids=["zero-then-negative-zero", "negative-zero-then-zero", "float-then-int"],
)
def test_scalar_constants_that_compare_equal_launch_with_their_own_value(first: Any, second: Any) -> None:
    def prog(wrap: Any, a: torch.Tensor, b: torch.Tensor) -> None:
        wrap(reciprocal_kernel)[(1,)](a, first, BLOCK=N)
        wrap(reciprocal_kernel)[(1,)](b, second, BLOCK=N)

    check_matches_eager(prog, lambda: (torch.zeros(N), torch.zeros(N)), modes=MODES)


@pytest.mark.parametrize(
    "first, second",
    [((2**40,), (2.0**40,)), ((2.0**40,), (2**40,)), ((1,), (True,)), ((True,), (1,))],
    ids=["int-then-float", "float-then-int", "int-then-bool", "bool-then-int"],
)
def test_tuple_constants_that_compare_equal_launch_with_their_own_elements(first: Any, second: Any) -> None:
    def prog(wrap: Any, a: torch.Tensor, b: torch.Tensor) -> None:
        wrap(tuple_scalar_kernel)[(1,)](first, a, BLOCK=N)
        wrap(tuple_scalar_kernel)[(1,)](second, b, BLOCK=N)

    def inputs() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(2 * N, dtype=torch.float64), torch.zeros(2 * N, dtype=torch.float64)

    check_matches_eager(prog, inputs, modes=MODES)


class _Pair(NamedTuple):
    a: Any
    b: Any


_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
_OTHER_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000002))[0]


@pytest.mark.parametrize(
    "a, b",
    [
        (0.0, -0.0),
        (1, 1.0),
        (1, True),
        (0, False),
        (_NAN, _OTHER_NAN),
        ((1, 2), (1, 2.0)),
        ((1, (2, 3)), (1, (2, 3.0))),
        ((1, 2), _Pair(1, 2)),
        (np.float32(0.5), 0.5),
        (np.float32(0.5), np.float64(0.5)),
        (np.int32(3), np.int64(3)),
        (np.int64(3), 3),
        (tl.constexpr(1), tl.constexpr(1.0)),
        (tl.constexpr(1), 1),
    ],
)
def test_exact_key_tells_apart_constants_a_kernel_can_tell_apart(a: Any, b: Any) -> None:
    assert side_table.exact_key(a) != side_table.exact_key(b)
    table = KernelSideTable()
    ia, ib = table.add_constants({"c": a}), table.add_constants({"c": b})
    assert int(ia) != int(ib)
    assert table.get_constants(ib)["c"] is b


@pytest.mark.parametrize("value", [0.0, -0.0, _NAN, (1, 2.0, None), np.float32(0.5), "s", math.inf])
def test_exact_key_shares_identical_constants(value: Any) -> None:
    table = KernelSideTable()
    copy = struct.unpack("<d", struct.pack("<d", value))[0] if isinstance(value, float) else value
    assert int(table.add_constants({"c": value})) == int(table.add_constants({"c": copy}))
