"""Fuzz: launch arguments of every kind, traced, bit for bit against the raw launch run eagerly.

Each example is a program of two launches of one kernel whose first argument is a tuple
(a tensor, its element stride, a scalar), drawn with: exact-type constants that compare equal
(``0.0`` / ``-0.0``, ``1`` / ``1.0`` / ``True``, ``2**40`` / ``2.0**40``, NaN), numpy scalars,
stride-0 read-only tensors (``x[:1].expand(n)``), views, inference tensors, plain and named
tuples, and grids that are int tuples, numpy-integer tuples, or callables (the tutorials' closure
over a size included), under every tracing mode, with static and dynamic shapes. When the raw
launch refuses the arguments, the wrapped launch must refuse them too.
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings

import functional_triton as ft
from tests.harness import check_matches_eager

N = 8
MODES = ("aot_function", "reinplace", "aot_module", "functionalize", "make_fx", "symbolic")


@triton.jit
def tuple_fuzz_kernel(src, dst_ptr, inv_ptr, scale, n, BLOCK: tl.constexpr):
    """dst = (src[0][i * src[1]] + src[2]) * scale; inv = 1 / scale (the sign of zero shows)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(src[0] + offs * src[1], mask=m)
    tl.store(dst_ptr + offs, (a + src[2]) * scale, mask=m)
    tl.store(inv_ptr + offs, 1 / (tl.full([BLOCK], 1.0, tl.float32) * scale), mask=m)


class Source(NamedTuple):
    tensor: Any
    stride: Any
    shift: Any


_NAN = float("nan")
SCALARS: list[Any] = [0.0, -0.0, 1, 1.0, True, False, 2**40, 2.0**40, -2.5, _NAN]
SCALARS += [np.float64(-0.0), np.float32(0.5), np.int64(3)]
# numpy scalars other than np.float64 (a float) are refused by the raw launch: drawn less often.
scalars = st.one_of(st.sampled_from(SCALARS[:-2]), st.sampled_from(SCALARS))


@st.composite
def launches(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "source": draw(st.sampled_from(["plain", "view", "stride0", "inference"])),
        "named": draw(st.booleans()),
        "shifts": (draw(scalars), draw(scalars)),
        "scales": (draw(scalars), draw(scalars)),
        "grid": draw(st.sampled_from(["ints", "numpy", "closure", "meta"])),
        "block": draw(st.sampled_from([4, 8])),
        "dynamic": draw(st.booleans()),
    }


def _grid(kind: str, n: int) -> Any:
    if kind == "ints":
        return (2,)  # enough programs for BLOCK=4; BLOCK=8 masks the second
    if kind == "numpy":
        return (np.int64(2),)
    if kind == "closure":  # closes over a (possibly symbolic) size, like the Triton tutorials
        return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    return lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)


def _source(kind: str, base: torch.Tensor) -> tuple[torch.Tensor, int]:
    if kind == "view":
        return base[1:], 1
    if kind == "stride0":
        return base[:1].expand(N), 0
    return base[:N], 1


def make_program(launch: dict[str, Any]) -> Any:
    def prog(wrap: Any, base: torch.Tensor) -> tuple[torch.Tensor, ...]:
        tensor, stride = _source(launch["source"], base)
        n = tensor.numel()
        outs = []
        for shift, scale in zip(launch["shifts"], launch["scales"]):
            dst, inv = torch.zeros(N), torch.zeros(N)
            src = Source(tensor, stride, shift) if launch["named"] else (tensor, stride, shift)
            grid = _grid(launch["grid"], n)
            wrap(tuple_fuzz_kernel)[grid](src, dst, inv, scale, n, BLOCK=launch["block"])
            outs += [dst, inv]
        return tuple(outs)

    return prog


def make_inputs(launch: dict[str, Any]) -> Any:
    def inputs() -> tuple[torch.Tensor]:
        base = (torch.arange(N + 1, dtype=torch.float32) - 3) / 2
        if launch["source"] == "inference":
            with torch.inference_mode():
                return (base.clone(),)
        return (base,)

    return inputs


def _raw_error(launch: dict[str, Any]) -> Exception | None:
    try:
        make_program(launch)(lambda k: k, *make_inputs(launch)())
    except Exception as e:  # noqa: BLE001 - triton may refuse an argument with anything
        return e
    return None


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # numpy, inside the interpreter
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")
@settings(max_examples=max(10, settings().max_examples // 5))
@given(launches())
def test_launch_arguments_match_the_raw_launch(launch: dict[str, Any]) -> None:
    raw_error = _raw_error(launch)
    program, inputs = make_program(launch), make_inputs(launch)
    if raw_error is not None:  # the wrapper must refuse what the raw launch refuses
        with pytest.raises(Exception):  # noqa: B017 - the raw launch's error, or a clearer one
            program(ft.wrap_triton, *inputs())
        return
    expected = program(lambda k: k, *inputs())
    for got, want in zip(program(ft.wrap_triton, *inputs()), expected):  # eager through the wrapper
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    context = torch.inference_mode() if launch["source"] == "inference" else contextlib.nullcontext()
    aot_kwargs = {"dynamic": True} if launch["dynamic"] else {}
    with context:
        check_matches_eager(program, inputs, modes=MODES, no_grad=(True,), **aot_kwargs)
