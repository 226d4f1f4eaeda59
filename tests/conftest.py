"""Test configuration: interpreter on CPU, Hypothesis profiles, the `gpu` marker."""

import os

# The interpreter must be chosen before triton is imported anywhere.
if os.environ.get("FT_TEST_DEVICE", "cpu") == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, Phase, settings  # noqa: E402

# On the GPU machine (FT_TEST_DEVICE=cuda) every suite runs on CUDA tensors unchanged:
# factory functions in the tests allocate on the default device.
if os.environ.get("FT_TEST_DEVICE", "cpu") != "cpu":
    torch.set_default_device(os.environ["FT_TEST_DEVICE"])

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# FT_THOROUGH_EXAMPLES splits a thorough run into shards (each with its own --hypothesis-seed).
# FT_NO_SHRINK=1 reports the first failing program as drawn (a time-limited GPU run cannot afford
# Hypothesis' minutes of shrinking; the report is then longer, not less exact).
settings.register_profile(
    "thorough",
    max_examples=int(os.environ.get("FT_THOROUGH_EXAMPLES", "10000")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[p for p in Phase if not (os.environ.get("FT_NO_SHRINK") and p is Phase.shrink)],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device (run on the GPU machine: pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def device() -> str:
    """Where test tensors live: cpu under the interpreter, cuda on the GPU machine."""
    return os.environ.get("FT_TEST_DEVICE", "cpu")
