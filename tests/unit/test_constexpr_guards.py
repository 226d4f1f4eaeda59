"""A tl.constexpr computed from shapes under dynamic shapes: specialised, guarded, rechecked at run time.

Note [constexpr guards] in functional_triton/launch_spec.py.
"""

from __future__ import annotations

import pytest
import torch
import triton
from functorch.compile import aot_function
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from tests.harness import raw
from tests.helpers import nop
from tests.kernels import add_one_inplace


def program(wrap, x: torch.Tensor) -> torch.Tensor:
    # As Liger does: the block is the next power of two of a size (a long SymInt expression).
    n = x.shape[0]
    wrap(add_one_inplace)[(1,)](x, n, BLOCK=triton.next_power_of_2(n))
    return x * 2


def _eager(n: int) -> torch.Tensor:
    return program(raw, torch.arange(n, dtype=torch.float32))


def test_symbolic_trace_specialises_and_runs_sizes_with_the_same_value() -> None:
    gm = make_fx(torch.func.functionalize(lambda x: program(ft.wrap_triton, x)), tracing_mode="symbolic")(
        torch.arange(5, dtype=torch.float32)
    )
    for n in (5, 6, 8):  # next_power_of_2 is 8 for each
        torch.testing.assert_close(gm(torch.arange(n, dtype=torch.float32)), _eager(n), rtol=0, atol=0)


def test_symbolic_graph_raises_a_short_error_when_the_value_changes() -> None:
    gm = make_fx(torch.func.functionalize(lambda x: program(ft.wrap_triton, x)), tracing_mode="symbolic")(
        torch.arange(5, dtype=torch.float32)
    )
    with pytest.raises(
        ValueError, match=r"argument 'BLOCK' of add_one_inplace is a tl\.constexpr specialised to 8"
    ) as e:
        gm(torch.arange(9, dtype=torch.float32))
    assert "16" in str(e.value) and len(str(e.value)) < 200


@pytest.mark.parametrize("compiler", [nop, ft.reinplace_compiler], ids=["nop", "reinplace"])
def test_aot_function_dynamic(compiler) -> None:
    f = aot_function(
        lambda x: program(ft.wrap_triton, x), fw_compiler=compiler, bw_compiler=compiler, dynamic=True
    )
    for n in (5, 7):
        x = torch.arange(n, dtype=torch.float32)
        expected_x = torch.arange(n, dtype=torch.float32)
        expected = program(raw, expected_x)
        torch.testing.assert_close(f(x), expected, rtol=0, atol=0)
        torch.testing.assert_close(x, expected_x, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"tl\.constexpr specialised to 8"):
        f(torch.arange(20, dtype=torch.float32))
