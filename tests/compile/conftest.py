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


@pytest.fixture(autouse=True)
def _release_compiled_state():
    """After each compile test: drop what torch.compile, Inductor and export kept for the process.

    Lowered Inductor nodes and resolved export references keep side-table entries alive for
    the life of the process (Note [Inductor lowering], Note [portable references]); other
    suites count side-table entries, so each test here gives them back once its compiled
    functions are gone.
    """
    yield
    import torch

    from functional_triton import inductor, portable

    torch._dynamo.reset()
    with inductor._lowered_lock:
        inductor._lowered[:] = [None] * len(inductor._lowered)  # type: ignore[list-item]
    with portable._lock:
        portable._made.clear()
        portable._resolved.clear()
