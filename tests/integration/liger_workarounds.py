"""Liger's losses without their data-dependent Python, built from Liger's own kernels.

Liger's cross-entropy counts the non-ignored targets with ``.item()`` in forward and skips the
backward scaling when ``torch.equal(grad_output, 1.0)``; FakeTensor, and so AOTAutograd, refuses
both (README, Known limits). The workaround: take the count from the caller (computed before the
traced step, from the targets) and always scale (multiplying by 1.0 is exact). The kernel launches
are Liger's, as ``cross_entropy_forward`` / ``cross_entropy_backward`` make them.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
from liger_kernel.ops import cross_entropy as ce


def _block(n_cols: int) -> int:
    return min(ce.MAX_FUSED_SIZE, triton.next_power_of_2(n_cols))


def cross_entropy_launch(
    logits: torch.Tensor, target: torch.Tensor, n_non_ignore: int, has_gradients: bool | None = None
) -> torch.Tensor:
    """Liger's forward launch for mean reduction: the per-row losses; dlogits overwrite ``logits``."""
    n_rows, n_cols = logits.shape
    loss_1d = torch.zeros(n_rows, dtype=logits.dtype, device=logits.device)
    ce.liger_cross_entropy_kernel[(n_rows,)](
        X_ptr=logits,
        X_stride=logits.stride(-2),
        Y_ptr=target,
        Y_stride=target.stride(-1),
        weight_ptr=None,
        loss_ptr=loss_1d,
        z_loss_ptr=None,
        loss_stride=loss_1d.stride(-1),
        token_accuracy_ptr=None,
        token_accuracy_stride=0,
        predicted_tokens_ptr=None,
        predicted_tokens_stride=0,
        n_cols=n_cols,
        n_non_ignore=n_non_ignore,
        sum_non_ignore_weight=n_non_ignore,
        ignore_index=-100,
        weight_sum=0.0,
        lse_square_scale=0.0,
        label_smoothing=0.0,
        reduction="mean",
        softcap=None,
        RETURN_Z_LOSS=False,
        RETURN_TOKEN_ACCURACY=False,
        RETURN_PREDICTED_TOKENS=False,
        BLOCK_SIZE=_block(n_cols),
        HAS_WEIGHT=False,
        HAS_SOFTCAPPING=False,
        HAS_GRADIENTS=logits.requires_grad if has_gradients is None else has_gradients,
        num_warps=32,
    )
    return loss_1d


def scale_in_place(dlogits: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
    """Liger's backward launch: ``dlogits *= grad_output`` (a scalar), in place."""
    n_rows, n_cols = dlogits.shape
    ce.element_mul_kernel[(n_rows,)](
        dlogits, dlogits.stride(-2), grad_output, n_cols, BLOCK_SIZE=_block(n_cols), num_warps=32
    )
    return dlogits


class CrossEntropy(torch.autograd.Function):
    """``LigerCrossEntropyFunction`` (mean reduction) with the count of targets given."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, target: torch.Tensor, n_non_ignore: int) -> torch.Tensor:
        loss_1d = cross_entropy_launch(logits, target, n_non_ignore)
        if logits.requires_grad:
            ctx.save_for_backward(logits.detach())  # as Liger: the logits now hold dlogits
        return torch.sum(loss_1d)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:
        (dlogits,) = ctx.saved_tensors
        return scale_in_place(dlogits, grad_output), None, None


def n_non_ignore(target: torch.Tensor, ignore_index: int = -100) -> int:
    """What Liger's forward computes with ``.item()``; call it outside the traced step."""
    return int((target != ignore_index).sum().item())


class FusedLinearCrossEntropy(torch.autograd.Function):
    """``LigerFusedLinearCrossEntropyFunction`` (mean reduction, no bias) with the count given.

    As Liger: logits are computed chunk by chunk, Liger's kernel overwrites each chunk with its
    gradient, grad_input and grad_weight are computed in forward and saved, and backward scales
    them in place with Liger's ``element_mul_kernel``.
    """

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, n_non_ignore: int
    ) -> Any:
        rows, hidden = x.shape
        vocab = weight.shape[0]
        chunk = min(triton.next_power_of_2(triton.cdiv(rows, triton.cdiv(vocab, hidden))), rows)
        grad_input = torch.zeros_like(x)
        grad_weight = torch.zeros_like(weight)
        losses = []
        for start in range(0, rows, chunk):
            x_chunk = x[start : start + chunk]
            logits = (x_chunk @ weight.t()).contiguous()
            losses.append(cross_entropy_launch(logits, target[start : start + chunk], n_non_ignore, True))
            grad_input[start : start + chunk] = logits @ weight
            grad_weight.addmm_(logits.t(), x_chunk)
        ctx.save_for_backward(grad_input, grad_weight)
        return torch.sum(torch.cat(losses))

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:
        grad_input, grad_weight = ctx.saved_tensors
        return scale_in_place(grad_input, grad_output), scale_in_place(grad_weight, grad_output), None, None
