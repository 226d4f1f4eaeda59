"""Dispatch modes that do not trace: a wrapped launch runs under them exactly as a raw launch does.

A raw launch never reaches the dispatcher, so a flop counter, a profiler, a user's TorchDispatchMode
or activation checkpointing never sees it (Note [modes that do not trace] in hops.py). Each test
runs the raw kernels eagerly under the mode and compares, bit for bit, with the wrapped launch
eagerly and with traced graphs replayed under the same mode.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
from torch.utils.flop_counter import FlopCounterMode

import functional_triton as ft
from tests.harness import compare, compile_mode, raw, run_once
from tests.helpers import RecordingMode
from tests.kernels import add_kernel, add_one_inplace


class DecliningMode(TorchDispatchMode):
    """Takes every HOP in __torch_dispatch__ and answers NotImplemented for them."""

    supports_higher_order_operators = True

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if isinstance(func, torch._ops.HigherOrderOperator):
            return NotImplemented
        return func(*args, **(kwargs or {}))


class HopLoggingMode(RecordingMode):
    """Takes every HOP too, logs it and runs it through ``func``."""

    supports_higher_order_operators = True


MODES: dict[str, Callable[[], TorchDispatchMode | FlopCounterMode | torch.profiler.profile]] = {
    "flop_counter": lambda: FlopCounterMode(display=False),
    # acc_events: torch 2.11 on CUDA warns at start that events are cleared per cycle otherwise
    "profiler": functools.partial(torch.profiler.profile, acc_events=True),
    "user_mode": RecordingMode,
    "declining_mode": DecliningMode,
    "hop_logging_mode": HopLoggingMode,
}


def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    out = torch.empty_like(x)
    wrap(add_kernel)[(1,)](x, y, out, 8, BLOCK=8)
    wrap(add_one_inplace)[(1,)](x, 8, BLOCK=8)
    return (out, x * 2)


def make_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.arange(8.0), torch.full((8,), 0.5))


def _under(make_mode: Callable[[], Any], call: Callable[..., Any]) -> Callable[..., Any]:
    def run(*inputs: Any) -> Any:
        with make_mode():
            return call(*inputs)

    return run


@pytest.mark.parametrize("mode_name", MODES)
def test_eager_launch_under_a_mode_matches_the_raw_launch(mode_name: str) -> None:
    make_mode = MODES[mode_name]
    expected = run_once(_under(make_mode, functools.partial(prog, raw)), make_inputs, True)
    actual = run_once(_under(make_mode, functools.partial(prog, ft.wrap_triton)), make_inputs, True)
    compare(actual, expected, f"eager under {mode_name}")


def test_profiler_records_the_eager_wrapped_launch_as_it_records_the_raw_one() -> None:
    """The profiler sees the same events, as many times each, for both: the wrapped launch adds none."""

    def recorded(wrap: Any) -> Counter[str]:
        inputs = make_inputs()
        with torch.profiler.profile(acc_events=True) as profiler:
            prog(wrap, *inputs)
        return Counter(event.name for event in profiler.events())

    raw_events, wrapped_events = recorded(raw), recorded(ft.wrap_triton)
    assert wrapped_events == raw_events
    assert not [name for name in wrapped_events if "triton_kernel_wrapper" in name], wrapped_events


@pytest.mark.parametrize(
    "graph_mode", ["make_fx", "functionalize", "aot_function", "reinplace", "reinplace_keep"]
)
@pytest.mark.parametrize("mode_name", MODES)
def test_replayed_graph_under_a_mode_matches_the_raw_launch(mode_name: str, graph_mode: str) -> None:
    make_mode = MODES[mode_name]
    expected = run_once(_under(make_mode, functools.partial(prog, raw)), make_inputs, True)
    with torch.no_grad():
        compiled = compile_mode(graph_mode, prog, make_inputs())
    actual = run_once(_under(make_mode, compiled), make_inputs, True)
    compare(actual, expected, f"{graph_mode} under {mode_name}", check_aliases=graph_mode != "functionalize")


def test_a_mode_that_takes_hops_sees_the_launch_and_runs_it() -> None:
    x, y = make_inputs()
    mode = HopLoggingMode()
    with mode:
        prog(ft.wrap_triton, x, y)
    assert ft.triton_kernel_wrapper_mutation in mode.seen
    torch.testing.assert_close(x, torch.arange(8.0) + 1, rtol=0, atol=0)


def test_tracing_inside_a_user_mode_records_the_launch() -> None:
    with RecordingMode():
        gm = compile_mode("functionalize", prog, make_inputs())
    assert isinstance(gm, torch.fx.GraphModule)
    targets = {n.target for n in gm.graph.nodes}
    assert ft.triton_kernel_wrapper_functional in targets
    compare(
        run_once(gm, make_inputs, True),
        run_once(functools.partial(prog, raw), make_inputs, True),
        "replay",
        check_aliases=False,
    )


def _checkpointed(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    t = x.sin()
    out = torch.empty_like(t)
    wrap(add_kernel)[(1,)](t, t, out, 8, BLOCK=8)  # opaque: its output is recomputed in backward
    return out * x


def _save_sin_only(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    return (
        CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.sin.default else CheckpointPolicy.PREFER_RECOMPUTE
    )


CHECKPOINTS: dict[str, dict[str, Any]] = {
    "selective": {"context_fn": functools.partial(create_selective_checkpoint_contexts, _save_sin_only)},
    "debug": {"debug": True},
}


@pytest.mark.parametrize("kind", CHECKPOINTS)
def test_launch_under_activation_checkpointing_matches_the_raw_launch(kind: str) -> None:
    def run(wrap: Any) -> dict[str, Any]:
        def call(x: torch.Tensor) -> torch.Tensor:
            return checkpoint(
                functools.partial(_checkpointed, wrap), x, use_reentrant=False, **CHECKPOINTS[kind]
            )

        return run_once(call, lambda: (torch.arange(8.0, requires_grad=True),), False)

    compare(run(ft.wrap_triton), run(raw), f"checkpoint ({kind})")
