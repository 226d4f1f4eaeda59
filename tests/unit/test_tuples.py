"""tuples.py: tuple arguments flattened to derived names (``ptrs[1]``), templates, and rebuilt tuples."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from functional_triton.launch_spec import kernel_info, make_launch_spec
from functional_triton.side_table import kernel_side_table
from functional_triton.tuples import (
    TUPLES_KEY,
    TupleSlot,
    element_name,
    flatten,
    holds_traced,
    rebuild,
    slot_names,
    with_tuples,
)
from tests.helpers import assert_same

N = 8


from tests.unit.test_launch_arguments import Pointers, nested_tuple_kernel  # noqa: E402


def is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def same_objects(a: Any, b: Any) -> bool:
    """The same nesting and tuple types, and the very same leaf objects."""
    if isinstance(a, tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same_objects(x, y) for x, y in zip(a, b))
    return a is b


LEAVES = st.one_of(
    st.integers(), st.floats(), st.none(), st.text(max_size=3), st.builds(torch.zeros, st.just(2))
)
TUPLES = st.recursive(st.tuples(LEAVES), lambda inner: st.lists(inner | LEAVES, max_size=4).map(tuple))


def test_element_names_nest_and_are_no_python_identifiers() -> None:
    assert element_name("ptrs", 1) == "ptrs[1]"
    assert element_name(element_name("args", 1), 0) == "args[1][0]"
    assert not element_name("ptrs", 0).isidentifier()


def test_flatten_claims_traced_leaves_by_derived_name_in_order() -> None:
    x, y = torch.zeros(2), torch.ones(3)
    seen: list[str] = []

    def take(name: str, value: Any) -> bool:
        seen.append(name)
        return is_tensor(value)

    template = flatten("a", (x, (3, y), 0.5, None), take)
    assert template == (TupleSlot("a[0]"), (3, TupleSlot("a[1][1]")), 0.5, None)
    assert seen == ["a[0]", "a[1][0]", "a[1][1]", "a[2]", "a[3]"]  # every leaf offered once
    assert slot_names(template) == ["a[0]", "a[1][1]"]
    assert same_objects(rebuild(template, {"a[0]": x, "a[1][1]": y}), (x, (3, y), 0.5, None))


@given(TUPLES)
def test_rebuild_inverts_flatten(value: tuple[Any, ...]) -> None:
    taken: dict[str, Any] = {}

    def take(name: str, leaf: Any) -> bool:
        if is_tensor(leaf):
            taken[name] = leaf
        return is_tensor(leaf)

    template = flatten("t", value, take)
    assert slot_names(template) == list(taken)
    assert holds_traced(value, is_tensor) == bool(taken)
    assert not holds_traced(template, is_tensor)  # the template keeps no tensor
    assert same_objects(rebuild(template, taken), value)


def test_namedtuples_keep_their_type() -> None:
    src, dst = torch.zeros(2), torch.zeros(2)
    template = flatten("p", Pointers(src, dst), lambda name, v: is_tensor(v))
    assert type(template) is Pointers and template == Pointers(TupleSlot("p[0]"), TupleSlot("p[1]"))
    rebuilt = rebuild(template, {"p[0]": src, "p[1]": dst})
    assert type(rebuilt) is Pointers and rebuilt.src is src and rebuilt.dst is dst


def test_with_tuples_rebuilds_and_drops_the_derived_names() -> None:
    x, y = torch.zeros(2), torch.ones(2)
    values = {"ptrs[0]": x, "ptrs[1]": y, "n": 4}
    out = with_tuples(values, {"ptrs": (TupleSlot("ptrs[0]"), (TupleSlot("ptrs[1]"), 7))})
    assert set(out) == {"ptrs", "n"} and out["n"] == 4
    assert same_objects(out["ptrs"], (x, (y, 7)))
    assert set(values) == {"ptrs[0]", "ptrs[1]", "n"}  # the caller's dict is left alone


def test_launch_spec_flattens_a_nested_tuple_and_the_node_launches_like_the_raw_kernel() -> None:
    x, out = torch.arange(N, dtype=torch.float32), torch.zeros(N)
    spec = make_launch_spec(
        nested_tuple_kernel, kernel_info(nested_tuple_kernel), (1,), ((x, (out, N), 0.5),), {"BLOCK": N}
    )
    assert spec.tensors == {"args[0]": x, "args[1][0]": out}
    template = spec.constants[TUPLES_KEY]["args"]
    assert template == (TupleSlot("args[0]"), (TupleSlot("args[1][0]"), N), 0.5)
    k = kernel_side_table.add_kernel(nested_tuple_kernel, None)
    c = kernel_side_table.add_constants(spec.constants)
    ft.triton_kernel_wrapper_mutation(kernel_idx=k, constant_args_idx=c, grid=(1,), kwargs=spec.tensors)
    ex, eout = torch.arange(N, dtype=torch.float32), torch.zeros(N)
    nested_tuple_kernel[(1,)]((ex, (eout, N), 0.5), BLOCK=N)
    assert_same(x, ex)
    assert_same(out, eout)


def test_a_symint_in_a_tuple_becomes_a_node_argument_and_replays_on_other_sizes() -> None:
    def prog(x: torch.Tensor, out: torch.Tensor) -> None:
        ft.wrap_triton(nested_tuple_kernel)[(1,)]((x, (out, x.numel()), 2.0), BLOCK=16)

    gm = make_fx(prog, tracing_mode="symbolic")(torch.zeros(6), torch.zeros(6))
    (node,) = [n for n in gm.graph.nodes if n.target is ft.triton_kernel_wrapper_mutation]
    assert set(node.kwargs["kwargs"]) == {"args[0]", "args[1][0]", "args[1][1]"}
    for n in (5, 11):
        x, out = torch.arange(n, dtype=torch.float32), torch.zeros(n)
        ex, eout = x.clone(), out.clone()
        gm(x, out)
        nested_tuple_kernel[(1,)]((ex, (eout, n), 2.0), BLOCK=16)
        assert_same(x, ex)
        assert_same(out, eout)
