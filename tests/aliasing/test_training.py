"""Training graphs (requires_grad inputs) and inference graphs: the three design-review cases."""

from __future__ import annotations

import functools

import torch

from tests import kernels as K
from tests.harness import AOT_MODES, check_matches_eager, compare, compile_mode, raw, run_once

N = 8


def _inputs(rg_x: bool, rg_w: bool):
    def make():
        x = torch.arange(N, dtype=torch.float32).requires_grad_(rg_x)
        w = (torch.arange(N, dtype=torch.float32) % 3).requires_grad_(rg_w)
        return x, w

    return make


def out_of_place_and_in_place(wrap, x, w):
    buf = w.detach().clone()
    wrap(K.add_one_inplace)[(1,)](buf, N, BLOCK=N)
    out = torch.empty_like(x)
    wrap(K.add_kernel)[(1,)](x.detach(), buf, out, N, BLOCK=N)
    return x * out + w, out


def test_a_inference_graph() -> None:
    check_matches_eager(out_of_place_and_in_place, _inputs(False, False), no_grad=(True,))


def test_b_training_graph_kernel_args_do_not_require_grad() -> None:
    check_matches_eager(out_of_place_and_in_place, _inputs(True, True))


def test_c_training_graph_kernel_args_require_grad() -> None:
    def prog(wrap, x, w):
        y = x * 2
        wrap(K.add_one_inplace)[(1,)](y, N, BLOCK=N)  # y keeps its grad_fn, as in eager
        out = torch.empty_like(y)
        wrap(K.add_kernel)[(1,)](y, w, out, N, BLOCK=N)  # out does not require grad
        return y * w, out

    check_matches_eager(prog, _inputs(True, True))


def test_c_kernel_mutates_view_of_arg_that_requires_grad() -> None:
    def prog(wrap, x, w):
        y = x * w
        v = y[2:]
        wrap(K.add_one_inplace)[(1,)](v, N - 2, BLOCK=N)
        return y * x, v

    check_matches_eager(prog, _inputs(True, True))


def test_kernel_writes_leaf_input_that_requires_grad() -> None:
    def prog(wrap, x, w):
        wrap(K.add_one_inplace)[(1,)](x, N, BLOCK=N)
        return x * w

    check_matches_eager(prog, _inputs(True, False))


def test_leaf_read_only_by_kernel_gets_no_grad() -> None:
    def prog(wrap, x, w):
        out = torch.empty_like(x)
        wrap(K.add_kernel)[(1,)](x, w, out, N, BLOCK=N)
        return out * 2, w * 3

    check_matches_eager(prog, _inputs(True, True))


def test_written_requires_grad_input_without_gradient_gets_zeros_not_none() -> None:
    # A known difference (README, Known limits): AOTAutograd gives every mutated input that requires
    # grad a tangent, so a leaf that only a kernel writes gets zeros for .grad where eager leaves None.
    # With keep_inference_input_mutations=True ("reinplace_keep") .grad stays None, as in eager.
    def prog(wrap, x, w):
        wrap(K.add_one_inplace)[(1,)](x, N, BLOCK=N)
        return w * 3

    eager = run_once(functools.partial(prog, raw), _inputs(True, True), no_grad=False)
    assert eager["grads"][0] is None
    # Everything else as in eager, bit for bit: outputs, x after the call, w.grad, aliasing.
    zeros = {**eager, "grads": [torch.zeros(N), eager["grads"][1]]}
    for mode in AOT_MODES:
        call = compile_mode(mode, prog, _inputs(True, True)())
        compare(
            run_once(call, _inputs(True, True), no_grad=False),
            eager if mode == "reinplace_keep" else zeros,
            mode,
        )
