"""torch.compile tests: warnings torch itself raises while compiling (pytest turns warnings into errors)."""

import pytest

_TORCH_WARNINGS = (
    # torch 2.13's Dynamo instantiates autograd.Function classes itself (a pure-torch Function too).
    "ignore:<class 'torch.autograd.function.Function'> should not be instantiated:DeprecationWarning",
    # torch 2.13's Inductor touches torch.jit.script_method while compiling.
    "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning",
    # torch 2.13's export (run_decompositions) still uses pytree's LeafSpec.
    r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/compile/" in item.nodeid.replace("\\", "/"):
            for rule in _TORCH_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(rule))
