"""Host TensorDescriptor arguments under dynamic shapes (issue 15, item 4).

A descriptor over a tensor of symbolic sizes is traced as its base plus metadata in which the
base's own sizes and strides stay symbolic (Note [symbolic descriptors]): a graph traced once
and called on other sizes must give eager's result for each, never the traced sizes.
"""

from __future__ import annotations

import functools

import pytest
import torch
import triton
import triton.language as tl
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from tests.harness import compile_mode, raw

TensorDescriptor = pytest.importorskip("triton.tools.tensor_descriptor").TensorDescriptor


@triton.jit
def desc_add_one(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    v = in_desc.load([pid * BM, 0])
    out_desc.store([pid * BM, 0], v + 1)


def prog(wrap, x, y):
    src = TensorDescriptor.from_tensor(x, [4, 8])
    dst = TensorDescriptor.from_tensor(y, [4, 8])
    wrap(desc_add_one)[(triton.cdiv(x.shape[0], 4),)](src, dst, BM=4, BN=8)
    return y * 2


def same_tensor(wrap, x):
    d = TensorDescriptor.from_tensor(x, [4, 8])
    wrap(desc_add_one)[(triton.cdiv(x.shape[0], 4),)](d, d, BM=4, BN=8)
    return x + 0


def inputs(rows: int, cols: int = 8):
    def make():
        x = torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols)
        return x, torch.zeros(rows, cols)

    return make


def one_input(rows: int):
    return lambda: (inputs(rows)()[0],)


ROWS = (8, 12, 6, 16)  # 6: the last block is partly outside the tensor (zero padding, masked store)


def check_sizes(call, program, make_for) -> None:
    for rows in ROWS:
        actual_inputs, expected_inputs = make_for(rows)(), make_for(rows)()
        actual = call(*actual_inputs)
        expected = program(raw, *expected_inputs)
        assert torch.equal(actual, expected), f"rows={rows}: output {actual} != eager {expected}"
        for i, (a, e) in enumerate(zip(actual_inputs, expected_inputs)):
            assert torch.equal(a, e), f"rows={rows}, input {i} after the call: {a} != eager {e}"


@pytest.mark.parametrize("mode", ["aot_function", "reinplace", "reinplace_keep", "aot_module"])
@pytest.mark.parametrize("program,make_for", [(prog, inputs), (same_tensor, one_input)])
def test_dynamic_aot_descriptors_follow_the_sizes(mode: str, program, make_for) -> None:
    with torch.no_grad():
        call = compile_mode(mode, program, make_for(ROWS[0])(), dynamic=True)
        check_sizes(call, program, make_for)


def test_dynamic_aot_descriptors_in_training() -> None:
    def train(wrap, x, y):
        z = x * 1.0
        src = TensorDescriptor.from_tensor(z, [4, 8])
        dst = TensorDescriptor.from_tensor(y, [4, 8])
        wrap(desc_add_one)[(triton.cdiv(x.shape[0], 4),)](src, dst, BM=4, BN=8)
        return y * x

    call = compile_mode("aot_function", train, inputs(8)(), dynamic=True)
    for rows in ROWS:
        x, y = inputs(rows)()
        x.requires_grad_(True)
        xe, ye = x.detach().clone().requires_grad_(True), y.clone()
        call(x, y).sum().backward()
        train(raw, xe, ye).sum().backward()
        torch.testing.assert_close(y, ye, rtol=0, atol=0)
        torch.testing.assert_close(x.grad, xe.grad, rtol=0, atol=0)


def test_make_fx_symbolic_records_the_mutation_with_symbolic_descriptors() -> None:
    gm = make_fx(functools.partial(prog, ft.wrap_triton), tracing_mode="symbolic")(*inputs(8)())
    check_sizes(gm, prog, inputs)


def test_torch_compile_dynamic_descriptors_follow_the_sizes() -> None:
    import torch._dynamo

    torch._dynamo.reset()
    compiled = torch.compile(functools.partial(prog, ft.wrap_triton), dynamic=True, backend="aot_eager")
    check_sizes(compiled, prog, inputs)
    torch._dynamo.reset()


def test_symbolic_shape_that_is_not_the_base_s_is_refused_naming_the_argument() -> None:
    def half(wrap, x, y):
        src = TensorDescriptor(x, [x.shape[0] // 2, 8], [8, 1], [4, 8])
        dst = TensorDescriptor.from_tensor(y, [4, 8])
        wrap(desc_add_one)[(1,)](src, dst, BM=4, BN=8)
        return y

    with pytest.raises(TypeError, match=r"argument 'in_desc' is a TensorDescriptor whose shape\[0\]"):
        compile_mode("aot_function", half, inputs(8)(), dynamic=True)(*inputs(8)())


def test_static_trace_called_on_other_sizes_refuses() -> None:
    gm = make_fx(functools.partial(prog, ft.wrap_triton))(*inputs(8)())
    with pytest.raises(ValueError, match=r"argument '(in_desc|out_desc)' has shape \(12, 8\)"):
        gm(*inputs(12)())
