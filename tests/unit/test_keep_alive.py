"""Note [keep alive]: a kernel with effects outside its outputs is never dead-code eliminated.

``int_table_opaque`` writes through an address it loads from memory: a tensor that is not
one of its arguments. The analysis cannot see that write, so every argument counts as
written, and nothing in the program reads the kernel's outputs: only the eager-visible
write into ``dst`` (compared by the harness as an input after the call) says whether the
kernel ran. ``print_kernel`` provably writes nothing but prints.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from functorch.compile import aot_function
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from functional_triton.hops import KEEP_ALIVE
from functional_triton.passes.reinplace import launch_in_place
from tests import kernels as K
from tests import mutation_kernels as MK
from tests.harness import ALL_MODES, AOT_MODES, compile_mode, raw
from tests.helpers import Capture, nop, targets

N = 8
pytestmark = pytest.mark.filterwarnings("ignore::functional_triton.functionalize.AnalysisWarning")


def invisible_write(wrap: Any, table: torch.Tensor, x: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    t, y = table.clone(), x + 1  # intermediates: the kernel's outputs are read by no one
    wrap(MK.int_table_opaque)[(1,)](t, y, N, BLOCK=N)
    return x * 2


def table_inputs(requires_grad: bool) -> tuple[torch.Tensor, ...]:
    dst = torch.zeros(N)
    table = torch.tensor([dst.data_ptr()], dtype=torch.int64)  # differs per call: not for the harness
    return table, torch.arange(float(N)).requires_grad_(requires_grad), dst


@pytest.mark.parametrize(
    ("mode", "requires_grad"),
    # make_fx-based graphs have no autograd semantics of their own: no_grad only.
    [(m, False) for m in ALL_MODES] + [(m, True) for m in AOT_MODES],
)
def test_kernel_with_invisible_write_is_kept(mode: str, requires_grad: bool) -> None:
    """Against the raw kernel run eagerly: dst, the output and x.grad, bit for bit.

    make_fx-based modes run eliminate_dead_code in compile_mode; AOTAutograd runs its own.
    """
    table, x, dst = table_inputs(requires_grad)
    expected = invisible_write(raw, table, x, dst)
    if requires_grad:
        expected.sum().backward()
    call = compile_mode(mode, invisible_write, table_inputs(requires_grad))
    table2, x2, dst2 = table_inputs(requires_grad)
    out = call(table2, x2, dst2)
    if requires_grad:
        out.sum().backward()
        assert x2.grad is not None and x.grad is not None
        assert torch.equal(x2.grad, x.grad)
    assert torch.equal(out, expected)
    assert torch.equal(dst2, dst) and torch.equal(dst, torch.arange(1.0, N + 1))


def _graphs(prog: Any, inputs: tuple[torch.Tensor, ...], compiler: Any = nop) -> dict[str, list[Any]]:
    kept = Capture(compiler)
    out = aot_function(prog, **kept.compilers)(*inputs)
    if out.requires_grad:
        out.sum().backward()
    return kept.by_kind


def test_training_graph_launches_the_kept_kernel_once() -> None:
    """Every input of the kernel is available to the backward (x is saved for x * x):
    the partitioner must not copy the kept kernel into the backward graph."""

    def prog(table: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        ft.wrap_triton(MK.int_table_opaque)[(1,)](table, x, N, BLOCK=N)
        ft.wrap_triton(K.add_one_inplace)[(1,)](out, N, BLOCK=N)
        return x * x

    dst = torch.zeros(N)
    table = torch.tensor([dst.data_ptr()], dtype=torch.int64)
    x = torch.arange(float(N), requires_grad=True)
    graphs = _graphs(prog, (table, x))
    (fw,), (bw,) = graphs["fw"], graphs["bw"]
    assert targets(fw).count(ft.triton_kernel_wrapper_functional) == 1, fw.code  # add_one_inplace: dead
    assert ft.triton_kernel_wrapper_functional not in targets(bw), bw.code
    assert torch.equal(dst, x.detach())
    assert x.grad is not None and torch.equal(x.grad, 2 * x.detach())


def test_unused_kernel_with_known_writes_is_still_eliminated() -> None:
    """The control: only kernels with effects beyond their outputs are kept."""

    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        wrap(K.add_one_inplace)[(1,)](torch.empty_like(x), N, BLOCK=N)
        return x * 2

    gm = make_fx(torch.func.functionalize(lambda x: prog(ft.wrap_triton, x)))(torch.zeros(N))
    gm.graph.eliminate_dead_code()
    assert ft.triton_kernel_wrapper_functional not in targets(gm)
    (fw,) = _graphs(lambda x: prog(ft.wrap_triton, x), (torch.zeros(N),))["fw"]
    assert ft.triton_kernel_wrapper_functional not in targets(fw)


def test_printing_kernel_is_kept_without_a_warning(recwarn: pytest.WarningsRecorder) -> None:
    """It provably writes nothing, but prints: its node stays, its argument is cloned."""

    def prog(x: torch.Tensor) -> torch.Tensor:
        ft.wrap_triton(MK.print_kernel)[(1,)](x * 1, N, BLOCK=N)
        return x + 1

    gm = make_fx(torch.func.functionalize(prog))(torch.zeros(N))
    gm.graph.eliminate_dead_code()
    assert targets(gm).count(ft.triton_kernel_wrapper_functional) == 1
    assert KEEP_ALIVE in targets(gm)
    (fw,) = _graphs(prog, (torch.zeros(N),))["fw"]
    assert ft.triton_kernel_wrapper_functional in targets(fw)
    assert not [w for w in recwarn if issubclass(w.category, ft.AnalysisWarning)]


def test_keep_alive_does_not_stop_reinplacing() -> None:
    """keep_alive reads nothing: the kept kernel's clones of intermediates are still removed."""
    dst = torch.zeros(N)
    table = torch.tensor([dst.data_ptr()], dtype=torch.int64)
    x = torch.arange(float(N))
    with torch.no_grad():
        (fw,) = _graphs(
            lambda t, x: invisible_write(ft.wrap_triton, t, x, dst), (table, x), ft.reinplace_compiler
        )["fw"]
    seen = targets(fw)
    assert ft.triton_kernel_wrapper_functional not in seen, fw.code
    assert launch_in_place in seen, fw.code
    assert torch.equal(dst, x + 1)


@triton.jit
def write_to_address(addr, n, BLOCK: tl.constexpr):
    """Writes 1..n at the float32 address ``addr``: a kernel with no tensor argument at all."""
    offs = tl.arange(0, BLOCK)
    dst = addr.to(tl.pointer_type(tl.float32))
    tl.store(dst + offs, offs.to(tl.float32) + 1, mask=offs < n)


def test_a_kernel_without_tensor_arguments_is_kept_in_every_graph() -> None:
    """A kernel with no tensor argument has no output for keep_alive to use. No argument is
    functional, so its launch goes on below functionalization as the mutation operator, which FX
    keeps as a side effect: every graph runs it (Note [tensors functionalization does not hold])."""
    dst = torch.zeros(N)  # alive for the whole test: the graphs hold its address as a constant

    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        wrap(write_to_address)[(1,)](dst.data_ptr(), N, BLOCK=N)
        return x * 2

    def runs_the_kernel(call: Any) -> bool:
        dst.zero_()  # tracing with real tensors may have run it
        assert torch.equal(call(torch.arange(float(N))), torch.arange(float(N)) * 2)
        if torch.equal(dst, torch.zeros(N)):
            return False
        assert torch.equal(dst, torch.arange(1.0, N + 1)), dst
        return True

    assert runs_the_kernel(lambda x: prog(raw, x)), "eager writes dst"

    functionalized = make_fx(torch.func.functionalize(lambda x: prog(ft.wrap_triton, x)))(torch.zeros(N))
    functionalized.graph.eliminate_dead_code()
    functionalized.recompile()
    assert ft.triton_kernel_wrapper_mutation in targets(functionalized), functionalized.code
    assert runs_the_kernel(functionalized)

    for compiler in (nop, ft.reinplace_compiler):
        kept = Capture(compiler)
        assert runs_the_kernel(aot_function(lambda x: prog(ft.wrap_triton, x), **kept.compilers))
        (fw,) = kept.fw
        assert ft.triton_kernel_wrapper_mutation in targets(fw), fw.code

    plain = compile_mode("make_fx", prog, (torch.zeros(N),))
    assert isinstance(plain, torch.fx.GraphModule)
    assert ft.triton_kernel_wrapper_mutation in targets(plain), plain.code
    assert runs_the_kernel(plain)
