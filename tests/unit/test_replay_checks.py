"""Run-time checks of replayed graphs: geometry a graph was not traced for, aliasing it was not traced for.

Note [traced geometry] (node.py) and Note [aliasing the graph was not traced for] (aliasing.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch
from functorch.compile import aot_function
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from tests.harness import compare, compile_mode, raw, run_once
from tests.helpers import nop
from tests.kernels import add_kernel, add_one_inplace, copy_2d, scale_inplace_2d, write_then_read


def inplace_1d(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    wrap(add_one_inplace)[(1,)](x, x.numel(), BLOCK=32)
    return x


def inplace_2d(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    wrap(scale_inplace_2d)[(x.shape[0],)](x, x.shape[0], x.shape[1], x.stride(0), x.stride(1), BLOCK=8)
    return x


def test_plain_make_fx_graph_replayed_on_other_sizes_raises_naming_the_argument() -> None:
    gm = make_fx(functools.partial(inplace_1d, ft.wrap_triton))(torch.zeros(8))
    with pytest.raises(
        ValueError, match=r"argument 'x_ptr' has shape \(20,\), but the graph was traced for \(8,\)"
    ):
        gm(torch.zeros(20))


def test_plain_make_fx_graph_replayed_on_other_strides_raises_naming_the_argument() -> None:
    gm = make_fx(functools.partial(inplace_2d, ft.wrap_triton))(torch.zeros(4, 8))
    x = torch.zeros(8, 4).t()
    with pytest.raises(
        ValueError, match=r"argument 'x_ptr' has strides \(1, 4\), but the graph was traced for \(8, 1\)"
    ):
        gm(x)
    assert not x.any()  # nothing launched


def test_plain_make_fx_graph_strides_of_size_one_dims_do_not_matter() -> None:
    gm = make_fx(functools.partial(inplace_2d, ft.wrap_triton))(torch.zeros(1, 8))
    x, expected = torch.zeros(1, 16)[:, :8], torch.zeros(1, 8)
    assert x.stride() != expected.stride()
    gm(x)
    inplace_2d(raw, expected)
    torch.testing.assert_close(x, expected, rtol=0, atol=0)


def test_plain_make_fx_graph_replayed_on_its_own_geometry_matches_eager() -> None:
    def inputs() -> tuple[torch.Tensor]:
        return (torch.arange(32.0).reshape(4, 8),)

    gm = compile_mode("make_fx", inplace_2d, inputs())
    compare(run_once(gm, inputs, True), run_once(functools.partial(inplace_2d, raw), inputs, True), "make_fx")


@pytest.mark.parametrize("shape", [(3, 5), (6, 2)])
def test_symbolic_make_fx_graph_replays_on_other_sizes(shape: tuple[int, int]) -> None:
    gm = make_fx(functools.partial(inplace_2d, ft.wrap_triton), tracing_mode="symbolic")(torch.zeros(4, 8))

    def inputs() -> tuple[torch.Tensor]:
        return (torch.arange(float(shape[0] * shape[1])).reshape(shape),)

    compare(
        run_once(gm, inputs, True), run_once(functools.partial(inplace_2d, raw), inputs, True), "symbolic"
    )


def write_then_read_prog(wrap: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    wrap(write_then_read)[(1,)](a, b, out, 8, BLOCK=8)
    return out


COMPILERS: dict[str, Callable[..., Any]] = {"nop": nop, "reinplace": ft.reinplace_compiler}
ALIASED_CALLS: dict[str, Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]] = {
    "same_tensor": lambda x: (x[:8], x[:8]),
    "overlapping_views": lambda x: (x[:8], x[4:12]),
    "overlapping_strided_views": lambda x: (x[0:16:2], x[2:18:2]),
}


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("call", ALIASED_CALLS)
def test_aot_graph_traced_distinct_called_aliased_raises_naming_the_arguments(
    compiler: str, call: str
) -> None:
    compiled = aot_function(
        functools.partial(write_then_read_prog, ft.wrap_triton), fw_compiler=COMPILERS[compiler]
    )
    compiled(torch.zeros(8), torch.zeros(8))
    x = torch.zeros(32)
    with pytest.raises(
        ValueError, match=r"kernel arguments 'a_ptr' and 'b_ptr' overlap in memory, but the graph"
    ):
        compiled(*ALIASED_CALLS[call](x))


def strided_copy(wrap: Any, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    wrap(copy_2d)[(1,)](src, dst, 8, 0, src.stride(0), 0, dst.stride(0), BLOCK=8)
    return dst


@pytest.mark.parametrize("compiler", COMPILERS)
def test_aot_graph_traced_distinct_called_with_disjoint_views_of_one_tensor_matches_eager(
    compiler: str,
) -> None:
    def inputs() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.arange(16.0)
        return (x[1::2], x[::2])

    compiled = aot_function(
        functools.partial(strided_copy, ft.wrap_triton),
        fw_compiler=COMPILERS[compiler],
        keep_inference_input_mutations=True,
    )
    compiled(torch.zeros(8), torch.zeros(8))
    expected = run_once(functools.partial(strided_copy, raw), inputs, True)
    compare(run_once(compiled, inputs, True), expected, compiler)


def test_read_only_arguments_may_alias_each_other_at_run_time() -> None:
    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        wrap(add_kernel)[(1,)](x, y, out, 8, BLOCK=8)
        return out

    def inputs() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.arange(8.0)
        return (x, x)

    compiled = aot_function(functools.partial(prog, ft.wrap_triton), fw_compiler=nop)
    compiled(torch.zeros(8), torch.ones(8))
    compare(run_once(compiled, inputs, True), run_once(functools.partial(prog, raw), inputs, True), "aot")
