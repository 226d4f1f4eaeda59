"""Every drawn program gives eager-identical results under every tracing mode it is allowed.

Modes per program (strategies.modes_for): aot_function, aot_module, reinplace and
reinplace_keep (aot_function with ``ft.reinplace_compiler``, without and with
keep_inference_input_mutations) and plain make_fx always; make_fx(functionalize(f))
("functionalize") unless graph inputs alias each other (limit 3) or an output is a
requires_grad input; "functionalize_views" likewise. Where a launch passes distinct aliases
of a written argument (limit 1), "functionalize_views" must match eager or refuse with the
documented NotImplementedError (which one is counted as an event), never answer wrongly.
check_matches_eager itself runs the make_fx-based modes under no_grad only when an input
requires grad. Both no_grad values are drawn (one, the other, or both per program).

Upstream guard: when a (mode, no_grad) pair fails, the same program with every launch
replaced by equivalent torch ops (``build(program, native=True)``) is run in that pair.
If torch fails on that too, with the same exception type and the same first line of
message, the program is outside what AOTAutograd / functionalization support; it is
counted (``event``), not failed. Where the torch ops meet a limit of their own, the program
with its launches left out is tried the same way (torch 2.11 returns some aliasing outputs
with the wrong shape with no kernel in the program). The strategy already steers around the
upstream limits we know (see strategies.py), so this should stay rare.

Each program runs in a forked child (strategies.run_isolated): a launch with the wrong
geometry can write past a buffer and corrupt the heap, and that must fail one example,
not kill the session.

Shrunk counterexamples are the @example(...)s below, each with a named test in
tests/aliasing/test_regressions.py.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch
from hypothesis import event, example, given, note, settings
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from tests.harness import check_matches_eager
from tests.property import strategies as S
from tests.property.strategies import (
    Compute,
    CopyView,  # noqa: F401  (pasted counterexamples use every op)
    Derive,
    Detach,
    Fresh,
    Input,
    Launch,
    Mask,  # noqa: F401
    Permute,
    Program,
    Select,
    Slice,
    TorchInplace,
    Unsqueeze,
    View,
)


def _signature(error: BaseException) -> tuple[type, str]:
    lines = str(error).strip().splitlines()
    return type(error), lines[0] if lines else ""


def _upstream_also_fails(program: Program, mode: str, no_grad: bool, error: BaseException) -> bool:
    """Whether torch fails the same way without this library: with the launches replaced by torch
    ops, or, where those ops meet a torch limit of their own (an in-place op through an
    as_strided chain), with the launches left out (torch 2.11's AOTAutograd returns some outputs
    that alias mutated, aliasing inputs with the wrong shape, with or without any kernel)."""
    without_launches = dataclasses.replace(
        program, steps=tuple(s for s in program.steps if not isinstance(s, Launch))
    )
    for variant, native in ((program, True), (without_launches, False)):
        prog, make_inputs = S.build(variant, native=native)
        try:
            check_matches_eager(prog, make_inputs, modes=(mode,), no_grad=(no_grad,), **S.aot_kwargs(program))
        except Exception as native_error:  # noqa: BLE001  (any failure of torch itself)
            if _signature(native_error) == _signature(error):
                return True
    return False


def _check_in_this_process(program: Program) -> list[str]:
    """check_matches_eager in every allowed mode; returns the events to record."""
    prog, make_inputs = S.build(program)
    modes = S.modes_for(program)
    facts = S.facts(program)
    # Limit (1): checked on its own below, where a documented refusal is accepted.
    views_modes = ("functionalize_views",) if facts.views_refused and "functionalize_views" in modes else ()
    modes = tuple(m for m in modes if m not in views_modes)
    events: list[str] = []
    extra = S.aot_kwargs(program)  # dynamic=True for data-dependent sizes
    try:
        check_matches_eager(prog, make_inputs, modes=modes, no_grad=program.no_grad, **extra)
    except Exception:
        # Find the failing (mode, no_grad) pairs; re-raise unless torch itself fails there too.
        for mode in modes:
            for ng in program.no_grad:
                try:
                    check_matches_eager(prog, make_inputs, modes=(mode,), no_grad=(ng,), **extra)
                except NotImplementedError as error:
                    # README known limits: distinct aliases of a non-contiguous input written by a
                    # torch in-place op, and writes through an as_strided chain that a detach() cut
                    # off its base, are refused; accepted only where facts() says they may apply.
                    if facts.detached_chain_write and "detach()" in str(error) and mode != "make_fx":
                        events.append(f"documented refusal (an as_strided chain through detach()): {mode}")
                        continue
                    if not (facts.restride_refusal and "traced strides disagree" in str(error)):
                        raise
                    events.append(f"documented refusal (strides after a torch in-place op): {mode}")
                except Exception as error:
                    if not _upstream_also_fails(program, mode, ng, error):
                        raise
                    events.append(f"upstream torch failure: {mode}, {_signature(error)[1][:60]}")
    # make_fx traces a Mask with real tensors and fails on its data-dependent size (torch's own
    # limit), so the refusal checks below cannot run for programs with one.
    if facts.chain_write and not facts.aliasing_inputs and not facts.unbacked:
        # Note [writes through as_strided view chains]: torch.func.functionalize exposes no base
        functionalized = torch.func.functionalize(lambda *xs: prog(ft.wrap_triton, *xs))
        with torch.no_grad(), pytest.raises(NotImplementedError, match=r"as_strided\(\) after another view"):
            make_fx(functionalized)(*make_inputs())
    if "functionalize_views" in views_modes:
        # Note [aliasing arguments when views are copies]: distinct aliases of a written argument
        # match eager when one of them is a view all the others are views of (with strides its
        # copy keeps), and must otherwise raise, naming them -- never answer wrongly.
        for ng in program.no_grad:
            try:
                check_matches_eager(prog, make_inputs, modes=views_modes, no_grad=(ng,), **extra)
                events.append("distinct aliases, views as copies: matched eager")
            except NotImplementedError as error:
                if "under functionalize(remove='mutations_and_views') views are copies" not in str(error):
                    raise
                events.append("distinct aliases, views as copies: refused")
            except Exception as error:
                # The same upstream guard as above (on CUDA, make_fx's real-tensor trace of a Mask
                # fails in torch's own boolean indexing before any launch).
                if not _upstream_also_fails(program, "functionalize_views", ng, error):
                    raise
                events.append(f"upstream torch failure: functionalize_views, {_signature(error)[1][:60]}")
    return events


def check_program(program: Program) -> None:
    """Check one program in a forked child (a crash is a failure, not the end of the session)."""
    note(program.source())
    note(f"modes: {S.modes_for(program)}")
    facts = S.facts(program)
    if facts.unbacked:
        event("drawn: a data-dependent size (Mask)")
    if S.chained_views(program):
        event("drawn: as_strided after another view" + (", written" if facts.chain_write else ""))
    for name in S.run_isolated(lambda: _check_in_this_process(program)):
        event(name)


# --- shrunk counterexamples (library bugs; see tests/aliasing/test_regressions.py) -----------------
# Each says what went wrong when it was found, and the commit that fixed it, if any.

# An empty alias below the other members' aligned start is rebuilt at a negative storage offset
# (RuntimeError: Tensor: invalid storage offset -4): aot_function, aot_module, functionalize.
# Fixed in 69be83c.
EMPTY_ALIAS_BELOW_WRITTEN_VIEW = Program(
    bases=((8,),),
    inputs=(Input("x"),),
    steps=(
        Derive("v1", "x", Slice(dim=0, start=4, stop=8)),
        Derive("v2", "x", Slice(dim=0, start=0, stop=0)),
        Launch("two_writes", ("v1", "v2")),
    ),
    returns=("x",),
)

# A graph input at storage offset 4, written, then launched with a view made afterwards: the alias
# group records the input at its old offset and the view at the new value's; the write through the
# view is lost (x = [18.] instead of [20.]): aot_function, aot_module. Fixed in 69be83c.
OFFSET_INPUT_WRITTEN_THEN_ALIASED = Program(
    bases=((5,),),
    inputs=(Input("x", views=(Slice(dim=0, start=4, stop=5),)),),
    steps=(
        Launch("inplace", ("x",)),
        Derive("v1", "x", Slice(dim=0, start=0, stop=1)),
        Launch("two_writes", ("x", "v1")),
    ),
    returns=("x",),
)

# The same with the view made before the first launch: make_fx(functionalize(f)) got [18.].
# Fixed in 69be83c.
OFFSET_INPUT_VIEW_BEFORE_WRITE = Program(
    bases=((5,),),
    inputs=(Input("x", views=(Slice(dim=0, start=4, stop=5),)),),
    steps=(
        Derive("v1", "x", Slice(dim=0, start=0, stop=1)),
        Launch("inplace", ("x",)),
        Launch("two_writes", ("x", "v1")),
    ),
    returns=("x",),
)

# As found and shrunk by Hypothesis: a torch in-place op on an input at storage offset 1, then a
# launch on it and an alias of it: aot_function / aot_module gave x = [[[2.]]], not [[[100.]]].
# Fixed in 69be83c.
TORCH_INPLACE_ON_OFFSET_INPUT = Program(
    bases=((1, 2),),
    inputs=(Input("x", views=(Select(dim=1, index=1), Unsqueeze(dim=0))),),
    steps=(
        TorchInplace("x", "add_"),
        Derive("v1", "x", Detach()),
        Launch("write_then_read", ("x", "v1", "x")),
    ),
    returns=("x",),
)

# reinplace_compiler: two launches writing one tensor give an FX graph that uses a node before
# defining it (RuntimeError: Argument 'getitem' of Node 'output' was used before it has been defined).
# Fixed in 69be83c.
REINPLACE_TWO_WRITES_OF_ONE_TENSOR = Program(
    bases=((4,),),
    inputs=(Input("x"),),
    steps=(Launch("inplace", ("x",)), Launch("inplace", ("x",))),
    returns=("x",),
)

# reinplace (no keep_inference_input_mutations): the forward returns an alias of the input as its
# new value, and AOTAutograd's copy-back x.copy_(alias) fails because strides of size-1 dims
# differ: "some elements of the input tensor and the written-to tensor refer to a single memory
# location". Fixed in 95f57eb.
REINPLACE_COPY_BACK_FROM_ALIAS = Program(
    bases=((2,),),
    inputs=(Input("x", views=(Slice(dim=0, start=0, stop=1, step=2), Unsqueeze(dim=1))),),
    steps=(Derive("v1", "x", View((1,))), Launch("copy", ("x", "v1"))),
    returns=("x",),
)

# reinplace_keep: after y.add_(1) the traced layout of y (strides (4, 1)) differs from the runtime
# value's ((2, 1)); the reinplaced argument is then re-strided into a copy and the kernel's write to
# y is lost (y = [[101., 102.]] instead of [[100., 101.]]). Fixed in 95f57eb.
REINPLACE_WRITE_LOST_TO_RESTRIDE = Program(
    bases=((2,), (1, 2)),
    inputs=(Input("x"), Input("y", base=1, views=(Slice(dim=0, start=0, stop=1, step=2),))),
    steps=(TorchInplace("y", "add_"), Launch("write_then_read", ("x", "x", "y"))),
    returns=("x",),
)


# A strided graph input (stride 2) after a torch in-place op, passed twice to one launch: the
# launch used the runtime value of x.mul(2) (contiguous) with the traced stride 2 and wrote past
# the end of a 4-element buffer: heap corruption or wrong values (aot_function, aot_module,
# reinplace, reinplace_keep). Fixed in 85caab0.
STRIDED_INPUT_TORCH_INPLACE_THEN_SAME_TENSOR_TWICE = Program(
    bases=((8,),),
    inputs=(Input("x", views=(Slice(dim=0, start=0, stop=8, step=2),)),),
    steps=(TorchInplace("x", "mul_"), Launch("two_writes", ("x", "x"))),
    returns=("x",),
    no_grad=(True,),
)

# The same family under make_fx(functionalize(f)): a torch in-place op on a full-size view of a
# strided input, then a launch on the input: heap corruption in functionalize(_views). The launch's
# layout was read after unwrapping x, which synced the pending write and re-strided x contiguous,
# while the kernel had been passed x's strides (2) before. Fixed in 2b6ff06; modes_for no longer
# leaves the functionalize modes out for it.
STRIDED_INPUT_VIEW_MUTATED_THEN_WRITTEN = Program(
    bases=((8,),),
    inputs=(Input("x", views=(Slice(dim=0, start=0, stop=8, step=2),)),),
    steps=(
        Derive("v1", "x", Slice(dim=0, start=0, stop=4)),
        TorchInplace("v1", "mul_"),
        Launch("inplace", ("x",)),
    ),
    returns=("x",),
    no_grad=(True,),
)


# reinplace_compiler: a launch on a view of an intermediate, then a launch on the intermediate:
# "RuntimeError: Argument 'slice_scatter' of Node 'output' was used before it has been defined"
# (reinplace, reinplace_keep). Fixed in 2d25323.
REINPLACE_VIEW_THEN_BASE_OF_INTERMEDIATE = Program(
    bases=((4,),),
    inputs=(Input("x"),),
    steps=(
        Compute("v1", "x", "mul2"),
        Derive("v2", "v1", Slice(dim=0, start=3, stop=4)),
        Launch("inplace", ("v2",)),
        Launch("inplace", ("v1",)),
    ),
    returns=("v1",),
    no_grad=(True,),
)

# Found on the GPU machine (thorough profile): reinplace, a launch with one group kept (the graph
# input x) and one reinplaced (y * 2 * 2, shape (1, 4)): the product's stride in its size-1 dim
# differed between trace and run, the functional rule "re-strided" it into a copy and the kernel's
# write into it was lost. Fixed: size-1 dims' strides are ignored (aliasing._restride).
REINPLACE_PARTIAL_SIZE_ONE_STRIDE = Program(
    bases=((4, 6),),
    inputs=(Input("x"), Input("y", views=(Permute(dims=(1, 0)), Slice(dim=0, start=2, stop=3)))),
    steps=(Compute("v1", "y", "mul2"), Compute("v2", "v1", "mul2"), Launch("halves", ("x", "v2"))),
    returns=("v2",),
    no_grad=(False,),
)

# Found on the CPU (thorough profile): reinplace, a launch rewritten to launch in place reads x after
# x.add_(1) on a non-dense input; that value's fake strides (2, 2, 1) are not its real ones
# (1, 1, 1), and the kernel read past x's elements. Fixed: in-place launches check strides when the
# graph runs and re-stride like the functional operator (reinplace.launch_arguments).
REINPLACE_FAKE_STRIDES_DIFFER = Program(
    bases=((4, 1, 2),),
    inputs=(Input("x", views=(Slice(dim=2, start=0, stop=1),)),),
    steps=(TorchInplace("x", "add_"), Fresh("v1", like="x", shape=(1,)), Launch("copy", ("x", "v1"))),
    returns=("x", "v1"),
)

# Found on the CPU (thorough profile): an empty, permuted input x written by x.add_(1), then launched
# with x[:, 0:1]: the library refused ("traced strides disagree", NotImplementedError) although an
# empty tensor's strides are never used. Fixed: _same_shape ignores strides of empty tensors.
EMPTY_PERMUTED_INPUT_AND_ITS_VIEW = Program(
    bases=((1, 2, 2),),
    inputs=(Input("x", views=(Permute(dims=(0, 2, 1)), Slice(dim=0, start=0, stop=0))), Input("y")),
    steps=(
        TorchInplace("x", "add_"),
        Derive("v1", "x", Slice(dim=1, start=0, stop=1)),
        Launch("copy", ("x", "v1")),
    ),
    returns=("x",),
)

# reinplace_keep, training graph: a requires_grad leaf and a view of it written by one launch:
# "AssertionError: Unexpected fake buffer _tensor_constant0" (also with plain aot_function and
# keep_inference_input_mutations=True; the same writes in torch ops pass). Fixed: the alias group's
# copies no longer record autograd history (aliasing.rebuild_arguments).
REINPLACE_KEEP_TRAINING_INPUT_AND_ITS_VIEW = Program(
    bases=((2,),),
    inputs=(Input("x", requires_grad=True),),
    steps=(
        Derive("v1", "x", Slice(dim=0, start=0, stop=1)),
        Launch("halves", ("x", "v1")),
        Compute("g_x", "x", "mul2"),
    ),
    returns=("g_x",),
    no_grad=(False,),
)


# reinplace, inference graph whose copy-back is after the graph: a launch writes x.view(1, 5, 2) of
# a permuted input and x is returned: "unsupported operation: some elements of the input tensor and
# the written-to tensor refer to a single memory location" -- the fake view had x's strides, the
# real one another stride in the size-1 dimension, and torch's copy_ refused the copy of the same
# memory onto itself (found on the GPU machine). Fixed: reinplace._returns_input_itself.
REINPLACE_COPY_BACK_THROUGH_A_SIZE_ONE_VIEW = Program(
    bases=((1, 2, 5),),
    inputs=(
        Input("x", views=(Permute(dims=(0, 2, 1)),)),
        Input("y", views=(Slice(dim=0, start=0, stop=0), Permute(dims=(0, 2, 1)))),
    ),
    steps=(
        Derive("v2", "x", View(shape=(1, 5, 2))),
        Launch("inplace", ("v2",), by_keyword=True, no_grad=True),
    ),
    returns=("x",),
    no_grad=(False, True),
)

# functionalize: an empty input written by x.mul_(2) (torch then gives it strides (0, 1, 0)) and
# launched with itself was refused as a written broadcast view (found on the GPU machine). Fixed:
# functionalize.broadcast_dims is empty for an empty tensor.
EMPTY_INPUT_ZERO_STRIDES_WRITTEN = Program(
    bases=((6, 3, 2),),
    inputs=(Input("x", views=(Slice(dim=2, start=0, stop=0), Permute(dims=(0, 2, 1)))),),
    steps=(
        TorchInplace("x", "mul_"),
        Derive("v3", "x", Detach()),
        Launch("two_writes", ("x", "v3"), by_keyword=True),
    ),
    returns=("x",),
    no_grad=(True,),
)


# The default (ci) profile draws 40 programs besides the named ones (each runs forked, ~2.5 s on
# the CPU interpreter; 200 took 8 minutes of CI's budget); the thorough profile sets its own count.
_EXAMPLES = 40 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci" else settings().max_examples


@settings(max_examples=_EXAMPLES)
@given(program=S.programs())
@example(program=REINPLACE_PARTIAL_SIZE_ONE_STRIDE)
@example(program=REINPLACE_FAKE_STRIDES_DIFFER)
@example(program=EMPTY_PERMUTED_INPUT_AND_ITS_VIEW)
@example(program=EMPTY_ALIAS_BELOW_WRITTEN_VIEW)
@example(program=OFFSET_INPUT_WRITTEN_THEN_ALIASED)
@example(program=OFFSET_INPUT_VIEW_BEFORE_WRITE)
@example(program=TORCH_INPLACE_ON_OFFSET_INPUT)
@example(program=REINPLACE_TWO_WRITES_OF_ONE_TENSOR)
@example(program=REINPLACE_COPY_BACK_FROM_ALIAS)
@example(program=REINPLACE_WRITE_LOST_TO_RESTRIDE)
@example(program=STRIDED_INPUT_TORCH_INPLACE_THEN_SAME_TENSOR_TWICE)
@example(program=STRIDED_INPUT_VIEW_MUTATED_THEN_WRITTEN)
@example(program=REINPLACE_VIEW_THEN_BASE_OF_INTERMEDIATE)
@example(program=REINPLACE_KEEP_TRAINING_INPUT_AND_ITS_VIEW)
@example(program=REINPLACE_COPY_BACK_THROUGH_A_SIZE_ONE_VIEW)
@example(program=EMPTY_INPUT_ZERO_STRIDES_WRITTEN)
def test_program_matches_eager(program: Program) -> None:
    check_program(program)
