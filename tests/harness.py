"""check_matches_eager / check_compiled: run a program eagerly with raw kernels and traced or compiled.

A program is ``fn(wrap, *inputs)``: it launches kernels as ``wrap(kernel)[grid](...)``.
The eager reference passes ``wrap = raw`` (the kernel itself, no functional_triton at
all); traced runs pass ``functional_triton.wrap_triton``. ``make_inputs`` is called once
per run, so aliasing between inputs (views, the same tensor twice) is the same in
every run. Everything is compared bit for bit.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from functorch.compile import aot_function, aot_module
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from tests.helpers import nop

Program = Callable[..., Any]
ALL_MODES = (
    "aot_function",
    "reinplace",
    "reinplace_keep",
    "aot_module",
    "functionalize",
    "functionalize_views",
    "make_fx",
    "symbolic",
)


def raw(kernel: Any) -> Any:
    """The eager reference's `wrap`: no wrapper, the kernel itself."""
    return kernel


class _Module(torch.nn.Module):
    def __init__(self, fn: Program) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *inputs: Any) -> Any:
        return self.fn(ft.wrap_triton, *inputs)


def compile_mode(mode: str, fn: Program, example: Sequence[Any], **aot_kwargs: Any) -> Callable[..., Any]:
    """``fn`` traced under ``mode``, as a callable of the inputs."""
    traced = functools.partial(fn, ft.wrap_triton)
    compilers = {
        "fw_compiler": aot_kwargs.pop("fw_compiler", nop),
        "bw_compiler": aot_kwargs.pop("bw_compiler", nop),
    }
    if mode == "aot_function":
        return aot_function(traced, **compilers, **aot_kwargs)
    if mode in ("reinplace", "reinplace_keep"):
        compilers = {"fw_compiler": ft.reinplace_compiler, "bw_compiler": ft.reinplace_compiler}
        aot_kwargs["keep_inference_input_mutations"] = mode == "reinplace_keep"
        return aot_function(traced, **compilers, **aot_kwargs)
    if mode == "aot_module":
        return aot_module(_Module(fn), **compilers, **aot_kwargs)
    if mode == "functionalize":
        gm = make_fx(torch.func.functionalize(traced, remove="mutations"))(*example)
    elif mode == "functionalize_views":
        gm = make_fx(torch.func.functionalize(traced, remove="mutations_and_views"))(*example)
    elif mode == "make_fx":
        gm = make_fx(traced)(*example)
    elif mode == "symbolic":
        gm = make_fx(torch.func.functionalize(traced), tracing_mode="symbolic")(*example)
    else:
        raise ValueError(f"unknown mode {mode!r}")
    # As any consumer of the graph may: nothing eager did may depend on a node FX thinks is dead.
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _tensors(tree: Any) -> list[Any]:
    return list(torch.utils._pytree.tree_leaves(tree))


def _assert_equal(actual: Any, expected: Any, what: str) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual)}"
        assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
        assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
        torch.testing.assert_close(
            actual.detach(), expected.detach(), rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{what}: {m}"
        )
    else:
        assert actual == expected, f"{what}: {actual!r} != {expected!r}"


def _storage(t: torch.Tensor) -> int:
    """Which storage: its address, or for an empty one (address 0 or shared) the storage itself."""
    storage = t.untyped_storage()
    return storage.data_ptr() if storage.nbytes() else storage._cdata


def _alias_map(outputs: list[Any], inputs: Sequence[Any]) -> list[tuple[int, ...]]:
    """For each tensor output: the indices of the inputs it shares storage with."""
    result: list[tuple[int, ...]] = []
    for o in outputs:
        if not isinstance(o, torch.Tensor):
            result.append(())
            continue
        result.append(
            tuple(
                i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and _storage(x) == _storage(o)
            )
        )
    return result


def _loss(outputs: Iterable[Any]) -> torch.Tensor | None:
    """A weighted sum of every output that requires grad (weights tell elements apart)."""
    terms = []
    for o in outputs:
        if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point():
            w = (torch.arange(o.numel(), device=o.device, dtype=o.dtype) % 5 + 1).reshape(o.shape)
            terms.append((o * w).sum())
    return torch.stack(terms).sum() if terms else None


def _leaves(inputs: Sequence[Any]) -> list[torch.Tensor]:
    return [x for x in inputs if isinstance(x, torch.Tensor) and x.is_leaf and x.requires_grad]


def run_once(
    call: Callable[..., Any], make_inputs: Callable[[], Sequence[Any]], no_grad: bool
) -> dict[str, Any]:
    """Call on fresh inputs; collect outputs, inputs after, grads, requires_grad, aliasing."""
    inputs = tuple(make_inputs())
    ctx = torch.no_grad() if no_grad else contextlib.nullcontext()
    with ctx:
        out = call(*inputs)
    outputs = _tensors(out)
    grads: list[Any] = []
    loss = None if no_grad else _loss(outputs)
    if loss is not None:
        loss.backward()
    grads = [x.grad for x in _leaves(inputs)]
    return {
        "outputs": outputs,
        "inputs": list(inputs),
        "grads": grads,
        "requires_grad": [getattr(o, "requires_grad", None) for o in outputs],
        "aliases": _alias_map(outputs, inputs),
        "output_aliases": _alias_map(outputs, outputs),
    }


AOT_MODES = ("aot_function", "aot_module", "reinplace", "reinplace_keep")
# functionalize() returns fresh tensors for outputs that alias inputs (torch's own
# semantics: the graph's outputs never alias its inputs); AOTAutograd regenerates them.
FRESH_OUTPUT_MODES = ("functionalize", "functionalize_views", "symbolic")
# Modes in which distinct arguments that share storage are supported (not views-as-copies).
ALIASING_MODES = ("aot_function", "aot_module", "functionalize", "make_fx", "reinplace", "reinplace_keep")


def compare(
    actual: dict[str, Any], expected: dict[str, Any], label: str, *, check_aliases: bool = True
) -> None:
    assert len(actual["outputs"]) == len(expected["outputs"]), f"{label}: number of outputs"
    for i, (a, e) in enumerate(zip(actual["outputs"], expected["outputs"])):
        _assert_equal(a, e, f"{label}: output {i}")
    for i, (a, e) in enumerate(zip(actual["inputs"], expected["inputs"])):
        _assert_equal(a, e, f"{label}: input {i} after the call")
    assert len(actual["grads"]) == len(expected["grads"]), f"{label}: number of leaves"
    for i, (a, e) in enumerate(zip(actual["grads"], expected["grads"])):
        assert (a is None) == (e is None), f"{label}: leaf {i} .grad is {a} but eager has {e}"
        if e is not None:
            _assert_equal(a, e, f"{label}: leaf {i} .grad")
    assert actual["requires_grad"] == expected["requires_grad"], f"{label}: requires_grad of outputs"
    if check_aliases:
        assert actual["aliases"] == expected["aliases"], f"{label}: which outputs alias which inputs"
        assert actual["output_aliases"] == expected["output_aliases"], f"{label}: aliasing among outputs"


def _needs_grad(make_inputs: Callable[[], Sequence[Any]]) -> bool:
    return any(isinstance(x, torch.Tensor) and x.requires_grad for x in make_inputs())


def check_matches_eager(
    fn: Program,
    make_inputs: Callable[[], Sequence[Any]],
    *,
    modes: Sequence[str] = (
        "aot_function",
        "aot_module",
        "functionalize",
        "functionalize_views",
        "make_fx",
        "reinplace",
        "reinplace_keep",
    ),
    no_grad: Sequence[bool] = (False, True),
    **aot_kwargs: Any,
) -> None:
    """Run ``fn`` eagerly (raw kernels) and under each mode; compare everything bit for bit.

    Outputs, every input after the call, each leaf's ``.grad`` (None included),
    ``requires_grad`` of each output, and which outputs share storage with which inputs
    and with each other. make_fx-based modes are plain graphs with no autograd
    semantics of their own, so they are checked under ``no_grad`` only.
    """
    for ng in no_grad:
        expected = run_once(functools.partial(fn, raw), make_inputs, ng)
        for mode in modes:
            if mode not in AOT_MODES and not ng and _needs_grad(make_inputs):
                continue
            label = f"{mode} (no_grad={ng})"
            ctx = torch.no_grad() if ng else contextlib.nullcontext()
            with ctx:
                call = compile_mode(mode, fn, tuple(make_inputs()), **dict(aot_kwargs))
            compare(
                run_once(call, make_inputs, ng), expected, label, check_aliases=mode not in FRESH_OUTPUT_MODES
            )


def check_compiled(
    fn: Program,
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
