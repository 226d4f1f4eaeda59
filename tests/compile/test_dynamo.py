"""torch.compile(fullgraph=True) records wrapped launches as this library's mutation operator."""

from __future__ import annotations

import types
import warnings

import pytest
import torch
import triton

import functional_triton as ft
from functional_triton import kernel as launch_path
from functional_triton.dynamo import CaptureWarning
from tests.compile import kernels as k
from tests.harness import check_compiled
from tests.helpers import GraphRecorder, targets

TensorDescriptor = pytest.importorskip("triton.tools.tensor_descriptor").TensorDescriptor

N = 40


def two_launches(wrap, x, y):
    out = torch.empty_like(x)
    wrap(k.add_kernel)[(triton.cdiv(x.numel(), 16),)](x, y, out, x.numel(), BLOCK=16)
    wrap(k.add_one_inplace).run(
        x, x.numel(), grid=lambda meta: (triton.cdiv(N, meta["BLOCK"]),), warmup=False, BLOCK=16
    )
    return out * 2


def inputs():
    return torch.arange(N, dtype=torch.float32), torch.linspace(-1, 1, N)


def test_dynamo_graph_holds_the_mutation_operator_and_aot_the_functional_one() -> None:
    rec = GraphRecorder()
    torch._dynamo.reset()
    torch.compile(lambda x, y: two_launches(ft.wrap_triton, x, y), backend=rec, fullgraph=True)(*inputs())
    hops = [t for t in targets(rec.dynamo[0]) if isinstance(t, torch._ops.HigherOrderOperator)]
    assert hops == [ft.triton_kernel_wrapper_mutation] * 2
    node = next(n for n in rec.dynamo[0].graph.nodes if n.target is ft.triton_kernel_wrapper_mutation)
    assert sorted(node.kwargs["kwargs"]) == ["out_ptr", "x_ptr", "y_ptr"]
    torch._dynamo.reset()
    torch.compile(lambda x, y: two_launches(ft.wrap_triton, x, y), backend=rec.aot_backend(), fullgraph=True)(
        *inputs()
    )
    aot_targets = targets(rec.aot[0])
    assert aot_targets.count(ft.triton_kernel_wrapper_functional) == 2
    assert ft.triton_kernel_wrapper_mutation not in aot_targets


def test_tuple_grid_and_grid_callable_of_meta() -> None:
    check_compiled(two_launches, inputs)


def test_module_level_grid_callable_and_list_grid() -> None:
    def prog(wrap, x, y):
        out = torch.empty_like(x)
        wrap(k.add_kernel)[k.grid_of_meta](x, y, out, x.numel(), BLOCK=8)
        grid = [3] if wrap is ft.wrap_triton else (3,)  # the interpreter refuses lists
        wrap(k.times_two_inplace)[grid](out, x.numel(), BLOCK=16)
        return out

    check_compiled(prog, inputs)


def test_constants_and_launch_options() -> None:
    def prog(wrap, x, y):
        out = torch.empty_like(x)
        wrap(k.scale_kernel)[(3,)](x, out, N, 0.5, BLOCK=16, num_warps=2)
        return out

    check_compiled(prog, inputs)


@pytest.mark.parametrize("kernel", ["autotune_kernel", "heuristics_kernel", "stacked_kernel"])
def test_autotune_heuristics_and_stacked(kernel: str) -> None:
    fn = getattr(k, kernel)

    block = {} if kernel == "stacked_kernel" else {"BLOCK": 64}  # autotuned there

    def prog(wrap, x, out, y):
        wrap(fn)[lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)](x, out, y, x.numel(), **block)
        return out

    def make():
        return torch.arange(64.0), torch.zeros(64), torch.zeros(64)

    # Tune once first: benchmarking runs every config on the real arguments (their writes leak), so
    # every compared run must find the config already chosen, as the eager reference's second call would.
    prog(lambda kernel: kernel, *make())

    check_compiled(prog, make)


def test_wrappers_made_outside_the_compiled_function() -> None:
    wrapped = ft.wrap_triton(k.add_kernel)
    bound = ft.wrap_triton(k.times_two_inplace)[(3,)]

    def prog(wrap, x, y):
        out = torch.empty_like(x)
        (wrapped if wrap is ft.wrap_triton else k.add_kernel)[(3,)](x, y, out, N, BLOCK=16)
        (bound if wrap is ft.wrap_triton else k.times_two_inplace[(3,)])(out, N, BLOCK=16)
        return out

    check_compiled(prog, inputs)


def test_host_tensor_descriptors_made_in_the_compiled_function() -> None:
    def prog(wrap, x, y):
        src = TensorDescriptor.from_tensor(x, [4, 8])
        dst = TensorDescriptor.from_tensor(y, [4, 8])
        wrap(k.desc_add_one)[(2,)](src, dst, BM=4, BN=8)
        return y * 2

    check_compiled(prog, lambda: (torch.arange(64, dtype=torch.float32).reshape(8, 8), torch.zeros(8, 8)))


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.empty_like(x)
        ft.wrap_triton(k.scale_kernel)[(3,)](x, out, x.numel(), 3.0, BLOCK=16)
        return out

    @staticmethod
    def backward(ctx, grad):
        dx = torch.empty_like(grad)
        ft.wrap_triton(k.scale_kernel)[(3,)](grad, dx, grad.numel(), 3.0, BLOCK=16)
        return dx


class _RawScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.empty_like(x)
        k.scale_kernel[(3,)](x, out, x.numel(), 3.0, BLOCK=16)
        return out

    @staticmethod
    def backward(ctx, grad):
        dx = torch.empty_like(grad)
        k.scale_kernel[(3,)](grad, dx, grad.numel(), 3.0, BLOCK=16)
        return dx


def test_training_kernels_inside_autograd_function() -> None:
    def prog(wrap, x):
        fn = _Scale if wrap is ft.wrap_triton else _RawScale
        return fn.apply(x * 1) + 1

    make = lambda: (torch.linspace(-2, 2, N, requires_grad=True),)  # noqa: E731
    check_compiled(prog, make, backends=("eager", "aot_eager", "functional_triton"))


def test_launch_that_cannot_be_captured_graph_breaks_with_one_warning() -> None:
    class Box:
        def __init__(self, t):
            self.t = t

    box = Box(7)

    def prog(x):
        out = torch.empty_like(x)
        ft.wrap_triton(k.scale_kernel)[(3,)](x, out, N, box, BLOCK=16)
        return out

    torch._dynamo.reset()
    with pytest.warns(CaptureWarning, match=r"scale_kernel .*argument 'scale'") as caught:
        with pytest.raises(Exception, match="not captured"):
            torch.compile(prog, backend="eager", fullgraph=True)(torch.zeros(N))
    assert len([w for w in caught if issubclass(w.category, CaptureWarning)]) == 1


def test_run_warmup_under_compile_runs_eagerly_and_launches_nothing() -> None:
    def prog(x):
        y = x * 2
        ft.wrap_triton(k.add_one_inplace).run(y, N, grid=(3,), warmup=True, BLOCK=16)
        ft.wrap_triton(k.add_one_inplace).run(y, N, grid=(3,), warmup=False, BLOCK=16)
        return y

    expected = prog(torch.arange(N, dtype=torch.float32))
    torch._dynamo.reset()
    with pytest.warns(CaptureWarning, match=r"run\(warmup=True\) compiles without launching"):
        got = torch.compile(prog, backend="aot_eager")(torch.arange(N, dtype=torch.float32))
    assert torch.equal(got, expected)
    assert torch.equal(expected, torch.arange(N, dtype=torch.float32) * 2 + 1)  # one launch, not two


def test_bad_launch_under_compile_raises_the_eager_error() -> None:
    def prog(x):
        ft.wrap_triton(k.add_one_inplace)[(1,)](x, BLOCK=16)
        return x

    torch._dynamo.reset()
    with pytest.warns(CaptureWarning, match="missing a required argument: 'n'"):
        with pytest.raises(TypeError, match=r"add_one_inplace\(\) missing a required argument: 'n'"):
            torch.compile(prog, backend="eager")(torch.zeros(N))


def test_a_raw_launch_under_compile_gives_the_eager_result() -> None:
    """Importing the library marks Triton kernels' ``run`` as frames Dynamo runs without compiling
    (the native launch path calls them from C: Note [the native launch path]); a raw launch under
    torch.compile still gives eager's result (on the interpreter, where Dynamo would otherwise trace
    into Triton's interpreter and fail, it now runs eagerly after a graph break)."""

    def prog(x):
        y = x * 2
        k.add_one_inplace[(1,)](y, N, BLOCK=16)
        return y + 1

    expected = prog(torch.arange(N, dtype=torch.float32))
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Dynamo's own graph-break warnings, if any
        actual = torch.compile(prog, backend="aot_eager")(torch.arange(N, dtype=torch.float32))
    assert torch.equal(actual, expected)


def test_uncaptured_launch_runs_eagerly_after_a_graph_break_without_tracing_the_interpreter() -> None:
    def prog(wrap, x, out, y):
        # A grid closing over a tensor, for a kernel whose heuristics feed the meta: not captured.
        grid = lambda meta: (triton.cdiv(x.shape[0], meta["BLOCK"]),)  # noqa: E731
        wrap(k.heuristics_kernel)[grid](x, out, y, 64, BLOCK=64)
        return out + 1

    def make():
        return torch.arange(64.0), torch.zeros(64), torch.zeros(64)

    expected = prog(lambda kernel: kernel, *make())
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: prog(ft.wrap_triton, *a), backend="eager")
    with pytest.warns(
        CaptureWarning, match="_select_store_kernel .*grid callable closes over traced values"
    ) as caught:
        actual = compiled(*make())
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert len([w for w in caught if issubclass(w.category, CaptureWarning)]) == 1


def test_host_tensor_descriptors_passed_in() -> None:
    def prog(wrap, src, dst):
        wrap(k.desc_add_one)[(2,)](src, dst, BM=4, BN=8)
        return dst.base * 2

    def make():
        x, y = torch.arange(64, dtype=torch.float32).reshape(8, 8), torch.zeros(8, 8)
        return TensorDescriptor.from_tensor(x, [4, 8]), TensorDescriptor.from_tensor(y, [4, 8])

    expected = prog(lambda kernel: kernel, *make())
    for backend in ("eager", "aot_eager"):
        torch._dynamo.reset()
        src, dst = make()
        compiled = torch.compile(lambda a, b: prog(ft.wrap_triton, a, b), backend=backend, fullgraph=True)
        actual = compiled(src, dst)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        torch.testing.assert_close(dst.base, expected / 2, rtol=0, atol=0)


_BY_WRAP = {ft.wrap_triton: "ft"}
# a C function where the native launch path is built (Note [the native launch path])
_WRAP_TRITON_TYPE = types.BuiltinFunctionType if launch_path.NATIVE is not None else types.FunctionType


def test_wrap_triton_is_an_ordinary_function_to_dynamo() -> None:
    def prog(wrap, x, y):  # wrap_triton used as a dict key and compared, as user code may
        assert _BY_WRAP.get(wrap, "raw") == ("ft" if wrap is ft.wrap_triton else "raw")
        assert wrap in _BY_WRAP or wrap is not ft.wrap_triton
        assert wrap is not ft.wrap_triton or type(wrap) is _WRAP_TRITON_TYPE
        out = torch.empty_like(x)
        wrap(k.add_kernel)[(3,)](x, y, out, N, BLOCK=16)
        return out

    check_compiled(prog, inputs, backends=("eager",), no_grad=(True,))


def test_dynamo_node_checks_the_traced_geometry_as_a_make_fx_node_does() -> None:
    # Both emit paths build one node (kernel.mutation_node): Dynamo's records the traced sizes and
    # strides too, so its graph replayed on other sizes raises instead of launching stale scalars.
    def prog(x: torch.Tensor) -> torch.Tensor:
        ft.wrap_triton(k.add_one_inplace)[(1,)](x, x.numel(), BLOCK=16)
        return x * 2

    rec = GraphRecorder()
    torch._dynamo.reset()
    torch.compile(prog, backend=rec, fullgraph=True)(torch.zeros(16))
    (gm,) = rec.dynamo
    gm(torch.zeros(16))
    with pytest.raises(
        ValueError, match=r"argument 'x_ptr' has shape \(32,\), but the graph was traced for \(16,\)"
    ):
        gm(torch.zeros(32))


class _WrapThroughClassAttribute(torch.autograd.Function):
    wrap = staticmethod(ft.wrap_triton)

    @staticmethod
    def forward(ctx, x):
        out = torch.empty_like(x)
        _WrapThroughClassAttribute.wrap(k.scale_kernel)[(3,)](x, out, x.numel(), 3.0, BLOCK=16)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


# torch 2.11's Dynamo warns (once per process, so whether this test sees it depends on the order) when
# it meets the builtin `object.__new__` while tracing the launch path; torch 2.13 does not.
@pytest.mark.filterwarnings("ignore:Dynamo does not know how to trace the builtin:UserWarning")
def test_known_limit_wrap_triton_through_a_function_class_attribute_breaks_the_graph() -> None:
    # README, Known limits: Dynamo builds `_WrapThroughClassAttribute.wrap` without a source, so
    # not as ours: the Python wrap_triton it traces into until it breaks (at `object.__hash__`),
    # the C one (the native path) a function it skips. fullgraph=True raises Dynamo's
    # Unsupported at that call; otherwise the Function graph-breaks (no CaptureWarning), Dynamo
    # traces its forward as a frame of its own, breaks again at `wrap_triton`, and captures the
    # launch on the wrapper that the eager `wrap_triton` call returned.
    def prog(x):
        return _WrapThroughClassAttribute.apply(x * 1) + 1

    def make():
        return torch.linspace(-2, 2, N, requires_grad=True)

    want = torch.empty(N)
    k.scale_kernel[(3,)](make().detach(), want, N, 3.0, BLOCK=16)
    prog(make())  # the launch path's caches filled, as in any process that launched before
    torch._dynamo.reset()
    with pytest.raises(
        torch._dynamo.exc.Unsupported,
        match=(
            r"builtin `functional_triton\.kernel\.wrap_triton"
            if launch_path.NATIVE is not None
            else r"(?s)from user code:.*functional_triton.kernel\.py"
        ),
    ):
        torch.compile(prog, backend="eager", fullgraph=True)(make())

    rec = GraphRecorder()
    torch._dynamo.reset()
    x = make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(prog, backend=rec)(x)
    assert not [w for w in caught if issubclass(w.category, CaptureWarning)]
    captured = any(ft.triton_kernel_wrapper_mutation in targets(gm) for gm in rec.dynamo)
    assert captured, torch.__version__
    torch.testing.assert_close(out, want + 1, rtol=0, atol=0)
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((N,), 3.0), rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["aot_eager", "functional_triton", "inductor"])
def test_write_through_as_strided_after_another_view_matches_eager(backend: str) -> None:
    """README known limit: a kernel writing a view made with as_strided after another view updates
    that view's base; torch.compile matches eager (outputs, the input, later reads of the base)."""

    def prog(wrap, x, h):
        v = x.narrow(0, 1, 6).as_strided((3,), (2,), 2)  # x[2], x[4], x[6]
        wrap(k.add_index_strided)[(1,)](v, v.numel(), v.stride(0), BLOCK=4)
        y = h * 2  # an intermediate written the same way (in training, h requires grad)
        w = y.narrow(0, 4, 8).as_strided((4,), (3,), 5)
        wrap(k.add_index_strided)[(1,)](w, w.numel(), w.stride(0), BLOCK=4)
        # `x + 1`, not `x + 0`: torch 2.14's Inductor returns `x + 0` and `v * 1` as the input itself
        # (aliasing it), with or without a kernel in the program; which outputs alias which inputs
        # is compared, and this test is about the writes.
        return x + 1, v * 2, x[1:5] * 2, y, w * 2

    make = lambda: (torch.arange(16.0), torch.arange(16.0, requires_grad=True))  # noqa: E731
    check_compiled(prog, make, backends=(backend,))


OUTSIDE = torch.zeros(N)  # a global the compiled function writes (README, Known limits)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor", "functional_triton"])
def test_a_global_tensor_written_next_to_inputs_is_lifted_as_an_input(backend: str) -> None:
    def prog(wrap, x):
        wrap(k.add_kernel)[(3,)](x, OUTSIDE, OUTSIDE, N, BLOCK=16)  # OUTSIDE += x
        return x * 2

    def runs(fn):
        OUTSIDE.copy_(torch.linspace(-1, 1, N))
        return [(fn(torch.arange(N, dtype=torch.float32) + i), OUTSIDE.clone()) for i in range(2)]

    expected = runs(lambda x: prog(lambda kernel: kernel, x))
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: prog(ft.wrap_triton, x), backend=backend, fullgraph=True)
    for (out, state), (want_out, want_state) in zip(runs(compiled), expected):
        assert torch.equal(out, want_out) and torch.equal(state, want_state)
