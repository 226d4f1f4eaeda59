"""bench_launch.py's CPU modes run to the end and print every row (the GPU figures in the READMEs
come from the same code with ``--gpu``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_ROWS = {
    "--eager": ["wrap_triton(k)[grid](...) per call", "wrap_triton(k).run(..., grid=)", "heuristics"],
    "--one": ["in place", "out (empty_like)", "ft+rp - aot-rest+raw", "site - k.run"],
    "--split": ["ft+rp", "aot-rest+raw", "eager raw", "pre", "post"],
}


@pytest.mark.parametrize("mode", sorted(_ROWS))
def test_bench_launch_mode_runs(mode: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "FT_TEST_DEVICE")}
    out = subprocess.run(
        [sys.executable, "benchmarks/bench_launch.py", mode],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "CPU host figures" in out.stdout
    for row in _ROWS[mode]:
        assert row in out.stdout, (row, out.stdout[-2000:])
