"""Fuzz: malformed launches either run exactly like the raw launch or raise a documented error.

Documented errors are TypeError, ValueError, RuntimeError (a grid callable that writes) and
NotImplementedError, with a message; never an AssertionError, never a crash from deep inside
torch, never a result that differs from the raw launch. What no wrapper can know in advance
(an int passed where the kernel loads through a pointer) fails inside the kernel exactly as
the raw launch does, and that is allowed. Meta tensors carry no data: an eager launch on them
raises, as the raw launch does (tests/unit/test_fuzz_arguments.py fuzzes the argument kinds that
must trace: tuples, numpy scalars, exact-type constants, inference and stride-0 tensors).
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
import torch
from functorch.compile import aot_function
from hypothesis import example, given

import functional_triton as ft
from tests import kernels as K
from tests.helpers import nop

DOCUMENTED = (TypeError, ValueError, RuntimeError, NotImplementedError)
N = 8

# Each argument slot is drawn from these kinds.
ARG_KINDS = ("tensor", "int", "float", "none", "str", "int_tensor", "half_tensor", "meta_tensor")


def make_arg(kind: str, seed: int) -> Any:
    base = (torch.arange(N, dtype=torch.float32) + seed) % 5
    return {
        "tensor": base,
        "int": N,
        "float": 2.5,
        "none": None,
        "str": "x",
        "int_tensor": base.to(torch.int32),
        "half_tensor": base.to(torch.float16),
        "meta_tensor": torch.empty(N, device="meta"),
    }[kind]


grid_entry = st.sampled_from([1, 2, 0, 1.0, True, "1", None])
grids = st.one_of(
    st.lists(grid_entry, min_size=0, max_size=4).map(tuple),
    st.lists(grid_entry, min_size=1, max_size=3).map(lambda g: lambda meta: tuple(g)),
    st.sampled_from([3, None, "grid"]),
)


# How the launch is written: kernel[grid](...), or kernel.run(...) with grid= and warmup=False
# after the kernel's keywords (as kernel[grid] calls it) or before them.
FORMS = ("subscript", "run", "run_grid_first")


@st.composite
def launches(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(min_value=2, max_value=5))  # add_kernel has 4 positional slots
    kinds = [draw(st.sampled_from(ARG_KINDS)) if draw(st.booleans()) else "tensor" for _ in range(3)]
    kinds = [*kinds, "int"][:count] + ["tensor"] * max(0, count - 4)
    kwargs: dict[str, Any] = {}
    if draw(st.booleans()):
        kwargs["BLOCK"] = draw(st.sampled_from([8, 16, 8.0, "8"]))
    if draw(st.booleans()):
        kwargs[draw(st.sampled_from(["FOO", "n", "x_ptr", "num_warps"]))] = 4
    form = draw(st.sampled_from(FORMS))
    return {"kinds": kinds, "kwargs": kwargs, "grid": draw(grids), "form": form}


def launched(kernel: Any, launch: dict[str, Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    grid, form = launch["grid"], launch["form"]
    if form == "subscript":
        return kernel[grid](*args, **kwargs)
    if form == "run":
        return kernel.run(*args, **kwargs, grid=grid, warmup=False)
    return kernel.run(*args, grid=grid, warmup=False, **kwargs)


def build(launch: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    args = [make_arg(k, i) for i, k in enumerate(launch["kinds"])]
    args = [a.clone() if isinstance(a, torch.Tensor) and not a.is_meta else a for a in args]
    return args, dict(launch["kwargs"])


def outcome(run: Any) -> tuple[str, Any]:
    try:
        return "ok", run()
    except DOCUMENTED as e:
        assert str(e), "documented errors carry a message"
        return "error", e
    except AssertionError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the raw launch raises
        return "other", e


@pytest.mark.filterwarnings("ignore::functional_triton.functionalize.AnalysisWarning")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy overflow inside the interpreter
@given(launches())
# A meta tensor the traced function did not receive is the launch's only tensor: it goes on below
# functionalization (Note [tensors functionalization does not hold]); it once raised an AssertionError.
@example(
    {"kinds": ["int", "int", "meta_tensor", "int"], "kwargs": {"BLOCK": 8}, "grid": (1,), "form": "subscript"}
)
def test_malformed_launch_is_raw_or_documented_error(launch: dict[str, Any]) -> None:
    raw_args, raw_kwargs = build(launch)
    raw_error: Exception | None = None
    try:  # triton itself may raise anything, AssertionError included
        launched(K.add_kernel, launch, raw_args, raw_kwargs)
    except Exception as e:  # noqa: BLE001
        raw_error = e

    def same_as_raw(e: Any) -> bool:
        return raw_error is not None and type(e) is type(raw_error) and str(e) == str(raw_error)

    ft_args, ft_kwargs = build(launch)
    ft_kind, ft_value = outcome(lambda: launched(ft.wrap_triton(K.add_kernel), launch, ft_args, ft_kwargs))
    assert ft_kind != "other" or same_as_raw(ft_value), f"eager: undocumented {ft_value!r}"
    if ft_kind == "ok":
        assert raw_error is None, f"ft launched what raw refused: {raw_error!r}"
        for a, b in zip(ft_args, raw_args):
            if isinstance(a, torch.Tensor) and not a.is_meta:
                assert torch.equal(a, b), "eager launch differs from the raw launch"

    tensor_slots = [i for i, a in enumerate(ft_args) if isinstance(a, torch.Tensor) and not a.is_meta]
    traced_args, traced_kwargs = build(launch)

    def prog(*tensors: torch.Tensor) -> list[torch.Tensor]:
        args = list(traced_args)
        for slot, t in zip(tensor_slots, tensors):
            args[slot] = t
        launched(ft.wrap_triton(K.add_kernel), launch, args, traced_kwargs)
        return [t + 0 for t in tensors]

    inputs = [traced_args[i] for i in tensor_slots]
    traced_kind, traced_value = outcome(lambda: aot_function(prog, fw_compiler=nop)(*inputs))
    assert traced_kind != "other" or raw_error is not None, f"aot_function: undocumented {traced_value!r}"
    if traced_kind == "ok" and ft_kind == "ok":
        for a, b in zip(traced_value, [ft_args[i] for i in tensor_slots]):
            assert torch.equal(a, b), "traced launch differs from the eager launch"
