"""transforms.py: the torch.func rules (vmap, grad, jvp) refuse a launch, naming the wrapped argument."""

from __future__ import annotations

import pytest
import torch
from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

import functional_triton as ft
from functional_triton._compat import functorch_transforms
from functional_triton.node import MutationNode
from functional_triton.side_table import TableIndex, kernel_side_table
from functional_triton.transforms import refuse_transform, transform_rules
from tests import kernels as K

N = 4


class AtLevel:
    """An interpreter stand-in: the rule asks it only for its level."""

    def __init__(self, level: int) -> None:
        self._level = level

    def level(self) -> int:
        return self._level


@pytest.fixture(scope="module")
def indices() -> tuple[TableIndex, TableIndex]:
    return kernel_side_table.add_kernel(K.add_kernel, None), kernel_side_table.add_constants({"BLOCK": N})


def test_each_transform_gets_a_rule_that_names_that_transform(indices: tuple[TableIndex, TableIndex]) -> None:
    rules = transform_rules()
    transforms = functorch_transforms()
    assert {"vmap", "grad", "jvp"} <= set(transforms)
    assert set(rules) == set(transforms.values())
    node = MutationNode(*indices, (1,), {"x_ptr": torch.zeros(N), "n": N})
    for name, key in transforms.items():
        assert rules[key].__name__ == f"{name}_rule"
        with pytest.raises(
            NotImplementedError, match=rf"is a tensor of torch\.func\.{name} .* no {name} rule"
        ):
            rules[key](AtLevel(1), node)


def test_without_a_wrapped_argument_the_first_tensor_or_the_launch_is_named(
    indices: tuple[TableIndex, TableIndex],
) -> None:
    rule = refuse_transform("grad")
    tensors = {"n": N, "y_ptr": torch.zeros(N), "out_ptr": torch.zeros(N)}
    with pytest.raises(
        NotImplementedError, match=r"^argument 'y_ptr' of add_kernel is a tensor of torch\.func\.grad"
    ):
        rule(AtLevel(7), MutationNode(*indices, (1,), tensors))
    with pytest.raises(
        NotImplementedError, match=r"^a launch of add_kernel is a tensor of torch\.func\.grad"
    ):
        rule(AtLevel(7), MutationNode(*indices, (1,), {"n": N}))


def test_the_argument_wrapped_at_the_interpreters_level_is_named(
    indices: tuple[TableIndex, TableIndex],
) -> None:
    messages: list[str] = []

    def launch(batched: torch.Tensor) -> torch.Tensor:
        kwargs = {"x_ptr": torch.zeros(N), "y_ptr": torch.ones(N), "out_ptr": batched, "n": N}
        with pytest.raises(NotImplementedError) as error:
            refuse_transform("vmap")(
                retrieve_current_functorch_interpreter(), MutationNode(*indices, (1,), kwargs)
            )
        messages.append(str(error.value))
        return batched

    torch.func.vmap(launch)(torch.zeros(2, N))
    (message,) = messages
    assert message.startswith("argument 'out_ptr' of add_kernel is a tensor of torch.func.vmap")
    assert "outside vmap" in message  # the advice fits the transform


def _launch_under(transform: str, functional: bool, indices: tuple[TableIndex, TableIndex]) -> None:
    """Call an operator under ``transform`` with the transformed tensor as ``y_ptr``, between plain ones."""
    plain_x, plain_out = torch.ones(N), torch.zeros(N)

    def launch(y: torch.Tensor) -> torch.Tensor:
        node = MutationNode(*indices, (1,), {"x_ptr": plain_x, "y_ptr": y, "out_ptr": plain_out, "n": N})
        if functional:
            layouts = {n: (0 if n == "out_ptr" else -1, (N,), (1,), 0) for n in ("x_ptr", "y_ptr", "out_ptr")}
            ft.triton_kernel_wrapper_functional(
                **node.as_kwargs(), tensors_to_clone=["out_ptr"], layouts=layouts
            )
        else:
            ft.triton_kernel_wrapper_mutation(**node.as_kwargs())
        return y

    try:
        if transform == "vmap":
            torch.func.vmap(launch)(torch.ones(2, N))
        elif transform == "grad":
            torch.func.grad(lambda x: launch(x).sum())(torch.ones(N))
        else:
            torch.func.jvp(launch, (torch.ones(N),), (torch.ones(N),))
    finally:
        assert torch.equal(plain_out, torch.zeros(N))  # nothing launched


# torch's forward-mode AD scripts a helper on first use, which warns.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
@pytest.mark.parametrize("transform", ["vmap", "grad", "jvp"])
@pytest.mark.parametrize("functional", [False, True], ids=["mutation", "functional"])
def test_both_operators_refuse_under_each_transform(
    transform: str, functional: bool, indices: tuple[TableIndex, TableIndex]
) -> None:
    named = "y_ptr"  # the transformed argument, also where grad and jvp lift every tensor first
    with pytest.raises(
        NotImplementedError,
        match=rf"^argument '{named}' of add_kernel is a tensor of torch\.func\.{transform}",
    ):
        _launch_under(transform, functional, indices)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_grad_and_jvp_name_the_transformed_argument(
    transform: str, indices: tuple[TableIndex, TableIndex]
) -> None:
    """grad and jvp lift every tensor argument to their level before the rule runs: the rule names
    the one that carries the transform's data (requires grad, has a tangent), not the first."""
    with pytest.raises(NotImplementedError, match=r"^argument 'y_ptr' of add_kernel"):
        _launch_under(transform, False, indices)
