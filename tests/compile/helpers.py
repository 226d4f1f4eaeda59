"""Compile-test scaffolding: torch.compile runs compared with eager raw launches, graph capture."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

import functional_triton as ft
from tests.harness import compare, raw, run_once


def check_compiled(
    fn: Callable[..., Any],
    make_inputs: Callable[[], Sequence[Any]],
    *,
    backends: Sequence[Any] = ("eager", "aot_eager"),
    no_grad: Sequence[bool] = (True, False),
    **compile_kwargs: Any,
) -> None:
    """``fn(wrap, *inputs)`` under torch.compile(fullgraph=True) == eager with raw kernels, bit for bit."""
    for ng in no_grad:
        expected = run_once(functools.partial(fn, raw), make_inputs, ng)
        for backend in backends:
            torch._dynamo.reset()
            compiled = torch.compile(
                functools.partial(fn, ft.wrap_triton), backend=backend, fullgraph=True, **compile_kwargs
            )
            compare(run_once(compiled, make_inputs, ng), expected, f"{backend} (no_grad={ng})")


class GraphRecorder:
    """A backend that keeps Dynamo's graph, and an AOTAutograd one that keeps the forward graph."""

    def __init__(self) -> None:
        self.dynamo: list[torch.fx.GraphModule] = []
        self.aot: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        self.dynamo.append(gm)
        return gm.forward

    def aot_backend(self) -> Any:
        def keep(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
            self.aot.append(gm)
            return make_boxed_func(gm.forward)

        return aot_autograd(fw_compiler=keep, bw_compiler=keep)


def targets(gm: torch.fx.GraphModule) -> list[Any]:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]
