"""Alias-group buffers: only the extent the members reach, and arguments whose elements share memory.

Note [alias groups] (extent-only buffers, issue 15 item 7), Note [overlapping arguments] and
Note [written broadcast views] (stride-0 arguments, issue 12 item 12).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import functional_triton as ft
from functional_triton.side_table import kernel_side_table
from tests import kernels as K
from tests.harness import ALIASING_MODES, AOT_MODES, check_matches_eager
from tests.property import kernels as PK
from tests.property.strategies import layout

BIG = 16 * 1024 * 1024  # float32 elements: 64 MiB


def _functional(
    kernel: Any,
    constants: dict[str, Any],
    kwargs: dict[str, Any],
    written: list[str],
    grid: tuple[int] = (1,),
) -> Any:
    layouts = {
        n: (0 if n in written else -1, tuple(t.shape), tuple(t.stride()), t.storage_offset())
        for n, t in kwargs.items()
    }
    return ft.triton_kernel_wrapper_functional(
        kernel_idx=kernel_side_table.add_kernel(kernel, None),
        constant_args_idx=kernel_side_table.add_constants(constants),
        grid=grid,
        kwargs=kwargs,
        tensors_to_clone=written,
        layouts=layouts,
    )


# --- extent-only buffers ---------------------------------------------------------------------------------


def test_buffer_for_the_tail_of_a_big_tensor_covers_only_the_tail() -> None:
    big = torch.zeros(BIG)
    tail = big[-4:]
    out = _functional(K.add_one_inplace, {"n": 4, "BLOCK": 4}, {"x_ptr": tail}, ["x_ptr"])["x_ptr"]
    torch.testing.assert_close(out, torch.ones(4), rtol=0, atol=0)
    assert not tail.any()
    assert out.untyped_storage().nbytes() == 16, out.untyped_storage().nbytes()  # the 4 floats, no more


def test_buffer_alignment_matches_the_storage() -> None:
    """Members keep their byte offset modulo 16, as Triton's pointer specialisation sees it in eager."""
    big = torch.zeros(64)
    for start in range(5):
        view = big[start + 40 : start + 44]
        out = _functional(K.add_one_inplace, {"n": 4, "BLOCK": 4}, {"x_ptr": view}, ["x_ptr"])["x_ptr"]
        assert (out.data_ptr() - view.data_ptr()) % 16 == 0


def test_group_of_two_views_spans_from_the_lower_to_the_upper() -> None:
    big = torch.zeros(1024)
    a, b = big[500:504], big[600:604]
    result = _functional(K.two_writes, {"n": 4, "BLOCK": 4}, {"x_ptr": a, "y_ptr": b}, ["x_ptr", "y_ptr"])
    assert result["x_ptr"].untyped_storage().data_ptr() == result["y_ptr"].untyped_storage().data_ptr()
    assert result["x_ptr"].untyped_storage().nbytes() <= (604 - 496) * 4
    assert result["y_ptr"].storage_offset() - result["x_ptr"].storage_offset() == 100


def test_tail_written_then_views_taken_after_the_launch() -> None:
    def prog(wrap, big):
        x = big[-8:]
        wrap(K.add_one_inplace)[(1,)](x, 8, BLOCK=8)
        v = x[2:6]  # a view of the written tensor, made after the launch
        wrap(K.write_then_read)[(1,)](v, x[1:5], out := torch.zeros(4), 4, BLOCK=4)
        w = big.as_strided((2,), (3,), big.numel() - 6)  # absolute storage offset
        return out, v, w, big

    check_matches_eager(prog, lambda: (torch.arange(64.0),), modes=ALIASING_MODES)


def test_input_at_a_storage_offset_written_then_views_taken_after_the_launch() -> None:
    def prog(wrap, x):
        wrap(K.add_one_inplace)[(1,)](x, 8, BLOCK=8)
        v = x[3:7]
        wrap(K.two_writes)[(1,)](v, x[0:4], 4, BLOCK=4)
        return x, v, v[1:].clone()

    check_matches_eager(prog, lambda: (torch.arange(64.0)[50:58],), modes=ALIASING_MODES)


def test_empty_member_far_below_the_written_one() -> None:
    def prog(wrap, x):
        a, b = x[-4:], x[0:0]
        wrap(PK.two_writes_kernel)[(1,)](a, *layout(a), b, *layout(b), CHUNK=64)
        return (x,)

    check_matches_eager(prog, lambda: (torch.arange(256.0),), modes=ALIASING_MODES)


# --- arguments whose elements share memory ---------------------------------------------------------------


def _write_rows(wrap: Any, x: torch.Tensor) -> None:
    """x[r, c] = x[r, c] + 1 read from a copy: every write to one location writes one value.

    (Deterministic on a GPU too, where the programs writing one location run in any order.)
    """
    src = x.clone()
    wrap(K.copy_2d)[(x.shape[0],)](src, x, x.shape[1], *src.stride(), *x.stride(), BLOCK=8)


# Modes in which a write through a broadcast view is carried back to the tensor it views.
BROADCAST_MODES = (*AOT_MODES, "make_fx")


@pytest.mark.parametrize(
    "view",
    [
        pytest.param(lambda b: b.expand(4, 8), id="expand"),
        pytest.param(lambda b: b.unsqueeze(1).expand(8, 4).t(), id="expand_transposed"),
        pytest.param(lambda b: torch.broadcast_to(b, (3, 8)), id="broadcast_to"),
    ],
)
def test_written_broadcast_view_of_an_input_matches_eager(view: Any) -> None:
    def prog(wrap, b):
        x = view(b)
        _write_rows(wrap, x)
        return b, x * 1

    check_matches_eager(prog, lambda: (torch.arange(8.0) - 2.5,), modes=BROADCAST_MODES)


def test_written_broadcast_view_of_a_view_with_an_offset_matches_eager() -> None:
    def prog(wrap, big):
        _write_rows(wrap, big[2:10].expand(4, 8))
        return (big,)

    check_matches_eager(prog, lambda: (torch.arange(12.0),), modes=BROADCAST_MODES)
    check_matches_eager(
        prog, lambda: (torch.arange(12.0, requires_grad=True),), modes=AOT_MODES, no_grad=(False,)
    )


def test_written_broadcast_view_of_an_intermediate_matches_eager() -> None:
    def prog(wrap, a):
        b = a * 2
        _write_rows(wrap, b[1].expand(4, 8))
        return b, b.sum()

    check_matches_eager(prog, lambda: (torch.arange(16.0).reshape(2, 8),), modes=BROADCAST_MODES)


def test_written_broadcast_graph_input_raises_naming_the_argument() -> None:
    def prog(wrap, x):
        _write_rows(wrap, x)
        return (x,)

    with pytest.raises(
        NotImplementedError, match=r"argument 'dst_ptr' is a graph input that the kernel writes"
    ):
        check_matches_eager(prog, lambda: (torch.arange(8.0).expand(4, 8),), modes=("aot_function",))


@pytest.mark.parametrize("mode", ["functionalize", "symbolic"])
def test_written_broadcast_view_under_torch_func_functionalize_raises_naming_the_argument(mode: str) -> None:
    def prog(wrap, b):
        _write_rows(wrap, b.expand(4, 8))
        return (b,)

    with pytest.raises(NotImplementedError, match=r"argument 'dst_ptr' is written and has a stride of 0"):
        check_matches_eager(prog, lambda: (torch.arange(8.0),), modes=(mode,))


def test_read_only_broadcast_argument_matches_eager() -> None:
    def prog(wrap, b, y):
        out = torch.empty(4, 8)
        x = b.expand(4, 8)
        wrap(K.copy_2d)[(4,)](x, out, 8, *x.stride(), *out.stride(), BLOCK=8)
        wrap(K.copy_2d)[(4,)](out, y, 8, *out.stride(), *y.stride(), BLOCK=8)
        return out, y

    check_matches_eager(prog, lambda: (torch.arange(8.0), torch.zeros(4, 8)))


def test_functional_dense_rebuilds_an_overlapping_as_strided_argument() -> None:
    """Overlapping strides that are not 0: rebuilt element by element (Note [overlapping arguments])."""
    eager = torch.arange(16.0)
    src = eager.as_strided((3, 4), (2, 1)).clone()
    K.copy_2d[(3,)](src, eager.as_strided((3, 4), (2, 1)), 4, 4, 1, 2, 1, BLOCK=4)
    base = torch.arange(16.0)
    x = base.as_strided((3, 4), (2, 1))
    constants = {"cols": 4, "s_r": 4, "s_c": 1, "d_r": 2, "d_c": 1, "BLOCK": 4}
    out = _functional(K.copy_2d, constants, {"src_ptr": src, "dst_ptr": x}, ["dst_ptr"], grid=(3,))["dst_ptr"]
    torch.testing.assert_close(out, eager.as_strided((3, 4), (2, 1)), rtol=0, atol=0)
    torch.testing.assert_close(base, torch.arange(16.0), rtol=0, atol=0)


def test_written_overlapping_as_strided_view_matches_eager() -> None:
    def prog(wrap, base):
        _write_rows(wrap, base.as_strided((3, 4), (2, 1)))
        return (base,)

    check_matches_eager(prog, lambda: (torch.arange(16.0),), modes=ALIASING_MODES)
