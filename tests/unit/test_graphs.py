"""Canonical graphs pinned as text: the mutation node, functional node + getitem + copy_, an AOT forward.

Side-table indices depend on what ran before, so they are normalised away (`kernel_idx = K`,
`constant_args_idx = C`); the tests also assert node targets and kwargs keys directly.
"""

from __future__ import annotations

import operator
import re
from typing import Any

import pytest
import torch
from functorch.compile import aot_function
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from tests import kernels as K
from tests.helpers import Capture, assert_same, kwarg

pytestmark = pytest.mark.filterwarnings("ignore::functional_triton.functionalize.AnalysisWarning")

N = 8
MUTATION_KEYS = {"kernel_idx", "constant_args_idx", "grid", "kwargs"}
FUNCTIONAL_KEYS = MUTATION_KEYS | {"tensors_to_clone", "layouts"}


def normalise(code: str) -> str:
    code = re.sub(r"kernel_idx = \d+", "kernel_idx = K", code)
    code = re.sub(r"constant_args_idx = \d+", "constant_args_idx = C", code)
    return "\n".join(line.rstrip() for line in code.strip().splitlines())


def call_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function"]


def inplace(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    wrap(K.add_one_inplace)[(1,)](x, N, BLOCK=8)
    return x


def out_of_place(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    wrap(K.add_kernel)[(1,)](x, y, out, N, BLOCK=8)
    return out * 2


def raw(kernel: Any) -> Any:
    return kernel


MUTATION_GRAPH = """\
def forward(self, x_1):
    ft_triton_kernel_wrapper_mutation = torch.ops.higher_order.ft_triton_kernel_wrapper_mutation(kernel_idx = K, constant_args_idx = C, grid = (1,), kwargs = {'x_ptr': x_1});  ft_triton_kernel_wrapper_mutation = None
    return x_1"""  # noqa: E501


def test_make_fx_mutation_graph() -> None:
    gm = make_fx(lambda x: inplace(ft.wrap_triton, x))(torch.arange(N, dtype=torch.float32))
    assert normalise(gm.code) == MUTATION_GRAPH
    (node,) = call_nodes(gm)
    assert node.target is ft.triton_kernel_wrapper_mutation
    assert set(node.kwargs) == MUTATION_KEYS
    assert node.kwargs["grid"] == (1,)
    assert list(kwarg(node, "kwargs")) == ["x_ptr"]
    x_g, x_e = torch.arange(N, dtype=torch.float32), torch.arange(N, dtype=torch.float32)
    assert_same(gm(x_g), inplace(raw, x_e))
    assert_same(x_g, x_e)


FUNCTIONALIZED_GRAPH = """\
def forward(self, x_1):
    ft_triton_kernel_wrapper_functional = torch.ops.higher_order.ft_triton_kernel_wrapper_functional(kernel_idx = K, constant_args_idx = C, grid = (1,), kwargs = {'x_ptr': x_1}, tensors_to_clone = ['x_ptr'], layouts = {'x_ptr': (0, (8,), (1,), 0)})
    getitem = ft_triton_kernel_wrapper_functional['x_ptr'];  ft_triton_kernel_wrapper_functional = None
    copy_ = torch.ops.aten.copy_.default(x_1, getitem);  x_1 = copy_ = None
    return getitem"""  # noqa: E501


def test_make_fx_functionalize_graph() -> None:
    gm = make_fx(torch.func.functionalize(lambda x: inplace(ft.wrap_triton, x)))(
        torch.arange(N, dtype=torch.float32)
    )
    assert normalise(gm.code) == FUNCTIONALIZED_GRAPH
    fnode, getitem, copy = call_nodes(gm)
    assert fnode.target is ft.triton_kernel_wrapper_functional
    assert set(fnode.kwargs) == FUNCTIONAL_KEYS
    assert getitem.target is operator.getitem and getitem.args == (fnode, "x_ptr")
    assert copy.target is torch.ops.aten.copy_.default
    assert isinstance(copy.args[0], torch.fx.Node) and copy.args[0].op == "placeholder"
    assert copy.args[1] is getitem
    x_g, x_e = torch.arange(N, dtype=torch.float32), torch.arange(N, dtype=torch.float32)
    assert_same(gm(x_g), inplace(raw, x_e))
    assert_same(x_g, x_e)


AOT_FORWARD_GRAPH = """\
def forward(self, arg0_1, arg1_1):
    empty_like = torch.ops.aten.empty_like.default(arg0_1, pin_memory = False)
    ft_triton_kernel_wrapper_functional = torch.ops.higher_order.ft_triton_kernel_wrapper_functional(kernel_idx = K, constant_args_idx = C, grid = (1,), kwargs = {'x_ptr': arg0_1, 'y_ptr': arg1_1, 'out_ptr': empty_like}, tensors_to_clone = ['out_ptr'], layouts = {'x_ptr': (-1, (8,), (1,), 0), 'y_ptr': (-1, (8,), (1,), 0), 'out_ptr': (0, (8,), (1,), 0)});  arg0_1 = arg1_1 = empty_like = None
    getitem = ft_triton_kernel_wrapper_functional['out_ptr'];  ft_triton_kernel_wrapper_functional = None
    mul = torch.ops.aten.mul.Tensor(getitem, 2);  getitem = None
    return (mul,)"""  # noqa: E501


def test_aot_function_forward_graph_out_of_place() -> None:
    kept = Capture()
    compiled = aot_function(lambda x, y: out_of_place(ft.wrap_triton, x, y), **kept.compilers)
    graphs = kept.graphs
    x, y = torch.arange(N, dtype=torch.float32), torch.full((N,), 0.5)
    result = compiled(x, y)
    assert len(graphs) == 1
    (fw,) = graphs
    assert normalise(fw.code) == AOT_FORWARD_GRAPH
    targets = [n.target for n in call_nodes(fw)]
    assert targets == [
        torch.ops.aten.empty_like.default,
        ft.triton_kernel_wrapper_functional,
        operator.getitem,
        torch.ops.aten.mul.Tensor,
    ]
    fnode = call_nodes(fw)[1]
    assert set(fnode.kwargs) == FUNCTIONAL_KEYS
    assert list(kwarg(fnode, "kwargs")) == ["x_ptr", "y_ptr", "out_ptr"]
    assert_same(result, out_of_place(raw, x.clone(), y.clone()))
    assert not torch.equal(result, torch.zeros(N))


def test_normalise_only_touches_indices() -> None:
    text = "f(kernel_idx = 12, constant_args_idx = 345, grid = (1,))   \n"
    assert normalise(text) == "f(kernel_idx = K, constant_args_idx = C, grid = (1,))"
