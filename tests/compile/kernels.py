"""Kernels for the torch.compile and export tests (in a file: triton refuses @jit defined elsewhere)."""

import triton
import triton.language as tl

from tests.kernels import add_index_strided, add_kernel, add_one_inplace  # noqa: F401  (re-exported)
from tests.mutation_kernels import autotune_kernel, heuristics_kernel, stacked_kernel  # noqa: F401


@triton.jit
def desc_add_one(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    v = in_desc.load([pid * BM, 0])
    out_desc.store([pid * BM, 0], v + 1)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * scale, mask=m)


@triton.jit
def times_two_inplace(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)


def grid_of_meta(meta):
    """A module-level grid callable: one program per BLOCK elements of n."""
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)
