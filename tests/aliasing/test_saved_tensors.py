"""Tensors saved for backward by torch ops, then written by a kernel (issue 15, item 5).

Eagerly a raw launch is invisible to autograd: no version bump, and the backward computes with
the values the kernel left. Traced, AOTAutograd must not see a version-bumping copy either.
"""

from __future__ import annotations

import torch

from tests import kernels as K
from tests.harness import check_matches_eager

MODES = ("aot_function", "aot_module", "reinplace", "reinplace_keep")


def _add_one(wrap, t: torch.Tensor) -> None:
    wrap(K.add_one_inplace)[(1,)](t, t.numel(), BLOCK=16)


def test_saved_intermediate_written_after_use() -> None:
    def prog(wrap, x):
        y = x.clone()
        out = y.sin()  # saves y
        _add_one(wrap, y)
        return out

    check_matches_eager(prog, lambda: (torch.arange(16.0).requires_grad_(),), modes=MODES, no_grad=(False,))


def test_saved_view_of_an_input_written_after_use() -> None:
    def prog(wrap, x, w):
        out = x[2:] * w  # saves the view x[2:] for w's gradient
        _add_one(wrap, x)
        return out

    check_matches_eager(
        prog, lambda: (torch.arange(16.0), torch.ones(14).requires_grad_()), modes=MODES, no_grad=(False,)
    )
