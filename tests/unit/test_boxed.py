"""reinplace_compiler's graphs free each input at its last use (Note [freeing graph inputs])."""

from __future__ import annotations

import weakref
from typing import Any

import torch
from functorch.compile import aot_function, make_boxed_func
from torch import fx

import functional_triton as ft
from functional_triton.passes.boxed import boxed_freeing_inputs
from tests.helpers import RecordingMode

_SEEN: list[bool] = []
_REFS: list[weakref.ref[torch.Tensor]] = []


def _first_input_is_alive(t: torch.Tensor) -> torch.Tensor:
    _SEEN.append(_REFS[0]() is not None)
    return t


def _graph() -> fx.GraphModule:
    g = fx.Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    first = g.call_function(torch.add, (a, 1))
    probed = g.call_function(_first_input_is_alive, (first,))
    g.output(g.call_function(torch.mul, (probed, b)))
    return fx.GraphModule(torch.nn.Module(), g)


def _input_alive_after_last_use(compiled_of: Any) -> bool:
    _SEEN.clear()
    a, b = torch.ones(3), torch.full((3,), 2.0)
    _REFS[:] = [weakref.ref(a)]
    fn = compiled_of(_graph())
    args = [a, b]
    del a
    out = fn(args)
    assert torch.equal(out, torch.full((3,), 4.0))
    return _SEEN[0]


def test_an_input_is_freed_after_its_last_use() -> None:
    assert not _input_alive_after_last_use(boxed_freeing_inputs)


def test_the_probe_sees_inputs_kept_alive_by_unpacking() -> None:
    """The probe can fail: ``make_boxed_func`` keeps every input until the graph returns."""
    assert _input_alive_after_last_use(lambda gm: make_boxed_func(gm.forward))


def test_reinplace_compiler_frees_saved_tensors_in_backward() -> None:
    """A backward graph drops a saved activation once used, as eager autograd does."""
    seen: list[bool] = []
    x, w = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    refs: list[weakref.ref[torch.Tensor]] = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            return g

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        a = (x * w).sin()  # saves x * w for sin's backward
        return Probe.apply(a * 3).sum()

    def bw(gm: fx.GraphModule, example_inputs: Any) -> Any:
        run = ft.reinplace_compiler(gm, example_inputs)

        def probing(args: list[Any]) -> Any:
            # saved activations: not the leaves (the caller holds those), not the 0-d tangent
            refs[:] = [weakref.ref(t) for t in args if t is not x and t is not w and t.dim() > 0]
            out = run(args)
            seen.append(any(r() is not None for r in refs))
            return out

        probing._boxed_call = True  # type: ignore[attr-defined]
        return probing

    compiled = aot_function(f, fw_compiler=ft.reinplace_compiler, bw_compiler=bw)
    compiled(x, w).backward()
    traced = (x.grad, w.grad)
    x.grad = w.grad = None
    f(x, w).backward()
    eager = (x.grad, w.grad)
    assert all(a is not None and b is not None and torch.equal(a, b) for a, b in zip(traced, eager))
    assert len(refs) > 0, "the probe found no saved activation"
    assert seen == [False], "the backward graph kept its saved tensors alive"


# --- Note [direct operator calls] -------------------------------------------------------------------


def _aten_graph() -> tuple[fx.GraphModule, list[torch.Tensor]]:
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x: torch.Tensor, y: torch.Tensor) -> Any:
        values, indices = torch.max(x @ y, dim=1)  # a tuple-returning op, keywords
        return values.relu() + 1, indices, torch.cat([x, y], dim=0).sum(dim=0, keepdim=True)

    args = [torch.randn(4, 4), torch.randn(4, 4)]
    return make_fx(f)(*args), args


def _python_calls_of_operators(fn: Any) -> tuple[Any, int]:
    """``fn()``'s result and how many times it went through ``OpOverload.__call__``.

    Runs with ``__torch_function__`` off: a torch-function mode (the suite's default-device mode on
    the GPU machine, ``torch.set_default_device``) is handed each operator and calls it through
    ``OpOverload.__call__`` itself, for eager code as for a graph, which would hide the graph's own calls.
    """
    calls = [0]
    original = torch._ops.OpOverload.__call__

    def counting(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(self, *args, **kwargs)

    torch._ops.OpOverload.__call__ = counting  # type: ignore[method-assign]
    try:
        with torch._C.DisableTorchFunction():
            return fn(), calls[0]
    finally:
        torch._ops.OpOverload.__call__ = original  # type: ignore[method-assign]


def test_aten_calls_skip_the_python_frame_with_the_same_results_and_dispatch() -> None:
    gm, args = _aten_graph()
    expected, through_python = _python_calls_of_operators(lambda: gm(*args))
    assert through_python > 0  # the probe sees FX's own calls
    run = boxed_freeing_inputs(gm)
    out, through_python = _python_calls_of_operators(lambda: run(list(args)))
    assert through_python == 0
    assert len(out) == len(expected)
    for a, b in zip(out, expected):
        assert torch.equal(a, b) and a.dtype == b.dtype
    with RecordingMode() as direct:
        run(list(args))
    with RecordingMode() as plain:
        gm(*args)
    assert direct.seen == plain.seen and plain.seen  # modes see the same calls


class _FunctionRecorder(torch.overrides.TorchFunctionMode):
    """Records the ``func`` of every call that reaches ``__torch_function__``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.seen.append(func)
        return func(*args, **(kwargs or {}))


def _view_and_matmul_graph() -> tuple[fx.GraphModule, list[torch.Tensor]]:
    """Every operator that takes its Python binding (``_compat.python_binding``), keywords too."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x: torch.Tensor, y: torch.Tensor, b: torch.Tensor) -> Any:
        m = torch.mm(x.t(), y.view(4, 6).transpose(0, 1).t())  # view, t, transpose.int, mm
        batched = torch.bmm(m.unsqueeze(0).expand(2, 6, 6), m.permute(1, 0).expand(2, 6, 6))
        z = torch.addmm(b, m, m, beta=2.0, alpha=0.5)
        acc = m.clone()
        acc.addmm_(z, m, beta=0.25)
        full = torch.empty_like(z, memory_format=torch.contiguous_format).fill_(1.5)  # empty_like
        return batched.detach(), z, acc, full

    args = [torch.randn(4, 6), torch.randn(6, 4), torch.randn(6, 6)]
    return make_fx(f)(*args), args


def test_view_and_matmul_operators_take_their_bindings_with_the_same_calls() -> None:
    """Note [direct operator calls]: ``Tensor.view``, ``torch.mm`` and the others listed in
    ``_compat.python_binding`` dispatch exactly the graph's overloads."""
    from functional_triton._compat import python_binding

    gm, args = _view_and_matmul_graph()
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    bound = {t for t in targets if python_binding(t) is not None}
    aten = torch.ops.aten
    assert {aten.addmm.default, aten.addmm_.default, aten.view.default, aten.empty_like.default} <= bound
    assert len(bound) >= 11, sorted(map(str, bound))
    run = boxed_freeing_inputs(gm)
    with _FunctionRecorder() as called:
        run(list(args))
    assert {python_binding(t) for t in bound} <= set(called.seen)  # the bindings ran
    expected, _ = _python_calls_of_operators(lambda: gm(*args))
    out, through_python = _python_calls_of_operators(lambda: run(list(args)))
    assert through_python == 0
    for a, b in zip(out, expected, strict=True):
        assert torch.equal(a, b) and a.dtype == b.dtype and a.stride() == b.stride()
    with RecordingMode() as replayed:
        run(list(args))
    with RecordingMode() as plain:
        gm(*args)
    assert replayed.seen == plain.seen and set(bound) <= set(plain.seen)


def test_an_operator_given_a_keyword_its_binding_may_not_share_keeps_its_own_callable() -> None:
    from functional_triton._compat import python_binding

    view = torch.ops.aten.view.default
    assert python_binding(view) is not None and python_binding(view, {"size": [6]}) is None
    g = fx.Graph()
    a = g.placeholder("a")
    g.output(g.call_function(view, (g.call_function(view, (a, [3, 2])),), {"size": [6]}))
    gm = fx.GraphModule(torch.nn.Module(), g)
    run = boxed_freeing_inputs(gm)
    x = torch.arange(6.0)
    with _FunctionRecorder() as called:
        out = run([x])
    assert torch.equal(out, x)
    assert called.seen == [view, view]  # both calls keep the op's own callable


def test_an_input_named_like_an_operator_global_is_not_shadowed() -> None:
    g = fx.Graph()
    a = g.placeholder("_op_aten_add_Tensor")  # the name the direct call would take
    g.output(g.call_function(torch.ops.aten.add.Tensor, (a, a)))
    run = boxed_freeing_inputs(fx.GraphModule(torch.nn.Module(), g))
    x = torch.arange(3.0)
    out, through_python = _python_calls_of_operators(lambda: run([x]))
    assert torch.equal(out, x + x)
    assert through_python == 0  # the call took another name


def test_custom_operators_with_their_own_call_path_keep_it() -> None:
    from functional_triton._compat import direct_operator_call

    @torch.library.custom_op("ft_test_boxed::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @twice.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    op = torch.ops.ft_test_boxed.twice.default
    g = fx.Graph()
    a = g.placeholder("a")
    g.output(g.call_function(op, (g.call_function(torch.ops.aten.add.Tensor, (a, 1)),)))
    run = boxed_freeing_inputs(fx.GraphModule(torch.nn.Module(), g))
    x = torch.arange(3.0)
    out, through_python = _python_calls_of_operators(lambda: run([x]))
    assert torch.equal(out, (x + 1) * 2)
    # torch >= 2.14 gives custom ops a PyObject fast path that only __call__ takes.
    assert through_python == (1 if direct_operator_call(op) is None else 0)
    assert direct_operator_call(torch.ops.aten.add.Tensor) is not None


def test_operators_whose_names_meet_take_distinct_globals() -> None:
    """``ns_a.b.c`` and ``ns.a_b.c`` both flatten to ``_op_ns_a_b_c``: each keeps its own global."""
    from torch.library import Library

    libs = [Library("ft_test_boxed_a", "DEF"), Library("ft_test_boxed_a_b", "DEF")]
    libs[0].define("b_c(Tensor x) -> Tensor")
    libs[0].impl("b_c", lambda x: x + 1, "CompositeExplicitAutograd")
    libs[1].define("c(Tensor x) -> Tensor")
    libs[1].impl("c", lambda x: x * 10, "CompositeExplicitAutograd")
    first, second = torch.ops.ft_test_boxed_a.b_c.default, torch.ops.ft_test_boxed_a_b.c.default
    g = fx.Graph()
    a = g.placeholder("a")
    g.output(g.call_function(second, (g.call_function(first, (a,)),)))
    run = boxed_freeing_inputs(fx.GraphModule(torch.nn.Module(), g))
    x = torch.arange(3.0)
    assert torch.equal(run([x]), (x + 1) * 10)


def test_torch_compile_over_a_compiled_graph_breaks_there_and_matches() -> None:
    """README known limits: Dynamo cannot trace the direct calls of a reinplace_compiler graph it
    meets inside a compiled function: it breaks the graph there and runs the graph as compiled."""
    import warnings

    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).relu() + 1

    compiled = aot_function(f, fw_compiler=ft.reinplace_compiler)
    x = torch.randn(8)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "does not know how to trace the builtin"
        explained = torch._dynamo.explain(lambda t: compiled(t) * 3)(x)
        torch._dynamo.reset()
        out = torch.compile(lambda t: compiled(t) * 3, backend="eager")(x)
    assert explained.graph_break_count >= 1
    assert torch.equal(out, f(x) * 3)
