"""Liger-Kernel's ops, every kernel launch routed through ``ft.wrap_triton``, against eager Liger.

The eager reference is Liger itself (raw kernels). The traced run replaces every module-level kernel
of Liger's op modules by its wrapper (``routed_through_ft``) and runs the same op under
aot_function / aot_module with nop or reinplace compilers. Compared bit for bit: outputs, every
input after forward and after backward, every ``.grad``. Incoming gradients are weighted per
element and scaled (loss scaling), so no backward sees a gradient of exactly 1.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from functorch.compile import aot_function, aot_module
from torch._subclasses.fake_tensor import DataDependentOutputException

import functional_triton as ft
from functional_triton import _compat
from functional_triton import functionalize as ft_functionalize
from functional_triton.passes.reinplace import launch_in_place
from tests.harness import _assert_equal
from tests.helpers import Capture, CloneCounts, nop
from tests.integration.liger import interpreter_shims, routed_through_ft

pytest.importorskip(
    "liger_kernel", reason="liger-kernel is not installed (.ci/run installs liger-kernel==0.8.5)"
)
from liger_kernel.ops import (  # noqa: E402
    cross_entropy,
    dyt,
    fused_add_rms_norm,
    fused_linear_cross_entropy,
    geglu,
    group_norm,
    jsd,
    kl_div,
    layer_norm,
    llama4_rope,
    modulated_rms_norm,
    relu_squared,
    rms_norm,
    rope,
    softmax,
    sparsemax,
    swiglu,
    tvd,
)
from liger_kernel.ops.experimental import embedding  # noqa: E402

from tests.integration import liger_workarounds as W  # noqa: E402

MODES = ("aot_function", "aot_function_reinplace", "aot_module", "aot_module_reinplace")
# swiglu / geglu overwrite their (saved) inputs in backward: on leaf inputs that write is launched in
# place where AOTAutograd's copy-back fails (torch < 2.13), else copied back (Note [backward writes to
# leaf inputs]). Both paths run wherever they can.
LEAF_WRITE_PATHS = (True, False) if _compat.backward_writes_to_leaf_inputs_supported() else (True,)


@contextlib.contextmanager
def leaf_writes_in_place(in_place: bool) -> Any:
    saved = ft_functionalize.LEAF_WRITES_IN_PLACE
    ft_functionalize.LEAF_WRITES_IN_PLACE = in_place
    try:
        yield
    finally:
        ft_functionalize.LEAF_WRITES_IN_PLACE = saved


SCALES = (1.0, 3.0)


class _Module(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *inputs: Any) -> Any:
        return self.fn(*inputs)


KERNEL_OPS = (ft.triton_kernel_wrapper_functional, ft.triton_kernel_wrapper_mutation, launch_in_place)


def kernel_nodes(graphs: Sequence[torch.fx.GraphModule]) -> int:
    return sum(n.target in KERNEL_OPS for gm in graphs for n in gm.graph.nodes)


def compiled(
    mode: str, fn: Callable[..., Any], kept: Capture | None = None, **aot_kwargs: Any
) -> Callable[..., Any]:
    """``fn`` under one AOTAutograd mode; ``kept`` (made here when not given) keeps its graphs."""
    inner = ft.reinplace_compiler if mode.endswith("reinplace") else nop
    if kept is None:
        kept = Capture(inner)
    kept.inner = inner
    compilers = kept.compilers
    if mode.startswith("aot_module"):
        return aot_module(_Module(fn), **compilers, **aot_kwargs)
    return aot_function(fn, **compilers, **aot_kwargs)


def _snapshot(inputs: Sequence[Any]) -> list[Any]:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _outputs(out: Any) -> list[torch.Tensor]:
    return [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]


def step(
    call: Callable[..., Any], make_inputs: Callable[[], Sequence[Any]], scale: float, no_grad: bool
) -> dict[str, Any]:
    """One forward (and backward): outputs, inputs after each, leaf grads."""
    torch.manual_seed(0)
    inputs = list(make_inputs())
    with torch.no_grad() if no_grad else contextlib.nullcontext():
        out = call(*inputs)
    outputs = _outputs(out)
    after_forward = _snapshot(inputs)
    outputs_before = [o.detach().clone() for o in outputs]
    if not no_grad:
        terms = [
            (o * (torch.arange(o.numel(), dtype=o.dtype) % 5 + 1).reshape(o.shape)).sum()
            for o in outputs
            if o.requires_grad
        ]
        (torch.stack(terms).sum() * scale).backward()
    leaves = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    return {
        "outputs": outputs_before,
        "after forward": after_forward,
        "after backward": _snapshot(inputs),
        "grads": [x.grad for x in leaves],
    }


def assert_same(actual: dict[str, Any], expected: dict[str, Any], label: str) -> None:
    for key in ("outputs", "after forward", "after backward", "grads"):
        assert len(actual[key]) == len(expected[key]), f"{label}: {key}"
        for i, (a, e) in enumerate(zip(actual[key], expected[key])):
            assert (a is None) == (e is None), f"{label}: {key} {i}: {a} vs {e}"
            if e is not None:
                _assert_equal(a, e, f"{label}: {key} {i}")


def check_against_eager(
    fn: Callable[..., Any],
    make_inputs: Callable[[], Sequence[Any]],
    *,
    modes: Sequence[str] = MODES,
    scales: Sequence[float] = SCALES,
    no_grad: Sequence[bool] = (False, True),
    traced_fn: Callable[..., Any] | None = None,
    **aot_kwargs: Any,
) -> None:
    """Eager Liger vs the same op (or ``traced_fn``) routed through ft under each mode, bit for bit."""
    with interpreter_shims():
        for ng in no_grad:
            for scale in scales if not ng else (1.0,):
                expected = step(fn, make_inputs, scale, ng)
                for mode in modes:
                    kept = Capture()
                    with routed_through_ft():
                        actual = step(
                            compiled(mode, traced_fn or fn, kept, **aot_kwargs), make_inputs, scale, ng
                        )
                    label = f"{mode} (scale={scale}, no_grad={ng})"
                    assert kernel_nodes(kept.graphs) > 0, f"{label}: no kernel reached the graphs"
                    assert_same(actual, expected, label)


def _randn(*shape: int, grad: bool = True, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


def test_routing_replaces_every_kernel_attribute_and_restores_it() -> None:
    before = rms_norm._rms_norm_forward_kernel
    with routed_through_ft() as count:
        assert count > 50
        assert isinstance(rms_norm._rms_norm_forward_kernel, ft.kernel.TritonKernel)
        assert isinstance(swiglu.silu, ft.kernel.TritonKernel)  # helpers too
    assert rms_norm._rms_norm_forward_kernel is before


def test_routing_again_installs_the_same_wrappers_so_compiled_code_keeps_its_guards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Code compiled under one entry guards on the wrappers' identity; a later entry passes them."""
    with routed_through_ft():
        first = rms_norm._rms_norm_forward_kernel
    with routed_through_ft():
        assert rms_norm._rms_norm_forward_kernel is first

    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return swiglu.swiglu_forward(a, b)[2]

    arch = swiglu.infer_device_arch()  # an lru_cache whose body Dynamo cannot trace (bench_training.py)
    monkeypatch.setattr(swiglu, "infer_device_arch", lambda: arch)
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="functional_triton", fullgraph=True)
    x, w = torch.randn(4, 64), torch.randn(4, 64)
    with interpreter_shims():
        with routed_through_ft():
            expected = compiled(x, w)
        with routed_through_ft(), torch._dynamo.config.patch(error_on_recompile=True):
            _assert_equal(compiled(x, w), expected, "the second entry's output")


def test_rms_norm() -> None:
    check_against_eager(
        lambda x, w: rms_norm.LigerRMSNormFunction.apply(x, w, 1e-6),
        lambda: (_randn(6, 32), _randn(32)),
    )


def test_rms_norm_gemma_offset_in_place_false() -> None:
    check_against_eager(
        lambda x, w: rms_norm.LigerRMSNormFunction.apply(x, w, 1e-6, 1.0, "gemma", False),
        lambda: (_randn(2, 3, 16), _randn(16)),
    )


def test_layer_norm() -> None:
    check_against_eager(
        lambda x, w, b: layer_norm.LigerLayerNormFunction.apply(x, w, b, 1e-6),
        lambda: (_randn(6, 32), _randn(32), _randn(32)),
    )


@pytest.mark.parametrize("in_place", LEAF_WRITE_PATHS, ids=lambda p: "in_place" if p else "copy_back")
def test_swiglu(in_place: bool) -> None:
    with leaf_writes_in_place(in_place):
        check_against_eager(
            lambda a, b: swiglu.LigerSiLUMulFunction.apply(a, b),
            lambda: (_randn(2, 3, 32), _randn(2, 3, 32)),
        )


@pytest.mark.parametrize("in_place", LEAF_WRITE_PATHS, ids=lambda p: "in_place" if p else "copy_back")
def test_geglu(in_place: bool) -> None:
    with leaf_writes_in_place(in_place):
        check_against_eager(
            lambda a, b: geglu.LigerGELUMulFunction.apply(a, b),
            lambda: (_randn(6, 32), _randn(6, 32)),
        )


def test_swiglu_inputs_computed_in_the_graph() -> None:
    # The usual MLP: gate and up projections are intermediates that backward overwrites.
    def mlp(x: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
        return swiglu.LigerSiLUMulFunction.apply(x @ wg, x @ wu)

    check_against_eager(mlp, lambda: (_randn(4, 8), _randn(8, 16), _randn(8, 16)))


def test_rope() -> None:
    check_against_eager(
        lambda q, k, cos, sin: rope.LigerRopeFunction.apply(q, k, cos, sin),
        lambda: (
            _randn(1, 2, 8, 16),
            _randn(1, 2, 8, 16),
            _randn(1, 8, 16, grad=False),
            _randn(1, 8, 16, grad=False),
        ),
    )


# Further ops that eager Liger runs on the interpreter: (function, input factory).
MORE_OPS: dict[str, tuple[Callable[..., Any], Callable[[], Sequence[Any]]]] = {
    "group_norm": (
        lambda x, w, b: group_norm.LigerGroupNormFunction.apply(x, w, b, 4, 2, 1e-6),
        lambda: (_randn(2, 4, 8), _randn(4), _randn(4)),
    ),
    "fused_add_rms_norm": (
        lambda x, r, w: fused_add_rms_norm.LigerFusedAddRMSNormFunction.apply(x, r, w, 1e-6),
        lambda: (_randn(4, 32), _randn(4, 32), _randn(32)),
    ),
    # Per-token modulation: one scale and shift row per row of x, no atomics in backward.
    "modulated_rms_norm": (
        lambda x, w, s, b: modulated_rms_norm.LigerModulatedRMSNormFunction.apply(x, w, s, b, 1e-6),
        lambda: (_randn(2, 4, 32), _randn(32), _randn(2, 4, 32), _randn(2, 4, 32)),
    ),
    # Per-batch modulation: backward sums dscale/dshift over rows with relaxed float atomics.
    "modulated_rms_norm_per_batch": (
        lambda x, w, s, b: modulated_rms_norm.LigerModulatedRMSNormFunction.apply(x, w, s, b, 1e-6),
        lambda: (_randn(2, 4, 32), _randn(32), _randn(2, 32), _randn(2, 32)),
    ),
    "softmax": (lambda x: softmax.LigerSoftmaxFunction.apply(x), lambda: (_randn(4, 32),)),
    "sparsemax": (lambda x: sparsemax.LigerSparsemaxFunction.apply(x, -1), lambda: (_randn(4, 32),)),
    "relu_squared": (lambda x: relu_squared.LigerReLUSquaredFunction.apply(x), lambda: (_randn(4, 32),)),
    "llama4_rope": (
        lambda q, k, f: llama4_rope.LigerLlama4RopeFunction.apply(q, k, f),
        lambda: (_randn(1, 8, 2, 16), _randn(1, 8, 2, 16), torch.randn(8, 8, dtype=torch.complex64)),
    ),
    "embedding": (
        lambda e, i: embedding.LigerEmbeddingFunction.apply(e, i),
        lambda: (_randn(16, 8), torch.tensor([[1, 3], [5, 1]])),
    ),
}


# dyt: eager Liger cannot run it on the interpreter (README, known limits): its kernels autotune over
# 18 configs, which benchmarks them through a GPU driver, and its backward sizes its partial sums by
# the device's multiprocessor count. On the GPU the traced run uses the config eager autotuning chose
# (the wrapper shares the Autotuner's cache, keyed by N), so the partial sums are laid out alike.
@pytest.mark.gpu
@pytest.mark.parametrize("beta", [True, False], ids=["beta", "no_beta"])
def test_dyt(beta: bool) -> None:
    check_against_eager(
        lambda x, a, g, b: dyt.LigerDyTFunction.apply(x, a, g, b),
        lambda: (
            _randn(2, 4, 64),
            torch.full((1,), 0.5).requires_grad_(),
            _randn(64),
            _randn(64) if beta else None,
        ),
    )


FLOAT_ATOMIC_OPS = frozenset({"modulated_rms_norm_per_batch"})


@pytest.mark.parametrize("name", list(MORE_OPS))
def test_more_ops(name: str) -> None:
    if name in FLOAT_ATOMIC_OPS and torch.empty(0).device.type == "cuda":
        pytest.skip(
            f"{name}'s backward accumulates with relaxed float atomics, so on a GPU two eager runs "
            "differ in the last bits; compared bit for bit on the interpreter, which runs programs in order"
        )
    fn, make_inputs = MORE_OPS[name]
    check_against_eager(fn, make_inputs)


def _logits_and_targets() -> tuple[torch.Tensor, torch.Tensor]:
    return _randn(5, 40), torch.tensor([1, 39, -100, 0, 7])


def _liger_ce(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return cross_entropy.LigerCrossEntropyFunction.apply(x, t, None)[0]


def test_cross_entropy_on_logits_passed_in_keeping_input_mutations() -> None:
    # Eager: Liger's own Function. Traced: Liger's kernels, the count given (liger_workarounds).
    # Forward writes dlogits into the logits (a graph input) and saves them; backward scales them
    # in place (scale != 1 runs element_mul_kernel on the saved tensor). The input is written in
    # forward and in backward: AOTAutograd carries both only with the mutations kept in the graph.
    count = W.n_non_ignore(_logits_and_targets()[1])
    check_against_eager(
        _liger_ce,
        _logits_and_targets,
        traced_fn=lambda x, t: W.CrossEntropy.apply(x, t, count),
        keep_inference_input_mutations=True,
    )


@pytest.mark.parametrize("mode", MODES)
def test_cross_entropy_on_logits_passed_in_raises_without_kept_input_mutations(mode: str) -> None:
    # Known limit (README): AOTAutograd copies a forward write of an input back after the forward
    # and cannot copy a second, backward write of it; raising beats the stale value.
    count = W.n_non_ignore(_logits_and_targets()[1])
    with interpreter_shims(), routed_through_ft():
        call = compiled(mode, lambda x, t: W.CrossEntropy.apply(x, t, count))
        with pytest.raises(AssertionError, match="X_ptr_written_in_backward_by_element_mul_kernel"):
            (call(*_logits_and_targets()) * 3.0).backward()


def test_cross_entropy_on_logits_computed_in_the_graph() -> None:
    count = W.n_non_ignore(_logits_and_targets()[1])

    def head(h: torch.Tensor, w: torch.Tensor, t: torch.Tensor, ce: Callable[..., Any]) -> torch.Tensor:
        return ce(h @ w.t(), t)

    check_against_eager(
        functools.partial(head, ce=_liger_ce),
        lambda: (_randn(5, 8), _randn(40, 8), _logits_and_targets()[1]),
        traced_fn=functools.partial(head, ce=lambda x, t: W.CrossEntropy.apply(x, t, count)),
    )


@pytest.mark.parametrize("name", ["rms_norm", "swiglu", "layer_norm"])
def test_dynamic_shapes_specialise_constexprs(name: str) -> None:
    # Liger computes BLOCK_SIZE (and swiglu's n_cols) from shapes: tl.constexprs that are SymInts
    # under dynamic=True. They are specialised with a guard (Note [constexpr guards]).
    fn, make_inputs, _ = REINPLACED[name]
    check_against_eager(
        fn, make_inputs, modes=("aot_function", "aot_module_reinplace"), scales=(3.0,), dynamic=True
    )


# Reinplacing: the clones functionalization adds for Liger's in-place writes (into graph inputs,
# saved tensors, incoming gradients) are all gone from the graphs reinplace_compiler returns.
REINPLACED: dict[str, tuple[Callable[..., Any], Callable[[], Sequence[Any]], bool]] = {
    "rms_norm": (
        lambda x, w: rms_norm.LigerRMSNormFunction.apply(x, w, 1e-6),
        lambda: (_randn(6, 32), _randn(32)),
        False,
    ),
    "layer_norm": (
        lambda x, w, b: layer_norm.LigerLayerNormFunction.apply(x, w, b, 1e-6),
        lambda: (_randn(6, 32), _randn(32), _randn(32)),
        False,
    ),
    "swiglu": (
        lambda a, b: swiglu.LigerSiLUMulFunction.apply(a, b),
        lambda: (_randn(6, 32), _randn(6, 32)),
        False,
    ),
    "swiglu_mlp": (
        lambda x, wg, wu: swiglu.LigerSiLUMulFunction.apply(x @ wg, x @ wu),
        lambda: (_randn(4, 8), _randn(8, 16), _randn(8, 16)),
        False,
    ),
    "geglu": (
        lambda a, b: geglu.LigerGELUMulFunction.apply(a, b),
        lambda: (_randn(6, 32), _randn(6, 32)),
        False,
    ),
    "rope": (
        lambda q, k, c, s: rope.LigerRopeFunction.apply(q, k, c, s),
        lambda: (
            _randn(1, 2, 8, 16),
            _randn(1, 2, 8, 16),
            _randn(1, 8, 16, grad=False),
            _randn(1, 8, 16, grad=False),
        ),
        False,
    ),
    "cross_entropy_head": (
        lambda h, w, t: W.CrossEntropy.apply(h @ w.t(), t, 4),
        lambda: (_randn(5, 8), _randn(40, 8), _logits_and_targets()[1]),
        False,
    ),
    "cross_entropy_input": (lambda x, t: W.CrossEntropy.apply(x, t, 4), _logits_and_targets, True),
}


@pytest.mark.parametrize("in_place", LEAF_WRITE_PATHS, ids=lambda p: "in_place" if p else "copy_back")
@pytest.mark.parametrize("name", list(REINPLACED))
def test_reinplacing_removes_every_clone(name: str, in_place: bool) -> None:
    fn, make_inputs, keep = REINPLACED[name]
    compiler = CloneCounts()
    counts = compiler.counts

    with interpreter_shims(), routed_through_ft(), leaf_writes_in_place(in_place):
        torch.manual_seed(0)
        out = aot_function(
            fn, fw_compiler=compiler, bw_compiler=compiler, keep_inference_input_mutations=keep
        )(*make_inputs())
        (torch.stack([o.sum() for o in _outputs(out) if o.requires_grad]).sum() * 3).backward()
    assert len(counts) == 2 and sum(before for before, _ in counts) > 0, counts
    assert [after for _, after in counts] == [0, 0], counts


def test_fused_linear_cross_entropy_without_data_dependent_python() -> None:
    # Liger's chunked loss: forward writes each logits chunk with its gradient and saves
    # grad_input / grad_weight; backward scales those saved tensors in place.
    targets = torch.tensor([1, 39, -100, 0, 7, 3])
    count = W.n_non_ignore(targets)
    fn = lambda x, w, t: W.FusedLinearCrossEntropy.apply(x, w, t, count)  # noqa: E731
    check_against_eager(fn, lambda: (_randn(6, 8), _randn(40, 8), targets.clone()))


def _distributions(log_input: bool, log_target: bool) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = torch.randn(4, 32), torch.randn(4, 32)
    x = x.log_softmax(-1) if log_input else x.softmax(-1)
    return x.requires_grad_(), y.log_softmax(-1) if log_target else y.softmax(-1)


# Liger's own Python reads data: .item() counts targets in forward (aten._local_scalar_dense), and
# torch.equal(grad_output, 1.0) picks a branch in backward (aten.equal).
DATA_DEPENDENT: dict[str, tuple[Callable[..., Any], Callable[[], Sequence[Any]], str]] = {
    "cross_entropy": (_liger_ce, _logits_and_targets, "_local_scalar_dense"),
    "fused_linear_cross_entropy": (
        lambda x, w, t: fused_linear_cross_entropy.LigerFusedLinearCrossEntropyFunction.apply(x, w, t)[0],
        lambda: (_randn(6, 8), _randn(40, 8), torch.tensor([1, 39, -100, 0, 7, 3])),
        "_local_scalar_dense",
    ),
    "kl_div": (kl_div.LigerKLDivLossFunction.apply, lambda: _distributions(True, False), "equal"),
    "jsd": (jsd.LigerJSDFunction.apply, lambda: _distributions(True, True), "equal"),
    "tvd": (tvd.LigerTVDLossFunction.apply, lambda: _distributions(False, False), "equal"),
}


@pytest.mark.parametrize("mode", ["aot_function", "aot_module"])
@pytest.mark.parametrize("name", list(DATA_DEPENDENT))
def test_losses_with_data_dependent_python_are_refused_by_fake_tensor(name: str, mode: str) -> None:
    """README known limit: FakeTensor, and so AOTAutograd, refuses Liger's losses with
    DataDependentOutputException naming the operator their Python reads data through; eagerly they run."""
    fn, make_inputs, refused = DATA_DEPENDENT[name]
    with interpreter_shims():
        fn(*make_inputs()).backward()  # eager Liger: no error
        with routed_through_ft():
            call = compiled(mode, fn)
            with pytest.raises(DataDependentOutputException, match=rf"^aten\.{refused}\.default$"):
                call(*make_inputs()).backward()  # the joint graph is traced at the first call
