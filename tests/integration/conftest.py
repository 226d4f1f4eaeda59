"""Liger-Kernel integration tests: skipped, with the reason, where liger_kernel is not installed."""

import pytest

pytest.importorskip(
    "liger_kernel", reason="liger-kernel is not installed (.ci/run installs liger-kernel==0.8.5)"
)
