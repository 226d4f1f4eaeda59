"""torch.func transforms (vmap, grad, jacrev, jvp, ...) around a launch: a clear refusal.

A raw launch under these transforms fails too ("Cannot access storage of BatchedTensorImpl"):
a kernel has no batching rule, and it is opaque to autograd, so there is nothing a transform
could do with it. Without a rule of their own, the operators would fail with a bare
``KeyError(<TransformType.Vmap: 1>)``; these rules name the argument and say what to do.
Functionalization (torch.func.functionalize) has its own rules in functionalize.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from ._compat import functorch_level, functorch_transforms
from .hops import launch_plan, triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation
from .kernel import kernel_info

_ADVICE = {
    "vmap": "launch it outside vmap (on the whole batch, or in a loop over it)",
    "grad": "give the kernel a backward with a torch.autograd.Function and use torch.autograd",
    "jvp": "give the kernel a forward-mode rule with a torch.autograd.Function (jvp staticmethod)",
}


def _refuse(transform: str, interpreter: Any, kwargs: Mapping[str, Any], node: Mapping[str, Any]) -> None:
    level = interpreter.level()
    tensors = [n for n, v in kwargs.items() if isinstance(v, Tensor)]
    wrapped = [n for n in tensors if functorch_level(kwargs[n]) == level] or tensors
    kernel = kernel_info(launch_plan(node["kernel_idx"], node["constant_args_idx"]).kernel).name
    what = f"argument '{wrapped[0]}' of {kernel}" if wrapped else f"a launch of {kernel}"
    raise NotImplementedError(
        f"{what} is a tensor of torch.func.{transform} (jacrev, jacfwd and hessian build on grad, jvp "
        f"and vmap): a Triton kernel has no {transform} rule, as a raw launch has none; {_ADVICE[transform]}"
    )


def _register(transform: str, key: Any) -> None:
    def mutation_transform(interpreter: Any, **node: Any) -> None:
        _refuse(transform, interpreter, node["kwargs"], node)

    def functional_transform(interpreter: Any, **node: Any) -> None:
        _refuse(transform, interpreter, node["kwargs"], node)

    triton_kernel_wrapper_mutation.py_impl(key)(mutation_transform)
    triton_kernel_wrapper_functional.py_impl(key)(functional_transform)


for _name, _key in functorch_transforms().items():
    _register(_name, _key)
