"""Strided Triton kernels for the property tests: every tensor argument may be any view.

Each tensor argument ``t`` comes with six scalars, ``layout(t)`` in strategies.py:
its element count ``n`` and, after padding its shape on the left to three dims,
the sizes of dims 1 and 2 and all three strides. Lane ``i`` of a kernel touches the
``i``-th element of each argument in row-major order (``elem``), so a kernel works on
any slice, transpose, ``as_strided`` view or 0-d tensor, whatever its storage offset.

Determinism on a GPU (the interpreter runs a program as one vector, so any order would
do there, but the GPU run of these tests must agree with eager too):

- no argument is self-overlapping (strategies.py never draws such a view), so one
  ``tl.store`` never has two lanes writing the same element;
- inside one program, every load that may read memory a later store writes through a
  possibly aliasing argument, and every store followed by a load or store through a
  possibly aliasing argument, is separated by ``tl.debug_barrier()``;
- a launch has more than one program only when its tensor arguments share no storage
  (strategies.py decides), so no two programs touch the same element.

``CHUNK`` is the number of lanes per program: 64 (every tensor here has at most 64
elements) for one program, 16 for four.
"""

import triton
import triton.language as tl

# Each tensor argument and its six layout scalars on one line: keep the formatter out.
# fmt: off


@triton.jit
def elem(i, d1, d2, s0, s1, s2):
    """Element offset of the i-th element (row-major) of a 3-d view with sizes (_, d1, d2)."""
    return (i // (d1 * d2)) * s0 + ((i // d2) % d1) * s1 + (i % d2) * s2


@triton.jit
def inplace_kernel(a_ptr, an, ad1, ad2, as0, as1, as2, CHUNK: tl.constexpr):
    """a = 2 * a + 1."""
    i = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    m = i < an
    p = a_ptr + elem(i, ad1, ad2, as0, as1, as2)
    v = tl.load(p, mask=m)
    tl.store(p, v * 2 + 1, mask=m)


@triton.jit
def copy_kernel(
    a_ptr, an, ad1, ad2, as0, as1, as2,
    out_ptr, on, od1, od2, os0, os1, os2,
    CHUNK: tl.constexpr,
):
    """out[i] = a[i] + 1 (a[i] = 0 past the end of a)."""
    i = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    v = tl.load(a_ptr + elem(i, ad1, ad2, as0, as1, as2), mask=i < an, other=0)
    tl.debug_barrier()
    tl.store(out_ptr + elem(i, od1, od2, os0, os1, os2), v + 1, mask=i < on)


@triton.jit
def write_then_read_kernel(
    a_ptr, an, ad1, ad2, as0, as1, as2,
    b_ptr, bn, bd1, bd2, bs0, bs1, bs2,
    out_ptr, on, od1, od2, os0, os1, os2,
    CHUNK: tl.constexpr,
):
    """a[i] = 100 + i; then out[i] = b[i] (-1 past the end of b): shows what b sees of a's write."""
    i = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    tl.store(a_ptr + elem(i, ad1, ad2, as0, as1, as2), (i + 100).to(tl.float32), mask=i < an)
    tl.debug_barrier()
    v = tl.load(b_ptr + elem(i, bd1, bd2, bs0, bs1, bs2), mask=i < bn, other=-1)
    tl.debug_barrier()
    tl.store(out_ptr + elem(i, od1, od2, os0, os1, os2), v, mask=i < on)


@triton.jit
def halves_kernel(
    a_ptr, an, ad1, ad2, as0, as1, as2,
    b_ptr, bn, bd1, bd2, bs0, bs1, bs2,
    CHUNK: tl.constexpr,
):
    """a[i] = 1000 + i for the first half of a; then b[i] = 2000 + i for the second half of b."""
    i = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    tl.store(a_ptr + elem(i, ad1, ad2, as0, as1, as2), (i + 1000).to(tl.float32), mask=i < an // 2)
    tl.debug_barrier()
    second = (i >= bn // 2) & (i < bn)
    tl.store(b_ptr + elem(i, bd1, bd2, bs0, bs1, bs2), (i + 2000).to(tl.float32), mask=second)


@triton.jit
def two_writes_kernel(
    a_ptr, an, ad1, ad2, as0, as1, as2,
    b_ptr, bn, bd1, bd2, bs0, bs1, bs2,
    CHUNK: tl.constexpr,
):
    """a += 1; then b *= 2 (b sees a's write where they overlap)."""
    i = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    pa = a_ptr + elem(i, ad1, ad2, as0, as1, as2)
    va = tl.load(pa, mask=i < an)
    tl.debug_barrier()
    tl.store(pa, va + 1, mask=i < an)
    tl.debug_barrier()
    pb = b_ptr + elem(i, bd1, bd2, bs0, bs1, bs2)
    vb = tl.load(pb, mask=i < bn)
    tl.debug_barrier()
    tl.store(pb, vb * 2, mask=i < bn)


@triton.jit
def atomic_sum_kernel(
    a_ptr, an, ad1, ad2, as0, as1, as2,
    acc_ptr,
    CHUNK: tl.constexpr,
):
    """acc's first element += sum(a), one atomic per program (integer-valued floats: exact in any order)."""
    i = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    v = tl.load(a_ptr + elem(i, ad1, ad2, as0, as1, as2), mask=i < an, other=0)
    s = tl.sum(v, axis=0)
    tl.debug_barrier()
    tl.atomic_add(acc_ptr, s)


@triton.jit
def read_only_kernel(a_ptr, an, ad1, ad2, as0, as1, as2, CHUNK: tl.constexpr):
    """Reads a, writes nothing."""
    i = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    tl.load(a_ptr + elem(i, ad1, ad2, as0, as1, as2), mask=i < an)


# fmt: on
