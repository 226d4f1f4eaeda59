"""Autograd: a kernel is opaque, exactly as a raw launch is in eager.

Both operators fall through every autograd key (registrations.py): what a kernel writes
gets no ``grad_fn`` from it, the tensors it reads get no gradient through it, and the
functionalization rule hides its mutations from autograd, so a written tensor keeps
whatever autograd history it had, as in eager.
"""

from __future__ import annotations

from ._compat import DispatchKey

_FALLTHROUGH_NAMES = (
    "PythonDispatcher",
    "PythonTLSSnapshot",
    "ADInplaceOrView",
    "BackendSelect",
    "AutocastCPU",
    "AutocastCUDA",
    "AutogradCPU",
    "AutogradCUDA",
    "AutogradMeta",
    "AutogradXPU",
    "AutogradOther",
)

# The keys both operators fall through (those this torch has).
FALLTHROUGH_KEYS: tuple[DispatchKey, ...] = tuple(
    getattr(DispatchKey, name) for name in _FALLTHROUGH_NAMES if hasattr(DispatchKey, name)
)
