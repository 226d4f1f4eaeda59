"""launch_spec.py: kernel_info, grid and argument checks, make_launch_spec, classify, trace_grid."""

from __future__ import annotations

import inspect
import re
from typing import Any

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from functional_triton._compat import interpreter_enabled
from functional_triton.launch_spec import (
    GridByConfig,
    LaunchKind,
    bind_arguments,
    check_grid,
    checked_grid_fn,
    classify,
    is_plain,
    kernel_info,
    make_launch_spec,
    trace_grid,
    traced_grid_entries,
)
from tests import kernels as K

N = 8


@triton.jit
def scaled(x_ptr, n, scale=2.0, BLOCK: tl.constexpr = 4):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * scale, mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 4}), triton.Config({"BLOCK": 8})], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def tuned(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)


def test_kernel_info_describes_the_kernel_once() -> None:
    info = kernel_info(K.add_kernel)
    assert kernel_info(K.add_kernel) is info
    assert info.name == "add_kernel" and info.arg_names == tuple(
        inspect.signature(K.add_kernel.fn).parameters
    )
    assert info.constexpr_names == {"BLOCK"} and info.provided_names == frozenset()
    assert info.interpreted == interpreter_enabled()
    assert {*info.arg_names, "num_warps", "num_stages"} <= info.keyword_names
    tuned_info = kernel_info(tuned)
    assert tuned_info.name == "tuned" and tuned_info.arg_names == ("x_ptr", "n", "BLOCK", "EVEN")
    assert tuned_info.provided_names == {"BLOCK", "EVEN"}  # num_warps is no parameter of the kernel


@pytest.mark.parametrize(
    "grid",
    [(1,), [1, 2], (1, 2, 3), (np.int64(2),), lambda meta: (1,)],
    ids=["tuple", "list", "three-entries", "numpy-int", "callable"],
)
def test_check_grid_accepts_one_to_three_ints_or_a_callable(grid: Any) -> None:
    check_grid(grid)


@pytest.mark.parametrize(
    "grid, error, message",
    [
        (3, TypeError, "got int 3"),
        ((), ValueError, "1 to 3 entries, got ()"),
        ((1, 1, 1, 1), ValueError, "1 to 3 entries"),
        ((1.0,), TypeError, "got float 1.0 at position 0"),
        ((1, True), TypeError, "got bool True at position 1"),
    ],
    ids=["not-a-sequence", "empty", "four-entries", "float", "bool"],
)
def test_check_grid_names_what_is_wrong(grid: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        check_grid(grid)


def test_bind_arguments_applies_defaults_keeps_options_and_names_missing_ones() -> None:
    x = torch.zeros(N)
    info = kernel_info(scaled)
    bound = bind_arguments(info, (x, N), {"num_warps": 2})
    assert bound == {"x_ptr": x, "n": N, "scale": 2.0, "BLOCK": 4, "num_warps": 2}
    with pytest.raises(TypeError, match="scaled\\(\\) missing a required argument: 'n'"):
        bind_arguments(info, (x,), {})
    with pytest.raises(TypeError, match="^scaled\\(\\) .*bogus"):
        bind_arguments(info, (x, N), {"bogus": 1})
    assert set(bind_arguments(kernel_info(tuned), (x, N), {})) == {"x_ptr", "n"}  # configs provide the rest


def test_make_launch_spec_splits_traced_values_from_constants_and_refuses_bad_ones() -> None:
    x, y, out = torch.zeros(N), torch.ones(N), torch.empty(N)
    info = kernel_info(K.add_kernel)
    spec = make_launch_spec(K.add_kernel, info, (2,), (x, y, out, N), {"BLOCK": 4, "num_warps": 1})
    assert spec.kernel is K.add_kernel and spec.info is info and spec.grid == (2,)
    assert list(spec.tensors) == ["x_ptr", "y_ptr", "out_ptr"]
    assert all(spec.tensors[n] is t for n, t in zip(spec.tensors, (x, y, out)))
    assert spec.constants == {"n": N, "BLOCK": 4, "num_warps": 1}
    with pytest.raises(TypeError, match="'BLOCK' of add_kernel is a tl.constexpr and cannot be a tensor"):
        make_launch_spec(K.add_kernel, info, (2,), (x, y, out, N), {"BLOCK": x})
    with pytest.raises(TypeError, match="'y_ptr' of add_kernel is a tensor with layout torch.sparse_coo"):
        make_launch_spec(K.add_kernel, info, (2,), (x, y.to_sparse(), out, N), {"BLOCK": 4})
    with pytest.raises(ValueError, match=f"on several devices: 'x_ptr' on {x.device}, 'y_ptr' on meta"):
        make_launch_spec(K.add_kernel, info, (2,), (x, y.to("meta"), out, N), {"BLOCK": 4})


def test_classify_tells_plain_launches_from_traced_values_and_modes() -> None:
    x = torch.zeros(N)
    symbol = ShapeEnv().create_unbacked_symint()
    assert classify((x, torch.nn.Parameter(x), 3, 0.5, None, "s"), {"y": x}) is LaunchKind.PLAIN
    assert is_plain((x,), {})
    cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((x.to("meta"),), {}),
        ((x,), {"n": symbol}),
        ((), {"y": x.to("meta")}),
    ]
    for args, kwargs in cases:
        assert classify(args, kwargs) is LaunchKind.TRACED_VALUES and not is_plain(args, kwargs)
    with FakeTensorMode():
        assert classify((x,), {}) is LaunchKind.UNDER_MODE
    kinds: list[LaunchKind] = []

    def record(t: torch.Tensor) -> torch.Tensor:
        kinds.append(classify((x,), {}))
        return t

    torch.func.vmap(record)(torch.zeros(2, N))
    assert kinds == [LaunchKind.UNDER_MODE]


def test_checked_grid_fn_refuses_writes_and_bad_results() -> None:
    x = torch.zeros(N)
    assert checked_grid_fn(lambda meta: [meta["BLOCK"], 1], {"x_ptr": x})({"BLOCK": 2}) == (2, 1)
    with pytest.raises(RuntimeError, match="grid callable wrote to tensor 'x_ptr'"):
        checked_grid_fn(lambda meta: (x.add_(1), (1,))[1], {"x_ptr": x})({})
    with pytest.raises(TypeError, match="must return a tuple of 1 to 3 ints, got int 4"):
        checked_grid_fn(lambda meta: 4, {})({})
    symbol = ShapeEnv().create_unbacked_symint()
    with pytest.raises(RuntimeError, match="returned the symbolic size"):
        checked_grid_fn(lambda meta: (symbol,), {})({})


def test_trace_grid_gives_one_grid_or_one_per_autotune_config() -> None:
    x = torch.zeros(N)
    static, fn = trace_grid(K.add_kernel, [2, np.int64(3)], {})
    assert static == (2, 3) and fn is None and all(type(g) is int for g in static)
    bound = bind_arguments(kernel_info(tuned), (x, N), {})
    assert trace_grid(tuned, lambda meta: (2,), bound) == ((2,), None)
    grids, chooser = trace_grid(tuned, lambda meta: (N // meta["BLOCK"],), bound)
    assert grids == tuple((N // c.kwargs["BLOCK"],) for c in tuned.configs)
    assert isinstance(chooser, GridByConfig) and chooser.keys[0] == (("BLOCK", 4), ("EVEN", True))
    assert chooser.chooser(grids)({"BLOCK": 8, "EVEN": True}) == (1,)

    def reads_data(meta: dict[str, Any]) -> tuple[int]:
        raise RuntimeError("data a fake tensor lacks")

    assert trace_grid(tuned, reads_data, bound) == (None, reads_data)  # called at launch time instead
    with pytest.raises(RuntimeError, match="wrote to tensor 'x_ptr'"):
        trace_grid(tuned, lambda meta: (x.add_(1), (1,))[1], bound)


def test_traced_grid_entries_convert_integers_and_refuse_tensor_data() -> None:
    assert traced_grid_entries((np.int32(2), 3)) == (2, 3)
    with pytest.raises(TypeError, match=r"grid entry 0 of .* would launch with the value it holds now \(2\)"):
        traced_grid_entries((torch.tensor(2),))
    with pytest.raises(TypeError, match="torch.float32 tensor of 1 elements"):
        traced_grid_entries((torch.tensor(2.0),))
