"""Autotune hooks: run once on stand-ins at analysis time (Note [hook stand-ins] in autotune_hooks.py).

A hook that only reads, or sets descriptor metadata, writes nothing; one that writes an argument adds
it to the written set; one whose effects cannot be observed makes the analysis give up (an
AnalysisWarning, every tensor argument cloned). Each program is checked against the raw kernel run
eagerly on copies of its inputs.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import triton
import triton.language as tl

import functional_triton as ft
from functional_triton import mutation
from functional_triton.mutation import analyze_writes
from tests.harness import check_matches_eager, compile_mode

TensorDescriptor = pytest.importorskip("triton.tools.tensor_descriptor").TensorDescriptor

N = 8


def same_timing(kernel_call: Callable[[], Any], quantiles: Any = None) -> list[float]:
    """Autotune benchmark stand-in for CPU tests: runs the config once, every config ties."""
    kernel_call()
    return [1.0, 1.0, 1.0]


def make_add_kernel() -> Any:
    """A fresh `out = x + y` kernel (its own python function: warnings are once per function)."""

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)

    return add_kernel


def autotuned_add(config_hook: Any = None, **options: Any) -> Any:
    """add_kernel under two configs, each with `config_hook` as its pre_hook; `options` for autotune."""
    configs = [
        triton.Config({"BLOCK": 4}, pre_hook=config_hook),
        triton.Config({"BLOCK": 8}, pre_hook=config_hook),
    ]
    return triton.autotune(configs=configs, key=["n"], do_bench=same_timing, **options)(make_add_kernel())


def add_args(**extra: object) -> dict[str, object]:
    x, y, out = torch.arange(N, dtype=torch.float32), torch.ones(N), torch.empty(N)
    return {"x_ptr": x, "y_ptr": y, "out_ptr": out, "n": N, **extra}


def add_program(kernel: Any) -> Callable[..., Any]:
    def prog(wrap: Any, x: torch.Tensor, base: torch.Tensor) -> Any:
        y = base[2:10]  # a view: under functionalize(remove="mutations_and_views") it arrives as a copy
        out = torch.empty_like(x)
        wrap(kernel)[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](x, y, out, N)
        return out, base * 2

    return prog


def add_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(N, dtype=torch.float32), torch.arange(12, dtype=torch.float32) + 1


def tensors_to_clone(prog: Callable[..., Any], inputs: Sequence[Any]) -> list[list[str]]:
    """The functional nodes' tensors_to_clone, in graph order, under make_fx(functionalize(...))."""
    gm = compile_mode("functionalize", prog, tuple(inputs))
    assert isinstance(gm, torch.fx.GraphModule)
    return [
        sorted(node.kwargs["tensors_to_clone"])
        for node in gm.graph.nodes
        if node.target is ft.triton_kernel_wrapper_functional
    ]


# --- read-only hooks -------------------------------------------------------------------------------


def test_hook_that_only_reads_writes_nothing() -> None:
    def reads(nargs: dict[str, Any]) -> None:
        assert nargs["x_ptr"].shape == (N,) and nargs["BLOCK"] in (4, 8)
        _ = nargs["y_ptr"] + nargs["x_ptr"]  # a new tensor, not an argument

    kernel = autotuned_add(reads)
    assert analyze_writes(kernel, add_args()).written_names == {"out_ptr"}
    assert tensors_to_clone(add_program(kernel), add_inputs()) == [["out_ptr"]]
    check_matches_eager(add_program(kernel), add_inputs)


def set_block_shapes(nargs: dict[str, Any]) -> None:
    # Like Triton's fused-attention tutorial's _host_descriptor_pre_hook.
    if not isinstance(nargs["in_desc"], TensorDescriptor):
        return
    nargs["in_desc"].block_shape = [nargs["BM"], N]
    nargs["out_desc"].block_shape = [nargs["BM"], N]


@triton.autotune(
    configs=[
        triton.Config({"BM": 2}, pre_hook=set_block_shapes),
        triton.Config({"BM": 4}, pre_hook=set_block_shapes),
    ],
    key=[],
    do_bench=same_timing,
)
@triton.jit
def desc_add_one(in_desc, out_desc, BM: tl.constexpr):
    # Compiles only with the block shape the hook sets: the analysis must see the hooked descriptors.
    tl.static_assert(in_desc.block_shape[0] == BM)
    pid = tl.program_id(0)
    v = in_desc.load([pid * BM, 0])
    out_desc.store([pid * BM, 0], v + 1)


def desc_program(wrap: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    src = TensorDescriptor.from_tensor(x, [1, N])  # the hook sets the real block shape
    dst = TensorDescriptor.from_tensor(y, [1, N])
    wrap(desc_add_one)[lambda meta: (N // meta["BM"],)](src, dst)
    return y * 2


def desc_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(N * N, dtype=torch.float32).reshape(N, N), torch.zeros(N, N)


def test_descriptor_metadata_hook_is_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    signatures: list[str] = []
    real = mutation._generate_ttir

    def recording(leaf: Any, signature: dict[str, str], constants: Any) -> Any:
        signatures.append(signature["in_desc"])
        return real(leaf, signature, constants)

    monkeypatch.setattr(mutation, "_CACHE", type(mutation._CACHE)())
    monkeypatch.setattr(mutation, "_generate_ttir", recording)
    x, y = desc_inputs()
    args = {
        "in_desc": TensorDescriptor.from_tensor(x, [1, N]),
        "out_desc": TensorDescriptor.from_tensor(y, [1, N]),
    }
    assert analyze_writes(desc_add_one, args).written_names == {"out_desc"}
    assert sorted(signatures) == ["tensordesc<fp32[2, 8]>", "tensordesc<fp32[4, 8]>"]
    assert args["in_desc"].block_shape == [1, N]  # the user's descriptors are left alone
    assert tensors_to_clone(desc_program, desc_inputs()) == [["out_desc"]]
    check_matches_eager(desc_program, desc_inputs)


# --- hooks that write ------------------------------------------------------------------------------


def zero_y(nargs: dict[str, Any]) -> None:
    nargs["y_ptr"].zero_()


def zero_y_through_a_view(nargs: dict[str, Any]) -> None:
    nargs["y_ptr"][1:3].fill_(0)


def copy_into_y(nargs: dict[str, Any]) -> None:
    torch.add(nargs["x_ptr"], 1, out=nargs["y_ptr"])


@pytest.mark.parametrize("hook", [zero_y, zero_y_through_a_view, copy_into_y])
def test_config_hook_that_writes_an_argument(hook: Any) -> None:
    kernel = autotuned_add(hook)
    assert analyze_writes(kernel, add_args()).written_names == {"out_ptr", "y_ptr"}
    assert tensors_to_clone(add_program(kernel), add_inputs()) == [["out_ptr", "y_ptr"]]
    check_matches_eager(add_program(kernel), add_inputs)


@pytest.mark.parametrize(
    "options",
    [
        {"pre_hook": lambda nargs, reset_only=False: nargs["y_ptr"].zero_()},
        {"pre_hook": lambda nargs, reset_only=False: reset_only and nargs["y_ptr"].zero_()},
        {"post_hook": lambda nargs, exception: nargs["y_ptr"].zero_()},
    ],
    ids=["pre_hook", "pre_hook_reset_only", "post_hook"],
)
def test_autotune_hook_that_writes_an_argument(options: dict[str, Any]) -> None:
    # Triton calls these only while benchmarking, once per key: compared by analysis and node only.
    kernel = autotuned_add(**options)
    assert analyze_writes(kernel, add_args()).written_names == {"out_ptr", "y_ptr"}
    assert tensors_to_clone(add_program(kernel), add_inputs()) == [["out_ptr", "y_ptr"]]


def test_read_only_autotune_hooks() -> None:
    kernel = autotuned_add(
        pre_hook=lambda nargs, reset_only=False: None, post_hook=lambda nargs, exception: None
    )
    assert analyze_writes(kernel, add_args()).written_names == {"out_ptr"}


@pytest.mark.parametrize("option", ["reset_to_zero", "restore_value"])
def test_reset_and_restored_arguments_are_written(option: str) -> None:
    # Triton's own hooks run only while benchmarking, once per key: compared by analysis and node only.
    kernel = autotuned_add(**{option: ["y_ptr"]})
    assert analyze_writes(kernel, add_args()).written_names == {"out_ptr", "y_ptr"}
    assert tensors_to_clone(add_program(kernel), add_inputs()) == [["out_ptr", "y_ptr"]]


# --- hooks that cannot be followed: unknown, every argument cloned ------------------------------------

CALLS = 0
COUNTER = torch.zeros(1)


def reads_data_ptr(nargs: dict[str, Any]) -> None:
    assert nargs["x_ptr"].data_ptr() % 4 == 0


def reads_a_value(nargs: dict[str, Any]) -> None:
    if nargs["y_ptr"].sum().item() > 1e9:
        nargs["y_ptr"].zero_()


def assigns_a_global(nargs: dict[str, Any]) -> None:
    global CALLS
    CALLS += 1


def writes_another_tensor(nargs: dict[str, Any]) -> None:
    COUNTER.add_(1)


def fails_on_stand_ins(nargs: dict[str, Any]) -> None:
    torch.nonzero(nargs["y_ptr"])  # a data-dependent shape


def swallows_the_refusal(nargs: dict[str, Any]) -> None:
    try:
        nargs["x_ptr"].data_ptr()
    except Exception:
        pass


class CallableHook:
    def __call__(self, nargs: dict[str, Any]) -> None:
        pass


@pytest.mark.parametrize(
    ("hook", "reason"),
    [
        (reads_data_ptr, "reads a data pointer"),
        (reads_a_value, "reads tensor data"),
        (assigns_a_global, "assigns the global 'CALLS'"),
        (writes_another_tensor, "writes a tensor that is not one of the kernel's arguments"),
        (fails_on_stand_ins, "failed on stand-in arguments"),
        (swallows_the_refusal, "reads a data pointer"),
        (CallableHook(), "not a plain function"),
    ],
    ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", type(v).__name__),
)
def test_hook_that_cannot_be_followed(hook: Any, reason: str) -> None:
    kernel = autotuned_add(hook)
    calls, counter = CALLS, COUNTER.item()
    result = analyze_writes(kernel, add_args())
    assert result.written_names is None and reason in (result.reason or ""), result.reason
    assert "a triton.Config pre_hook" in (result.reason or "")
    # Nothing the hook does outside its stand-ins ran at analysis time.
    assert (CALLS, COUNTER.item()) == (calls, counter)
    with pytest.warns(ft.AnalysisWarning, match=r"add_kernel .*pre_hook"):
        clones = tensors_to_clone(add_program(kernel), add_inputs())
    assert clones == [["out_ptr", "x_ptr", "y_ptr"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ft.AnalysisWarning)
        check_matches_eager(add_program(kernel), add_inputs)


def test_hook_on_symbolic_arguments_gives_up() -> None:
    kernel = autotuned_add(zero_y)
    with pytest.warns(ft.AnalysisWarning, match="gets a tensor 'x_ptr' with a symbolic shape"):
        gm = torch.fx.experimental.proxy_tensor.make_fx(
            torch.func.functionalize(lambda x, base: add_program(kernel)(ft.wrap_triton, x, base)),
            tracing_mode="symbolic",
        )(*add_inputs())
    (node,) = [n for n in gm.graph.nodes if n.target is ft.triton_kernel_wrapper_functional]
    assert sorted(node.kwargs["tensors_to_clone"]) == ["out_ptr", "x_ptr", "y_ptr"]


# --- Triton's fused-attention tutorial, in small -------------------------------------------------------


def attention_pre_hook(nargs: dict[str, Any]) -> None:
    # As the tutorial's _host_descriptor_pre_hook: block shapes follow the config.
    block_m, block_n, head_dim = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["HEAD_DIM"]
    if not isinstance(nargs["desc_q"], TensorDescriptor):
        return
    nargs["desc_q"].block_shape = [block_m, head_dim]
    nargs["desc_v"].block_shape = [block_n, head_dim]
    nargs["desc_k"].block_shape = [block_n, head_dim]
    nargs["desc_o"].block_shape = [block_m, head_dim]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, pre_hook=attention_pre_hook)
        for bm in (2, 4)
        for bn in (2, 4)
        for w in (4, 8)
    ],
    key=["N_CTX", "HEAD_DIM"],
    do_bench=same_timing,
)
@triton.jit
def attention_like(
    desc_q,
    desc_k,
    desc_v,
    desc_o,
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_M
    q = desc_q.load([start_m, 0])
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        k = desc_k.load([start_n, 0])
        v = desc_v.load([start_n, 0])
        scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)  # [BLOCK_M, BLOCK_N], exact in fp32
        acc += tl.sum(scores[:, :, None] * v[None, :, :], axis=1)
    desc_o.store([start_m, 0], acc)


def attention_program(wrap: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    o = torch.empty_like(q)
    n_ctx, head_dim = q.shape
    dummy = [1, 1]  # as the tutorial: the pre_hook sets the real block shapes
    descs = [TensorDescriptor(t, t.shape, t.stride(), dummy) for t in (q, k, v, o)]
    grid = lambda meta: (triton.cdiv(n_ctx, meta["BLOCK_M"]),)  # noqa: E731
    wrap(attention_like)[grid](*descs, n_ctx, HEAD_DIM=head_dim)
    return o


def attention_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # Small integers: every sum is exact, so any order of accumulation gives the same bits.
    make = lambda seed: (torch.arange(32, dtype=torch.float32).reshape(8, 4) * seed % 3) - 1  # noqa: E731
    return make(1), make(2), make(5)


def test_fused_attention_pattern_clones_no_input() -> None:
    assert tensors_to_clone(attention_program, attention_inputs()) == [["desc_o"]]
    check_matches_eager(attention_program, attention_inputs)


def test_autotune_hooks_of_a_single_config_never_run() -> None:
    # Triton benchmarks, and so calls autotune(pre_hook=, post_hook=), only with several configs.
    def zero_y_no_reset_only(nargs: dict[str, Any]) -> None:
        nargs["y_ptr"].zero_()

    kernel = triton.autotune(
        configs=[triton.Config({"BLOCK": 8})], key=["n"], do_bench=same_timing, pre_hook=zero_y_no_reset_only
    )(make_add_kernel())
    assert analyze_writes(kernel, add_args()).written_names == {"out_ptr"}
    check_matches_eager(add_program(kernel), add_inputs)
