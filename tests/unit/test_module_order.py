"""The package's modules import one way: each imports only modules listed before it here.

Every ``from .x import`` in a module counts, at its top or inside a function (a deferred
import is still a dependency). The README's module map lists the same order.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "functional_triton"
PREFIX = "functional_triton."

# Lowest first: version probes and plain data, the aliasing rules, kernel facts and the
# analysis, the node description, the operators and their rules, the passes, the launch path,
# the torch.compile integration, the public package.
ORDER = [
    "_compat",
    "_logging",
    "_native",
    "side_table",
    "tuples",
    "descriptors",
    "grid_watch",
    "aliasing",
    "autograd",
    "bounds",
    "portable",
    "launch_spec",
    "ttir",
    "autotune_hooks",
    "mutation",
    "node",
    "dense",
    "hops",
    "transforms",
    "fake_rules",
    "functionalize",
    "passes.boxed",
    "passes.forward_copies",
    "passes.torch_ops",
    "passes.views",
    "passes.reinplace",
    "registrations",
    "inductor",
    "kernel",
    "dynamo",
    "demo",
    "passes",
    "__init__",
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = rel.parts
    if parts[-1] == "__init__" and len(parts) > 1:
        return ".".join(parts[:-1])
    return ".".join(parts)


def _imports(path: Path, name: str) -> set[str]:
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    if name == "__init__":
        package = []
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        # Absolute imports of the package count too: functional_triton.x is x.
        if isinstance(node, ast.Import):
            found.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith(PREFIX))
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(PREFIX):
            found.add(node.module.split(".", 1)[1])  # type: ignore[union-attr]
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            if node.module:
                found.add(".".join([*base, node.module]))
            else:
                found.update(".".join([*base, alias.name]) for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p, _module_name(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_is_placed() -> None:
    assert sorted(_graph()) == sorted(ORDER)


@pytest.mark.parametrize("module", ORDER)
def test_imports_point_down(module: str) -> None:
    rank = {m: i for i, m in enumerate(ORDER)}
    upward = sorted(m for m in _graph()[module] if m in rank and rank[m] >= rank[module])
    assert not upward, f"{module} imports {upward}, which come after it"


def test_the_check_sees_deferred_imports(tmp_path: Path) -> None:
    """It can fail: a deferred upward import is found."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from .kernel import TritonKernel\n")
    assert _imports(probe, "probe") == {"kernel"}


def test_the_check_sees_absolute_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import functional_triton.kernel\nfrom functional_triton.dynamo import x\n")
    assert _imports(probe, "probe") == {"kernel", "dynamo"}


def test_readme_module_map_lists_this_order() -> None:
    """The README's module map names the modules in ORDER's order (the package itself aside)."""
    readme = (PACKAGE.parent / "README.md").read_text()
    table = readme.split("## Module map", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    named = [m.replace("/", ".") for row in rows for m in re.findall(r"`([\w/]+)\.py`", row.split("|")[1])]
    assert named == [m for m in ORDER if m not in ("passes", "__init__", "demo")]
