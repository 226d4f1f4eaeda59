"""Counterexamples found by tests/property (shrunk), one named test each.

Each is also an @example on tests/property/test_equivalence.py::test_program_matches_eager.
The kernels are the strided ones of tests/property/kernels.py: every tensor argument is
followed by its layout (numel, two sizes, three strides), read from the tensor at trace time.
Modes: ALIASING_MODES, since each launch passes distinct aliases of a written argument,
which functionalize(remove="mutations_and_views") refuses by design.
"""

from __future__ import annotations

from typing import Any

import torch

from tests.harness import ALIASING_MODES, check_matches_eager
from tests.property import kernels as PK
from tests.property.strategies import layout


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
