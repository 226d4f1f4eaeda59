"""The operators' dense rules, called directly on real tensors, compared with raw eager launches."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import functional_triton as ft
from functional_triton.side_table import TableIndex, kernel_side_table
from tests import kernels as K
from tests.helpers import assert_same

N = 8


def layout(t: torch.Tensor, group: int) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
    return (group, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()))


def storage_ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


class Registered:
    """Side-table indices for one kernel and its constants, alive as long as this object."""

    def __init__(self, kernel: Any, constants: dict[str, Any], grid_fn: Any = None) -> None:
        self.kernel_idx: TableIndex = kernel_side_table.add_kernel(kernel, grid_fn)
        self.constant_args_idx: TableIndex = kernel_side_table.add_constants(constants)

    def mutation(self, grid: Any, kwargs: dict[str, Any]) -> Any:
        return ft.triton_kernel_wrapper_mutation(
            kernel_idx=self.kernel_idx, constant_args_idx=self.constant_args_idx, grid=grid, kwargs=kwargs
        )

    def functional(
        self, grid: Any, kwargs: dict[str, Any], to_clone: list[str], layouts: dict[str, Any]
    ) -> Any:
        return ft.triton_kernel_wrapper_functional(
            kernel_idx=self.kernel_idx,
            constant_args_idx=self.constant_args_idx,
            grid=grid,
            kwargs=kwargs,
            tensors_to_clone=to_clone,
            layouts=layouts,
        )


def arange(n: int = N) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32) - 2.5


# --- mutation ------------------------------------------------------------------------------------------


def test_mutation_dense_matches_raw_launch() -> None:
    reg = Registered(K.add_one_inplace, {"n": N, "BLOCK": 4})
    x_hop, x_raw = arange(), arange()
    assert reg.mutation((2,), {"x_ptr": x_hop}) is None
    K.add_one_inplace[(2,)](x_raw, N, BLOCK=4)
    assert not torch.equal(x_raw, arange())
    assert_same(x_hop, x_raw)


def test_mutation_dense_with_grid_callable_and_symint_free_scalar() -> None:
    seen: list[dict[str, Any]] = []

    def grid_fn(meta: dict[str, Any]) -> tuple[int]:
        seen.append(meta)
        return (2,)

    reg = Registered(K.add_one_inplace, {"BLOCK": 4}, grid_fn)
    x_hop, x_raw = arange(), arange()
    reg.mutation(None, {"x_ptr": x_hop, "n": N})  # n travels with the tensors, as a SymInt would
    K.add_one_inplace[(2,)](x_raw, N, BLOCK=4)
    assert seen and seen[0]["BLOCK"] == 4
    assert_same(x_hop, x_raw)


# --- functional ----------------------------------------------------------------------------------------


def test_functional_dense_does_not_modify_inputs_and_matches_raw() -> None:
    reg = Registered(K.add_one_inplace, {"n": N, "BLOCK": 8})
    x = arange()
    before_version = x._version
    result = reg.functional((1,), {"x_ptr": x}, ["x_ptr"], {"x_ptr": layout(x, 0)})
    assert_same(x, arange())
    assert x._version == before_version
    assert list(result) == ["x_ptr"]
    out = result["x_ptr"]
    assert storage_ptr(out) != storage_ptr(x)
    x_raw = arange()
    K.add_one_inplace[(1,)](x_raw, N, BLOCK=8)
    assert not torch.equal(x_raw, arange())
    assert_same(out, x_raw)


def test_functional_dense_outputs_have_no_autograd_history() -> None:
    """The kernel is opaque to autograd (autograd.py): the copy into the clone records nothing.

    Before the copy ran under no_grad, the output of an input that requires grad had a grad_fn
    leading back to the input, as if the kernel were the identity.
    """
    reg = Registered(K.add_one_inplace, {"n": N, "BLOCK": 8})
    x = arange().requires_grad_()
    out = reg.functional((1,), {"x_ptr": x}, ["x_ptr"], {"x_ptr": layout(x, 0)})["x_ptr"]
    assert not out.requires_grad
    assert out.grad_fn is None


def test_functional_dense_out_of_place_returns_written_only() -> None:
    reg = Registered(K.add_kernel, {"n": N, "BLOCK": 8})
    x, y, out = arange(), torch.full((N,), 0.25), torch.zeros(N)
    kwargs = {"x_ptr": x, "y_ptr": y, "out_ptr": out}
    layouts = {"x_ptr": layout(x, -1), "y_ptr": layout(y, -1), "out_ptr": layout(out, 0)}
    result = reg.functional((1,), kwargs, ["out_ptr"], layouts)
    assert list(result) == ["out_ptr"]
    assert_same(out, torch.zeros(N))
    expected = torch.zeros(N)
    K.add_kernel[(1,)](arange(), torch.full((N,), 0.25), expected, N, BLOCK=8)
    assert_same(result["out_ptr"], expected)
    assert storage_ptr(result["out_ptr"]) not in {storage_ptr(x), storage_ptr(y), storage_ptr(out)}


def test_functional_dense_keeps_recorded_strides() -> None:
    reg = Registered(K.scale_inplace_2d, {"rows": 4, "cols": 2, "BLOCK": 2})
    base = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    xt = base.t()  # (4, 2), strides (1, 4)
    s_r, s_c = xt.stride()
    kwargs = {"x_ptr": xt, "stride_r": s_r, "stride_c": s_c}
    result = reg.functional((4,), kwargs, ["x_ptr"], {"x_ptr": layout(xt, 0)})
    out = result["x_ptr"]
    assert tuple(out.shape) == (4, 2)
    assert tuple(out.stride()) == (1, 4)
    assert_same(base, torch.arange(8, dtype=torch.float32).reshape(2, 4))
    raw_base = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    raw_t = raw_base.t()
    K.scale_inplace_2d[(4,)](raw_t, 4, 2, *raw_t.stride(), BLOCK=2)
    assert_same(out, raw_t)


def test_functional_dense_uses_recorded_strides_not_runtime_ones() -> None:
    """A read-only argument arriving contiguous is re-strided to its recorded layout before the launch."""
    reg = Registered(K.copy_2d, {"cols": 4, "BLOCK": 4})
    src_eager = torch.arange(16, dtype=torch.float32).reshape(4, 4).t()  # strides (1, 4)
    dst_eager = torch.zeros(4, 4)
    strides = (*src_eager.stride(), *dst_eager.stride())
    K.copy_2d[(4,)](src_eager, dst_eager, 4, *strides, BLOCK=4)
    # The graph was traced with the transposed view; at run time it arrives as a contiguous copy.
    src_now = src_eager.contiguous()
    dst = torch.zeros(4, 4)
    kwargs = {"src_ptr": src_now, "dst_ptr": dst, "s_r": strides[0], "s_c": strides[1], "d_r": 4, "d_c": 1}
    layouts = {"src_ptr": layout(src_eager, -1), "dst_ptr": layout(dst, 0)}
    result = reg.functional((4,), kwargs, ["dst_ptr"], layouts)
    assert not torch.equal(dst_eager, torch.zeros(4, 4))
    assert_same(result["dst_ptr"], dst_eager)


@pytest.mark.parametrize(
    "offsets", [(0, 2), (2, 0), (0, 0), (3, 5)], ids=["b-after-a", "b-before-a", "same", "offset"]
)
def test_functional_dense_alias_group_matches_eager(offsets: tuple[int, int]) -> None:
    """write_then_read(a, b): writes through a must be visible through b, as on the eager aliases."""
    reg = Registered(K.write_then_read, {"n": 4, "BLOCK": 4})
    oa, ob = offsets

    def make() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        base = torch.arange(12, dtype=torch.float32) + 100
        return base, base[oa : oa + 4], base[ob : ob + 4], torch.zeros(4)

    base_e, a_e, b_e, out_e = make()
    K.write_then_read[(1,)](a_e, b_e, out_e, 4, BLOCK=4)

    base, a, b, out = make()
    kwargs = {"a_ptr": a, "b_ptr": b, "out_ptr": out}
    layouts = {"a_ptr": layout(a, 0), "b_ptr": layout(b, 0), "out_ptr": layout(out, 1)}
    result = reg.functional((1,), kwargs, ["a_ptr", "out_ptr"], layouts)
    assert list(result) == ["a_ptr", "out_ptr"]
    # Inputs are untouched.
    assert_same(base, torch.arange(12, dtype=torch.float32) + 100)
    assert_same(out, torch.zeros(4))
    # Outputs equal what eager left in those arguments.
    assert_same(result["a_ptr"], a_e)
    assert_same(result["out_ptr"], out_e)
    assert storage_ptr(result["a_ptr"]) != storage_ptr(base)


def test_functional_dense_same_tensor_twice_matches_eager() -> None:
    reg = Registered(K.two_writes, {"n": N, "BLOCK": N})
    x_e = arange()
    K.two_writes[(1,)](x_e, x_e, N, BLOCK=N)  # x = (x + 1) * 2
    x = arange()
    lay = layout(x, 0)
    result = reg.functional((1,), {"x_ptr": x, "y_ptr": x}, ["x_ptr", "y_ptr"], {"x_ptr": lay, "y_ptr": lay})
    assert_same(x, arange())
    assert_same(result["x_ptr"], x_e)
    assert_same(result["y_ptr"], x_e)
    # Both names are views of one clone, as both arguments were one tensor.
    assert storage_ptr(result["x_ptr"]) == storage_ptr(result["y_ptr"])


def test_functional_dense_disjoint_views_share_one_clone() -> None:
    reg = Registered(K.two_writes, {"n": N // 2, "BLOCK": N // 2})
    base_e = arange()
    K.two_writes[(1,)](base_e[: N // 2], base_e[N // 2 :], N // 2, BLOCK=N // 2)
    base = arange()
    lo, hi = base[: N // 2], base[N // 2 :]
    result = reg.functional(
        (1,), {"x_ptr": lo, "y_ptr": hi}, ["x_ptr", "y_ptr"], {"x_ptr": layout(lo, 0), "y_ptr": layout(hi, 0)}
    )
    assert_same(base, arange())
    assert_same(result["x_ptr"], base_e[: N // 2])
    assert_same(result["y_ptr"], base_e[N // 2 :])
    assert storage_ptr(result["x_ptr"]) == storage_ptr(result["y_ptr"])


def test_functional_dense_stale_size_raises_naming_argument() -> None:
    reg = Registered(K.add_one_inplace, {"n": N, "BLOCK": 8})
    recorded = layout(torch.zeros(8), 0)
    x = torch.zeros(16)
    with pytest.raises(
        ValueError, match=r"argument 'x_ptr' has shape \(16,\), but the graph was traced for \(8,\)"
    ):
        reg.functional((1,), {"x_ptr": x}, ["x_ptr"], {"x_ptr": recorded})
    assert_same(x, torch.zeros(16))


def test_functional_dense_stale_rank_raises_naming_argument() -> None:
    reg = Registered(K.add_kernel, {"n": N, "BLOCK": 8})
    x, y, out = torch.zeros(8), torch.zeros(2, 4), torch.zeros(8)
    layouts = {"x_ptr": layout(x, -1), "y_ptr": layout(torch.zeros(8), -1), "out_ptr": layout(out, 0)}
    with pytest.raises(ValueError, match=r"argument 'y_ptr' has shape \(2, 4\)"):
        reg.functional((1,), {"x_ptr": x, "y_ptr": y, "out_ptr": out}, ["out_ptr"], layouts)


def test_hops_are_distinct_named_operators() -> None:
    assert ft.triton_kernel_wrapper_mutation is not ft.triton_kernel_wrapper_functional
    assert "mutation" in ft.triton_kernel_wrapper_mutation.__name__
    assert "functional" in ft.triton_kernel_wrapper_functional.__name__


def test_mutation_node_is_impure_for_fx() -> None:
    """Dead-code elimination must keep a launch (torch 2.11 reads HOP impurity from the effects
    registry only; 2.13 also from has_side_effect's set)."""
    graph = torch.fx.Graph()
    assert graph.call_function(ft.triton_kernel_wrapper_mutation, (), {}).is_impure()
