"""grid_watch.py: GridWatch records the kernel arguments a grid callable writes, changing nothing.

Inference tensors have no version counter, which is why the watch exists; most tests use them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from functional_triton.grid_watch import GridWatch
from functional_triton.launch_spec import _run_grid
from tests.helpers import assert_same

N = 8


@pytest.fixture(autouse=True)
def inference_mode() -> Iterator[None]:
    """Inference tensors may be written only under inference mode."""
    with torch.inference_mode():
        yield


def inference(*values: torch.Tensor) -> list[torch.Tensor]:
    assert torch.is_inference_mode_enabled()
    return [v.clone() for v in values]


def test_in_place_and_out_writes_are_recorded_and_still_run() -> None:
    x, y, z = inference(torch.zeros(4), torch.ones(4), torch.full((4,), 3.0))
    with GridWatch({"x": x, "y": y, "z": z}) as watch:
        x.add_(1)
        torch.mul(y, 2, out=z)  # `out` is keyword-only in the schema
        total = y.sum()
    assert watch.written == ["x", "z"]
    assert_same(x, torch.ones(4))
    assert_same(z, torch.full((4,), 2.0))
    assert_same(total, torch.tensor(4.0))


def test_reads_and_writes_to_other_tensors_are_not_recorded() -> None:
    x, other = inference(torch.arange(4.0), torch.zeros(4))
    with GridWatch({"x": x}) as watch:
        doubled = x * 2
        doubled.add_(1)  # a fresh tensor
        other.copy_(x)  # another storage
        size = int(x.numel())
    assert watch.written == []
    assert_same(doubled, torch.arange(4.0) * 2 + 1)
    assert_same(other, torch.arange(4.0))
    assert size == 4


@pytest.mark.parametrize("through", ["a view of the argument", "the base of the argument"])
def test_a_write_through_shared_storage_is_a_write_to_the_argument(through: str) -> None:
    (base,) = inference(torch.zeros(N))
    argument = base if through == "a view of the argument" else base[2:6]
    written = base[1:3] if through == "a view of the argument" else base
    with GridWatch({"a": argument}) as watch:
        written.fill_(5)
    assert watch.written == ["a"]
    assert base.tolist().count(5.0) == (2 if through == "a view of the argument" else N)


def test_each_argument_is_recorded_once_in_order_of_its_first_write() -> None:
    x, y, z = inference(torch.zeros(2), torch.zeros(2), torch.zeros(2))
    with GridWatch({"x": x, "y": y, "z": z}) as watch:
        y.add_(1)
        torch._foreach_add_([z, x], 1.0)  # a list of written tensors
        x.mul_(3)
        y.add_(1)
    assert watch.written == ["y", "z", "x"]
    assert_same(x, torch.full((2,), 3.0))
    assert_same(y, torch.full((2,), 2.0))
    assert_same(z, torch.ones(2))


def test_the_same_tensor_under_two_names_is_recorded_for_both() -> None:
    (x,) = inference(torch.zeros(2))
    with GridWatch({"a": x, "b": x}) as watch:
        x.zero_()
    assert watch.written == ["a", "b"]


def test_run_grid_reports_watched_and_version_counted_writes() -> None:
    (x,) = inference(torch.zeros(N))  # no version counter: the watch must see its write
    with torch.inference_mode(False):
        y = torch.zeros(N)  # a normal tensor: its version counter sees the write
    assert x.is_inference() and not y.is_inference()

    def grid(meta: dict[str, Any]) -> tuple[int]:
        x.add_(1)
        return (meta["BLOCK"],)

    result, written = _run_grid(grid, {"BLOCK": 2}, {"x_ptr": x, "y_ptr": y})
    assert result == (2,) and written == ["x_ptr"]
    with torch.inference_mode(False):
        result, written = _run_grid(lambda meta: (y.add_(1), (1,))[1], {}, {"x_ptr": x, "y_ptr": y})
    # Both the watch and the version counter see it: named once.
    assert result == (1,) and written == ["y_ptr"]
    assert_same(x, torch.ones(N))
    assert_same(y, torch.ones(N))
