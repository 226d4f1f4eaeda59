"""The eager launch path's common case in C (``_launch.c``), built once per machine, or None.

Note [the native launch path]
An eager launch in Python costs three objects and frames and a loop of checks over its arguments:
about 1.2 us of host time over the raw ``kernel[grid](...)`` (benchmarks/README.md), against a
raw launch of about 12 us on a GPU. ``_launch.c`` holds the same common case (the base of
``TritonKernel``, its ``[grid]`` object and ``run``, and the public ``wrap_triton``, a C function
with the Python one's doc that finds a described kernel's entry through a cache of recent hits,
each checked by its weakref) and makes the same checks in the same order; everything else it
hands to kernel.py's Python path (``_wrap_new`` for a kernel not described yet), which
stays the reference: it is used as a whole where the module cannot be built (no C compiler or
Python headers, Python < 3.11, a free-threaded build) or where ``FUNCTIONAL_TRITON_NATIVE=0``
asks for it, and the tests run the launch tests both ways (tests/unit/test_native.py).

The module is compiled with the C compiler Triton itself uses for its launchers (``CC``, else
``cc``, ``gcc`` or ``clang`` on the path) into a cache directory
(``FUNCTIONAL_TRITON_CACHE_DIR``, else ``$XDG_CACHE_HOME/functional_triton`` or
``~/.cache/functional_triton``), under a name made from a hash of the source, the compiler and
the Python build, so an edit or another Python builds again and concurrent builds (pytest-xdist
workers) never see a partial file. The first import on a machine compiles (~0.5 s); later ones
load the file. A failed build logs why at debug level and falls back.

Note [probes read in libtorch]
Every eager launch asks whether a dispatch mode (make_fx, FakeTensorMode, FunctionalTensorMode) or
a functorch transform (vmap, grad, functionalize) is active: through torch's Python bindings two
calls, ~50 ns together from C (benchmarks/README.md). ``install_probes`` finds the two C++
functions those bindings call, ``c10::impl::TorchDispatchModeTLS::stack_len()`` and
``at::functorch::getDynamicLayerStack()``, in torch's own libraries (by their Itanium-mangled names,
Linux and macOS) and hands their addresses to the module, which calls them directly. They are used
only after they answered as the Python probes with no mode, under a dispatch mode and under a vmap
level, checked at import; a torch where a name is missing or an answer differs keeps the Python
probes (logged at debug).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from ._compat import dispatch_stack_len, functorch_interpreter

log = logging.getLogger(__name__)

ENV_VAR = "FUNCTIONAL_TRITON_NATIVE"
CACHE_ENV_VAR = "FUNCTIONAL_TRITON_CACHE_DIR"
_SOURCE = Path(__file__).with_name("_launch.c")
_MODULE = "_ft_launch"  # the name PyInit__ft_launch is exported under


def _compiler() -> str | None:
    cc = os.environ.get("CC")
    if cc:
        return shutil.which(cc) or cc
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _cache_dir() -> Path:
    explicit = os.environ.get(CACHE_ENV_VAR)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "functional_triton"


def why_not() -> str | None:
    """Why this interpreter cannot take the native path (None: it can)."""
    if os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "no", "off"):
        return f"{ENV_VAR}={os.environ[ENV_VAR]} asks for the Python launch path"
    if sys.implementation.name != "cpython" or sys.version_info < (3, 11):
        return "it needs CPython 3.11 or newer"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return "a free-threaded Python build"
    if sys.platform == "win32":
        return "not built on Windows"
    return None


def _build(cc: str, target: Path, flags: list[str]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        partial = Path(tmp) / target.name
        subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", *flags, str(_SOURCE), "-o", str(partial)],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        os.replace(partial, target)  # atomic: a concurrent build writes the same bytes


def load() -> ModuleType | None:
    """The compiled ``_launch.c`` (built if need be), or None with the reason logged."""
    reason = why_not()
    if reason is not None:
        log.debug("the Python launch path: %s", reason)
        return None
    cc = _compiler()
    include = sysconfig.get_paths().get("include")
    if cc is None or include is None or not os.path.exists(os.path.join(include, "Python.h")):
        log.debug("the Python launch path: no C compiler or no Python.h (cc=%s, include=%s)", cc, include)
        return None
    flags = [f"-I{include}"]
    if sys.platform == "darwin":
        flags += ["-undefined", "dynamic_lookup"]
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = hashlib.sha256(
        b"\0".join(s.encode() for s in (_SOURCE.read_text(), cc, sys.version, suffix, *flags))
    ).hexdigest()[:24]
    target = _cache_dir() / key / f"{_MODULE}{suffix}"
    try:
        if not target.exists():
            _build(cc, target, flags)
        spec = importlib.util.spec_from_file_location(_MODULE, target)
        if spec is None or spec.loader is None:
            raise ImportError(f"no loader for {target}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except subprocess.CalledProcessError as e:
        log.debug("the Python launch path: building %s failed:\n%s", _SOURCE, e.stderr)
        return None
    except (OSError, ImportError, subprocess.TimeoutExpired) as e:
        log.debug("the Python launch path: %s", e)
        return None
    return module


# (library, symbol): the functions behind torch._C._len_torch_dispatch_stack and
# torch._C._functorch.peek_interpreter_stack (Note [probes read in libtorch]).
_STACK_LEN = ("c10", "_ZN3c104impl20TorchDispatchModeTLS9stack_lenEv")
_LAYER_STACK = ("torch_cpu", "_ZN2at9functorch20getDynamicLayerStackEv")


def _address(library: str, symbol: str) -> int:
    import torch

    lib_dir = Path(torch.__file__).parent / "lib"
    for suffix in (".so", ".dylib"):
        path = lib_dir / f"lib{library}{suffix}"
        if path.exists():
            # RTLD_NOLOAD: the library torch has loaded, never a second copy
            handle = ctypes.CDLL(str(path), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            address = ctypes.cast(getattr(handle, symbol), ctypes.c_void_p).value
            if not address:
                raise OSError(f"{symbol} has no address in {path}")
            return address
    raise OSError(f"no lib{library} in {lib_dir}")


def probes_agree(native: Callable[[], bool], python: Callable[[], bool]) -> bool:
    """Whether ``native`` answers as ``python`` with no mode, under a dispatch mode, under a vmap level."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            return func(*args, **(kwargs or {}))

    if python():
        return False  # imported under a mode: nothing to tell the states apart by
    answers = [(native(), False)]
    with _Passthrough():
        answers.append((native(), python()))
    torch._C._functorch._vmap_increment_nesting(1, "error")
    try:
        answers.append((native(), python()))
    finally:
        torch._C._functorch._vmap_decrement_nesting()
    answers.append((native(), python()))
    return answers == [(False, False), (True, True), (True, True), (False, False)]


def install_probes(module: ModuleType, python: Callable[[], bool]) -> bool:
    """Have ``module`` read the mode probes in libtorch where they agree with ``python``, else Python's."""
    try:
        module.set_probes(_address(*_STACK_LEN), _address(*_LAYER_STACK))
        if probes_agree(module.probes, python):
            return True
        reason = "they answer differently from torch's Python probes"
    except Exception as e:  # any failure keeps the Python probes, which are always right
        reason = f"{type(e).__name__}: {e}"
    module.set_probes(0, 0)
    log.debug("the launch path reads the mode probes through Python: %s", reason)
    return False


# The compiled module, loaded once (kernel.py configures it and installs its probes).
NATIVE: ModuleType | None = load()


def python_modes_active() -> bool:
    """The mode probe through torch's Python bindings (the reference the C probes are checked against)."""
    return bool(dispatch_stack_len()) or functorch_interpreter() is not None


# Whether a dispatch mode or a functorch transform is active, as a launch reads it: one C call
# where the module is built (read in libtorch where install_probes found the functions), else
# torch's two bindings. Every in-place launch of a replayed graph reads it (Note [launch sites]);
# callable once kernel.py has configured the module, which importing the package does.
modes_active: Callable[[], bool] = python_modes_active if NATIVE is None else NATIVE.probes
