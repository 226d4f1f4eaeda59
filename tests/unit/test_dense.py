"""dense.py: launch_raw, launch_planned, mutation_dense and functional_dense on real CPU tensors.

Each node runs next to the raw kernel launched on copies of its inputs; results compare bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from functional_triton.dense import functional_dense, launch_planned, launch_raw, mutation_dense
from functional_triton.node import GEOMETRY_KEY, FunctionalNode, MutationNode
from functional_triton.side_table import TableIndex, kernel_side_table
from tests import kernels as K
from tests.helpers import assert_same

N = 8


def register(kernel: Any, constants: dict[str, Any], grid_fn: Any = None) -> tuple[TableIndex, TableIndex]:
    return kernel_side_table.add_kernel(kernel, grid_fn), kernel_side_table.add_constants(constants)


def arange(n: int = N) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32) - 2.5


def layout(t: torch.Tensor, group: int) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
    return (group, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()))


def raw_add_one(x: torch.Tensor, n: int = N) -> torch.Tensor:
    K.add_one_inplace[(2,)](x, n, BLOCK=4)
    return x


@pytest.mark.parametrize(
    "grid", [(2,), [2], (np.int64(2),), (torch.tensor(2),)], ids=["tuple", "list", "numpy-int", "0-d-tensor"]
)
def test_launch_raw_matches_the_raw_kernel_for_each_grid_form(grid: Any) -> None:
    k, c = register(K.add_one_inplace, {"n": N, "BLOCK": 4})
    x, other = arange(), arange()
    launch_raw(MutationNode(k, c, grid, {"x_ptr": x}))
    assert_same(x, raw_add_one(arange()))
    launch_raw(MutationNode(k, c, grid, {"x_ptr": x}), {"x_ptr": other})  # kwargs given: the node's unused
    assert_same(other, raw_add_one(arange()))
    assert_same(x, raw_add_one(arange()))


def test_launch_raw_runs_the_side_table_grid_callable_checked() -> None:
    metas: list[dict[str, Any]] = []

    def grid_fn(meta: dict[str, Any]) -> tuple[int]:
        metas.append(dict(meta))
        return (2,)

    written = arange()

    def writing_grid(meta: dict[str, Any]) -> tuple[int]:
        written.add_(1)  # the interpreter's meta holds its own values: close over the argument
        return (2,)

    k, c = register(K.add_one_inplace, {"BLOCK": 4}, grid_fn)
    x = arange()
    launch_raw(MutationNode(k, c, None, {"x_ptr": x, "n": N}))
    assert_same(x, raw_add_one(arange()))
    assert metas and metas[0]["BLOCK"] == 4 and {"x_ptr", "n"} <= set(metas[0])
    k2, c2 = register(K.add_one_inplace, {"BLOCK": 4}, writing_grid)
    with pytest.raises(RuntimeError, match="grid callable wrote to tensor 'x_ptr'"):
        launch_raw(MutationNode(k2, c2, None, {"x_ptr": written, "n": N}))


def test_launch_planned_launches_only_what_its_plan_decides() -> None:
    k, c = register(K.add_one_inplace, {"n": N, "BLOCK": 4, "num_warps": 1})
    plan = MutationNode(k, c, (2,), {}).plan
    x = arange()
    assert launch_planned(plan, (2,), {"x_ptr": x})
    assert_same(x, raw_add_one(arange()))
    for grid, kwargs in [([2], {"x_ptr": x}), ((2,), {}), ((2,), {"x_ptr": x, "extra": x})]:
        assert not launch_planned(plan, grid, kwargs)
    kg, cg = register(K.add_one_inplace, {"n": N, "BLOCK": 4}, lambda meta: (2,))
    assert not launch_planned(MutationNode(kg, cg, None, {}).plan, (2,), {"x_ptr": x})
    assert_same(x, raw_add_one(arange()))  # nothing launched again


def test_mutation_dense_checks_the_traced_geometry_before_launching() -> None:
    k, c = register(K.add_one_inplace, {"n": N, "BLOCK": 4, GEOMETRY_KEY: (("x_ptr", ((N,), (1,))),)})
    with pytest.raises(ValueError, match=r"argument 'x_ptr' has shape \(6,\)"):
        mutation_dense(MutationNode(k, c, (2,), {"x_ptr": arange(6)}))
    strided = arange(2 * N)[::2]
    with pytest.raises(ValueError, match=r"argument 'x_ptr' has strides \(2,\)"):
        mutation_dense(MutationNode(k, c, (2,), {"x_ptr": strided}))
    assert_same(strided, arange(2 * N)[::2])  # refused before any launch
    x = arange()
    mutation_dense(MutationNode(k, c, (2,), {"x_ptr": x}))
    assert_same(x, raw_add_one(arange()))
    # A symbolic size (None) accepts any size; n comes with the tensors, as a SymInt would.
    ks, cs = register(K.add_one_inplace, {"BLOCK": 4, GEOMETRY_KEY: (("x_ptr", ((None,), (1,))),)})
    y = arange(6)
    mutation_dense(MutationNode(ks, cs, (2,), {"x_ptr": y, "n": 6}))
    assert_same(y, raw_add_one(arange(6), 6))


def test_functional_dense_returns_clones_of_the_written_arguments() -> None:
    k, c = register(K.two_writes, {"n": N, "BLOCK": 4})
    x, y = arange(), arange() * 3
    layouts = {"x_ptr": layout(x, 0), "y_ptr": layout(y, 1)}
    out = functional_dense(FunctionalNode(k, c, (2,), {"x_ptr": x, "y_ptr": y}, ["y_ptr"], layouts))
    ex, ey = arange(), arange() * 3
    K.two_writes[(2,)](ex, ey, N, BLOCK=4)
    assert list(out) == ["y_ptr"]
    assert_same(out["y_ptr"], ey)
    assert out["y_ptr"].untyped_storage().data_ptr() != y.untyped_storage().data_ptr()
    assert_same(x, arange())
    assert_same(y, arange() * 3)


def test_functional_dense_overlapping_members_see_each_others_writes() -> None:
    k, c = register(K.two_writes, {"n": N, "BLOCK": N})
    base = arange(12)
    x, y = base[:N], base[4:]
    layouts = {"x_ptr": layout(x, 0), "y_ptr": layout(y, 0)}
    out = functional_dense(FunctionalNode(k, c, (1,), {"x_ptr": x, "y_ptr": y}, ["x_ptr", "y_ptr"], layouts))
    expected = arange(12)
    K.two_writes[(1,)](expected[:N], expected[4:], N, BLOCK=N)
    assert_same(out["x_ptr"], expected[:N])
    assert_same(out["y_ptr"], expected[4:])
    assert out["x_ptr"].untyped_storage().data_ptr() == out["y_ptr"].untyped_storage().data_ptr()
    assert_same(base, arange(12))


def test_functional_dense_in_place_group_writes_back_a_rebuilt_argument() -> None:
    k, c = register(K.add_one_inplace, {"n": N, "BLOCK": 4})
    base = arange(2 * N)
    x = base[::2]  # traced contiguous, given strided: rebuilt, launched, copied back
    lay = (-2, (N,), (1,), 0)
    out = functional_dense(FunctionalNode(k, c, (2,), {"x_ptr": x}, ["x_ptr"], {"x_ptr": lay}))
    expected = arange(2 * N)
    expected[::2] = raw_add_one(expected[::2].contiguous())
    assert_same(base, expected)
    assert_same(out["x_ptr"], expected[::2])


def test_functional_dense_refuses_aliasing_the_graph_was_not_traced_for() -> None:
    k, c = register(K.add_kernel, {"n": N, "BLOCK": 4})
    x = arange()
    layouts = {"x_ptr": layout(x, -1), "y_ptr": layout(x, -1), "out_ptr": layout(x, 0)}
    node = FunctionalNode(k, c, (2,), {"x_ptr": x, "y_ptr": x, "out_ptr": x}, ["out_ptr"], layouts)
    with pytest.raises(ValueError, match="'x_ptr' and 'out_ptr' overlap in memory"):
        functional_dense(node)
    assert_same(x, arange())
