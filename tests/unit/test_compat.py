"""_compat.py: each torch/triton probe answers what the installed versions do."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode
from torch.utils._python_dispatch import TorchDispatchMode

import functional_triton as ft
from functional_triton import _compat


@pytest.mark.parametrize(
    ("text", "release"),
    [("3.9.0", (3, 9, 0)), ("3.6.0+git1234abcd", (3, 6, 0)), ("2.13.0a0", (2, 13, 0)), ("nightly", (0,))],
)
def test_release_parses_the_numeric_prefix(text: str, release: tuple[int, ...]) -> None:
    assert _compat._release(text) == release


def test_triton_version_is_the_installed_one() -> None:
    assert _compat.TRITON_VERSION == _compat._release(triton.__version__)
    assert _compat.TRITON_VERSION >= (3, 6)


def test_interpreter_enabled_follows_the_environment() -> None:
    # conftest sets TRITON_INTERPRET=1 on the CPU; the GPU machine runs compiled kernels.
    assert _compat.interpreter_enabled() == (os.environ.get("TRITON_INTERPRET") == "1")


def test_interpreter_patched_objects_are_the_language_modules_and_classes() -> None:
    objects = _compat.interpreter_patched_objects()
    assert tl in objects and tl.core in objects and tl.core.tensor in objects
    assert all(obj is not None for obj in objects)


def test_config_kwargs_include_the_launch_options() -> None:
    config = triton.Config({"BLOCK": 32}, num_warps=2, num_stages=3)
    bound = _compat.config_kwargs(config)
    assert bound["BLOCK"] == 32
    assert bound["num_warps"] == 2 and bound["num_stages"] == 3


class _Recording(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def test_current_and_popped_dispatch_mode() -> None:
    assert _compat.current_dispatch_mode() is None
    with _Recording() as mode:
        assert _compat.current_dispatch_mode() is mode
        with _compat.pop_dispatch_mode() as popped:
            assert popped is mode
            assert _compat.current_dispatch_mode() is None
        assert _compat.current_dispatch_mode() is mode
    assert _compat.current_dispatch_mode() is None


def test_torch_dispatch_mode_is_the_base_of_make_fx_modes() -> None:
    assert _compat.TorchDispatchMode is TorchDispatchMode
    assert issubclass(ProxyTorchDispatchMode, _compat.TorchDispatchMode)


def test_mode_rule_types_lists_the_operators_python_rules() -> None:
    for op in (ft.triton_kernel_wrapper_mutation, ft.triton_kernel_wrapper_functional):
        types = _compat.mode_rule_types(op)
        assert types is not None and ProxyTorchDispatchMode in types
        assert _Recording not in types

    class NoTable:
        pass

    assert _compat.mode_rule_types(NoTable()) is None


def test_fx_sees_side_effect_of_impure_ops_only() -> None:
    assert _compat.fx_sees_side_effect(torch.ops.aten._assert_async.msg)
    assert not _compat.fx_sees_side_effect(torch.ops.aten.add.Tensor)


def test_functorch_transforms_and_levels() -> None:
    transforms = _compat.functorch_transforms()
    assert {"vmap", "grad", "jvp"} <= set(transforms)
    x = torch.zeros(3)
    assert _compat.functorch_level(x) == -1
    levels: list[int] = []

    def record(t: torch.Tensor) -> torch.Tensor:
        levels.append(_compat.functorch_level(t))
        return t

    torch.func.vmap(record)(torch.zeros(2, 3))
    (level,) = levels
    assert level >= 1


def test_tensor_descriptor_type_is_tritons() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    assert _compat.TENSOR_DESCRIPTOR_TYPE is TensorDescriptor


def test_interpreter_failure_note_only_for_the_known_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    unrelated = TypeError("something else")
    _compat.explain_interpreter_failure(unrelated)
    assert not getattr(unrelated, "__notes__", [])

    known = TypeError(_compat._INTERPRETER_LOOP_ERROR)
    monkeypatch.setattr(_compat, "INTERPRETER_LOOPS_NEED_OLD_NUMPY", False)
    _compat.explain_interpreter_failure(known)
    assert not getattr(known, "__notes__", [])
    monkeypatch.setattr(_compat, "INTERPRETER_LOOPS_NEED_OLD_NUMPY", True)
    _compat.explain_interpreter_failure(known)
    (note,) = known.__notes__
    assert "numpy<2.4" in note and triton.__version__ in note


def test_backward_leaf_write_probe_is_cached_and_matches_torch() -> None:
    first = _compat.backward_writes_to_leaf_inputs_supported()
    assert _compat.backward_writes_to_leaf_inputs_supported() is first
    # torch 2.13 replays a backward mutation under no_grad (pytorch#178622); torch 2.11 does not.
    if _compat._release(torch.__version__) >= (2, 13):
        assert first


def test_backward_leaf_copy_back_probe_runs_in_its_own_thread_during_a_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The rule asks while a trace is in progress: the probe must not see the caller's modes.
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setattr(_compat, "_BACKWARD_LEAF_WRITES", [])
    with FakeTensorMode():
        fails = _compat.backward_leaf_copy_back_fails()
    assert fails is (not _compat.backward_writes_to_leaf_inputs_supported())
    if _compat._release(torch.__version__) >= (2, 13):
        assert not fails
