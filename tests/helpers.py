"""Shared test scaffolding: compilers that keep the graphs they receive, graph queries, tensor equality.

The correctness harness (a program run eagerly with raw kernels and traced, compared bit for bit)
is tests/harness.py; this module holds the small pieces many test files need besides it, and
imports nothing from the tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
from torch.utils._python_dispatch import TorchDispatchMode

import functional_triton as ft
from functional_triton.side_table import kernel_side_table

Compiler = Callable[[torch.fx.GraphModule, Any], Any]
TracingMode = Literal["real", "fake", "symbolic"]  # make_fx's tracing_mode


def nop(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    """An AOTAutograd compiler that runs the graph as it is."""
    return make_boxed_func(gm.forward)


class Capture:
    """AOTAutograd compilers that keep each graph they receive, then hand it to ``inner``.

    ``fw`` and ``bw`` hold the forward (or inference) and backward graphs in the order they
    were compiled; ``graphs`` holds both, in that order. ``inner`` defaults to running the graph
    as it is; with ``ft.reinplace_compiler`` the kept graph is the one the pass rewrote (it
    rewrites in place). ``compilers`` is the keyword pair for aot_function / aot_module.
    """

    def __init__(self, inner: Compiler = nop) -> None:
        self.inner = inner
        self.fw: list[torch.fx.GraphModule] = []
        self.bw: list[torch.fx.GraphModule] = []
        self.graphs: list[torch.fx.GraphModule] = []

    def _keep(self, into: list[torch.fx.GraphModule]) -> Compiler:
        def compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
            into.append(gm)
            self.graphs.append(gm)
            return self.inner(gm, example_inputs)

        return compiler

    @property
    def fw_compiler(self) -> Compiler:
        return self._keep(self.fw)

    @property
    def bw_compiler(self) -> Compiler:
        return self._keep(self.bw)

    @property
    def by_kind(self) -> dict[str, list[torch.fx.GraphModule]]:
        return {"fw": self.fw, "bw": self.bw}

    @property
    def compilers(self) -> dict[str, Compiler]:
        return {"fw_compiler": self.fw_compiler, "bw_compiler": self.bw_compiler}


class GraphRecorder:
    """A torch.compile backend that keeps Dynamo's graphs, and an AOTAutograd one keeping its graphs."""

    def __init__(self) -> None:
        self.dynamo: list[torch.fx.GraphModule] = []
        self._aot = Capture()

    @property
    def aot(self) -> list[torch.fx.GraphModule]:
        return self._aot.graphs

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        self.dynamo.append(gm)
        return gm.forward

    def aot_backend(self) -> Any:
        return aot_autograd(**self._aot.compilers)


def targets(gm: torch.fx.GraphModule) -> list[Any]:
    """The targets of the graph's call_function nodes, in order."""
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def kwarg(node: torch.fx.Node, name: str) -> Any:
    """A node's keyword argument (FX types them as a wide union; the tests know what they hold)."""
    return node.kwargs[name]


def kernel_calls(gm: torch.fx.GraphModule, in_place_ok: bool = False) -> list[tuple[str, tuple[str, ...]]]:
    """(kernel name, written argument names) of each kernel call in the graph, in order.

    Every call must be functional: a mutation node left in an AOTAutograd graph is a bug, except
    a backward's launch on leaf inputs (``in_place_ok``, Note [backward writes to leaf inputs]),
    listed as (kernel name, ("in place",)).
    """
    calls: list[tuple[str, tuple[str, ...]]] = []
    for node in gm.graph.nodes:
        if in_place_ok and node.target is ft.triton_kernel_wrapper_mutation:
            kernel, _ = kernel_side_table.get_kernel(kwarg(node, "kernel_idx"))
            calls.append((kernel.fn.__name__, ("in place",)))
            continue
        assert node.target is not ft.triton_kernel_wrapper_mutation, f"mutation node left in\n{gm.code}"
        if node.target is ft.triton_kernel_wrapper_functional:
            kernel, _ = kernel_side_table.get_kernel(kwarg(node, "kernel_idx"))
            calls.append((kernel.fn.__name__, tuple(kwarg(node, "tensors_to_clone"))))
    return calls


def cloned_names(gm: torch.fx.GraphModule) -> list[str]:
    """The arguments the graph's functional kernel calls clone (the group id of a cloned layout is >= 0)."""
    return sorted(
        name
        for node in gm.graph.nodes
        if node.target is ft.triton_kernel_wrapper_functional
        for name, layout in kwarg(node, "layouts").items()
        if name in kwarg(node, "tensors_to_clone") and layout[0] >= 0
    )


def cloned_groups(gm: torch.fx.GraphModule) -> int:
    """Alias groups the graph's functional kernel calls copy (each one clone)."""
    count = 0
    for node in gm.graph.nodes:
        if node.target is ft.triton_kernel_wrapper_functional:
            cloned = kwarg(node, "tensors_to_clone")
            layouts = kwarg(node, "layouts")
            count += len({raw[0] for name, raw in layouts.items() if name in cloned and raw[0] >= 0})
    return count


class CloneCounts:
    """A compiler running ``ft.reinplace_compiler`` that records, per graph, (clones received, clones left).

    ``graphs`` keeps the rewritten graphs, in the order they were compiled (a forward before its backward).
    """

    def __init__(self) -> None:
        self.counts: list[tuple[int, int]] = []
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        before = cloned_groups(gm)
        ft.reinplace_compiler(gm, example_inputs)
        self.counts.append((before, cloned_groups(gm)))
        self.graphs.append(gm)
        return nop(gm, example_inputs)


def assert_same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Bit-for-bit equal: values (NaN where NaN), shape, dtype, device."""
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


class RecordingMode(TorchDispatchMode):
    """A user's mode: records every op it sees and runs it (HOPs are not its business)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.seen.append(func)
        return func(*args, **(kwargs or {}))
