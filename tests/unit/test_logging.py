"""Logging: the package's logger, its FUNCTIONAL_TRITON_LOGS switch, and the debug records it gives."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any

import pytest
import torch
from functorch.compile import aot_function, make_boxed_func

import functional_triton as ft
from functional_triton import _logging
from tests import kernels as K


def _compile(fn: Any) -> Any:
    def nop(gm: torch.fx.GraphModule, _: Any) -> Any:
        return make_boxed_func(gm.forward)

    return aot_function(fn, fw_compiler=ft.reinplace_compiler, bw_compiler=nop)


def writes_input(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    ft.wrap_triton(K.add_one_inplace)[(1,)](x, x.numel(), BLOCK=16)
    return x * w


def writes_intermediate(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    ft.wrap_triton(K.add_one_inplace)[(1,)](y, y.numel(), BLOCK=16)
    return y


def test_module_loggers_are_children_of_the_package_logger() -> None:
    import functional_triton.functionalize as functionalize
    import functional_triton.passes.reinplace as reinplace

    package = logging.getLogger("functional_triton")
    for module in (functionalize, reinplace):
        logger = module.log
        while logger.parent is not None and logger is not package:
            logger = logger.parent
        assert logger is package, module.log.name
    assert reinplace.log.name == "functional_triton.passes.reinplace"


def test_reinplace_logs_why_a_clone_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="functional_triton"), torch.no_grad():
        _compile(writes_intermediate)(torch.arange(16.0))
    messages = [r.getMessage() for r in caplog.records if r.name == "functional_triton.passes.reinplace"]
    assert any("clone of ['x_ptr'] dropped" in m for m in messages), messages
    grouped = [r.getMessage() for r in caplog.records if r.name == "functional_triton.functionalize"]
    assert any("clones group 0 ['x_ptr']" in m for m in grouped), grouped


def test_reinplace_logs_why_a_clone_is_kept(caplog: pytest.LogCaptureFixture) -> None:
    # A training forward's written input: AOTAutograd copies the new value back after the graph.
    w = torch.ones(16, requires_grad=True)
    with caplog.at_level(logging.DEBUG, logger="functional_triton"):
        _compile(writes_input)(torch.arange(16.0), w).sum().backward()
    messages = [r.getMessage() for r in caplog.records if r.name == "functional_triton.passes.reinplace"]
    assert any("clone of ['x_ptr'] kept: a graph input" in m for m in messages), messages


def test_no_debug_records_at_the_default_level(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="functional_triton"), torch.no_grad():
        _compile(writes_intermediate)(torch.arange(16.0))
    assert not [r for r in caplog.records if r.name.startswith("functional_triton")]


@pytest.mark.parametrize("text, level", [("debug", logging.DEBUG), ("INFO", logging.INFO), ("15", 15)])
def test_levels_of_the_switch(text: str, level: int) -> None:
    assert _logging.level_of(text) == level


def test_a_bad_switch_value_names_the_variable() -> None:
    with pytest.raises(ValueError, match=r"FUNCTIONAL_TRITON_LOGS='loud' is not a logging level"):
        _logging.level_of("loud")


_PROBE = (
    "import logging, functional_triton; "
    "print(logging.getLogger('functional_triton').getEffectiveLevel()); "
    "logging.getLogger('functional_triton.passes.reinplace').debug('probe record')"
)


def _fresh_process(**env_vars: str) -> subprocess.CompletedProcess[str]:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if k != "FUNCTIONAL_TRITON_LOGS"}
    env.update(PYTHONPATH=root, **env_vars)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done


def test_the_environment_switch_sets_the_level_at_import_and_logs_to_stderr() -> None:
    done = _fresh_process(FUNCTIONAL_TRITON_LOGS="debug")
    assert done.stdout.strip() == str(logging.DEBUG)
    assert "probe record" in done.stderr


def test_nothing_below_warning_is_logged_by_default_in_a_fresh_process() -> None:
    done = _fresh_process()
    assert done.stdout.strip() == str(logging.WARNING)
    assert "probe record" not in done.stderr
