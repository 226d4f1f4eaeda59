"""Triton kernels for the training tests: the shapes people write for fused ops and their gradients.

Every kernel is written so that one eager answer exists on both the interpreter and a GPU: each
program reads what it needs before it stores, programs touch disjoint memory (except where a
comment says otherwise), and every reduction has a fixed order. So a kernel whose output argument
is also one of its inputs (``dx_ptr`` is ``dy_ptr``: the gradient written over the incoming one)
computes the same values as with a fresh output buffer, on either backend.
"""

import triton
import triton.language as tl

# --- row-wise softmax: one program per row -------------------------------------------------------------


@triton.jit
def softmax_fwd(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    """y[r, :] = softmax(x[r, :])."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=m, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    den = tl.sum(num, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, num / den, mask=m)


@triton.jit
def softmax_bwd(
    y_ptr, dy_ptr, dx_ptr, y_row_stride, dy_row_stride, dx_row_stride, n_cols, BLOCK: tl.constexpr
):
    """dx[r, :] = y * (dy - sum(y * dy)). ``dx`` may be ``y`` or ``dy``: the row is loaded first."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    y = tl.load(y_ptr + row * y_row_stride + cols, mask=m, other=0.0)
    dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=m, other=0.0)
    dot = tl.sum(y * dy, axis=0)
    tl.store(dx_ptr + row * dx_row_stride + cols, y * (dy - dot), mask=m)


# --- layer norm over the last dimension ------------------------------------------------------------------


@triton.jit
def layer_norm_fwd(
    x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, row_stride, n_cols, eps, BLOCK: tl.constexpr
):
    """y = (x - mean) * rstd * w + b per row; saves mean and rstd (one float per row) for backward."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=m, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(m, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    w = tl.load(w_ptr + cols, mask=m)
    b = tl.load(b_ptr + cols, mask=m)
    tl.store(y_ptr + row * row_stride + cols, xc * rstd * w + b, mask=m)


@triton.jit
def layer_norm_bwd_dx(
    x_ptr,
    dy_ptr,
    dx_ptr,
    w_ptr,
    mean_ptr,
    rstd_ptr,
    partial_dw_ptr,
    partial_db_ptr,
    row_stride,
    n_rows,
    n_cols,
    ROWS_PER_GROUP: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Stage 1 of the backward: dx per row, and per-group partial sums of dw and db.

    Program g handles rows g, g + GROUP, g + 2 * GROUP, ... in that order and stores its partial
    sums into row g of ``partial_dw`` / ``partial_db`` (GROUP x n_cols): no two programs write the
    same address, so the sums have one order on any backend. ``dx`` may be ``dy``.
    (The loop runs ROWS_PER_GROUP times with a row mask: triton 3.6's interpreter takes neither a
    program id nor an integer argument as a range bound.)
    """
    g = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    w = tl.load(w_ptr + cols, mask=m, other=0.0)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, ROWS_PER_GROUP):
        row = g + i * GROUP
        mr = m & (row + 0 * cols < n_rows)  # a block mask: the interpreter refuses block & scalar
        x = tl.load(x_ptr + row * row_stride + cols, mask=mr, other=0.0)
        dy = tl.load(dy_ptr + row * row_stride + cols, mask=mr, other=0.0)
        last = tl.minimum(row, n_rows - 1)  # a row past the end reads the last row's stats, unused
        mean = tl.load(mean_ptr + last)
        rstd = tl.load(rstd_ptr + last)
        xhat = tl.where(mr, (x - mean) * rstd, 0.0)
        wdy = w * dy
        c1 = tl.sum(xhat * wdy, axis=0) / n_cols
        c2 = tl.sum(wdy, axis=0) / n_cols
        tl.store(dx_ptr + row * row_stride + cols, (wdy - (xhat * c1 + c2)) * rstd, mask=mr)
        dw += dy * xhat
        db += dy
    tl.store(partial_dw_ptr + g * n_cols + cols, dw, mask=m)
    tl.store(partial_db_ptr + g * n_cols + cols, db, mask=m)


@triton.jit
def layer_norm_bwd_dwdb(
    partial_dw_ptr, partial_db_ptr, dw_ptr, db_ptr, n_cols, GROUP: tl.constexpr, BLOCK: tl.constexpr
):
    """Stage 2: dw += sum of the GROUP partial rows (and db alike), one program per BLOCK columns.

    The sum over groups is one tl.sum (fixed order), and it is added to the zero-filled gradient
    buffer with tl.atomic_add; each address gets exactly one atomic add (one program owns each
    column), so 0 + s == s exactly and the result does not depend on scheduling, even on a GPU.
    """
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = cols < n_cols
    offs = tl.arange(0, GROUP)[:, None] * n_cols + cols[None, :]
    dw = tl.sum(tl.load(partial_dw_ptr + offs, mask=m[None, :], other=0.0), axis=0)
    db = tl.sum(tl.load(partial_db_ptr + offs, mask=m[None, :], other=0.0), axis=0)
    tl.atomic_add(dw_ptr + cols, dw, mask=m)
    tl.atomic_add(db_ptr + cols, db, mask=m)


# --- elementwise activations -----------------------------------------------------------------------------


@triton.jit
def _tanh(z):
    # tanh from exp, so it is the same op on the interpreter and on a GPU (no libdevice).
    return 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)


@triton.jit
def gelu_tanh_fwd(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    t = _tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + t), mask=m)


@triton.jit
def gelu_tanh_bwd(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    """dx = dy * gelu'(x). ``dx`` may be ``x`` (the saved input, overwritten) or ``dy``."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    dy = tl.load(dy_ptr + offs, mask=m)
    t = _tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))
    dt = (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x)
    tl.store(dx_ptr + offs, dy * (0.5 * (1.0 + t) + 0.5 * x * dt), mask=m)


@triton.jit
def leaky_relu_inplace(x_ptr, n, slope, BLOCK: tl.constexpr):
    """x = leaky_relu(x), in place."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(x_ptr + offs, tl.where(x > 0, x, x * slope), mask=m)


@triton.jit
def leaky_relu_bwd_inplace(y_ptr, dy_ptr, n, slope, BLOCK: tl.constexpr):
    """dy = dy * leaky_relu'(x) in place, from the output y (slope > 0: y > 0 exactly when x > 0)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    y = tl.load(y_ptr + offs, mask=m)
    dy = tl.load(dy_ptr + offs, mask=m)
    tl.store(dy_ptr + offs, tl.where(y > 0, dy, dy * slope), mask=m)


# --- small kernels for the autograd.Function cases ----------------------------------------------------------


@triton.jit
def scale_shift(x_ptr, out_ptr, n, scale, shift, BLOCK: tl.constexpr):
    """out = x * scale + shift."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * scale + shift, mask=m)


@triton.jit
def mul_fwd(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = x * w."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * tl.load(w_ptr + offs, mask=m), mask=m)


@triton.jit
def mul_bwd(x_ptr, w_ptr, dy_ptr, dx_ptr, dw_ptr, n, BLOCK: tl.constexpr):
    """dx = dy * w, dw = dy * x. ``dx`` / ``dw`` may be any of the inputs: all loads come first."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    w = tl.load(w_ptr + offs, mask=m)
    dy = tl.load(dy_ptr + offs, mask=m)
    tl.debug_barrier()
    tl.store(dx_ptr + offs, dy * w, mask=m)
    tl.store(dw_ptr + offs, dy * x, mask=m)


@triton.jit
def accumulate(acc_ptr, x_ptr, n, BLOCK: tl.constexpr):
    """acc += x."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(acc_ptr + offs, tl.load(acc_ptr + offs, mask=m) + tl.load(x_ptr + offs, mask=m), mask=m)


@triton.jit
def mul_bwd_opaque(x_ptr, w_ptr, dy_ptr, dx_ptr, dw_ptr, n, OPAQUE: tl.constexpr, BLOCK: tl.constexpr):
    """mul_bwd, with the gradient passed through non-pure inline asm when OPAQUE (GPU only).

    Non-pure inline asm may touch any memory, so mutation analysis cannot tell what this kernel
    writes. The interpreter cannot run inline asm, so on CPU the tests launch OPAQUE=False and make
    the analysis answer "unknown" instead.
    """
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    w = tl.load(w_ptr + offs, mask=m)
    dy = tl.load(dy_ptr + offs, mask=m)
    if OPAQUE:
        dy = tl.inline_asm_elementwise(
            "mov.f32 $0, $1;", "=f,f", [dy], dtype=tl.float32, is_pure=False, pack=1
        )
    tl.store(dx_ptr + offs, dy * w, mask=m)
    tl.store(dw_ptr + offs, dy * x, mask=m)
