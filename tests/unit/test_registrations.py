"""functional_triton.registrations: which dispatch keys and modes each operator handles.

The expected keys are written out here, so that a rule lost or added anywhere (a table entry,
a registration outside the table) fails; they are compared with the operator objects' own
tables, which are what torch's dispatch reads.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch._C import DispatchKey
from torch._functorch.pyfunctorch import TransformType
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensorMode
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode

import functional_triton as ft
from functional_triton import registrations

OPERATORS = [
    pytest.param(ft.triton_kernel_wrapper_mutation, registrations.MUTATION_TABLE, id="mutation"),
    pytest.param(ft.triton_kernel_wrapper_functional, registrations.FUNCTIONAL_TABLE, id="functional"),
]
DISPATCH_KEYS = {DispatchKey.CompositeExplicitAutograd, DispatchKey.Meta, DispatchKey.Functionalize}
MODES = {FakeTensorMode, ProxyTorchDispatchMode, FunctionalTensorMode}
TRANSFORMS = {TransformType.Functionalize, TransformType.Vmap, TransformType.Grad, TransformType.Jvp}
FALLTHROUGH = {"ADInplaceOrView", "AutogradCPU", "AutogradCUDA", "AutogradOther", "BackendSelect"}


@pytest.mark.parametrize("op, table", OPERATORS)
def test_each_operator_handles_exactly_the_pinned_keys(op: Any, table: Any) -> None:
    assert set(op.py_kernels) == DISPATCH_KEYS
    assert set(op.python_key_table) == MODES
    assert set(op.functorch_table) == TRANSFORMS


@pytest.mark.parametrize("op, table", OPERATORS)
def test_the_table_is_what_was_registered(op: Any, table: Any) -> None:
    # py_functionalize_impl registers one rule under three keys; the table names it once.
    functionalize = {DispatchKey.Functionalize, FunctionalTensorMode, TransformType.Functionalize}
    registered = set(op.py_kernels) | set(op.python_key_table) | set(op.functorch_table)
    assert set(table) == (registered - functionalize) | {registrations.FUNCTIONALIZE}
    for key, entry in table.items():
        if key is registrations.FUNCTIONALIZE:
            continue
        impl = {**op.py_kernels, **op.python_key_table, **op.functorch_table}[key]
        assert impl.__name__ == entry.rule.__name__, key


@pytest.mark.parametrize("op, table", OPERATORS)
def test_autograd_keys_fall_through(op: Any, table: Any) -> None:
    for name in FALLTHROUGH:
        assert not op.non_fallthrough_keys.has(getattr(DispatchKey, name)), name
    assert op.non_fallthrough_keys.has(DispatchKey.CompositeExplicitAutograd)


def test_fake_and_meta_are_one_rule() -> None:
    for table in (registrations.MUTATION_TABLE, registrations.FUNCTIONAL_TABLE):
        assert table[DispatchKey.Meta].rule is table[FakeTensorMode].rule


def test_meta_rule_of_the_functional_operator_gives_the_written_arguments() -> None:
    from functional_triton.side_table import kernel_side_table
    from tests import kernels as K

    x = torch.empty_strided((4,), (2,), device="meta")
    kernel_idx = kernel_side_table.add_kernel(K.add_one_inplace, None)
    constants_idx = kernel_side_table.add_constants({"n": 4, "BLOCK": 4})
    out = ft.triton_kernel_wrapper_functional(
        kernel_idx=kernel_idx,
        constant_args_idx=constants_idx,
        grid=(1,),
        kwargs={"x_ptr": x},
        tensors_to_clone=["x_ptr"],
        layouts={"x_ptr": (0, (4,), (2,), 0)},
    )
    assert list(out) == ["x_ptr"]
    assert out["x_ptr"].is_meta and out["x_ptr"].stride() == (2,)
