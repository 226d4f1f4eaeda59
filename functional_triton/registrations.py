"""Which dispatch keys and modes each operator handles: one table per operator, applied once.

Every rule takes the node as one ``MutationNode`` / ``FunctionalNode`` (node.py); the adapters
here turn the keywords torch's dispatch passes into one. A key maps to a rule in four ways:

- a ``DispatchKey``: ``rule(node)``;
- FakeTensorMode: ``rule(node)`` with the mode entered (so the fake rule, also the Meta rule,
  allocates fake tensors);
- ProxyTorchDispatchMode: ``rule(mode, node)``; a torch.func ``TransformType``: ``rule(interpreter, node)``;
- ``FUNCTIONALIZE``: ``rule(ctx, node)`` through ``py_functionalize_impl``, which registers
  ``DispatchKey.Functionalize``, FunctionalTensorMode and ``TransformType.Functionalize``.

``FALLTHROUGH_KEYS`` (autograd.py) are fallen through by both. tests/unit/test_registrations.py
pins the keys each operator handles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode

from ._compat import DispatchKey, HigherOrderOperator, fake_tensor_mode_type
from .autograd import FALLTHROUGH_KEYS
from .dense import functional_dense, mutation_dense
from .fake_rules import functional_fake, functional_proxy, mutation_fake, mutation_proxy
from .functionalize import functional_functionalize, mutation_functionalize
from .hops import triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation
from .node import FunctionalNode, MutationNode
from .portable import install_export_checks
from .transforms import transform_rules


class _FunctionalizeKey:
    """The table key of a ``py_functionalize_impl`` rule (compared by identity only)."""

    def __repr__(self) -> str:
        return "FUNCTIONALIZE"


FUNCTIONALIZE = _FunctionalizeKey()
FakeTensorMode = fake_tensor_mode_type()

Rule = Callable[..., Any]


class Entry(NamedTuple):
    """One row of an operator's table: how torch calls the rule, and the rule."""

    call: str  # "node", "node in mode", or "<mode | interpreter | ctx> and node"
    rule: Rule


def _table(dense: Rule, fake: Rule, proxy: Rule, functionalize: Rule) -> dict[Any, Entry]:
    return {
        DispatchKey.CompositeExplicitAutograd: Entry("node", dense),
        DispatchKey.Meta: Entry("node", fake),
        FakeTensorMode: Entry("node in mode", fake),
        ProxyTorchDispatchMode: Entry("mode and node", proxy),
        FUNCTIONALIZE: Entry("ctx and node", functionalize),
        **{key: Entry("interpreter and node", rule) for key, rule in transform_rules().items()},
    }


MUTATION_TABLE: dict[Any, Entry] = _table(
    mutation_dense, mutation_fake, mutation_proxy, mutation_functionalize
)
FUNCTIONAL_TABLE: dict[Any, Entry] = _table(
    functional_dense, functional_fake, functional_proxy, functional_functionalize
)


def _adapter(node_type: type[MutationNode], entry: Entry) -> Rule:
    """The function torch calls for ``entry``: keywords in, one node to the rule."""
    rule = entry.rule
    if entry.call == "node":

        def impl(**kwargs: Any) -> Any:
            return rule(node_type(**kwargs))

    elif entry.call == "node in mode":

        def impl(mode: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            with mode:
                return rule(node_type(**kwargs))

    else:

        def impl(first: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            return rule(first, node_type(**kwargs))

    impl.__name__ = impl.__qualname__ = rule.__name__
    return impl


def register(op: HigherOrderOperator, node_type: type[MutationNode], table: Mapping[Any, Entry]) -> None:
    """Register every rule of ``table`` on ``op``, and its fallthrough keys."""
    for key, entry in table.items():
        impl = _adapter(node_type, entry)
        if key is FUNCTIONALIZE:
            op.py_functionalize_impl(impl)
        else:
            op.py_impl(key)(impl)
    for key in FALLTHROUGH_KEYS:
        op.fallthrough(key)


register(triton_kernel_wrapper_mutation, MutationNode, MUTATION_TABLE)
register(triton_kernel_wrapper_functional, FunctionalNode, FUNCTIONAL_TABLE)
install_export_checks((triton_kernel_wrapper_mutation, triton_kernel_wrapper_functional))
