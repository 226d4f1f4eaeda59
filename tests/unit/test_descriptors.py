"""Host-side TensorDescriptor arguments: traced as their base tensor, writes seen and copied back."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from tests.harness import check_matches_eager

TensorDescriptor = pytest.importorskip("triton.tools.tensor_descriptor").TensorDescriptor


@triton.jit
def desc_add_one(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    v = in_desc.load([pid * BM, 0])
    out_desc.store([pid * BM, 0], v + 1)


def prog(wrap, x, y):
    src = TensorDescriptor.from_tensor(x, [4, 8])
    dst = TensorDescriptor.from_tensor(y, [4, 8])
    wrap(desc_add_one)[(2,)](src, dst, BM=4, BN=8)
    return y * 2


def inputs():
    return torch.arange(64, dtype=torch.float32).reshape(8, 8), torch.zeros(8, 8)


def test_write_through_descriptor_is_functionalized_and_copied_back() -> None:
    check_matches_eager(prog, inputs)


def test_analysis_sees_writes_through_descriptors() -> None:
    from functional_triton.mutation import analyze_writes

    x, y = inputs()
    args = dict(
        in_desc=TensorDescriptor.from_tensor(x, [4, 8]), out_desc=TensorDescriptor.from_tensor(y, [4, 8])
    )
    assert analyze_writes(desc_add_one, {**args, "BM": 4, "BN": 8}).written_names == frozenset({"out_desc"})


def test_descriptor_over_the_same_tensor_reads_its_own_writes() -> None:
    def same(wrap, x):
        d = TensorDescriptor.from_tensor(x, [4, 8])
        wrap(desc_add_one)[(2,)](d, d, BM=4, BN=8)
        return x

    check_matches_eager(same, lambda: (torch.arange(64, dtype=torch.float32).reshape(8, 8),))
