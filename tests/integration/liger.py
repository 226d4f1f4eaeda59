"""Route every Liger-Kernel kernel launch through ``ft.wrap_triton``, as a user would.

Liger's ops launch module-level kernels (``liger_kernel/ops/*.py``, also
``ops/backends/_triton/*``) inside ``torch.autograd.Function``s; a kernel imported into several
modules is bound in each of them, so every module attribute that holds a Triton kernel is
replaced by its wrapper, and put back afterwards.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import sys
from collections.abc import Iterator
from typing import Any

import functional_triton as ft
from functional_triton.launch_spec import _triton_kernel_types

PACKAGES = ("liger_kernel.ops", "liger_kernel.ops.backends._triton")


def import_liger_ops() -> list[Any]:
    """Import every module of Liger's Triton ops (those that import on this machine)."""
    modules = []
    for package_name in PACKAGES:
        try:
            package = importlib.import_module(package_name)
        except ImportError:
            continue
        modules.append(package)
        for info in pkgutil.iter_modules(package.__path__, package_name + "."):
            try:
                modules.append(importlib.import_module(info.name))
            except Exception:  # noqa: BLE001 - a backend this machine lacks (cute, cutile, ...)
                continue
    return modules


def _liger_modules() -> list[Any]:
    import_liger_ops()
    prefixes = tuple(p + "." for p in PACKAGES)
    return [m for name, m in list(sys.modules.items()) if m is not None and name.startswith(prefixes)]


_WRAPPERS: dict[int, tuple[Any, Any]] = {}  # id(kernel) -> (kernel, its wrapper), for routed_through_ft


@contextlib.contextmanager
def routed_through_ft() -> Iterator[int]:
    """Replace every Triton kernel attribute of Liger's op modules by its wrapper; yields how many.

    Each kernel gets the same wrapper every time (as a module that wraps its kernels once at import
    would): code compiled by torch.compile under one entry guards on the wrappers' identity, and a
    later entry (bench_training.py's variants take turns) must not fail those guards.
    """
    kernel_types = _triton_kernel_types()
    saved: list[tuple[Any, str, Any]] = []
    for module in _liger_modules():
        for name, value in list(vars(module).items()):
            if isinstance(value, kernel_types):
                saved.append((module, name, value))
                kept = _WRAPPERS.get(id(value))
                if kept is None or kept[0] is not value:
                    kept = _WRAPPERS[id(value)] = (value, ft.wrap_triton(value))
                setattr(module, name, kept[1])
    try:
        yield len(saved)
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)


# --- the interpreter's gaps, filled the same way for eager and traced runs ---------------------------


@contextlib.contextmanager
def interpreter_shims() -> Iterator[None]:
    """On the interpreter: Python floats reach kernels as fp32 (as compiled triton passes them),
    and Liger's libdevice ``rsqrt`` / ``tanh`` (stubs returning None there) compute their values.

    Nothing is changed on a GPU. Eager references and traced runs both run under it.
    """
    import triton
    from triton.runtime import interpreter

    from functional_triton import _compat

    if not _compat.interpreter_enabled():
        yield
        return
    original = interpreter._implicit_cvt

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            handle = interpreter.TensorHandle(
                interpreter.np.array([arg], dtype=interpreter.np.float32), triton.language.float32
            )
            return triton.language.tensor(handle, triton.language.float32)
        return original(arg)

    saved: list[tuple[Any, str, Any]] = []
    from tests.integration import interpreter_helpers

    helpers = {"rsqrt": interpreter_helpers.rsqrt, "tanh": interpreter_helpers.tanh}
    for module in _liger_modules():
        for name, helper in helpers.items():
            value = vars(module).get(name)
            if value is not None and getattr(value, "__module__", "").startswith("triton.language.extra"):
                saved.append((module, name, value))
                setattr(module, name, helper)
    interpreter._implicit_cvt = implicit_cvt
    try:
        yield
    finally:
        interpreter._implicit_cvt = original
        for module, name, value in reversed(saved):
            setattr(module, name, value)
