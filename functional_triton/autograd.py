"""Autograd: a kernel is opaque, exactly as a raw launch is in eager.

Both operators fall through every autograd key: what a kernel writes gets no
``grad_fn`` from it, the tensors it reads get no gradient through it, and the
functionalization rule hides its mutations from autograd, so a written tensor
keeps whatever autograd history it had, as in eager.
"""

from __future__ import annotations

from torch._C import DispatchKey

from .hops import triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation

_FALLTHROUGH_KEYS = (
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

for _hop in (triton_kernel_wrapper_mutation, triton_kernel_wrapper_functional):
    for _key in _FALLTHROUGH_KEYS:
        if hasattr(DispatchKey, _key):
            _hop.fallthrough(getattr(DispatchKey, _key))
