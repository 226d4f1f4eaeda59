"""Shared Triton kernels for the tests. Each works on one program of BLOCK elements or more."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def add_one_inplace(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


@triton.jit
def add_index_strided(x_ptr, n, stride, BLOCK: tl.constexpr):
    """x[i * stride] += i + 1 for i < n (one program): honours the view's stride."""
    i = tl.arange(0, BLOCK)
    m = i < n
    p = x_ptr + i * stride
    tl.store(p, tl.load(p, mask=m) + i + 1, mask=m)


@triton.jit
def scale_inplace_2d(x_ptr, rows, cols, stride_r, stride_c, BLOCK: tl.constexpr):
    """x[r, c] = 2 * x[r, c] + 1 for a strided 2-d view; one program per row."""
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    m = c < cols
    p = x_ptr + r * stride_r + c * stride_c
    tl.store(p, tl.load(p, mask=m) * 2 + 1, mask=m)


@triton.jit
def copy_2d(src_ptr, dst_ptr, cols, s_r, s_c, d_r, d_c, BLOCK: tl.constexpr):
    """dst[r, c] = src[r, c] + 1, both strided; one program per row."""
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    m = c < cols
    v = tl.load(src_ptr + r * s_r + c * s_c, mask=m)
    tl.store(dst_ptr + r * d_r + c * d_c, v + 1, mask=m)


@triton.jit
def write_then_read(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Store 7 through `a`, then store what `b` holds into `out` (one program)."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(a_ptr + offs, tl.full([BLOCK], 7, a_ptr.dtype.element_ty), mask=m)
    tl.debug_barrier()
    tl.store(out_ptr + offs, tl.load(b_ptr + offs, mask=m), mask=m)


@triton.jit
def halves(a_ptr, b_ptr, n, BLOCK: tl.constexpr):
    """Write 1 to the first half through `a` and 2 to the second half through `b`."""
    offs = tl.arange(0, BLOCK)
    half = n // 2
    tl.store(a_ptr + offs, tl.full([BLOCK], 1, a_ptr.dtype.element_ty), mask=offs < half)
    second = (offs >= half) & (offs < n)
    tl.store(b_ptr + offs, tl.full([BLOCK], 2, b_ptr.dtype.element_ty), mask=second)


@triton.jit
def two_writes(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """x += 1 and y *= 2."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=m) * 2, mask=m)


@triton.jit
def atomic_add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[0] += sum(x) with one atomic per program."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=m, other=0), axis=0))


@triton.jit
def read_only_sum(x_ptr, n, BLOCK: tl.constexpr):
    """Reads x and writes nothing."""
    offs = tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < n)


@triton.jit
def transpose_add_one(src_ptr, dst_ptr, s_r, s_c, d_r, d_c, R: tl.constexpr, C: tl.constexpr):
    """dst[c, r] = src[r, c] + 1 in one program; all loads happen before any store."""
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    v = tl.load(src_ptr + r * s_r + c * s_c)
    tl.debug_barrier()
    tl.store(dst_ptr + c * d_r + r * d_c, v + 1)
