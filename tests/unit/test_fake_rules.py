"""FakeTensorMode / Meta / proxy rules of both operators: right results, and the kernel never runs."""

from __future__ import annotations

import operator
import os
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from functional_triton.side_table import TableIndex, kernel_side_table
from tests import kernels as K

pytestmark = pytest.mark.filterwarnings("ignore::functional_triton.functionalize.AnalysisWarning")

N = 8


# Real launches need tensors where the kernel runs: CPU under the interpreter, else CUDA.
DEVICE = os.environ.get("FT_TEST_DEVICE", "cpu")


class Launches:
    """Registers add_kernel with a grid callable that counts launches (it runs once per launch)."""

    def __init__(self) -> None:
        self.count = 0
        self.kernel_idx: TableIndex = kernel_side_table.add_kernel(K.add_kernel, self.grid)
        self.constant_args_idx: TableIndex = kernel_side_table.add_constants({"BLOCK": N})

    def grid(self, meta: dict[str, Any]) -> tuple[int]:
        self.count += 1
        return (1,)

    def mutation_args(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return dict(
            kernel_idx=self.kernel_idx,
            constant_args_idx=self.constant_args_idx,
            grid=None,
            kwargs=kwargs,
        )

    def functional_args(
        self, kwargs: dict[str, Any], tensors_to_clone: list[str], layouts: dict[str, Any]
    ) -> dict[str, Any]:
        return dict(self.mutation_args(kwargs), tensors_to_clone=tensors_to_clone, layouts=layouts)


@pytest.fixture
def launches() -> Iterator[Launches]:
    yield Launches()


def layout(t: torch.Tensor, group: int) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
    return (group, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()))


def out_2d(device: str = "cpu") -> torch.Tensor:
    """A (2, 4) output with column-major strides (1, 2): strides that a contiguous clone would lose."""
    return torch.zeros(4, 2, device=device).t()


def add_kwargs(device: str = DEVICE) -> dict[str, Any]:
    x = torch.arange(N, dtype=torch.float32, device=device).reshape(2, 4)
    y = torch.ones(2, 4, device=device)
    return {"x_ptr": x, "y_ptr": y, "out_ptr": out_2d(device), "n": N}


def add_layouts(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {
        "x_ptr": layout(kwargs["x_ptr"], -1),
        "y_ptr": layout(kwargs["y_ptr"], -1),
        "out_ptr": layout(kwargs["out_ptr"], 0),
    }


def test_counter_sees_a_real_launch(launches: Launches) -> None:
    """Control: the dense rule does launch (so a count of 0 below means the kernel did not run)."""
    kwargs = add_kwargs()
    ft.triton_kernel_wrapper_mutation(**launches.mutation_args(kwargs))
    assert launches.count == 1
    expected = torch.zeros(4, 2, device=DEVICE).t()
    K.add_kernel[(1,)](kwargs["x_ptr"], kwargs["y_ptr"], expected, N, BLOCK=N)
    torch.testing.assert_close(kwargs["out_ptr"], expected, rtol=0, atol=0)
    assert not torch.equal(expected, torch.zeros(2, 4, device=DEVICE))


# Typed as returning None; the tests below check the value it really returns.
MUTATION: Any = ft.triton_kernel_wrapper_mutation


def test_mutation_under_fake_mode_returns_none_without_launching(launches: Launches) -> None:
    with FakeTensorMode() as mode:
        kwargs = {
            k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in add_kwargs().items()
        }
        result = MUTATION(**launches.mutation_args(kwargs))
    assert result is None
    assert launches.count == 0


def test_mutation_on_meta_tensors_returns_none_without_launching(launches: Launches) -> None:
    result = MUTATION(**launches.mutation_args(add_kwargs("meta")))
    assert result is None
    assert launches.count == 0


def _check_functional_result(
    result: Any,
    kwargs: dict[str, Any],
    to_clone: list[str],
    layouts: dict[str, Any],
    tensor_type: type[torch.Tensor],
) -> None:
    assert isinstance(result, dict)
    assert list(result) == to_clone
    for name, t in result.items():
        assert isinstance(t, tensor_type), f"{name}: {type(t)}"
        _, size, stride, _ = layouts[name]
        assert tuple(t.shape) == tuple(size), name
        assert tuple(t.stride()) == tuple(stride), name
        assert t.dtype == kwargs[name].dtype
        assert t.device == kwargs[name].device
        assert t is not kwargs[name]


def test_functional_under_fake_mode(launches: Launches) -> None:
    with FakeTensorMode() as mode:
        kwargs = {
            k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in add_kwargs().items()
        }
        layouts = add_layouts(kwargs)
        result = ft.triton_kernel_wrapper_functional(**launches.functional_args(kwargs, ["out_ptr"], layouts))
    assert launches.count == 0
    _check_functional_result(result, kwargs, ["out_ptr"], layouts, FakeTensor)
    assert tuple(result["out_ptr"].stride()) == (1, 2)


def test_functional_on_meta_tensors(launches: Launches) -> None:
    kwargs = add_kwargs("meta")
    layouts = add_layouts(kwargs)
    result = ft.triton_kernel_wrapper_functional(**launches.functional_args(kwargs, ["out_ptr"], layouts))
    assert launches.count == 0
    _check_functional_result(result, kwargs, ["out_ptr"], layouts, torch.Tensor)
    assert result["out_ptr"].is_meta


@pytest.mark.parametrize("where", ["fake", "meta"])
def test_functional_returns_exactly_tensors_to_clone(launches: Launches, where: str) -> None:
    """Every argument cloned: the result has all three names, in order, each with its own layout."""
    to_clone = ["x_ptr", "y_ptr", "out_ptr"]
    if where == "meta":
        kwargs = add_kwargs("meta")
        layouts = {n: layout(kwargs[n], g) for g, n in enumerate(to_clone)}
        result = ft.triton_kernel_wrapper_functional(**launches.functional_args(kwargs, to_clone, layouts))
        tensor_type: type = torch.Tensor
    else:
        with FakeTensorMode() as mode:
            kwargs = {
                k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in add_kwargs().items()
            }
            layouts = {n: layout(kwargs[n], g) for g, n in enumerate(to_clone)}
            result = ft.triton_kernel_wrapper_functional(
                **launches.functional_args(kwargs, to_clone, layouts)
            )
        tensor_type = FakeTensor
    assert launches.count == 0
    _check_functional_result(result, kwargs, to_clone, layouts, tensor_type)


@pytest.mark.parametrize("where", ["fake", "meta"])
def test_functional_alias_group_members_keep_their_geometry(launches: Launches, where: str) -> None:
    """x and out are views of one base (one group); each output keeps its own sizes and strides."""

    def make(device: str) -> dict[str, Any]:
        base = torch.zeros(16, device=device)
        return {
            "x_ptr": base[2:10],
            "y_ptr": torch.ones(8, device=device),
            "out_ptr": base.as_strided((2, 4), (1, 2), 4),
            "n": N,
        }

    def layouts_of(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {
            "x_ptr": layout(kwargs["x_ptr"], 0),
            "y_ptr": layout(kwargs["y_ptr"], -1),
            "out_ptr": layout(kwargs["out_ptr"], 0),
        }

    to_clone = ["out_ptr", "x_ptr"]
    if where == "meta":
        kwargs = make("meta")
        layouts = layouts_of(kwargs)
        result = ft.triton_kernel_wrapper_functional(**launches.functional_args(kwargs, to_clone, layouts))
    else:
        with FakeTensorMode() as mode:
            kwargs = {
                k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in make("cpu").items()
            }
            layouts = layouts_of(kwargs)
            result = ft.triton_kernel_wrapper_functional(
                **launches.functional_args(kwargs, to_clone, layouts)
            )
    assert launches.count == 0
    assert list(result) == to_clone
    assert tuple(result["out_ptr"].shape) == (2, 4) and tuple(result["out_ptr"].stride()) == (1, 2)
    assert tuple(result["x_ptr"].shape) == (8,) and tuple(result["x_ptr"].stride()) == (1,)


def test_fake_mode_does_not_touch_real_inputs(launches: Launches) -> None:
    real = add_kwargs()
    before = {k: v.clone() for k, v in real.items() if isinstance(v, torch.Tensor)}
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        kwargs = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in real.items()}
        ft.triton_kernel_wrapper_mutation(**launches.mutation_args(kwargs))
        ft.triton_kernel_wrapper_functional(
            **launches.functional_args(kwargs, ["out_ptr"], add_layouts(kwargs))
        )
    for k, v in before.items():
        torch.testing.assert_close(real[k], v, rtol=0, atol=0)
    assert launches.count == 0


# --- make_fx ------------------------------------------------------------------------------------------


def _prog(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty_like(x)
    ft.wrap_triton(K.add_kernel)[(1,)](x, y, out, x.shape[0], BLOCK=16)
    ft.wrap_triton(K.add_one_inplace)[(1,)](x, x.shape[0], BLOCK=16)
    return out, x


def _prog_eager(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty_like(x)
    K.add_kernel[(1,)](x, y, out, x.shape[0], BLOCK=16)
    K.add_one_inplace[(1,)](x, x.shape[0], BLOCK=16)
    return out, x


def test_make_fx_symbolic_functional_outputs_are_symbolic() -> None:
    gm = make_fx(torch.func.functionalize(_prog), tracing_mode="symbolic")(
        torch.arange(N, dtype=torch.float32), torch.ones(N)
    )
    x_node = next(n for n in gm.graph.nodes if n.op == "placeholder")
    x_size = x_node.meta["val"].shape[0]
    assert isinstance(x_size, torch.SymInt)
    fnodes = [n for n in gm.graph.nodes if n.target is ft.triton_kernel_wrapper_functional]
    assert len(fnodes) == 2
    getitems = [u for f in fnodes for u in f.users]
    assert getitems and all(g.target is operator.getitem for g in getitems)
    for g in getitems:
        val = g.meta["val"]
        assert isinstance(val, FakeTensor)
        assert isinstance(val.shape[0], torch.SymInt), f"{g.args[1]}: {val.shape}"
        assert str(val.shape[0]) == str(x_size), f"{g.args[1]}: {val.shape} vs {x_size}"
    # The functional node's own value is the dict of outputs.
    for f in fnodes:
        assert isinstance(f.meta["val"], dict)
        assert set(f.meta["val"]) == set(f.kwargs["tensors_to_clone"])
    # And the graph replays on another size, like eager.
    for n in (N, 13):
        x_g, y_g = torch.arange(n, dtype=torch.float32), torch.full((n,), 0.5)
        x_e, y_e = x_g.clone(), y_g.clone()
        out_g = gm(x_g, y_g)
        out_e = _prog_eager(x_e, y_e)
        for a, e in zip(out_g, out_e):
            torch.testing.assert_close(a, e, rtol=0, atol=0)
        torch.testing.assert_close(x_g, x_e, rtol=0, atol=0)


def test_make_fx_fake_functional_outputs_match_layouts() -> None:
    def prog(x: torch.Tensor) -> torch.Tensor:
        xt = x.t()
        ft.wrap_triton(K.scale_inplace_2d)[(4,)](xt, 4, 2, *xt.stride(), BLOCK=2)
        return x

    gm = make_fx(torch.func.functionalize(prog), tracing_mode="fake")(torch.arange(8.0).reshape(2, 4))
    (f,) = [n for n in gm.graph.nodes if n.target is ft.triton_kernel_wrapper_functional]
    (g,) = list(f.users)
    _, size, stride, _ = f.kwargs["layouts"]["x_ptr"]
    assert tuple(size) == (4, 2) and tuple(stride) == (1, 4)
    assert tuple(g.meta["val"].shape) == (4, 2)
    assert tuple(g.meta["val"].stride()) == (1, 4)
    x_g, x_e = torch.arange(8.0).reshape(2, 4), torch.arange(8.0).reshape(2, 4)
    xt = x_e.t()
    K.scale_inplace_2d[(4,)](xt, 4, 2, *xt.stride(), BLOCK=2)
    torch.testing.assert_close(gm(x_g), x_e, rtol=0, atol=0)
    torch.testing.assert_close(x_g, x_e, rtol=0, atol=0)
