"""Functionalization rule: what gets cloned and copied back follows the mutation analysis."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
from functorch.compile import aot_function
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
import functional_triton.mutation as mutation
from tests import kernels as K
from tests.harness import check_matches_eager
from tests.helpers import Capture

aten = torch.ops.aten
N = 8


def forward_graph(prog: Any, *inputs: torch.Tensor) -> torch.fx.GraphModule:
    kept = Capture()
    with torch.no_grad():
        aot_function(prog, fw_compiler=kept.fw_compiler, keep_inference_input_mutations=True)(*inputs)
    return kept.fw[0]


def add_then_increment(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    ft.wrap_triton(K.add_kernel)[(1,)](x, y, out, N, BLOCK=N)
    ft.wrap_triton(K.add_one_inplace)[(1,)](x, N, BLOCK=N)
    return out


def test_read_only_arguments_are_neither_cloned_nor_copied_back() -> None:
    gm = forward_graph(add_then_increment, torch.arange(float(N)), torch.ones(N))
    x, y = [n for n in gm.graph.nodes if n.op == "placeholder"]
    calls = [n for n in gm.graph.nodes if n.target is ft.triton_kernel_wrapper_functional]
    assert [c.kwargs["tensors_to_clone"] for c in calls] == [["out_ptr"], ["x_ptr"]]
    assert all(c.kwargs["layouts"]["y_ptr"][0] == -1 for c in calls[:1])  # y_ptr in no alias group
    copies_into = [n.args[0] for n in gm.graph.nodes if n.target is aten.copy_.default]
    assert copies_into == [x], gm.code  # only the written input gets a copy_, never y
    assert not any(n.target is aten.clone.default for n in gm.graph.nodes)


@pytest.mark.filterwarnings("ignore::functional_triton.functionalize.AnalysisWarning")
def test_unknown_analysis_clones_every_tensor_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        mutation, "analyze_writes", lambda kernel, args: mutation.WriteAnalysis(None, "forced unknown", True)
    )
    gm = forward_graph(add_then_increment, torch.arange(float(N)), torch.ones(N))
    calls = [n for n in gm.graph.nodes if n.target is ft.triton_kernel_wrapper_functional]
    assert [sorted(c.kwargs["tensors_to_clone"]) for c in calls] == [["out_ptr", "x_ptr", "y_ptr"], ["x_ptr"]]


def test_unknown_analysis_warns_once_per_kernel_naming_it_and_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import functional_triton.functionalize as functionalize

    monkeypatch.setattr(functionalize, "_warned", type(functionalize._warned)())
    monkeypatch.setattr(
        mutation, "analyze_writes", lambda kernel, args: mutation.WriteAnalysis(None, "forced unknown", True)
    )
    with pytest.warns(
        functionalize.AnalysisWarning, match=r"add_one_inplace writes \(forced unknown\)"
    ) as record:
        forward_graph(
            functools.partial(lambda x: ft.wrap_triton(K.add_one_inplace)[(1,)](x, N, BLOCK=N) or x),
            torch.zeros(N),
        )
        forward_graph(
            functools.partial(lambda x: ft.wrap_triton(K.add_one_inplace)[(1,)](x, N, BLOCK=N) or x),
            torch.zeros(N),
        )
    assert len([w for w in record if issubclass(w.category, functionalize.AnalysisWarning)]) == 1


@pytest.mark.filterwarnings("ignore::functional_triton.functionalize.AnalysisWarning")
def test_fallback_keeps_every_write_with_aliased_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fallback case: with every argument "written", write_then_read(x, x, out) must
    # still keep the write to x and read it back (one clone for the group, not one per name).
    monkeypatch.setattr(
        mutation, "analyze_writes", lambda kernel, args: mutation.WriteAnalysis(None, "forced unknown", True)
    )

    def prog(wrap, x):
        out = torch.zeros(4)
        wrap(K.write_then_read)[(1,)](x, x, out, 4, BLOCK=4)
        return out

    check_matches_eager(prog, lambda: (torch.zeros(4),))


@pytest.mark.parametrize("remove", ["mutations", "mutations_and_views"])
def test_layout_records_the_strides_the_program_read_before_a_pending_write_is_synced(remove: str) -> None:
    """x.view(2, 4).mul_(2) on a strided input is still pending when the program reads x.stride().

    The launch's functionalization rule unwraps x, which syncs that write, and torch then gives
    x its new value's contiguous metadata. The kernel was told strides (8, 2): the layout must
    say so, or the functional operator rebuilds x contiguous and the kernel writes past the end
    of its buffer. Traced with fake tensors, so a wrong layout fails here without launching.
    """

    def prog(x: torch.Tensor) -> torch.Tensor:
        x.view(2, 4).mul_(2)
        ft.wrap_triton(K.scale_inplace_2d)[(2,)](x, 2, 4, *x.stride(), BLOCK=4)
        return x

    def inputs() -> torch.Tensor:
        return torch.arange(16.0).reshape(2, 8)[:, ::2]  # strides (8, 2)

    gm = make_fx(torch.func.functionalize(prog, remove=remove), tracing_mode="fake")(inputs())
    (call,) = [n for n in gm.graph.nodes if n.target is ft.triton_kernel_wrapper_functional]
    assert call.kwargs["layouts"]["x_ptr"] == (0, (2, 4), (8, 2), 0), gm.code
    x = inputs()
    expected = inputs()
    expected.mul_(2).mul_(2).add_(1)
    torch.testing.assert_close(gm(x), expected, rtol=0, atol=0)
    torch.testing.assert_close(x, expected, rtol=0, atol=0)
