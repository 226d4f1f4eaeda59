"""torch.func transforms (vmap, grad, jacrev, jvp, ...) around a launch: a clear refusal.

A raw launch under these transforms fails too ("Cannot access storage of BatchedTensorImpl"):
a kernel has no batching rule, and it is opaque to autograd, so there is nothing a transform
could do with it. Without a rule of their own, the operators would fail with a bare
``KeyError(<TransformType.Vmap: 1>)``; these rules name the argument and say what to do.
Functionalization (torch.func.functionalize) has its own rules in functionalize.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from torch import Tensor
from torch.autograd.forward_ad import unpack_dual

from ._compat import functorch_level, functorch_transforms
from .node import MutationNode

_ADVICE = {
    "vmap": "launch it outside vmap (on the whole batch, or in a loop over it)",
    "grad": "give the kernel a backward with a torch.autograd.Function and use torch.autograd",
    "jvp": "give the kernel a forward-mode rule with a torch.autograd.Function (jvp staticmethod)",
}


def refuse_transform(transform: str) -> Callable[[Any, MutationNode], NoReturn]:
    """The rule of both operators for the torch.func transform ``transform``: raise, naming the argument."""

    def transform_rule(interpreter: Any, node: MutationNode) -> NoReturn:
        level = interpreter.level()
        kwargs = node.kwargs
        tensors = [n for n, v in kwargs.items() if isinstance(v, Tensor)]
        wrapped = [n for n in tensors if functorch_level(kwargs[n]) == level] or tensors
        # grad and jvp lift every tensor argument to their level before the rule runs: the
        # transformed ones are those that carry the transform's data (a gradient to track, a tangent).
        wrapped = [n for n in wrapped if _carries(transform, kwargs[n])] or wrapped
        kernel = node.kernel_name
        what = f"argument '{wrapped[0]}' of {kernel}" if wrapped else f"a launch of {kernel}"
        raise NotImplementedError(
            f"{what} is a tensor of torch.func.{transform} (jacrev, jacfwd and hessian build on grad, jvp "
            f"and vmap): a Triton kernel has no {transform} rule, as a raw launch has none; "
            f"{_ADVICE[transform]}"
        )

    transform_rule.__name__ = f"{transform}_rule"
    return transform_rule


def _carries(transform: str, t: Tensor) -> bool:
    if transform == "grad":
        return t.requires_grad
    if transform == "jvp":
        return unpack_dual(t).tangent is not None
    return True


def transform_rules() -> dict[Any, Callable[[Any, MutationNode], NoReturn]]:
    """TransformType -> its rule, for the transforms this torch has."""
    return {key: refuse_transform(name) for name, key in functorch_transforms().items()}
