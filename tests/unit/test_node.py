"""node.py: MutationNode / FunctionalNode, their accessors, and launch_plan's decoding of reserved keys."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from functional_triton.aliasing import Sharing
from functional_triton.launch_spec import CONSTEXPR_GUARD_PREFIX, CONSTEXPR_GUARDS_KEY
from functional_triton.node import (
    GEOMETRY_KEY,
    FunctionalNode,
    MutationNode,
    check_constexpr_guards,
    kernel_arguments,
    launch_plan,
)
from functional_triton.side_table import TableIndex, kernel_side_table
from functional_triton.tuples import TUPLES_KEY, TupleSlot
from tests import kernels as K
from tests.helpers import assert_same

N = 8


@triton.jit
def pair_copy(ptrs, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(ptrs[1] + offs, tl.load(ptrs[0] + offs, mask=m) * 2, mask=m)


def register(kernel: Any, constants: dict[str, Any], grid_fn: Any = None) -> tuple[TableIndex, TableIndex]:
    """Side-table indices, alive as long as the caller holds them."""
    return kernel_side_table.add_kernel(kernel, grid_fn), kernel_side_table.add_constants(constants)


def arange() -> torch.Tensor:
    return torch.arange(N, dtype=torch.float32) - 2.5


def test_as_kwargs_is_the_operator_signature_and_launches_like_the_raw_kernel() -> None:
    k, c = register(K.add_one_inplace, {"n": N, "BLOCK": 4})
    x, expected = arange(), arange()
    node = MutationNode(k, c, (2,), {"x_ptr": x})
    assert set(node.as_kwargs()) == {"kernel_idx", "constant_args_idx", "grid", "kwargs"}
    assert node.kernel_name == "add_one_inplace"
    ft.triton_kernel_wrapper_mutation(**node.as_kwargs())
    K.add_one_inplace[(2,)](expected, N, BLOCK=4)
    assert_same(x, expected)

    y = arange()
    layout = (0, tuple(y.shape), tuple(y.stride()), y.storage_offset())
    fnode = FunctionalNode(k, c, (2,), {"x_ptr": y}, ["x_ptr"], {"x_ptr": layout})
    assert set(fnode.as_kwargs()) - set(node.as_kwargs()) == {"tensors_to_clone", "layouts"}
    out = ft.triton_kernel_wrapper_functional(**fnode.as_kwargs())
    assert list(out) == ["x_ptr"]
    assert_same(out["x_ptr"], expected)
    assert_same(y, arange())  # the functional form leaves its input alone


def test_arg_layouts_decode_each_group_id_and_replace_copies() -> None:
    layouts = {
        "a": (0, (4,), (1,), 0),
        "b": (-1, (2, 3), (3, 1), 2),
        "c": (-2, (5,), (2,), 1),
    }
    node = FunctionalNode(0, 0, (1,), {}, ["a"], layouts)
    decoded = node.arg_layouts()
    assert {n: lay.sharing for n, lay in decoded.items()} == {
        "a": Sharing.CLONED,
        "b": Sharing.LONE,
        "c": Sharing.IN_PLACE,
    }
    for name, raw in layouts.items():
        assert decoded[name].as_tuple() == raw
    changed = node.replace(tensors_to_clone=["a", "c"])
    assert type(changed) is FunctionalNode and changed is not node
    assert list(node.tensors_to_clone) == ["a"] and list(changed.tensors_to_clone) == ["a", "c"]
    assert changed.layouts is node.layouts and changed.grid == node.grid


def test_launch_plan_removes_the_reserved_keys_and_plans_a_simple_launch() -> None:
    geometry = (("x_ptr", ((N,), (1,))),)
    k, c = register(K.add_one_inplace, {"n": N, "BLOCK": 4, GEOMETRY_KEY: geometry, "num_warps": 2})
    plan = launch_plan(k, c)
    assert plan.kernel is K.add_one_inplace and plan.grid_fn is None
    assert plan.arg_names == tuple(inspect.signature(K.add_one_inplace.fn).parameters)
    assert plan.constants == {"n": N, "BLOCK": 4, "num_warps": 2}
    assert plan.geometry == geometry
    assert (plan.descriptors, plan.tuples, plan.guarded_names) == ({}, {}, ())
    assert plan.positional == (None, N, 4)
    assert plan.dynamic == ((0, "x_ptr"),)
    assert plan.keyword_constants == {"num_warps": 2}
    assert launch_plan(k, c) is plan  # decoded once per (kernel, constants) pair


def test_tuple_templates_are_decoded_and_rebuilt_by_kernel_arguments() -> None:
    template = (TupleSlot("ptrs[0]"), TupleSlot("ptrs[1]"))
    k, c = register(pair_copy, {"n": N, "BLOCK": N, TUPLES_KEY: {"ptrs": template}})
    plan = launch_plan(k, c)
    assert plan.tuples == {"ptrs": template} and TUPLES_KEY not in plan.constants
    assert plan.positional is None  # not a simple launch
    x, out = arange(), torch.zeros(N)
    values = kernel_arguments(plan, {"ptrs[0]": x, "ptrs[1]": out})
    assert set(values) == {"ptrs", "n", "BLOCK"}
    assert values["ptrs"][0] is x and values["ptrs"][1] is out
    ft.triton_kernel_wrapper_mutation(
        kernel_idx=k, constant_args_idx=c, grid=(1,), kwargs={"ptrs[0]": x, "ptrs[1]": out}
    )
    expected = torch.zeros(N)
    pair_copy[(1,)]((arange(), expected), N, BLOCK=N)
    assert_same(out, expected)


def test_constexpr_guards_pass_when_unchanged_and_name_the_argument_otherwise() -> None:
    k, c = register(K.add_one_inplace, {"n": N, "BLOCK": 4, CONSTEXPR_GUARDS_KEY: ("BLOCK",)})
    plan = launch_plan(k, c)
    assert plan.guarded_names == ("BLOCK",) and plan.positional is None
    assert CONSTEXPR_GUARDS_KEY not in plan.constants
    values = {**plan.constants, CONSTEXPR_GUARD_PREFIX + "BLOCK": 4}
    check_constexpr_guards(plan, values)
    assert CONSTEXPR_GUARD_PREFIX + "BLOCK" not in values  # popped: never reaches the kernel
    with pytest.raises(ValueError, match="'BLOCK' of add_one_inplace .* specialised to 4.* give 8"):
        check_constexpr_guards(plan, {**plan.constants, CONSTEXPR_GUARD_PREFIX + "BLOCK": 8})


def test_traced_node_records_the_launch_constants_and_geometry() -> None:
    def prog(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
        ft.wrap_triton(K.add_kernel)[(2,)](x, y, out, 4, BLOCK=2)

    base = torch.arange(2 * N, dtype=torch.float32)
    x, y, out = base[:4], base[::4], torch.zeros(N)[2:6]
    gm = make_fx(prog)(x, y, out)
    (fx_node,) = [n for n in gm.graph.nodes if n.target is ft.triton_kernel_wrapper_mutation]
    node = MutationNode(**fx_node.kwargs)
    assert node.kernel_name == "add_kernel"
    assert set(node.kwargs) == {"x_ptr", "y_ptr", "out_ptr"}
    plan = node.plan
    assert plan.constants == {"n": 4, "BLOCK": 2}
    expected = {
        name: (tuple(t.shape), tuple(t.stride()))
        for name, t in zip(("x_ptr", "y_ptr", "out_ptr"), (x, y, out))
    }
    assert dict(plan.geometry) == expected
