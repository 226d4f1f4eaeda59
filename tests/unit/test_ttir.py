"""ttir.py: a launch's specialization, TTIR from Triton's frontend, and the Program read from it.

Signature types are checked against triton's own ``mangle_type``; programs against the kernels' source
(which arguments are pointers, how many stores, where a loop's body sits).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from triton.runtime.jit import mangle_type

from functional_triton import _compat, ttir
from tests import kernels as K
from tests.helpers import assert_same

N = 8


@triton.jit
def loop_store(x_ptr, n, BLOCK: tl.constexpr):
    for i in range(n):
        tl.store(x_ptr + i * BLOCK + tl.arange(0, BLOCK), tl.full([BLOCK], 1.0, tl.float32))


@triton.jit
def nested_tuple_kernel(args, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < args[1][1]
    tl.store(args[1][0] + offs, tl.load(args[0] + offs, mask=m) * args[2], mask=m)


def ops(blocks: tuple[ttir.Block, ...]) -> list[ttir.Op]:
    """Every op of the blocks, nested regions included."""
    found: list[ttir.Op] = []
    for block in blocks:
        for op in block.ops:
            found.append(op)
            for region in op.regions:
                found.extend(ops(region))
    return found


def lowered(kernel: Any, args: dict[str, Any]) -> tuple[ttir.Spec, ttir.Program]:
    spec = ttir.specialize(kernel.fn, args)
    return spec, ttir.read_module(ttir.generate_ttir(kernel, spec.signature, spec.constants))


@pytest.mark.parametrize(
    "value",
    [
        torch.zeros(2),
        torch.zeros(2, dtype=torch.float16),
        torch.zeros(2, dtype=torch.int64),
        3,
        -1,
        2**40,
        2**31,
        2**63 + 1,
        True,
        1.5,
    ],
    ids=lambda v: f"tensor-{v.dtype}" if isinstance(v, torch.Tensor) else repr(v),
)
def test_specialize_types_arguments_as_triton_does(value: Any) -> None:
    spec = ttir.specialize(K.add_one_inplace.fn, {"x_ptr": value, "n": value, "BLOCK": 4})
    assert spec.signature == {"x_ptr": mangle_type(value), "n": mangle_type(value), "BLOCK": "constexpr"}
    assert spec.constants == {(2,): 4}
    assert [(a.name, a.pointer) for a in spec.ttir_args] == [
        (n, isinstance(value, torch.Tensor)) for n in ("x_ptr", "n")
    ]


def test_specialize_keys_tell_apart_what_changes_the_ttir_and_nothing_else() -> None:
    def key(**changes: Any) -> Any:
        return ttir.specialize(
            K.add_one_inplace.fn, {"x_ptr": torch.zeros(N), "n": N, "BLOCK": 4, **changes}
        ).key

    assert key() is not None and key() == key(n=N + 3, x_ptr=torch.ones(3))  # scalar values and data: same
    different = [
        key(BLOCK=8),
        key(BLOCK=True),
        key(BLOCK=1),
        key(BLOCK=4.0),
        key(n=2**40),
        key(x_ptr=torch.zeros(N, dtype=torch.float16)),
    ]
    assert len({key(), *different}) == 1 + len(different)
    assert key(BLOCK=0.0) != key(BLOCK=-0.0)
    assert key(BLOCK=[4]) is None  # an unhashable constexpr: analysed, never cached
    with pytest.raises(ttir.Unknown, match="constexpr argument 'BLOCK' is symbolic"):
        key(BLOCK=ShapeEnv().create_unbacked_symint())
    with pytest.raises(ttir.Unknown, match="missing a value for parameter 'n'"):
        ttir.specialize(K.add_one_inplace.fn, {"x_ptr": torch.zeros(N), "BLOCK": 4})


@pytest.mark.parametrize("kernel, stores", [(K.add_kernel, 1), (K.two_writes, 2), (K.read_only_sum, 0)])
def test_program_has_the_kernels_arguments_and_stores(kernel: Any, stores: int) -> None:
    names = list(inspect.signature(kernel.fn).parameters)
    args = {n: (4 if n == "BLOCK" else N if n == "n" else torch.zeros(N)) for n in names}
    spec, program = lowered(kernel, args)
    assert program.entry == kernel.fn.__name__
    entry = program.functions[program.entry][0]
    assert len(entry.args) == len(spec.ttir_args) == len(names) - 1  # BLOCK is no TTIR argument
    assert [a in program.pointers for a in entry.args] == [n.endswith("_ptr") for n in names[:-1]]
    if _compat.HAS_LOCATION_NAME:
        assert entry.arg_names == tuple(names[:-1])
    assert [op.name for op in ops(program.functions[program.entry])].count("tt.store") == stores
    ttir.check_arguments(program, spec)


def test_a_loop_body_is_a_nested_region_holding_the_store() -> None:
    _, program = lowered(loop_store, {"x_ptr": torch.zeros(N), "n": 2, "BLOCK": 4})
    (loop,) = [op for op in program.functions[program.entry][0].ops if op.name == "scf.for"]
    (body,) = loop.regions[0]
    assert "tt.store" in [op.name for op in body.ops] and body.ops[-1].name == "scf.yield"
    assert "tt.store" not in [op.name for op in program.functions[program.entry][0].ops]


def test_check_arguments_refuses_a_spec_that_does_not_match() -> None:
    spec, program = lowered(
        K.add_kernel,
        {"x_ptr": torch.zeros(N), "y_ptr": torch.zeros(N), "out_ptr": torch.zeros(N), "n": N, "BLOCK": 4},
    )
    args = spec.ttir_args
    with pytest.raises(ttir.Unknown, match="has 4 arguments, expected 3"):
        ttir.check_arguments(program, dataclasses.replace(spec, ttir_args=args[:3]))
    with pytest.raises(ttir.Unknown, match="for 'n' does not match its value"):
        ttir.check_arguments(
            program, dataclasses.replace(spec, ttir_args=(*args[:3], args[3]._replace(pointer=True)))
        )
    if _compat.HAS_LOCATION_NAME:
        swapped = (args[1], args[0], *args[2:])
        with pytest.raises(ttir.Unknown, match="'x_ptr' is where 'y_ptr' was expected"):
            ttir.check_arguments(program, dataclasses.replace(spec, ttir_args=swapped))


def test_tuple_elements_become_ttir_arguments_under_derived_names() -> None:
    x, out = torch.zeros(N), torch.zeros(N)
    spec, program = lowered(nested_tuple_kernel, {"args": (x, (out, N), 0.5), "BLOCK": N})
    assert spec.signature["args"] == ("*fp32", ("*fp32", "i32"), "fp32")
    assert [(a.name, a.ttir_name, a.pointer) for a in spec.ttir_args] == [
        ("args[0]", "args.0", True),
        ("args[1][0]", "args.1.0", True),
        ("args[1][1]", "args.1.1", False),
        ("args[2]", "args.2", False),
    ]
    ttir.check_arguments(program, spec)  # count, pointer-ness and names agree with triton's


def test_code_generation_leaves_triton_language_as_it_found_it() -> None:
    # An interpreted kernel calling tl.sum leaves triton.language patched (Note [interpreter guard]).
    total = torch.zeros(1)
    K.atomic_add_kernel[(1,)](torch.ones(N), total, N, BLOCK=N)
    objects = _compat.interpreter_patched_objects()
    before = [dict(vars(obj)) for obj in objects]
    lowered(K.atomic_add_kernel, {"x_ptr": torch.zeros(N), "out_ptr": total, "n": N, "BLOCK": N})
    for obj, attrs in zip(objects, before):
        now = vars(obj)
        assert now.keys() == attrs.keys() and all(now[k] is v for k, v in attrs.items()), obj
    K.atomic_add_kernel[(1,)](torch.ones(N), total, N, BLOCK=N)  # interpreted kernels still run
    assert_same(total, torch.full((1,), 2.0 * N))


def test_describe_gives_the_root_cause_in_one_short_line() -> None:
    try:
        try:
            raise ValueError("context\nthe real cause")
        except ValueError as inner:
            raise RuntimeError("wrapper") from inner
    except RuntimeError as outer:
        assert ttir.describe(outer) == "ValueError: the real cause"
    assert len(ttir.describe(RuntimeError("x" * 1000))) == 300
