"""Portable kernel references: what an exported program's launch nodes hold instead of indices.

Note [portable references]
Side-table indices are process-local (Note [side-table lifetime]), so a program that
``torch.export.save`` writes cannot hold them. While ``torch.compiler.is_exporting()``,
a traced launch's ``kernel_idx`` and ``constant_args_idx`` are strings instead:

- the kernel: ``{"kernel": [module, name, fingerprint], "grid": [...] or null}``, where
  ``name`` is the module-level name bound to the kernel object (for an autotuned kernel,
  the autotuner's name) and the fingerprint hashes the kernel's source and every
  autotune config and heuristic name above it; the grid callable, if any, likewise;
- the constants: their ``repr``, which ``ast.literal_eval`` turns back into the same
  values and types.

Both resolve, when a node first runs or is functionalized, to ordinary side-table
indices: first from this process's own record of the references it made (so a program
exported and run in one process runs the very objects it traced, closures included),
else by importing the module and checking the fingerprint. Objects named by references
made in this process are kept for the life of the process.

What another process cannot find is named early, with the reason:
- ``torch.export.save`` raises for a kernel or grid callable that is not a module-level
  name (defined in a function, a lambda), lives in ``__main__`` (a script, ``python -c``),
  or is no longer what its module binds under that name, and for constants with no
  literal form;
- ``torch.export.load`` raises LookupError for a kernel whose module does not import,
  whose name is gone, or whose source changed since the export (the fingerprint differs).
(Through ``_compat.hook_export_serialization``; where torch lacks those hooks, the same
errors come when a loaded node first runs.)
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import json
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ._compat import hook_export_serialization
from .descriptors import DESCRIPTORS_KEY
from .side_table import TableIndex, kernel_side_table

_made: dict[str, tuple[Any, ...]] = {}  # reference -> the objects it was made from
_resolved: dict[str, TableIndex] = {}
_lock = threading.Lock()


def _layers(obj: Any) -> list[Any]:
    """The kernel object and every autotune / heuristics layer below it."""
    layers = [obj]
    while hasattr(layers[-1], "fn") and type(layers[-1]).__name__ in ("Autotuner", "Heuristics"):
        layers.append(layers[-1].fn)
    return layers


def fingerprint(obj: Any) -> str:
    """A hash of a kernel's (or a function's) source and of its autotune configs / heuristics."""
    parts = []
    for layer in _layers(obj):
        if type(layer).__name__ == "Autotuner":
            parts.append(repr([(sorted(c.kwargs.items()), c.num_warps, c.num_stages) for c in layer.configs]))
        elif type(layer).__name__ == "Heuristics":
            parts.append(repr(sorted(layer.values)))
    fn = getattr(_layers(obj)[-1], "fn", obj)
    try:
        parts.append(inspect.getsource(fn))
    except (OSError, TypeError):
        parts.append(getattr(fn, "__qualname__", repr(fn)))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _module_name(obj: Any) -> list[str]:
    """[module, module-level name bound to obj or its qualified name, fingerprint]."""
    fn = getattr(_layers(obj)[-1], "fn", obj)
    module = getattr(fn, "__module__", None) or "?"
    name = next((n for n, v in vars(sys.modules.get(module, object)).items() if v is obj), None)
    return [module, name or getattr(fn, "__qualname__", repr(fn)), fingerprint(obj)]


def kernel_reference(kernel: Any, grid_fn: Callable[..., Any] | None) -> str:
    """The portable reference of a kernel and its grid callable (Note [portable references])."""
    ref = json.dumps(
        {"kernel": _module_name(kernel), "grid": None if grid_fn is None else _module_name(grid_fn)}
    )
    with _lock:
        _made[ref] = (kernel, grid_fn)
    return ref


def constants_reference(constants: Mapping[str, Any]) -> str:
    """The constants' repr (kept in this process too, for values that have no literal form)."""
    ref = repr(sorted(constants.items()))
    with _lock:
        _made[ref] = (dict(constants),)
    return ref


def _not_module_level(module: str, name: str) -> str | None:
    """Why another process could not import ``name`` from ``module``, or None."""
    if "<locals>" in name or "<lambda>" in name:
        return "was defined inside a function (or is a lambda); define it at module level"
    if module in ("__main__", "?") or module.startswith("<"):
        return (
            f"lives in {module!r} (a script or python -c code), which another process cannot "
            "import; move it into a module"
        )
    return None


def _find(entry: list[str], what: str) -> Any:
    module, name, expected = entry
    problem = _not_module_level(module, name)
    if problem is not None:
        raise RuntimeError(
            f"{what} '{name}' (module {module}) cannot be found after torch.export.load: it {problem}"
        )
    try:
        imported = importlib.import_module(module)
    except Exception as e:  # any failure of the import (ImportError, SyntaxError, the module's own)
        raise RuntimeError(
            f"{what} '{name}' cannot be found after torch.export.load: importing {module} failed "
            f"({type(e).__name__}: {e})"
        ) from None
    try:
        obj = getattr(imported, name)
    except AttributeError as e:
        raise RuntimeError(f"{what} '{name}' cannot be found after torch.export.load: {e}") from None
    if fingerprint(obj) != expected:
        raise RuntimeError(
            f"{what} '{name}' (module {module}) changed since the program was exported "
            f"(fingerprint {fingerprint(obj)}, expected {expected}); export it again"
        )
    return obj


def _resolve_kernel(ref: str) -> TableIndex:
    made = _made.get(ref)
    if made is not None:
        return kernel_side_table.add_kernel(*made)
    entry = json.loads(ref)
    kernel = _find(entry["kernel"], "kernel")
    grid_fn = (
        None if entry["grid"] is None else _find(entry["grid"], f"the grid callable of {entry['kernel'][1]}")
    )
    return kernel_side_table.add_kernel(kernel, grid_fn)


def _resolve_constants(ref: str) -> TableIndex:
    made = _made.get(ref)
    if made is not None:
        return kernel_side_table.add_constants(made[0])
    try:
        items = ast.literal_eval(ref)
    except (ValueError, SyntaxError):
        raise RuntimeError(
            f"the constant arguments {ref} of an exported launch have no literal form and "
            "cannot be loaded in another process"
        ) from None
    return kernel_side_table.add_constants(dict(items))


def resolve(kernel_idx: Any, constant_args_idx: Any) -> tuple[int, int]:
    """Side-table indices for a node's indices or portable references (cached, kept alive)."""
    out = []
    for ref, resolver in ((kernel_idx, _resolve_kernel), (constant_args_idx, _resolve_constants)):
        if not isinstance(ref, str):
            out.append(ref)
            continue
        hit = _resolved.get(ref)
        if hit is None:
            hit = resolver(ref)
            with _lock:
                _resolved[ref] = hit
        out.append(hit)
    return out[0], out[1]


def node_indices(
    kernel: Any, grid_fn: Callable[..., Any] | None, constants: Mapping[str, Any]
) -> tuple[Any, Any]:
    """What a traced launch node names its kernel and constants by: portable while exporting."""
    import torch

    if torch.compiler.is_exporting():
        return kernel_reference(kernel, grid_fn), constants_reference(constants)
    return kernel_side_table.add_kernel(kernel, grid_fn), kernel_side_table.add_constants(constants)


def exported_grid(spec: Any) -> Any:
    """While exporting, a grid callable of a kernel with no autotune/heuristics: its value now.

    Its meta is then fully known, and a tuple (of ints or SymInts) needs no reference.
    """
    import torch

    if not (callable(spec.grid) and torch.compiler.is_exporting()) or spec.info.provided_names:
        return spec.grid
    meta = {k: v for k, v in {**spec.constants, **spec.tensors}.items() if k != DESCRIPTORS_KEY}
    return tuple(spec.grid(meta))


def _kernel_entries(ref: str) -> list[tuple[list[str], str]]:
    entry = json.loads(ref)
    found = [(entry["kernel"], "kernel")]
    if entry["grid"] is not None:
        found.append((entry["grid"], f"the grid callable of kernel '{entry['kernel'][1]}'"))
    return found


def check_savable(kernel_idx: Any, constant_args_idx: Any) -> None:
    """Before ``torch.export.save`` writes a launch node: raise if another process could not
    find its kernel, grid callable or constants (Note [portable references])."""
    if not isinstance(kernel_idx, str) or not isinstance(constant_args_idx, str):
        raise RuntimeError(
            "torch.export.save: a functional_triton launch node names its kernel by a "
            f"process-local index ({kernel_idx!r}); only a program made by torch.export.export "
            "can be saved"
        )
    entries = _kernel_entries(kernel_idx)
    kernel_name = entries[0][0][1]
    made = _made.get(kernel_idx)
    # launch_spec.GridByConfig, by name: launch_spec comes after this module (test_module_order)
    if made is not None and type(made[1]).__name__ == "GridByConfig":
        source = made[1].source
        shown = getattr(source, "__qualname__", None) or repr(source)
        raise RuntimeError(
            f"torch.export.save: kernel '{kernel_name}' was exported with one grid per autotune config "
            f"(its grid callable {shown} gives its configs different grids; triton picks the config, "
            "and so the grid, when it launches), which a saved program cannot hold. Export the "
            "program with strict=True, which keeps the grid callable itself (a module-level function)"
        )
    for (module, name, _), what in entries:
        problem = _not_module_level(module, name)
        if problem is None:
            obj = getattr(sys.modules.get(module), name, None) if module in sys.modules else None
            if made is not None and obj is not made[0 if what == "kernel" else 1]:
                problem = f"is not what module {module} binds to the name '{name}'"
        if problem is not None:
            raise RuntimeError(
                f"torch.export.save: {what} '{name}' (module {module}) could not be found "
                f"by torch.export.load in another process: it {problem}"
            )
    try:
        ast.literal_eval(constant_args_idx)
    except (ValueError, SyntaxError):
        raise RuntimeError(
            f"torch.export.save: the constant arguments of kernel '{kernel_name}' have no "
            f"literal form ({constant_args_idx}), so another process could not load them"
        ) from None


def check_loaded(kernel_idx: Any, constant_args_idx: Any) -> None:
    """After ``torch.export.load`` rebuilds a launch node: find its kernel now (raising with its
    name where it cannot be found or changed), not when the program first runs."""
    if isinstance(kernel_idx, str) and isinstance(constant_args_idx, str):
        try:
            resolve(kernel_idx, constant_args_idx)
        except RuntimeError as e:  # LookupError: torch.export.load passes it on as it is
            raise LookupError(str(e)) from None


def install_export_checks(operators: tuple[Any, ...]) -> bool:
    """Run ``check_savable`` / ``check_loaded`` on every node of ``operators`` that
    ``torch.export.save`` writes or ``torch.export.load`` rebuilds (registrations.py calls it)."""

    def on_save(node: Any) -> None:
        if node.target in operators:
            check_savable(node.kwargs.get("kernel_idx"), node.kwargs.get("constant_args_idx"))

    def on_load(target: Any, inputs: Mapping[str, Any]) -> None:
        if target in operators:
            check_loaded(inputs.get("kernel_idx"), inputs.get("constant_args_idx"))

    return hook_export_serialization(on_save, on_load)
