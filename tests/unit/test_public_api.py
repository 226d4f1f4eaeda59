"""The public surface: ft.__all__ is exactly API.md's names, and each name is what API.md says."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch
from torch._ops import HigherOrderOperator

import functional_triton as ft

REPO_ROOT = Path(__file__).resolve().parents[2]

# The public names API.md fixes, checked in: the tests below compare the package with this set
# always, and this set with API.md wherever API.md can be found.
CONTRACT_NAMES = {
    "wrap_triton",
    "triton_kernel_wrapper_mutation",
    "triton_kernel_wrapper_functional",
    "reinplace_compiler",
    "AnalysisWarning",
}


def find_api_md() -> Path | None:
    """API.md: $FT_API_MD, else shared/API.md in the nearest folder above the checkout that has one
    (the project lays shared/ beside its checkouts; a worktree may sit one level deeper)."""
    candidates = [Path(os.environ["FT_API_MD"])] if os.environ.get("FT_API_MD") else []
    candidates += [folder / "shared" / "API.md" for folder in REPO_ROOT.parents]
    return next((p for p in candidates if p.is_file()), None)


def api_md_names(path: Path) -> set[str]:
    """Every `ft.<name>` the document mentions."""
    return set(re.findall(r"\bft\.([A-Za-z_]\w*)", path.read_text()))


def test_api_md_parses_to_the_contract() -> None:
    path = find_api_md()
    if path is None:
        pytest.skip(
            f"API.md not found (set FT_API_MD, or lay shared/ in a folder above {REPO_ROOT}); "
            "the package is still checked against the checked-in CONTRACT_NAMES"
        )
    assert api_md_names(path) == CONTRACT_NAMES, f"API.md ({path}) and CONTRACT_NAMES differ"


def test_api_md_names_are_read_from_the_document(tmp_path: Path) -> None:
    doc = tmp_path / "API.md"
    doc.write_text("`ft.wrap_triton(k)` and ft.reinplace_compiler; not draft.ft_thing nor ft.\n")
    assert api_md_names(doc) == {"wrap_triton", "reinplace_compiler"}


def test_all_is_the_contract() -> None:
    assert sorted(ft.__all__) == sorted(CONTRACT_NAMES)
    assert len(ft.__all__) == len(set(ft.__all__))


def test_every_public_name_exists() -> None:
    missing = [name for name in CONTRACT_NAMES if not hasattr(ft, name)]
    assert missing == []


def test_star_import_gives_exactly_the_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from functional_triton import *", namespace)  # noqa: S102 - the point of the test
    assert set(namespace) - {"__builtins__"} == CONTRACT_NAMES


def test_version_is_a_string() -> None:
    assert isinstance(ft.__version__, str)
    assert re.match(r"\d+(\.\d+)*", ft.__version__)


def test_hops_are_higher_order_operators() -> None:
    assert isinstance(ft.triton_kernel_wrapper_mutation, HigherOrderOperator)
    assert isinstance(ft.triton_kernel_wrapper_functional, HigherOrderOperator)
    assert type(ft.triton_kernel_wrapper_mutation) is not type(ft.triton_kernel_wrapper_functional)


def test_hops_are_reachable_under_torch_ops_higher_order() -> None:
    """Graph code prints them as torch.ops.higher_order.<name>: that path must resolve to them."""
    mut = getattr(torch.ops.higher_order, ft.triton_kernel_wrapper_mutation.__name__)
    fun = getattr(torch.ops.higher_order, ft.triton_kernel_wrapper_functional.__name__)
    assert mut is ft.triton_kernel_wrapper_mutation
    assert fun is ft.triton_kernel_wrapper_functional


def test_wrap_triton_is_callable_with_docstring() -> None:
    import inspect
    import pickle

    assert callable(ft.wrap_triton)
    assert ft.wrap_triton.__doc__ and "Raises" in ft.wrap_triton.__doc__
    # a Python function or, where the native launch path is built, a C one: named alike either way
    assert (ft.wrap_triton.__name__, ft.wrap_triton.__qualname__) == ("wrap_triton", "wrap_triton")
    assert list(inspect.signature(ft.wrap_triton).parameters) == ["kernel"]
    assert pickle.loads(pickle.dumps(ft.wrap_triton)) is ft.wrap_triton


def test_reinplace_compiler_is_callable() -> None:
    assert callable(getattr(ft, "reinplace_compiler", None))


def test_reinplace_compiler_takes_inner_keyword() -> None:
    import inspect

    params = inspect.signature(ft.reinplace_compiler).parameters
    assert list(params)[:2] == ["gm", "example_inputs"]
    assert "inner" in params and params["inner"].kind in (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )


def test_analysis_warning_is_public_and_a_user_warning() -> None:
    from functional_triton.functionalize import AnalysisWarning

    assert ft.AnalysisWarning is AnalysisWarning
    assert issubclass(ft.AnalysisWarning, UserWarning)
