"""Counterexamples found by tests/property (shrunk), one named test each.

Each is also an @example on tests/property/test_equivalence.py::test_program_matches_eager
(the first reinplace crash has a non-crashing sibling there). Those that corrupted the heap
run in a forked child (strategies.run_isolated), so a crash fails one test, not the session.
The kernels are the strided ones of tests/property/kernels.py: every tensor argument is
followed by its layout (numel, two sizes, three strides), read from the tensor at trace time.
Docstrings describe each failure as it was found (most are fixed since). Modes:
ALIASING_MODES where a launch passes distinct aliases of a written argument
(functionalize(remove="mutations_and_views") rebuilds only some of those, README), else all.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.harness import ALIASING_MODES, AOT_MODES, check_matches_eager
from tests.property import kernels as PK
from tests.property.strategies import layout, run_isolated


def launch(wrap: Any, kernel: Any, *tensors: torch.Tensor) -> None:
    """``wrap(kernel)[(1,)]`` with each tensor followed by its layout; one program of 64 lanes."""
    args = [v for t in tensors for v in (t, *layout(t))]
    wrap(kernel)[(1,)](*args, CHUNK=64)


def test_empty_alias_below_the_written_view() -> None:
    """An empty alias whose storage offset lies below the other members' 16-byte-aligned start.

    Eager: x[4:8] += 1 (the empty x[0:0] is never touched). Traced: the alias group's
    buffer starts at x[4], so x[0:0] is rebuilt at storage offset -4 and tracing raises
    "RuntimeError: Tensor: invalid storage offset -4" (aot_function, aot_module, functionalize).
    """

    def prog(wrap, x):
        launch(wrap, PK.two_writes_kernel, x[4:8], x[0:0])
        return (x,)

    check_matches_eager(prog, lambda: (torch.arange(8.0),), modes=ALIASING_MODES)


def test_input_with_storage_offset_written_then_aliased_by_a_new_view() -> None:
    """A graph input at storage offset 4, written by one launch, then passed with a view made after it.

    Eager: x = [4] -> 2 * 4 + 1 = 9 -> x += 1 -> 10 -> v *= 2 through the alias -> x = [20].
    Under AOTAutograd the second launch records x at its old storage offset (4) but the new
    view at the offset of the replaced value (0), so the alias group rebuilds them as
    disjoint tensors and the write through v is lost (aot_function, aot_module).
    """

    def prog(wrap, x):
        launch(wrap, PK.inplace_kernel, x)
        v = x[0:1]
        launch(wrap, PK.two_writes_kernel, x, v)
        return (x,)

    check_matches_eager(prog, lambda: (torch.arange(5.0)[4:5],), modes=ALIASING_MODES)


def test_view_of_offset_input_made_before_the_input_is_written() -> None:
    """As above, but the view is taken before the first launch: make_fx(functionalize(f)) gets it wrong.

    Eager: x = [20] as above. Under torch.func.functionalize the written input reports storage
    offset 0 while the regenerated view keeps offset 4, so again the two arguments are
    rebuilt apart (functionalize).
    """

    def prog(wrap, x):
        v = x[0:1]
        launch(wrap, PK.inplace_kernel, x)
        launch(wrap, PK.two_writes_kernel, x, v)
        return (x,)

    check_matches_eager(prog, lambda: (torch.arange(5.0)[4:5],), modes=ALIASING_MODES)


def test_torch_inplace_on_offset_input_then_aliased_launch() -> None:
    """A torch in-place op on a graph input at a nonzero storage offset, then a launch on it and an alias.

    Eager: x = [1] -> add_(1) -> 2 -> write_then_read writes 100 through x, reads it back
    through x.detach() into x: x = [100]. Under AOTAutograd the mutated input's value is a
    fresh tensor at offset 0 while x itself still reports offset 1, so the alias group
    misplaces one argument (aot_function, aot_module). Found as shrunk.
    """

    def prog(wrap, x):
        x.add_(1)
        v = x.detach()
        launch(wrap, PK.write_then_read_kernel, x, v, x)
        return (x,)

    def inputs():
        return (torch.arange(2.0).reshape(1, 2).select(1, 1).unsqueeze(0).detach(),)  # [[1.]], offset 1

    check_matches_eager(prog, inputs, modes=ALIASING_MODES)


def test_reinplace_two_launches_writing_one_tensor() -> None:
    """Two in-place launches on one graph input: the simplest program with two writes of one storage.

    Eager: x = 2 * (2 * x + 1) + 1. With ft.reinplace_compiler the rewritten forward graph uses
    a node before defining it: "RuntimeError: Argument 'getitem' of Node 'output' was used before
    it has been defined!" (reinplace; with an intermediate instead of an input, reinplace_keep too).
    """

    def prog(wrap, x):
        launch(wrap, PK.inplace_kernel, x)
        launch(wrap, PK.inplace_kernel, x)
        return (x,)

    check_matches_eager(prog, lambda: (torch.arange(4.0),))


def test_reinplace_copy_back_from_an_alias_with_other_size_one_strides() -> None:
    """An input of shape (1, 1) and strides (2, 1), written through its view x.view(1).

    Eager: x = [[1.]]. reinplace (keep_inference_input_mutations=False): the forward returns an
    alias of x as x's new value, AOTAutograd's epilogue runs x.copy_(alias), and the strides of the
    size-1 dims differ, so torch refuses: "RuntimeError: unsupported operation: some elements of the
    input tensor and the written-to tensor refer to a single memory location".
    """

    def prog(wrap, x):
        launch(wrap, PK.copy_kernel, x, x.view(1))
        return (x,)

    check_matches_eager(prog, lambda: (torch.arange(2.0)[0:1:2].unsqueeze(1),), modes=ALIASING_MODES)


def test_reinplace_keep_write_lost_when_runtime_strides_differ() -> None:
    """y.add_(1) on an input of strides (4, 1), then a launch writing y beside a write the pass keeps.

    Eager: y = [[100., 101.]] (written through the launch). reinplace_keep: the launch's group for y
    is reinplaced, but the traced layout of y (4, 1) differs from the runtime value of y.add(1)
    ((2, 1)), so the functional node re-strides y into a copy and the write is lost:
    y = [[101., 102.]].
    """

    def prog(wrap, x, y):
        y.add_(1)
        launch(wrap, PK.write_then_read_kernel, x, x, y)
        return (x,)

    def inputs():
        return torch.arange(2.0), (torch.arange(2.0) + 100).reshape(1, 2)[0:1:2]

    check_matches_eager(prog, inputs)


def test_reinplaced_launch_on_input_restrided_by_torch_op() -> None:
    """The traced layout of x (stride 2) is not the runtime layout of x.add(1) (stride 1).

    Eager: x = [3., 7., 11., 15.]. The reinplace modes launched in place on the contiguous runtime
    value with the traced stride 2: wrong values (reinplace_keep) and writes past the end of a
    4-element buffer, which corrupted the heap ("double free or corruption"), so it runs in a
    forked child.
    """

    def prog(wrap, x):
        x.add_(1)
        launch(wrap, PK.inplace_kernel, x)
        return (x,)

    run_isolated(lambda: check_matches_eager(prog, lambda: (torch.arange(8.0)[0:8:2],), modes=AOT_MODES))


def test_strided_input_after_torch_inplace_op_passed_twice() -> None:
    """x = arange(8)[::2]; x.mul_(2); then one launch gets x twice (a one-member alias group).

    Eager: x = [2., 10., 18., 26.]. aot_function, aot_module, reinplace, reinplace_keep: the launch
    uses the runtime value of x.mul(2) (contiguous) with the traced stride 2 and writes past its
    end: heap corruption ("double free or corruption" / "corrupted size vs. prev_size") or wrong
    values. Runs in a forked child.
    """

    def prog(wrap, x):
        x.mul_(2)
        launch(wrap, PK.two_writes_kernel, x, x)
        return (x,)

    run_isolated(lambda: check_matches_eager(prog, lambda: (torch.arange(8.0)[0:8:2],), no_grad=(True,)))


FULL_VIEWS = {
    "view_as": lambda x: x.view_as(x),
    "view": lambda x: x.view(4),
    "ellipsis": lambda x: x[...],
    "slice_tuple": lambda x: x[(slice(0, 4),)],
    "itself": lambda x: x,
    "colon": lambda x: x[:],
}


@pytest.mark.parametrize("full_view", list(FULL_VIEWS))
def test_strided_input_written_after_torch_inplace_op_through_a_full_view(full_view: str) -> None:
    """x = arange(8)[::2].detach(); x.view_as(x).mul_(2); then a launch writes x in place.

    Eager: x = [1., 9., 17., 25.]. make_fx(functionalize(f)) (remove="mutations" and
    "mutations_and_views"): the mutation through a full-size view (view_as, x[...], x.view(4),
    x[(slice(0, 4),)]; not x itself, not x[:]) is pending when the program reads x's strides
    (2) for the kernel; the launch's functionalization rule unwraps x, which syncs it, and
    torch then gives x its new contiguous value's metadata (stride 1). The layout was taken
    after that, so the kernel, told stride 2, wrote past the end of a 4-element buffer: heap
    corruption ("double free or corruption") or, with x.view(4), wrong values. Fixed: layouts
    record the metadata the program saw, read before unwrapping. Runs in a forked child.
    """
    make_view = FULL_VIEWS[full_view]

    def prog(wrap, x):
        make_view(x).mul_(2)
        launch(wrap, PK.inplace_kernel, x)
        return (x,)

    def inputs():
        return (torch.arange(8.0)[0:8:2].detach(),)  # strided, and no view

    run_isolated(lambda: check_matches_eager(prog, inputs, no_grad=(True,)))


def test_reinplace_partial_launch_on_a_product_with_a_size_one_dim() -> None:
    """x and y = x.t()[2:3] are graph inputs (one synthetic base); v = y * 2 * 2 has shape (1, 4).

    Eager: v = [[8., 32., 2002., 2003.]]. reinplace: x's group keeps its clone, v's is launched in
    place; v's stride in its size-1 dim differed between trace and run, the functional rule
    copied v to "re-stride" it and the kernel wrote the copy: v = [[8., 32., 56., 80.]].
    """

    def prog(wrap, x, y):
        v = y * 2 * 2
        launch(wrap, PK.halves_kernel, x, v)
        return (v,)

    def inputs():
        base = torch.arange(24.0).reshape(4, 6)
        return base, base.t()[2:3]

    check_matches_eager(prog, inputs, modes=AOT_MODES, no_grad=(False, True))


def test_reinplace_launch_reading_a_value_whose_real_strides_differ_from_the_fake_ones() -> None:
    """x = arange(8).reshape(4, 1, 2)[:, :, 0:1] (not dense); x.add_(1); copy x into zeros_like(x).

    Eager: v = [2., 4., 6., 8.]. reinplace: the launch became an in-place launch, but the value of
    x.add_(1) has strides (2, 2, 1) as a fake tensor and (1, 1, 1) for real, and the kernel was
    told (2, 2, 1): it read past x's elements (v = [2., 6., <garbage>]). The functional operator
    re-strides such an argument; the in-place launch now does too (launch_arguments).
    """

    def prog(wrap, x):
        x.add_(1)
        v = torch.zeros_like(x)
        launch(wrap, PK.copy_kernel, x, v)
        return x, v

    check_matches_eager(
        prog, lambda: (torch.arange(8.0).reshape(4, 1, 2)[:, :, 0:1].detach(),), modes=AOT_MODES
    )


def test_empty_permuted_input_written_then_launched_with_its_view() -> None:
    """x = base.permute(0, 2, 1)[0:0] (empty); x.add_(1); launch copy(x, x[:, 0:1]).

    Eager: nothing to do. Traced: the alias group's traced strides disagreed with its values'
    and the launch was refused with NotImplementedError, though no element is ever touched.
    """

    def prog(wrap, x):
        x.add_(1)
        launch(wrap, PK.copy_kernel, x, x[:, 0:1])
        return (x,)

    check_matches_eager(
        prog, lambda: (torch.arange(4.0).reshape(1, 2, 2).permute(0, 2, 1)[0:0],), modes=ALIASING_MODES
    )


def test_reinplace_launch_on_a_view_then_on_its_intermediate_base() -> None:
    """y = x * 2; a launch writes y[3:4]; a second launch writes y.

    Eager: y = [1., 5., 9., 27.]. reinplace and reinplace_keep: the rewritten graph uses a node
    before defining it: "RuntimeError: Argument 'slice_scatter' of Node 'output' was used before
    it has been defined!".
    """

    def prog(wrap, x):
        y = x * 2
        launch(wrap, PK.inplace_kernel, y[3:4])
        launch(wrap, PK.inplace_kernel, y)
        return (y,)

    check_matches_eager(prog, lambda: (torch.arange(4.0),))


def test_reinplace_keep_training_graph_input_and_its_view_written() -> None:
    """A requires_grad leaf x and x[0:1] passed to one launch, x used differentiably afterwards.

    Eager: x = [2000., 1.], output x * 2 = [4000., 2.], x.grad = 2 * weights. reinplace_keep
    (aot_function with keep_inference_input_mutations=True), no_grad=False: "AssertionError:
    Unexpected fake buffer _tensor_constant0" in AOTAutograd's graph capture: the fake rule's
    copies into the alias group's buffer recorded autograd history, and functionalization's
    slice_scatter of the view's update made autograd replay as_strided on that untraced buffer.
    """

    def prog(wrap, x):
        launch(wrap, PK.halves_kernel, x, x[0:1])
        return (x * 2,)

    check_matches_eager(
        prog, lambda: (torch.arange(2.0).requires_grad_(),), modes=ALIASING_MODES, no_grad=(False,)
    )


def test_reinplace_input_returned_through_a_view_with_a_size_one_dim() -> None:
    """x = arange(10).reshape(1, 2, 5).permute(0, 2, 1); a launch writes x.view(1, 5, 2); return x.

    Eager: x + 1. reinplace (copy-back after the graph): "RuntimeError: unsupported operation: some
    elements of the input tensor and the written-to tensor refer to a single memory location":
    the write was launched in place and the graph returned x.view(...) for AOTAutograd to copy
    back, which the fake tensor gave x's strides (10, 1, 5) and the real view (5, 1, 5) -- the
    same memory, but a partial overlap to torch's copy_ (found on the GPU machine by the thorough
    profile, reproduced on the CPU).
    """

    def prog(wrap, x):
        launch(wrap, PK.inplace_kernel, x.view(1, 5, 2))
        return (x,)

    check_matches_eager(prog, lambda: (torch.arange(10.0).reshape(1, 2, 5).permute(0, 2, 1),))


def test_empty_input_with_zero_strides_written_under_functionalize() -> None:
    """x = base[:, :, 0:0].permute(0, 2, 1) (shape (6, 0, 3)); x.mul_(2); launch two_writes(x, x).

    Eager: nothing to do. functionalize and functionalize_views: NotImplementedError "argument
    'a_ptr' is written and has a stride of 0 in a dimension longer than 1" -- torch's in-place op
    left the empty tensor strides (0, 1, 0), taken for a broadcast view, though an empty tensor
    shares no element (found on the GPU machine by the thorough profile, reproduced on the CPU).
    """

    def prog(wrap, x):
        x.mul_(2)
        launch(wrap, PK.two_writes_kernel, x, x.detach())
        return (x,)

    check_matches_eager(
        prog, lambda: (torch.arange(36.0).reshape(6, 3, 2)[:, :, 0:0].permute(0, 2, 1),), modes=ALIASING_MODES
    )


@pytest.mark.parametrize("mode", ["aot_function", "aot_module", "reinplace", "functionalize", "symbolic"])
def test_distinct_aliases_of_a_strided_input_written_by_a_torch_op_are_refused(mode: str) -> None:
    """README known limit: after x.add_(1) on a non-contiguous graph input, torch's functionalization
    gives views of x contiguous metadata; x and a view of it passed to one launch that writes one of
    them cannot be laid out as in eager, and must raise, naming them -- never answer wrongly."""

    def prog(wrap, x):
        v = x[:, 0:1]
        x.add_(1)
        launch(wrap, PK.copy_kernel, x, v)
        return (x,)

    with pytest.raises(
        NotImplementedError, match=r"'a_ptr', 'out_ptr' share storage.*traced strides disagree"
    ):
        check_matches_eager(prog, lambda: (torch.arange(16.0).reshape(4, 4)[:, ::2],), modes=(mode,))


@pytest.mark.parametrize("shape", [(4, 4), (3, 5)], ids=["square", "oblong"])
@pytest.mark.parametrize("mode", ["aot_function", "aot_module", "reinplace", "functionalize", "symbolic"])
def test_distinct_aliases_of_a_transposed_input_written_by_a_torch_op_match_eager(
    mode: str, shape: tuple[int, int]
) -> None:
    """README known limit, its other half: the program refused above, on a transposed graph input
    (base.t(), non-contiguous) instead of a column slice, matches eager bit for bit."""

    def prog(wrap, x):
        v = x[:, 0:1]
        x.add_(1)
        launch(wrap, PK.copy_kernel, x, v)
        return (x,)

    rows, cols = shape
    check_matches_eager(
        prog, lambda: (torch.arange(float(rows * cols)).reshape(rows, cols).t(),), modes=(mode,)
    )


def test_empty_written_view_of_a_returned_intermediate_keeps_output_aliasing() -> None:
    """y = base[0:0] (shape (0, 1, 6)); v1 = y * 2; v4 = v1.select(2, 2); halves(v4, v1); return v4, v1.

    Reported by the thorough profile (seed 61206001) as "aliasing among outputs" under aot_function:
    eager's v4 and v1 share an empty storage of 0 bytes, the traced ones a 16-byte buffer (the
    functional operator's copy), and the harness told empty storages apart by tensor, so only the
    traced pair counted as aliasing. The harness now compares an empty storage by the storage itself
    (tests/harness.py ``_storage``): both pairs alias, as they do.
    """

    def prog(wrap, x, y):
        v1 = y * 2
        v4 = v1.select(2, 2)
        launch(wrap, PK.halves_kernel, v4, v1)
        return x, v4, v1

    def make() -> tuple[torch.Tensor, ...]:
        x = torch.arange(5.0).reshape(1, 1, 5).requires_grad_()
        y = (torch.arange(6.0) + 100).reshape(1, 1, 6)[0:0].detach().requires_grad_()
        return x, y

    check_matches_eager(prog, make, modes=("aot_function",), no_grad=(False,))


def test_known_limit_write_through_a_detach_of_an_as_strided_chain_is_refused_under_aot() -> None:
    """x (5, 2); v7 = x.permute(0, 1).as_strided((2,), (1,), 1).detach(); two_writes(v7, v7) under no_grad.

    Eager writes x's storage through v7. Under AOTAutograd the write must go to the chain's base
    (Note [writes through as_strided view chains]), but detach() leaves v7 without a ``_base``, so
    the library refuses, naming the argument and the detach() (README Known limits); without the
    detach() it matches eager. Found by the thorough profile (seed 61206002) on the CPU; before,
    the refusal named torch.func.functionalize.
    """

    def prog(wrap, x):
        v7 = x.permute(0, 1).as_strided((2,), (1,), 1).detach()
        launch(wrap, PK.two_writes_kernel, v7, v7)
        return (x * 2,)

    def without_detach(wrap, x):
        v3 = x.permute(0, 1).as_strided((2,), (1,), 1)
        launch(wrap, PK.two_writes_kernel, v3, v3)
        return (x * 2,)

    def make() -> tuple[torch.Tensor, ...]:
        return (torch.arange(10.0).reshape(5, 2).requires_grad_(),)

    refused = r"'a_ptr' is written and is a detach\(\) of a view made with as_strided\(\) after another view"
    with pytest.raises(NotImplementedError, match=refused):
        check_matches_eager(prog, make, modes=("aot_function",), no_grad=(True,))
    check_matches_eager(without_detach, make, modes=("aot_function",), no_grad=(True,))
