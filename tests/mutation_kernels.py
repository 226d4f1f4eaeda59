"""@triton.jit kernels for the mutation-analysis table in tests/unit/test_mutation.py.

Every kernel takes 1-D (or, for the descriptor kernel, 2-D) tensors and a BLOCK constexpr, so one
launch over `grid` programs covers the test tensors. Kernels whose name ends in `_opaque` write through
a pointer the analysis cannot see; they are never run.
"""

from __future__ import annotations

import sys
from typing import Any

import triton
import triton.language as tl

# This module, reached as a module attribute by `module_helper_kernel`.
_this_module = sys.modules[__name__]


def same_timing(kernel_call: Any, quantiles: Any = None) -> list[float]:
    """Autotune benchmark stand-in for CPU tests: runs the config once, every config ties."""
    kernel_call()
    return [1.0, 1.0, 1.0]


@triton.jit
def _store_helper(ptr, offs, val, mask):
    tl.store(ptr + offs, val, mask=mask)


@triton.jit
def _nested_store_helper(ptr, offs, val, mask):
    _store_helper(ptr, offs, val, mask)


@triton.jit
def _copy_helper(src_ptr, dst_ptr, offs, mask):
    # Two pointers in, only the second one is written.
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _offset_ptr(ptr, k):
    return ptr + k


@triton.jit
def _add_combine(a, b):
    return a + b


@triton.jit
def store_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


@triton.jit
def atomic_kernel(x_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if OP == "add":
        tl.atomic_add(out_ptr + offs, x, mask=mask)
    elif OP == "cas":
        tl.atomic_cas(out_ptr + offs, x, x + 1)
    elif OP == "xchg":
        tl.atomic_xchg(out_ptr + offs, x, mask=mask)
    elif OP == "max":
        tl.atomic_max(out_ptr + offs, x, mask=mask)
    elif OP == "min":
        tl.atomic_min(out_ptr + offs, x, mask=mask)
    elif OP == "and":
        tl.atomic_and(out_ptr + offs, x, mask=mask)
    elif OP == "or":
        tl.atomic_or(out_ptr + offs, x, mask=mask)
    elif OP == "xor":
        tl.atomic_xor(out_ptr + offs, x, mask=mask)


@triton.jit
def store_if_kernel(x_ptr, out_ptr, n, flag, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if flag > 0:
        tl.store(out_ptr + offs, x + 1, mask=mask)


@triton.jit
def store_for_kernel(x_ptr, out_ptr, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    # Both pointers are loop-carried; only the second one is written.
    offs = tl.program_id(0) * BLOCK * ITERS + tl.arange(0, BLOCK)
    src = x_ptr + offs
    dst = out_ptr + offs
    for i in range(ITERS):
        tl.store(dst, tl.load(src) + i)
        src += BLOCK
        dst += BLOCK


@triton.jit
def store_while_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    while start < n:
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 3, mask=mask)
        start += BLOCK * tl.num_programs(0)


@triton.jit
def reduce_kernel(x_ptr, sum_ptr, max_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(sum_ptr + tl.program_id(0), tl.reduce(x, 0, _add_combine))
    tl.store(max_ptr + tl.program_id(0), x.max(0))  # the tensor-method form of a @jit library function


@triton.jit
def scan_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.cumsum(x, 0), mask=mask)


@triton.jit
def helper_store_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    _store_helper(out_ptr, offs, tl.load(x_ptr + offs, mask=mask), mask)


@triton.jit
def helper_loop_kernel(x_ptr, y_ptr, out_ptr, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    for i in range(ITERS):
        _nested_store_helper(out_ptr, offs, x + i, mask)
        _copy_helper(x_ptr, y_ptr, offs, mask)


@triton.jit
def helper_returns_ptr_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    dst = _offset_ptr(out_ptr, 0)
    src = _offset_ptr(x_ptr, 0)
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def module_helper_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # The helper is reached through a module attribute, not a global name.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    _this_module._nested_store_helper(out_ptr, offs, tl.load(x_ptr + offs, mask=mask), mask)


@triton.jit
def _pick_ptr(a_ptr, b_ptr, c_ptr, flag):
    # A return inside an `if`: triton emits unstructured control flow (cf.cond_br / cf.br), and `dst`
    # reaches the join block as a pointer-typed block argument.
    dst = a_ptr
    if flag > 0:
        dst = b_ptr
        if flag > 5:
            return c_ptr
    return dst


@triton.jit
def _store_unless(ptr, offs, val, mask, skip):
    if skip > 0:
        return
    tl.store(ptr + offs, val, mask=mask)


@triton.jit
def early_return_kernel(x_ptr, a_ptr, b_ptr, c_ptr, d_ptr, n, flag, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    dst = _pick_ptr(a_ptr, b_ptr, c_ptr, flag)
    tl.store(dst + offs, x, mask=mask)
    _store_unless(d_ptr, offs, x, mask, flag)


@triton.jit
def ptr_arith_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    base = (out_ptr + 3) - 3
    tl.store(base + offs * 1, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def ptr_2d_kernel(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # expand_dims + broadcast + addptr: the usual 2-d pointer block.
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    src = x_ptr + rows[:, None] * N + cols[None, :]
    dst = tl.reshape(out_ptr + rows[:, None] * N + cols[None, :], (BM * BN,))
    tl.store(dst, tl.reshape(tl.load(src, mask=mask), (BM * BN,)), mask=tl.reshape(mask, (BM * BN,)))


@triton.jit
def where_ptr_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    dst = tl.where(offs % 2 == 0, a_ptr + offs, b_ptr + offs)
    tl.store(dst, tl.load(c_ptr + offs, mask=mask), mask=mask)


@triton.jit
def block_ptr_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.make_block_ptr(x_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    dst = tl.make_block_ptr(out_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    src = tl.advance(src, (pid * BLOCK,))
    dst = tl.advance(dst, (pid * BLOCK,))
    tl.store(dst, tl.load(src, boundary_check=(0,)), boundary_check=(0,))


@triton.jit
def descriptor_kernel(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    m = tl.program_id(0) * BM
    dst.store([m, 0], src.load([m, 0]) + 1)


@triton.jit
def descriptor_update_kernel(x_ptr, out_ptr, M, N, OP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    m = tl.program_id(0) * BM
    tile = src.load([m, 0])
    if OP == "atomic_add":
        dst = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        dst.atomic_add([m, 0], tile)
    else:
        rows = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1], block_shape=[1, BN])
        rows.scatter(tile, m + tl.arange(0, BM), 0)


@triton.jit
def host_descriptor_kernel(in_desc, n, out_desc, spare_desc, BM: tl.constexpr, BN: tl.constexpr):
    # Host-side TensorDescriptor arguments: each is a descriptor plus shape and stride scalars in TTIR.
    m = tl.program_id(0) * BM
    out_desc.store([m, 0], in_desc.load([m, 0]) + n + spare_desc.load([m, 0]))


@triton.jit
def read_only_kernel(a_ptr, b_ptr, mask_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < n) & (tl.load(mask_ptr + offs, mask=offs < n, other=0) != 0)
    a = tl.load(a_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, a + b, mask=offs < n)


@triton.jit
def optional_ptr_kernel(x_ptr, out_ptr, n, extra_ptr=None, BLOCK: tl.constexpr = 16):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x, mask=mask)
    if extra_ptr is not None:
        tl.store(extra_ptr + offs, x + 1, mask=mask)


@triton.jit
def no_write_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    x + y


@triton.jit
def print_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.device_print("x", tl.load(x_ptr + offs, mask=offs < n))


@triton.jit
def static_assert_kernel(x_ptr, out_ptr, FAIL: tl.constexpr):
    tl.static_assert(not FAIL, "deliberate frontend failure")
    tl.store(out_ptr, tl.load(x_ptr))


def make_closure_kernel() -> Any:
    """A kernel whose helper is a closure variable, not a global."""

    @triton.jit
    def closure_helper(ptr, offs, val, mask):
        tl.store(ptr + offs, val, mask=mask)

    @triton.jit
    def closure_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        closure_helper(out_ptr, offs, tl.load(x_ptr + offs, mask=mask), mask)

    return closure_kernel


closure_kernel = make_closure_kernel()


def make_store_kernel() -> Any:
    """A fresh kernel object on each call (for lifetime tests)."""

    @triton.jit
    def fresh_store_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs))

    return fresh_store_kernel


@triton.jit
def pure_asm_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(out_ptr + offs, y)


@triton.jit
def loaded_ptr_read_kernel(table_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # A pointer loaded from memory that is only read from: no invisible write.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ptrs = table_ptr.to(tl.pointer_type(tl.pointer_type(tl.float32)), bitcast=True)
    src = tl.load(ptrs)
    tl.store(out_ptr + offs, tl.load(src + offs))


# --- kernels whose writes the analysis cannot see -------------------------------------------------


@triton.jit
def int_table_opaque(table_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    addr = tl.load(table_ptr + tl.program_id(0))
    dst = addr.to(tl.pointer_type(tl.float32))
    tl.store(dst + offs, tl.load(x_ptr + offs))


@triton.jit
def loaded_ptr_opaque(table_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    ptrs = table_ptr.to(tl.pointer_type(tl.pointer_type(tl.float32)), bitcast=True)
    dst = tl.load(ptrs + tl.program_id(0))
    tl.store(dst + offs, tl.load(x_ptr + offs))


@triton.jit
def int_to_ptr_opaque(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    addr = out_ptr.to(tl.int64, bitcast=True) + 0
    dst = addr.to(tl.pointer_type(tl.float32), bitcast=True)
    tl.store(dst + offs, tl.load(x_ptr + offs))


@triton.jit
def impure_asm_opaque(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(out_ptr + offs, y)


# --- decorated kernels ----------------------------------------------------------------------------


@triton.jit
def _select_store_kernel(x_ptr, out_ptr, y_ptr, n, WRITE_Y: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x, mask=mask)
    if WRITE_Y:
        tl.store(y_ptr + offs, x + 1, mask=mask)


# Only the second config writes y_ptr: an analysis of configs[0] alone would miss it.
autotune_kernel = triton.autotune(
    configs=[triton.Config({"WRITE_Y": False}), triton.Config({"WRITE_Y": True})],
    key=["n"],
    do_bench=same_timing,
)(_select_store_kernel)

heuristics_kernel = triton.heuristics({"WRITE_Y": lambda args: args["n"] % 32 == 0})(_select_store_kernel)


@triton.jit
def _even_kernel(x_ptr, out_ptr, y_ptr, n, EVEN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x, mask=offs < n)
    if not EVEN:
        tl.store(y_ptr + offs, x + 1, mask=offs < n)


# autotune over heuristics over jit: the heuristic sees each config's BLOCK.
stacked_kernel = triton.autotune(
    configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})],
    key=["n"],
    do_bench=same_timing,
)(triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})(_even_kernel))
