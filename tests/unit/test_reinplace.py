"""reinplace_compiler: which graphs it rewrites, which it must leave alone, and that results hold."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from functorch.compile import aot_function
from torch.utils._python_dispatch import TorchDispatchMode

import functional_triton as ft
from functional_triton import _compat
from functional_triton import functionalize as ft_functionalize
from functional_triton.passes.reinplace import launch_in_place
from tests import kernels as K
from tests.harness import check_matches_eager
from tests.helpers import Capture, CloneCounts, cloned_names, targets

aten = torch.ops.aten
N = 8


def reinplacing(kept: Capture) -> Any:
    """reinplace_compiler handing the graph it rewrote to ``kept``."""
    return functools.partial(ft.reinplace_compiler, inner=kept.fw_compiler)


def inplace_input(wrap, x):
    wrap(K.add_one_inplace)[(1,)](x, x.numel(), BLOCK=16)
    return x.sum()


def out_of_place(wrap, x):
    out = torch.empty_like(x)
    wrap(K.add_kernel)[(1,)](x, x, out, x.numel(), BLOCK=16)
    return out


def inplace_tail(wrap, x):
    v = x[1:]
    wrap(K.add_one_inplace)[(1,)](v, v.numel(), BLOCK=16)


def inplace_half_columns(wrap, x):
    v = x[:, :4]
    wrap(K.scale_inplace_2d)[(v.shape[0],)](v, v.shape[0], v.shape[1], *v.stride(), BLOCK=8)


def inplace_intermediate(wrap, x):
    y = x * 2
    wrap(K.add_one_inplace)[(1,)](y, y.numel(), BLOCK=16)
    return y


CASES = {
    "graph input": (inplace_input, lambda: (torch.arange(16.0),)),
    "fresh buffer": (out_of_place, lambda: (torch.arange(16.0),)),
    "x[1:]": (inplace_tail, lambda: (torch.arange(16.0),)),
    "half the columns": (inplace_half_columns, lambda: (torch.arange(32.0).reshape(4, 8),)),
    "intermediate": (inplace_intermediate, lambda: (torch.arange(16.0),)),
}


@pytest.mark.parametrize("case", CASES)
def test_every_benchmark_case_launches_in_place_with_no_copies(case: str) -> None:
    prog, make = CASES[case]
    kept = Capture()
    with torch.no_grad():
        aot_function(
            functools.partial(prog, ft.wrap_triton),
            fw_compiler=reinplacing(kept),
            keep_inference_input_mutations=True,
        )(*make())
    (gm,) = kept.graphs
    seen = targets(gm)
    assert ft.triton_kernel_wrapper_functional not in seen, gm.code
    assert launch_in_place in seen, gm.code
    copies = {
        aten.copy_.default,
        aten.slice_scatter.default,
        aten.as_strided_scatter.default,
        aten.clone.default,
    }
    assert not copies & set(seen), gm.code


@pytest.mark.parametrize("case", CASES)
def test_rewritten_graphs_match_eager(case: str) -> None:
    prog, make = CASES[case]
    check_matches_eager(prog, make, modes=("reinplace", "reinplace_keep"))


def _training_graphs(prog: Any, keep: bool) -> list[torch.fx.GraphModule]:
    kept = Capture()
    aot_function(
        functools.partial(prog, ft.wrap_triton),
        fw_compiler=reinplacing(kept),
        bw_compiler=reinplacing(kept),
        keep_inference_input_mutations=keep,
    )(torch.arange(float(N)), torch.ones(N).requires_grad_()).sum().backward()
    return kept.graphs


def test_training_graph_input_written_in_place_only_when_its_copy_back_is_in_the_graph() -> None:
    # The forward saves x (as the kernel leaves it: eager's backward sees the write) for the
    # backward. With the copy-back in the graph (keep_inference_input_mutations=True) the kernel
    # writes the input in place and the copy_ goes (Note [reinplacing]). Without it, AOTAutograd
    # copies the returned value into x after the forward, which would bump the version of the
    # saved x if that value were x itself: the clone stays.
    def prog(wrap, x, w):
        y = x * w
        wrap(K.add_one_inplace)[(1,)](x, N, BLOCK=N)
        return y

    kept = _training_graphs(prog, keep=True)[0]
    assert ft.triton_kernel_wrapper_functional not in targets(kept), kept.code
    assert launch_in_place in targets(kept) and aten.copy_.default not in targets(kept)
    returned = _training_graphs(prog, keep=False)[0]
    assert ft.triton_kernel_wrapper_functional in targets(returned), returned.code
    check_matches_eager(
        prog,
        lambda: (torch.arange(float(N)), torch.ones(N).requires_grad_()),
        modes=("reinplace", "reinplace_keep"),
    )


@pytest.mark.parametrize(("keep", "still_cloned"), [(False, ["y_ptr"]), (True, [])], ids=["returned", "kept"])
def test_only_safe_groups_are_reinplaced(keep: bool, still_cloned: list[str]) -> None:
    # One launch, two groups: `a` is an intermediate nobody reads again (always written in
    # place); `x` is a training graph's input, written in place only when its copy-back is in
    # the graph (keep_inference_input_mutations=True), else its clone stays (Note [reinplacing]).
    def prog(wrap, x, w):
        a = x * 2
        wrap(K.two_writes)[(1,)](a, x, N, BLOCK=N)
        return a * w

    def make_inputs() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.arange(float(N)), torch.ones(N).requires_grad_()

    before, after = Capture(), Capture()
    aot_function(
        functools.partial(prog, ft.wrap_triton),
        fw_compiler=functools.partial(ft.reinplace_compiler, inner=after.fw_compiler),
        keep_inference_input_mutations=keep,
    )(*make_inputs())
    aot_function(
        functools.partial(prog, ft.wrap_triton),
        fw_compiler=before.fw_compiler,
        keep_inference_input_mutations=keep,
    )(*make_inputs())
    assert cloned_names(before.fw[0]) == ["x_ptr", "y_ptr"], before.fw[0].code
    assert cloned_names(after.fw[0]) == still_cloned, after.fw[0].code
    check_matches_eager(prog, make_inputs, modes=("reinplace", "reinplace_keep"))


def test_stale_sizes_still_raise_after_reinplacing() -> None:
    compiled = aot_function(
        functools.partial(inplace_input, ft.wrap_triton),
        fw_compiler=ft.reinplace_compiler,
        keep_inference_input_mutations=True,
    )
    with torch.no_grad():
        compiled(torch.zeros(16))
        with pytest.raises(
            ValueError, match=r"argument 'x_ptr' has shape \(32,\), but the graph was traced for \(16,\)"
        ):
            compiled(torch.zeros(32))


def test_inner_compiler_receives_the_rewritten_graph() -> None:
    kept = Capture()
    with torch.no_grad():
        out = aot_function(functools.partial(out_of_place, ft.wrap_triton), fw_compiler=reinplacing(kept))(
            torch.arange(16.0)
        )
    assert torch.equal(out, torch.arange(16.0) * 2)
    assert launch_in_place in targets(kept.graphs[0])


def test_in_place_group_kept_when_strides_match_rebuilt_and_written_back_otherwise() -> None:
    """Groups a reinplaced node launches in place (Note [reinplacing]): the arguments themselves
    when their strides are the traced ones (size-1 dims aside), else a rebuilt group whose
    writes ``write_back`` copies into the originals."""
    from functional_triton.aliasing import in_place_group, rebuild_arguments, write_back

    base = torch.arange(8.0)
    t = base[::2]  # stride 2 at run time
    traced_contiguous = {"a": (in_place_group(0), (4,), (1,), 0)}
    launched = rebuild_arguments({"a": t}, traced_contiguous)
    assert launched["a"] is not t and launched["a"].stride() == (1,)
    launched["a"].add_(100)  # the kernel's write
    write_back({"a": t}, launched, traced_contiguous)
    assert torch.equal(base, torch.tensor([100.0, 1, 102, 3, 104, 5, 106, 7]))

    u = torch.zeros(4, 1)
    traced_other_size_one_stride = {"a": (in_place_group(3), (4, 1), (1, 7), 0)}
    assert rebuild_arguments({"a": u}, traced_other_size_one_stride)["a"] is u
    lone = {"a": (-1, (4,), (1,), 0)}  # read-only: re-strided, never written back
    copied = rebuild_arguments({"a": t}, lone)
    copied["a"].zero_()
    write_back({"a": t}, copied, lone)
    assert torch.equal(base, torch.tensor([100.0, 1, 102, 3, 104, 5, 106, 7]))


# --- training graphs: writes into graph inputs, saved tensors and incoming gradients ---------------


def clone_counts(prog: Any, make_inputs: Any, keep: bool) -> list[tuple[int, int]]:
    """(clones received, clones returned) per graph reinplace_compiler compiles, forward first."""
    compiler = CloneCounts()
    out = aot_function(
        functools.partial(prog, ft.wrap_triton),
        fw_compiler=compiler,
        bw_compiler=compiler,
        keep_inference_input_mutations=keep,
    )(*make_inputs())
    (out * 3).sum().backward()
    return compiler.counts


def _add_one(wrap: Any, t: torch.Tensor) -> None:
    wrap(K.add_one_inplace)[(1,)](t, t.numel(), BLOCK=16)


class GradWrittenInPlace(torch.autograd.Function):
    """Backward overwrites the incoming gradient (as Liger's rms_norm writes dY)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wrap: Any) -> torch.Tensor:
        ctx.wrap = wrap
        return x * 2

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        dy = dy.contiguous()
        _add_one(ctx.wrap, dy)
        return dy, None


class SavedWrittenInPlace(torch.autograd.Function):
    """Backward overwrites a tensor its forward computed and saved."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wrap: Any) -> torch.Tensor:
        y = x * 3
        ctx.save_for_backward(y)
        ctx.wrap = wrap
        return x * 2

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        (y,) = ctx.saved_tensors
        _add_one(ctx.wrap, y)
        return dy * y, None


class SavedInputWrittenInPlace(torch.autograd.Function):
    """Backward overwrites a view of its input (as Liger's swiglu writes its inputs)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wrap: Any) -> torch.Tensor:
        ctx.save_for_backward(x.view(-1))
        ctx.wrap = wrap
        return x * 2

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        (x,) = ctx.saved_tensors
        _add_one(ctx.wrap, x)
        return dy * x.view(dy.shape), None


class InputWrittenAndSaved(torch.autograd.Function):
    """Forward overwrites its input and saves it (as Liger's cross-entropy saves dlogits)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wrap: Any) -> torch.Tensor:
        out = torch.empty_like(x)
        _add_one(wrap, x)
        wrap(K.add_kernel)[(1,)](x, x, out, x.numel(), BLOCK=16)
        ctx.save_for_backward(x.detach())
        return out

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        (x,) = ctx.saved_tensors
        return dy * x, None


def _leaf() -> tuple[torch.Tensor]:
    return (torch.arange(16.0).reshape(4, 4).requires_grad_(),)


TRAINING_CASES = {
    "incoming gradient": (lambda wrap, x: GradWrittenInPlace.apply(x * 1, wrap), [(0, 0), (1, 0)]),
    "saved intermediate": (lambda wrap, x: SavedWrittenInPlace.apply(x, wrap), [(0, 0), (1, 0)]),
}


# A backward write of a leaf input: copied back by AOTAutograd where it can (torch >= 2.13), else
# launched in place on the saved input, without any clone (Note [backward writes to leaf inputs]).
LEAF_WRITE_PATHS = (True, False) if _compat.backward_writes_to_leaf_inputs_supported() else (True,)


@pytest.mark.parametrize("keep", [False, True], ids=["returned", "kept"])
@pytest.mark.parametrize("case", list(TRAINING_CASES))
def test_training_graph_writes_done_in_place(case: str, keep: bool) -> None:
    prog, expected = TRAINING_CASES[case]
    assert clone_counts(prog, _leaf, keep) == expected
    check_matches_eager(prog, _leaf, modes=("reinplace", "reinplace_keep"))


@pytest.mark.parametrize("in_place", LEAF_WRITE_PATHS, ids=lambda p: "in_place" if p else "copy_back")
@pytest.mark.parametrize("keep", [False, True], ids=["returned", "kept"])
def test_saved_view_of_a_leaf_input_written_in_backward(
    keep: bool, in_place: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ft_functionalize, "LEAF_WRITES_IN_PLACE", in_place)
    prog = lambda wrap, x: SavedInputWrittenInPlace.apply(x, wrap)  # noqa: E731
    # In place, the backward graph launches on the saved view itself: no functional node to reinplace.
    assert clone_counts(prog, _leaf, keep) == [(0, 0), (0, 0) if in_place else (1, 0)]
    check_matches_eager(prog, _leaf, modes=("reinplace", "reinplace_keep"))


@pytest.mark.parametrize("keep", [False, True], ids=["returned", "kept"])
def test_forward_input_written_and_saved(keep: bool) -> None:
    # AOTAutograd writes a copy of the Function's leaf input (its own aten.clone); the kernel's
    # write into that copy, saved for backward, is done in place. (A graph input written directly,
    # with its copy-back in the graph, is tests/integration/test_liger.py's cross-entropy case.)
    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        return InputWrittenAndSaved.apply(x, wrap)

    assert clone_counts(prog, _leaf, keep=keep) == [(2, 0), (0, 0)]
    check_matches_eager(prog, _leaf, modes=("reinplace", "reinplace_keep"))


def test_saved_tensor_read_after_the_backward_write_keeps_its_clone() -> None:
    class ReadAfterWrite(SavedWrittenInPlace):
        @staticmethod
        def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
            (y,) = ctx.saved_tensors
            old = y * 1  # read before the write, used after it: a clone must keep it
            _add_one(ctx.wrap, y)
            return dy * y + old, None

    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        return ReadAfterWrite.apply(x, wrap)

    check_matches_eager(prog, _leaf, modes=("reinplace", "reinplace_keep"))


def written_input_returned(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    _add_one(wrap, x)
    return x


def written_through_transpose(wrap: Any, x: torch.Tensor) -> None:
    v = x.t()
    wrap(K.scale_inplace_2d)[(v.shape[0],)](v, v.shape[0], v.shape[1], *v.stride(), BLOCK=8)


INPUT_CASES = {
    "written input returned": (written_input_returned, lambda: (torch.arange(16.0),)),
    "written through a transpose": (written_through_transpose, lambda: (torch.arange(32.0).reshape(8, 4),)),
}


@pytest.mark.parametrize("keep", [False, True], ids=["returned", "kept"])
@pytest.mark.parametrize("case", INPUT_CASES)
def test_inference_input_writes_done_in_place(case: str, keep: bool) -> None:
    # Without the copy-back in the graph, AOTAutograd copies the returned value into the input:
    # once that value is the input's own memory with its geometry, the copy is onto itself.
    prog, make_inputs = INPUT_CASES[case]
    compiler = CloneCounts()
    with torch.no_grad():
        aot_function(
            functools.partial(prog, ft.wrap_triton), fw_compiler=compiler, keep_inference_input_mutations=keep
        )(*make_inputs())
    assert compiler.counts == [(1, 0)]
    (gm,) = compiler.graphs
    assert aten.copy_.default not in targets(gm), gm.code
    check_matches_eager(prog, make_inputs, modes=("reinplace", "reinplace_keep"))


def _chain_in_place(wrap, x):
    y = x * 2
    for _ in range(3):
        wrap(K.add_one_inplace)[(1,)](y, y.numel(), BLOCK=16)
    return y


def _reinplaced_chain() -> torch.fx.GraphModule:
    kept = Capture()
    with torch.no_grad():
        aot_function(functools.partial(_chain_in_place, ft.wrap_triton), fw_compiler=reinplacing(kept))(
            torch.arange(16.0)
        )
    (gm,) = kept.graphs
    return gm


def test_a_launch_in_place_is_one_node_that_dead_code_elimination_keeps() -> None:
    """Note [in-place launch node]: each launch is one call, nothing else of this library's around it."""
    gm = _reinplaced_chain()
    gm.graph.eliminate_dead_code()
    assert targets(gm) == [aten.mul.Tensor, launch_in_place, launch_in_place, launch_in_place], gm.code
    (node, *_) = (n for n in gm.graph.nodes if n.target is launch_in_place)
    assert set(node.kwargs) == {"kernel_idx", "constant_args_idx", "grid", "kwargs", "layouts"}
    assert [raw[0] for raw in node.kwargs["layouts"].values()] == [-2]  # marked in place
    assert "functional_triton_passes_reinplace_launch_in_place(kernel_idx = " in gm.code


def test_a_reinplaced_graph_names_its_launch_by_an_importable_name() -> None:
    """The launch is a module-level function: FX's code names it by module and name, and a copy of
    the graph (what Inductor's decisions and graph copies make) recompiles and runs."""
    import importlib

    from torch.fx.node import _get_qualified_name

    module, _, name = _get_qualified_name(launch_in_place).rpartition(".")
    assert getattr(importlib.import_module(module), name) is launch_in_place
    gm = _reinplaced_chain()
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    copy = torch.fx.GraphModule(gm, graph)
    x = torch.arange(16.0)
    (got,) = copy(x)
    torch.testing.assert_close(got, x * 2 + 3, rtol=0, atol=0)


def test_tracing_a_reinplaced_graph_again_records_the_mutation_operator() -> None:
    """Traced tensors take launch_in_place's general path: the mutation operator, dispatched."""
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = _reinplaced_chain()
    traced = make_fx(gm)(torch.arange(16.0))
    assert targets(traced).count(ft.triton_kernel_wrapper_mutation) == 3, traced.code
    x = torch.arange(16.0)
    (got,) = traced(x)
    torch.testing.assert_close(got, x * 2 + 3, rtol=0, atol=0)


def _spy_launches(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[dict[str, Any]]]:
    """Record the runner's launches: the sites launched through, and launch_in_place's keywords."""
    from functional_triton.passes import reinplace as rp

    sites: list[Any] = []
    general: list[dict[str, Any]] = []
    # Each site's launch is a function in its slot `launch` (Note [site launch code]): a function
    # in the class's place is found first, and calls the one the slot holds.
    slot, real_general = vars(rp.LaunchSite)["launch"], rp.launch_in_place

    def site_launch(site: Any, *tensors: Any) -> None:
        sites.append(site)
        slot.__get__(site)(*tensors)

    def general_launch(**kwargs: Any) -> None:
        general.append(kwargs)
        real_general(**kwargs)

    monkeypatch.setattr(rp.LaunchSite, "launch", site_launch)
    monkeypatch.setattr(rp, "launch_in_place", general_launch)
    return sites, general


def _sites_program(wrap, x, y):
    wrap(K.add_one_inplace)[(1,)](x, x.numel(), BLOCK=16)  # one tensor
    wrap(K.two_writes)[(1,)](x, y, x.numel(), BLOCK=16)  # two tensors, both written
    return x * 1, y * 1


@pytest.mark.parametrize("strided", [False, True])
def test_reinplace_compiler_launches_through_bound_sites(
    monkeypatch: pytest.MonkeyPatch, strided: bool
) -> None:
    """Note [launch sites]: the runner's launches in place go through sites bound once, with eager's
    results; a call with other strides (anything their fast path does not take) is handed to
    launch_in_place, with exactly the results of the graph run without sites."""
    from functorch.compile import make_boxed_func

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        if strided:  # traced contiguous, replayed on every other element
            return torch.arange(32.0)[::2], torch.linspace(-1, 1, 32)[::2]
        return torch.arange(16.0), torch.linspace(-1, 1, 16)

    def compile_program(compiler: Any) -> Any:
        fn = aot_function(functools.partial(_sites_program, ft.wrap_triton), fw_compiler=compiler)
        fn(torch.arange(16.0), torch.linspace(-1, 1, 16))  # compiles (contiguous)
        return fn

    with torch.no_grad():
        compiled = compile_program(ft.reinplace_compiler)
        unbound = compile_program(
            functools.partial(ft.reinplace_compiler, inner=lambda gm, _: make_boxed_func(gm.forward))
        )
        if strided:  # the kernels assume contiguity: eager would write other elements
            want_x, want_y = make()
            expected = unbound(want_x, want_y)
        else:
            want_x, want_y = make()
            expected = _sites_program(lambda k: k, want_x, want_y)
        site_calls, general_calls = _spy_launches(monkeypatch)
        x, y = make()
        got = compiled(x, y)
    assert len(site_calls) == 2
    assert len(general_calls) == (2 if strided else 0)
    for a, b in zip([*got, x, y], [*expected, want_x, want_y]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def _python_match(a: torch.Tensor, b: Any) -> bool:
    """What Note [launch site checks] says a site's C++ check compares, written out in Python."""
    return (
        type(b) is type(a)
        and b.dtype == a.dtype
        and b.device == a.device
        and b.requires_grad == a.requires_grad
        and b.shape == a.shape
        and b.stride() == a.stride()
    )


_OTHERS: dict[str, Callable[[torch.Tensor], Any]] = {
    "same layout": lambda x: torch.zeros_like(x),
    "a view with its strides": lambda x: torch.zeros(x.shape[0], 2 * x.shape[1])[:, ::2],
    "sizes": lambda x: torch.zeros(x.shape[0] + 1, x.shape[1]),
    "strides": lambda x: torch.zeros(x.shape[1], x.shape[0]).t(),
    "dtype": lambda x: torch.zeros_like(x, dtype=torch.float64),
    "meta": lambda x: torch.zeros_like(x, device="meta"),
    "requires_grad": lambda x: torch.zeros_like(x).requires_grad_(),
    "a Parameter": lambda x: torch.nn.Parameter(torch.zeros_like(x), requires_grad=False),
    "a fake tensor": lambda x: torch._subclasses.FakeTensorMode().from_tensor(x),
}


@pytest.mark.parametrize("other", sorted(_OTHERS))
def test_a_sites_cpp_check_compares_what_its_python_checks_and_more(other: str) -> None:
    """Note [launch site checks]: ``tensor_check`` answers as the Python comparison does, case by case."""
    x = torch.zeros(4, 3)
    check = _compat.tensor_check([x])
    assert check is not None  # every supported torch has TensorGuards
    value = _OTHERS[other](x)
    assert check(value) is _python_match(x, value)
    with pytest.raises(TypeError):  # another count (a site always passes its own)
        check(value, value)


def test_a_site_checks_in_cpp_after_its_first_launch_and_in_python_where_that_check_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Note [launch site checks]: the first launch makes the site's C++ check; tensors of that layout
    pass it, a Parameter (another Python type) fails it, passes the Python checks and still launches
    through the site; other strides fail both and take launch_in_place. Every call's results are eager's."""

    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        wrap(K.scale_inplace_2d)[(x.shape[0],)](x, x.shape[0], x.shape[1], 3, 1, BLOCK=4)  # traced strides
        return x

    with torch.no_grad():
        compiled = aot_function(
            functools.partial(prog, ft.wrap_triton),
            fw_compiler=ft.reinplace_compiler,
            keep_inference_input_mutations=True,
        )
        compiled(torch.zeros(4, 3))  # compiles; the site's first launch makes its check
        sites, general = _spy_launches(monkeypatch)
        for make, via_site in [
            (lambda: torch.arange(12.0).reshape(4, 3), True),
            (lambda: torch.arange(12.0).reshape(4, 3), True),
            (lambda: torch.nn.Parameter(torch.arange(12.0).reshape(4, 3), requires_grad=False), True),
            (lambda: torch.arange(12.0).reshape(3, 4).t(), False),
        ]:
            sites.clear()
            general.clear()
            x, want = make(), make()
            got = compiled(x)
            prog(lambda k: k, want)
            torch.testing.assert_close(x, want, rtol=0, atol=0)
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            assert len(sites) == 1
            assert len(general) == (0 if via_site else 1)
            assert sites[0].check is not None and sites[0].check(torch.zeros(4, 3)) is True


def test_a_site_compares_storages_only_where_two_graph_inputs_meet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Note [launch site checks]: a launch on two graph inputs compares their storages at run time
    (they may alias each other then); one on an input and a value the graph made, or on two values
    the graph made, does not. Results are eager's either way."""

    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a, b = z * 2, z + 1
        wrap(K.two_writes)[(1,)](x, y, x.numel(), BLOCK=16)  # two graph inputs
        wrap(K.two_writes)[(1,)](z, a, x.numel(), BLOCK=16)  # an input and a value the graph made
        c = b * 3
        wrap(K.two_writes)[(1,)](b, c, x.numel(), BLOCK=16)  # two values the graph made
        return a, b, c

    with torch.no_grad():
        compiled = aot_function(
            functools.partial(prog, ft.wrap_triton),
            fw_compiler=ft.reinplace_compiler,
            keep_inference_input_mutations=True,
        )
        compiled(torch.arange(16.0), torch.ones(16), torch.zeros(16))  # compiles
        sites, _ = _spy_launches(monkeypatch)
        inputs = torch.arange(16.0), torch.linspace(-1, 1, 16), torch.arange(16.0) / 7
        wants = tuple(t.clone() for t in inputs)
        got = compiled(*inputs)
    expected = prog(lambda k: k, *wants)
    for a, b in zip((*got, *inputs), (*expected, *wants)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert [site.compare_storages for site in sites] == [True, False, False]


def _shared_program(wrap, x, z):
    y = x * 1  # an intermediate, written in place
    wrap(K.add_kernel)[(1,)](y, z, y, y.numel(), BLOCK=16)  # y += z: one tensor as two arguments
    return y


@pytest.mark.parametrize("empty", [False, True])
def test_a_launch_site_given_one_tensor_twice_as_traced_skips_the_overlap_check(
    monkeypatch: pytest.MonkeyPatch, empty: bool
) -> None:
    """Note [launch sites]: arguments sharing a storage as they were traced (one alias group) launch
    without the complete overlap check; empty tensors (no storage address) bind no site and take
    launch_in_place (Note [launch site checks])."""
    from functional_triton.passes import reinplace as rp

    n = 0 if empty else 16
    with torch.no_grad():
        compiled = aot_function(
            functools.partial(_shared_program, ft.wrap_triton), fw_compiler=ft.reinplace_compiler
        )
        compiled(torch.arange(float(n)), torch.ones(n))
        checks: list[Any] = []
        real_check = rp.check_untraced_aliasing

        def check(*a: Any) -> None:
            checks.append(a)
            real_check(*a)

        monkeypatch.setattr(rp, "check_untraced_aliasing", check)
        sites, general = _spy_launches(monkeypatch)
        x, z = torch.arange(float(n)), torch.linspace(-1, 1, n)
        got = compiled(x, z)
    expected = _shared_program(lambda k: k, torch.arange(float(n)), torch.linspace(-1, 1, n))
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert len(sites) == (0 if empty else 1)  # an empty launch is the graph's own launch_in_place
    assert not general
    if not empty:  # (empty tensors of distinct groups share the null address: the complete check runs)
        assert not checks


@triton.jit
def _scale_then_add(x_ptr, factor, y_ptr, n, BLOCK: tl.constexpr):
    """x *= factor and y += x (the new x): a constant between the two tensors."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m) * factor
    tl.store(x_ptr + offs, x, mask=m)
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=m) + x, mask=m)


def test_a_site_launch_writes_out_constants_between_tensors_and_launch_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Note [site launch code]: a site's launch, made for it, passes the tensors, the constants between
    them and the launch options where the raw launch does; results are eager's, call after call."""

    def prog(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        wrap(_scale_then_add)[(2,)](x, 3.0, y, x.numel(), BLOCK=8, num_warps=2)
        return x, y

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.arange(16.0), torch.linspace(-1, 1, 16)

    with torch.no_grad():
        compiled = aot_function(
            functools.partial(prog, ft.wrap_triton),
            fw_compiler=ft.reinplace_compiler,
            keep_inference_input_mutations=True,
        )
        compiled(*make())  # compiles
        sites, general = _spy_launches(monkeypatch)
        x, y = make()
        want_x, want_y = make()
        for _ in range(3):
            compiled(x, y)
            prog(lambda k: k, want_x, want_y)
            torch.testing.assert_close(x, want_x, rtol=0, atol=0)
            torch.testing.assert_close(y, want_y, rtol=0, atol=0)
    assert len(sites) == 3 and not general
    assert sites[0].options == {"num_warps": 2}


class _Passthrough(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def test_a_site_under_a_dispatch_mode_takes_launch_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Note [launch sites]: under a dispatch mode (the mode probe every site reads) a site hands its
    launch to launch_in_place, which dispatches it; results are eager's."""
    with torch.no_grad():
        program = functools.partial(_sites_program, ft.wrap_triton)
        compiled = aot_function(program, fw_compiler=ft.reinplace_compiler)
        compiled(torch.arange(16.0), torch.linspace(-1, 1, 16))  # compiles
        sites, general = _spy_launches(monkeypatch)
        x, y = torch.arange(16.0), torch.linspace(-1, 1, 16)
        want_x, want_y = torch.arange(16.0), torch.linspace(-1, 1, 16)
        with _Passthrough():
            got = compiled(x, y)
        expected = _sites_program(lambda k: k, want_x, want_y)
    assert len(sites) == 2 and len(general) == 2
    for a, b in zip([*got, x, y], [*expected, want_x, want_y]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
