"""functional_triton.mutation's taint analysis on hand-built programs (no Triton compile).

Each program is a ``ttir.Program`` written out by hand: value ids are small integers, ``pointers`` says
which of them have pointer type. The entry function ``k`` takes (x, y, n) unless a test says otherwise.
"""

from __future__ import annotations

import logging

import pytest

from functional_triton import mutation
from functional_triton.mutation import WriteAnalysis, analyze_program
from functional_triton.ttir import Block, Op, Program

X, Y, N = 0, 1, 2  # the entry block's arguments: two pointers and an integer
NAMES = ("x", "y", "n")


def program(*ops: Op, pointers: set[int] | None = None, **functions: tuple[Block, ...]) -> Program:
    """A program whose entry `k(x, y, n)` runs `ops` then returns; extra functions by keyword."""
    entry = Block(args=(X, Y, N), ops=[*ops, Op("tt.return")], arg_names=NAMES)
    return Program({"k": (entry,), **functions}, "k", {X, Y} | (pointers or set()))


def store(ptr: int, value: int = N) -> Op:
    return Op("tt.store", (ptr, value))


def written(prog: Program) -> frozenset[str] | None:
    return analyze_program(prog, NAMES).written_names


def test_no_write() -> None:
    assert written(program(Op("tt.load", (X,), (10,)))) == frozenset()


def test_store_through_pointer_arithmetic() -> None:
    # offs = splat(x) + n; store(offs) writes x, not y.
    prog = program(Op("tt.splat", (X,), (10,)), Op("tt.addptr", (10, N), (11,)), store(11), pointers={10, 11})
    assert written(prog) == {"x"}


@pytest.mark.parametrize("op", sorted(mutation._WRITE_OPS))
def test_every_write_op_writes(op: str) -> None:
    assert written(program(Op(op, (Y, N), ()))) == {"y"}


def test_select_of_two_arguments_writes_both() -> None:
    prog = program(Op("arith.select", (N, X, Y), (10,)), store(10), pointers={10})
    assert written(prog) == {"x", "y"}


def test_loop_carried_pointer() -> None:
    # scf.for %iv = n to n step n iter_args(%p = y) { store(%p); yield %p + n }
    body = Block(args=(20, 21), ops=[store(21), Op("tt.addptr", (21, N), (22,)), Op("scf.yield", (22,))])
    loop = Op("scf.for", (N, N, N, Y), (23,), regions=((body,),))
    prog = program(loop, store(23), pointers={21, 22, 23})
    assert written(prog) == {"y"}


def test_pointer_yielded_by_if() -> None:
    then = Block(args=(), ops=[Op("scf.yield", (X,))])
    other = Block(args=(), ops=[Op("scf.yield", (Y,))])
    prog = program(Op("scf.if", (N,), (10,), regions=((then,), (other,))), store(10), pointers={10})
    assert written(prog) == {"x", "y"}


def test_if_without_else() -> None:
    then = Block(args=(), ops=[store(X), Op("scf.yield")])
    assert written(program(Op("scf.if", (N,), (), regions=((then,), ())))) == {"x"}


def test_while_forwards_pointers() -> None:
    # before(%a = x) { condition(n, %a) } after(%b) { store(%b); yield %b }
    before = Block(args=(20,), ops=[Op("scf.condition", (N, 20))])
    after = Block(args=(21,), ops=[store(21), Op("scf.yield", (21,))])
    loop = Op("scf.while", (X,), (22,), regions=((before,), (after,)))
    assert written(program(loop, pointers={20, 21, 22})) == {"x"}


def test_reduce_combines_pointers() -> None:
    body = Block(args=(20, 21), ops=[Op("tt.reduce.return", (21,))])
    reduce = Op("tt.reduce", (Y,), (22,), regions=((body,),))
    assert written(program(reduce, store(22), pointers={20, 21, 22})) == {"y"}


def test_call_maps_callee_parameters() -> None:
    # helper(p, q) writes q; k calls helper(y, x): x is written.
    helper = Block(args=(30, 31), ops=[store(31), Op("tt.return")])
    prog = program(Op("tt.call", (Y, X), (), callee="helper"), pointers={30, 31}, helper=(helper,))
    assert written(prog) == {"x"}


def test_call_returns_a_pointer() -> None:
    helper = Block(args=(30,), ops=[Op("tt.addptr", (30, N), (32,)), Op("tt.return", (32,))])
    call = Op("tt.call", (Y,), (10,), callee="helper")
    assert written(program(call, store(10), pointers={10, 30, 32}, helper=(helper,))) == {"y"}


def test_branches_between_blocks() -> None:
    # k: cf.cond_br n, ^1(x), ^1(y)   ^1(%p): store(%p)
    entry = Block(args=(X, Y, N), ops=[Op("cf.cond_br", (N, X, Y))])
    target = Block(args=(20,), ops=[store(20), Op("tt.return")])
    prog = Program({"k": (entry, target)}, "k", {X, Y, 20})
    assert written(prog) == {"x", "y"}


def test_unknown_op_without_pointers_is_inert() -> None:
    assert written(program(Op("arith.addi", (N, N), (10,)), store(X))) == {"x"}


def test_unknown_region_op_sees_writes_inside() -> None:
    inner = Block(args=(), ops=[store(Y), Op("some.yield")])
    assert written(program(Op("some.region_op", (N,), (), regions=((inner,),)))) == {"y"}


def test_print_is_a_side_effect() -> None:
    result = analyze_program(program(Op("tt.print", (N,))), NAMES)
    assert result == WriteAnalysis(frozenset(), None, True)


def test_pure_inline_asm_is_fine() -> None:
    prog = program(Op("tt.elementwise_inline_asm", (N,), (10,), pure=True), store(X))
    assert analyze_program(prog, NAMES) == WriteAnalysis(frozenset({"x"}), None, False)


# --- give-up cases: unknown, never fewer writes ----------------------------------------------------


def unknown(prog: Program) -> WriteAnalysis:
    result = analyze_program(prog, NAMES)
    assert result.written_names is None and result.reason is not None and result.opaque_side_effects
    return result


def test_write_through_loaded_pointer() -> None:
    result = unknown(program(Op("tt.load", (X,), (10,)), store(10), pointers={10}))
    assert result.writes_outside_arguments and "loaded from memory (tt.load)" in (result.reason or "")


def test_write_through_int_to_ptr() -> None:
    result = unknown(program(Op("tt.int_to_ptr", (N,), (10,)), store(10), pointers={10}))
    assert result.writes_outside_arguments and "tt.int_to_ptr" in (result.reason or "")


def test_non_pure_inline_asm() -> None:
    result = unknown(program(Op("tt.elementwise_inline_asm", (N,), (10,))))
    assert result.writes_outside_arguments and "inline asm" in (result.reason or "")


def test_unknown_op_with_pointers() -> None:
    result = unknown(program(Op("tt.future_op", (X,), (10,)), pointers={10}))
    assert result.reason == "unknown op tt.future_op handles pointers"


def test_unknown_op_that_may_write() -> None:
    assert (
        unknown(program(Op("tt.future_store", (N,)))).reason == "unknown op tt.future_store may write memory"
    )


def test_unknown_region_op_carrying_pointers() -> None:
    inner = Block(args=(20,), ops=[Op("some.yield", (20,))])
    result = unknown(program(Op("some.region_op", (X,), (10,), regions=((inner,),)), pointers={10, 20}))
    assert "carries pointers through its regions" in (result.reason or "")


def test_recursive_call() -> None:
    helper = Block(args=(30,), ops=[Op("tt.call", (30,), (), callee="helper"), Op("tt.return")])
    prog = program(Op("tt.call", (X,), (), callee="helper"), pointers={30}, helper=(helper,))
    assert unknown(prog).reason == "recursive call to 'helper'"


def test_call_without_body() -> None:
    assert (
        unknown(program(Op("tt.call", (X,), (), callee="extern"))).reason
        == "call to 'extern', which has no body"
    )


def test_malformed_loop() -> None:
    body = Block(args=(20,), ops=[Op("scf.yield", (20,))])  # one carried value, but no iter_args
    result = unknown(program(Op("scf.for", (N, N, N), (), regions=((body,),)), pointers={20}))
    assert result.reason == "unexpected scf.for form"


def test_block_without_terminator() -> None:
    then = Block(args=(), ops=[store(X)])
    result = unknown(program(Op("scf.if", (N,), (), regions=((then,), ()))))
    assert result.reason == "a block does not end in scf.yield"


# --- debug logging ---------------------------------------------------------------------------------


class FakeModule:
    """Stands in for the MLIR module a program was read from: only its text is used."""

    def str(self) -> str:
        return "module { tt.func @k(...) { tt.future_op ... } }"


def test_give_up_logs_the_op_and_the_ttir(caplog: pytest.LogCaptureFixture) -> None:
    prog = program(Op("tt.future_op", (X,), (10,)), pointers={10})
    with caplog.at_level(logging.DEBUG, logger="functional_triton.mutation"):
        analyze_program(prog, NAMES, kernel_name="my_kernel", module=FakeModule())
    (record,) = [r for r in caplog.records if r.name == "functional_triton.mutation"]
    text = record.getMessage()
    assert record.levelno == logging.DEBUG and "my_kernel" in text
    assert "tt.future_op(operands=[0], results=[10])" in text
    assert "handles pointers" in text and FakeModule().str() in text


def test_give_up_inside_a_region_logs_the_inner_op(caplog: pytest.LogCaptureFixture) -> None:
    then = Block(args=(), ops=[store(X)])  # no terminator: the scf.if is malformed
    with caplog.at_level(logging.DEBUG, logger="functional_triton.mutation"):
        analyze_program(program(Op("scf.if", (N,), (), regions=((then,), ()))), NAMES)
    assert "gave up at op scf.if(" in caplog.text


def test_untraced_write_logs_the_write(caplog: pytest.LogCaptureFixture) -> None:
    prog = program(Op("tt.load", (X,), (10,)), store(10), pointers={10})
    with caplog.at_level(logging.DEBUG, logger="functional_triton.mutation"):
        analyze_program(prog, NAMES)
    assert "gave up at op tt.store(operands=[10, 2]" in caplog.text


def test_nothing_logged_above_debug(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="functional_triton.mutation"):
        analyze_program(program(Op("tt.future_op", (X,), (10,)), pointers={10}), NAMES)
    assert not caplog.records
