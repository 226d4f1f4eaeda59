"""reinplace_compiler's graphs free each input at its last use (Note [freeing graph inputs])."""

from __future__ import annotations

import weakref
from typing import Any

import torch
from functorch.compile import aot_function, make_boxed_func
from torch import fx

import functional_triton as ft
from functional_triton.passes.boxed import boxed_freeing_inputs

_SEEN: list[bool] = []
_REFS: list[weakref.ref[torch.Tensor]] = []


def _first_input_is_alive(t: torch.Tensor) -> torch.Tensor:
    _SEEN.append(_REFS[0]() is not None)
    return t


def _graph() -> fx.GraphModule:
    g = fx.Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    first = g.call_function(torch.add, (a, 1))
    probed = g.call_function(_first_input_is_alive, (first,))
    g.output(g.call_function(torch.mul, (probed, b)))
    return fx.GraphModule(torch.nn.Module(), g)


def _input_alive_after_last_use(compiled_of: Any) -> bool:
    _SEEN.clear()
    a, b = torch.ones(3), torch.full((3,), 2.0)
    _REFS[:] = [weakref.ref(a)]
    fn = compiled_of(_graph())
    args = [a, b]
    del a
    out = fn(args)
    assert torch.equal(out, torch.full((3,), 4.0))
    return _SEEN[0]


def test_an_input_is_freed_after_its_last_use() -> None:
    assert not _input_alive_after_last_use(boxed_freeing_inputs)


def test_the_probe_sees_inputs_kept_alive_by_unpacking() -> None:
    """The probe can fail: ``make_boxed_func`` keeps every input until the graph returns."""
    assert _input_alive_after_last_use(lambda gm: make_boxed_func(gm.forward))


def test_reinplace_compiler_frees_saved_tensors_in_backward() -> None:
    """A backward graph drops a saved activation once used, as eager autograd does."""
    seen: list[bool] = []
    x, w = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    refs: list[weakref.ref[torch.Tensor]] = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            return g

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        a = (x * w).sin()  # saves x * w for sin's backward
        return Probe.apply(a * 3).sum()

    def bw(gm: fx.GraphModule, example_inputs: Any) -> Any:
        run = ft.reinplace_compiler(gm, example_inputs)

        def probing(args: list[Any]) -> Any:
            # saved activations: not the leaves (the caller holds those), not the 0-d tangent
            refs[:] = [weakref.ref(t) for t in args if t is not x and t is not w and t.dim() > 0]
            out = run(args)
            seen.append(any(r() is not None for r in refs))
            return out

        probing._boxed_call = True  # type: ignore[attr-defined]
        return probing

    compiled = aot_function(f, fw_compiler=ft.reinplace_compiler, bw_compiler=bw)
    compiled(x, w).backward()
    traced = (x.grad, w.grad)
    x.grad = w.grad = None
    f(x, w).backward()
    eager = (x.grad, w.grad)
    assert all(a is not None and b is not None and torch.equal(a, b) for a, b in zip(traced, eager))
    assert len(refs) > 0, "the probe found no saved activation"
    assert seen == [False], "the backward graph kept its saved tensors alive"
