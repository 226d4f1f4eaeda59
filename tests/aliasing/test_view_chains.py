"""Writes through view chains that contain as_strided (issue 15, item 1).

torch's functionalization refuses to commit a mutation through a chain in which as_strided
follows another view; the rule updates the view's base instead (Note [writes through as_strided
view chains]). Every test compares with eager raw launches: outputs, inputs after the call,
later reads through other views of the base, aliasing of outputs, and grads in training.
"""

from __future__ import annotations

import pytest
import torch

import functional_triton as ft
from tests import kernels as K
from tests.harness import check_matches_eager

# make_fx(functionalize) is absent: torch.func.functionalize gives no access to a view's base,
# and raises (test_functionalize_refuses_clearly). "make_fx" traces without functionalization.
MODES = ("aot_function", "aot_module", "reinplace", "reinplace_keep", "make_fx")


def launch(wrap, v):
    wrap(K.add_index_strided)[(1,)](v, v.numel(), v.stride(0), BLOCK=8)


def arange(n: int = 16, requires_grad: bool = False) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32).requires_grad_(requires_grad)


def test_as_strided_after_narrow() -> None:
    def prog(wrap, x):
        v = x.narrow(0, 0, 8).as_strided((3,), (2,), 1)
        launch(wrap, v)
        return x + 0, v * 1, x[1:5] * 2

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_as_strided_after_narrow_with_offset_of_an_intermediate() -> None:
    def prog(wrap, x):
        y = x * 2
        v = y.narrow(0, 4, 8).as_strided((4,), (3,), 5)
        launch(wrap, v)
        return y, v

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_as_strided_after_transpose() -> None:
    def prog(wrap, x):
        v = x.view(4, 4).t().as_strided((4,), (5,), 0)  # the diagonal
        launch(wrap, v)
        return x.view(4, 4).t() + 0

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_as_strided_of_an_as_strided() -> None:
    def prog(wrap, x):
        v = x.as_strided((2, 6), (8, 1), 1).as_strided((3,), (4,), 2)
        launch(wrap, v)
        return x.sum(), v + 0

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_chain_written_and_other_views_read_in_one_launch() -> None:
    # read-only aliases of the same base in the same launch see the write (one alias group)
    def prog(wrap, x):
        v = x.narrow(0, 0, 8).as_strided((4,), (2,), 0)
        out = torch.empty(4)
        wrap(K.write_then_read)[(1,)](v.as_strided((4,), (1,), 0), x[0:4], out, 4, BLOCK=4)
        return out, x + 0

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_chain_of_an_input_view_is_returned_and_aliases_the_input() -> None:
    def prog(wrap, x):
        v = x[2:].as_strided((3,), (3,), 4)
        launch(wrap, v)
        return v

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_two_chains_of_one_base_written_by_one_launch() -> None:
    def prog(wrap, x):
        a = x.narrow(0, 0, 8).as_strided((4,), (2,), 0)
        b = x.narrow(0, 0, 8).as_strided((4,), (2,), 1)
        wrap(K.two_writes)[(1,)](a.as_strided((4,), (1,), 0), b.as_strided((4,), (1,), 8), 4, BLOCK=4)
        return x * 1

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_training_chain_of_a_requires_grad_input_view() -> None:
    # eager: the raw write is invisible to autograd; x's grad comes from the ops around it
    def prog(wrap, x):
        y = x * 3
        v = y.narrow(0, 0, 8).as_strided((3,), (2,), 1)
        launch(wrap, v)
        return y * x

    check_matches_eager(prog, lambda: (arange(requires_grad=True),), modes=MODES)


def test_training_chain_written_on_a_leaf_input_under_no_grad() -> None:
    def prog(wrap, x, w):
        v = x.narrow(0, 0, 8).as_strided((3,), (2,), 1)
        launch(wrap, v)
        return x * w

    check_matches_eager(
        prog, lambda: (arange(), arange(requires_grad=True)), modes=("aot_function", "reinplace")
    )


def test_overlapping_as_strided_chain_raises_clearly() -> None:
    # elements 0..3 of v overlap pairwise (stride 1 rows of stride 1): no exact scatter exists
    def prog(wrap, x):
        v = x.narrow(0, 0, 8).as_strided((3, 2), (1, 1), 0)
        wrap(K.scale_inplace_2d)[(3,)](v, 3, 2, v.stride(0), v.stride(1), BLOCK=2)
        return x + 0

    with pytest.raises(NotImplementedError, match=r"argument 'x_ptr' .*overlap"):
        check_matches_eager(prog, lambda: (arange(),), modes=("aot_function",), no_grad=(True,))


def test_functionalize_refuses_clearly() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    def prog(x):
        launch(ft.wrap_triton, x.narrow(0, 0, 8).as_strided((3,), (2,), 1))
        return x

    with pytest.raises(NotImplementedError, match=r"argument 'x_ptr' .*as_strided\(\) after another view"):
        make_fx(torch.func.functionalize(prog))(arange())


def test_plain_chains_keep_the_plain_commit() -> None:
    # a chain torch accepts (as_strided first) is committed through the view: no base scatter
    from functorch.compile import aot_function, make_boxed_func

    graphs = []

    def keep(gm, _):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    def prog(x):
        launch(ft.wrap_triton, x.as_strided((3,), (2,), 1)[1:])
        return x

    aot_function(prog, keep)(arange())
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.as_strided_scatter.default in targets
    assert torch.ops.aten.slice_scatter.default in targets


# Note [scattering into a base]: the base of a view made from a detach() of another view is that
# detached tensor, itself a view; its functional value does not keep the storage's layout. Before,
# as_strided_scatter placed the view in that value's own coordinates: fake tensors refused it as out
# of bounds (a RuntimeError from torch, not the raw launch's result) or, at offset 0, the write went
# to other elements.


def test_as_strided_of_a_detached_view_of_an_input_with_an_offset() -> None:
    def prog(wrap, x):
        v = x.narrow(0, 1, 6).detach().as_strided((3,), (2,), x.storage_offset() + 2)
        launch(wrap, v)
        return x + 0, v * 1

    check_matches_eager(prog, lambda: (arange(20)[4:],), modes=MODES)


def test_as_strided_of_a_detached_transpose_is_placed_in_memory_order() -> None:
    def prog(wrap, x):
        d = x.view(4, 4).t().detach()
        v = d.narrow(1, 1, 3).as_strided((3,), (5,), x.storage_offset() + 1)  # a diagonal
        launch(wrap, v)
        return x + 0, d * 1

    check_matches_eager(prog, lambda: (arange(20)[4:],), modes=MODES)


def test_broadcast_view_of_a_detached_view_is_written_as_in_eager() -> None:
    def prog(wrap, x):
        v = x.narrow(0, 2, 1).detach().expand(4)  # every element is x[2]: the last write wins
        launch(wrap, v)
        return x + 0

    check_matches_eager(prog, lambda: (arange(),), modes=MODES)


def test_as_strided_of_a_detached_view_reaching_other_elements_raises_clearly() -> None:
    # d holds x[1] and x[3]; v reaches x[2] and x[4]: only x could take the write, and detach() cut it off
    def prog(wrap, x):
        v = x.as_strided((2,), (2,), 1).detach().as_strided((2,), (2,), 2)
        launch(wrap, v)
        return x + 0

    refused = r"argument 'x_ptr' is written and is a view .* made with detach\(\) from another view"
    with pytest.raises(NotImplementedError, match=refused):
        check_matches_eager(prog, lambda: (arange(),), modes=("aot_function",), no_grad=(True,))
