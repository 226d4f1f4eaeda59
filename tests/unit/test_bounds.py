"""Kernels that touch memory outside their arguments' elements (Note [kernels stay within their arguments]).

The contract: a kernel reads and writes only its tensor arguments' elements. With
FUNCTIONAL_TRITON_CHECK_BOUNDS=1 every functional launch checks it and names the arguments;
kernels that keep it must still match eager bit for bit in that mode.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import triton
import triton.language as tl

import functional_triton as ft
from tests import kernels as K
from tests.harness import ALIASING_MODES, check_matches_eager


@triton.jit
def stencil_inplace(x_ptr, n, BLOCK: tl.constexpr):
    """x[i] = x[i - 1] + x[i + 1]: reads one element on each side of the argument."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs - 1, mask=m) + tl.load(x_ptr + offs + 1, mask=m)
    tl.debug_barrier()
    tl.store(x_ptr + offs, v, mask=m)


@triton.jit
def double_contiguous(x_ptr, n, BLOCK: tl.constexpr):
    """Assumes x is contiguous: given x[::2] it reads and writes the elements in between."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)


@triton.jit
def copy_with_halo(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[i] = x[i + 1]: reads one element past the end of x."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1, mask=m), mask=m)


@pytest.fixture
def check_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUNCTIONAL_TRITON_CHECK_BOUNDS", "1")


def stencil_prog(wrap: Any, x: torch.Tensor) -> tuple[torch.Tensor]:
    wrap(stencil_inplace)[(1,)](x[1:-1], 6, BLOCK=8)
    return (x,)


def strided_prog(wrap: Any, x: torch.Tensor) -> tuple[torch.Tensor]:
    wrap(double_contiguous)[(1,)](x[::2], 4, BLOCK=4)
    return (x,)


@pytest.mark.parametrize("mode", ["aot_function", "reinplace", "functionalize"])
def test_read_outside_the_argument_raises_naming_it(check_bounds: None, mode: str) -> None:
    with pytest.raises(
        RuntimeError, match=r"stencil_inplace read memory outside the elements of its argument\(s\) 'x_ptr'"
    ):
        check_matches_eager(stencil_prog, lambda: (torch.arange(8.0),), modes=(mode,), no_grad=(True,))


@pytest.mark.parametrize("mode", ["aot_function", "functionalize"])
def test_write_outside_the_argument_raises_naming_it(check_bounds: None, mode: str) -> None:
    with pytest.raises(
        RuntimeError, match=r"double_contiguous wrote .* outside the elements of its argument\(s\) 'x_ptr'"
    ):
        check_matches_eager(strided_prog, lambda: (torch.arange(8.0),), modes=(mode,), no_grad=(True,))


def test_read_past_the_end_of_a_written_argument_raises(check_bounds: None) -> None:
    def prog(wrap: Any, x: torch.Tensor) -> tuple[torch.Tensor]:
        v = x[0:4]
        wrap(copy_with_halo)[(1,)](v, v, 4, BLOCK=4)  # v[i] = v[i + 1]: reads x[4]
        return (x,)

    with pytest.raises(
        RuntimeError, match=r"copy_with_halo read memory outside the elements of its argument\(s\)"
    ):
        check_matches_eager(prog, lambda: (torch.arange(8.0),), modes=("aot_function",), no_grad=(True,))


def _within_bounds_programs() -> dict[str, tuple[Any, Any]]:
    def write_then_read_overlapping(wrap: Any, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = torch.zeros(4)
        wrap(K.write_then_read)[(1,)](x[0:4], x[2:6], out, 4, BLOCK=4)
        return out, x

    def strided_rows(wrap: Any, x: torch.Tensor) -> tuple[torch.Tensor]:
        v = x[:, ::2]
        wrap(K.scale_inplace_2d)[(4,)](v, 4, 4, *v.stride(), BLOCK=4)
        return (x,)

    def broadcast(wrap: Any, b: torch.Tensor) -> tuple[torch.Tensor]:
        x = b.expand(4, 8)
        src = x.clone()  # every program writes the same values: deterministic on a GPU too
        wrap(K.copy_2d)[(4,)](src, x, 8, *src.stride(), *x.stride(), BLOCK=8)
        return (b,)

    return {
        "overlapping_views": (write_then_read_overlapping, lambda: (torch.arange(8.0),)),
        "strided_rows": (strided_rows, lambda: (torch.arange(32.0).reshape(4, 8),)),
        "broadcast": (broadcast, lambda: (torch.arange(8.0),)),
    }


@pytest.mark.parametrize("name", list(_within_bounds_programs()))
def test_kernels_within_their_arguments_pass_the_check_and_match_eager(check_bounds: None, name: str) -> None:
    prog, inputs = _within_bounds_programs()[name]
    modes = ("aot_function", "aot_module") if name == "broadcast" else ALIASING_MODES
    check_matches_eager(prog, inputs, modes=modes)


def test_a_launch_that_also_writes_in_place_runs_once(check_bounds: None) -> None:
    """A partly reinplaced node writes one group in place: the check must not launch it twice."""
    from functional_triton.aliasing import in_place_group
    from functional_triton.side_table import kernel_side_table

    x, y = torch.arange(8.0), torch.arange(8.0)
    layouts = {"x_ptr": (in_place_group(0), (8,), (1,), 0), "y_ptr": (1, (8,), (1,), 0)}
    out = ft.triton_kernel_wrapper_functional(
        kernel_idx=kernel_side_table.add_kernel(K.two_writes, None),
        constant_args_idx=kernel_side_table.add_constants({"n": 8, "BLOCK": 8}),
        grid=(1,),
        kwargs={"x_ptr": x, "y_ptr": y},
        tensors_to_clone=["y_ptr"],
        layouts=layouts,
    )
    torch.testing.assert_close(x, torch.arange(8.0) + 1, rtol=0, atol=0)  # once, in place
    torch.testing.assert_close(out["y_ptr"], torch.arange(8.0) * 2, rtol=0, atol=0)
    torch.testing.assert_close(y, torch.arange(8.0), rtol=0, atol=0)
