"""backend="inductor" copies what ft.reinplace_compiler copies: counted in Inductor's output code.

For each program, the copies that stay after ``ft.reinplace_compiler`` (the groups its
functional nodes still clone, and the graph's own copy_/clone/scatter nodes) are counted
from its graph; Inductor's are counted from the code it generates: the groups cloned by
``clone_arguments`` and by functional launches (read from the lowered nodes they name), and
Inductor's own copy kernels. Both must agree, and so must the allocations, and the results
equal eager's bit for bit.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
from torch._dynamo.backends.common import aot_autograd
from torch._inductor.utils import run_and_get_code

import functional_triton as ft
from functional_triton import inductor
from tests import kernels as K
from tests.harness import compare, raw, run_once

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_graphs  # noqa: E402

aten = torch.ops.aten
_COPY_OPS = (
    aten.copy_.default,
    aten.clone.default,
    aten.slice_scatter.default,
    aten.select_scatter.default,
    aten.as_strided_scatter.default,
    aten.diagonal_scatter.default,
)
# a lowered node's call: of its runner (Note [Inductor host overhead]) or of the operator
_FT_CALL = re.compile(
    r"\b_ft_(functional_launch_?|clone_arguments)_(\d+)\(|"
    r"torch\.ops\.functional_triton\.(\w+)\.default\(.*, (\d+)\)\s*$"
)


def _cloned_groups(layouts: Any) -> int:
    return len({raw[0] for raw in layouts.values() if raw[0] >= 0})


def _reinplace_counts(graphs: list[torch.fx.GraphModule]) -> tuple[int, int]:
    """(copies, fresh allocations) left in ft.reinplace_compiler's graphs."""
    copies = allocations = 0
    for gm in graphs:
        for n in gm.graph.nodes:
            if n.target is ft.triton_kernel_wrapper_functional:
                copies += _cloned_groups(n.kwargs["layouts"])
            elif n.target in _COPY_OPS:
                copies += 1
            elif isinstance(n.target, torch._ops.OpOverload) and not (
                n.target.is_view or n.target._schema.is_mutable
            ):
                allocations += 1
    return copies, allocations


def _inductor_counts(codes: list[str]) -> tuple[int, int]:
    """(copies, allocations) in Inductor's output code."""
    copies = allocations = 0
    for code in codes:
        for line in code.splitlines():
            call = _FT_CALL.search(line)
            if call is not None:
                op, spec = (call.group(1), call.group(2)) if call.group(1) else (call.group(3), call.group(4))
                layouts = _layouts_of(inductor._lowered[int(spec)])
                if op == "clone_arguments":
                    copies += len(layouts)
                elif op == "functional_launch":
                    copies += _cloned_groups(layouts)
            allocations += len(re.findall(r"\bempty_strided\w*\(", line))
        # Inductor's own copy kernels (C++ or Triton): named after copy/clone/scatter ops, or
        # after no op at all (Inductor names a bare copy_ that way)
        kernels = set(re.findall(r"\b((?:cpp|triton)_\w*fused_\w+)\(", code))
        copies += sum(1 for k in kernels if re.search(r"copy|clone|scatter|fused_\d+$", k))
    return copies, allocations


def _layouts_of(lowered: inductor.LoweredNode) -> Any:
    leaves = [v if kind == "c" else None for kind, v in lowered.leaves]
    return torch.utils._pytree.tree_unflatten(leaves, lowered.treespec)["layouts"]


def _reinplaced_graphs(fn: Any, inputs: Any, no_grad: bool, **aot: Any) -> list[torch.fx.GraphModule]:
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    rp = functools.partial(ft.reinplace_compiler, inner=keep)
    backend = aot_autograd(fw_compiler=rp, bw_compiler=rp, keep_inference_input_mutations=True, **aot)
    torch._dynamo.reset()
    run_once(
        torch.compile(functools.partial(fn, ft.wrap_triton), backend=backend, fullgraph=True), inputs, no_grad
    )
    return graphs


def _inductor_run(fn: Any, inputs: Any, no_grad: bool) -> tuple[dict[str, Any], list[str]]:
    torch._dynamo.reset()
    compiled = torch.compile(functools.partial(fn, ft.wrap_triton), fullgraph=True)
    return run_and_get_code(run_once, compiled, inputs, no_grad)


def _inplace_view_of_intermediate(wrap: Any, x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    v = y[1:]  # written through a view: AOTAutograd scatters it back into y (absorbed)
    wrap(bench_graphs.add_one_inplace)[bench_graphs.grid1(v.numel())](v, v.numel(), BLOCK=bench_graphs.BLOCK)
    return y


_CASES = [
    *bench_graphs.cases(False),
    ("in place, view of an intermediate", _inplace_view_of_intermediate, lambda: torch.zeros(4096)),
]


def test_importing_the_benchmark_leaves_the_interpreter_to_the_importer() -> None:
    """bench_graphs chooses the interpreter only when a benchmark script runs: imported here, on a
    GPU run of the suite, it once set TRITON_INTERPRET=1 and every kernel defined after it became
    an interpreted one."""
    code = (
        "import os, sys; sys.path.insert(0, 'benchmarks'); import bench_graphs; "
        "print(os.environ.get('TRITON_INTERPRET'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "None", out.stderr


@pytest.mark.parametrize("case", [c[0] for c in _CASES])
def test_bench_graphs_cases_copy_what_reinplace_copies(case: str) -> None:
    (prog, make) = next((p, m) for name, p, m in _CASES if name == case)
    inputs = lambda: (make(),)  # noqa: E731
    result, codes = _inductor_run(prog, inputs, True)
    compare(result, run_once(functools.partial(prog, raw), inputs, True), f"inductor on {case!r}")
    assert _inductor_counts(codes) == _reinplace_counts(_reinplaced_graphs(prog, inputs, True)), codes


def _two_writes(wrap: Any, a: torch.Tensor, b: torch.Tensor) -> None:
    wrap(K.two_writes)[(1,)](a, b, a.numel(), BLOCK=16)


class _SavedReadAfterTheWrite(torch.autograd.Function):
    """The backward writes a saved tensor and a gradient; the saved one's old value is read later."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wrap: Any) -> torch.Tensor:
        y = x * 3
        ctx.save_for_backward(y)
        ctx.wrap = wrap
        return x * 2

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        (y,) = ctx.saved_tensors
        old = y * 1  # the partitioner moves this read after the launch: y's group keeps its clone
        dy = dy * 1
        _two_writes(ctx.wrap, y, dy)
        return dy * y + old, None


def test_node_keeping_some_clones_clones_only_those() -> None:
    def prog(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        return _SavedReadAfterTheWrite.apply(x, wrap)

    inputs = lambda: (torch.arange(16.0).reshape(4, 4).requires_grad_(),)  # noqa: E731
    result, codes = _inductor_run(prog, inputs, False)
    compare(result, run_once(functools.partial(prog, raw), inputs, False), "inductor, training")
    # Inductor partitions with min-cut rematerialisation: so does the reinplace_compiler run
    graphs = _reinplaced_graphs(prog, inputs, False, partition_fn=min_cut_rematerialization_partition)
    kept = [n for g in graphs for n in g.graph.nodes if n.target is ft.triton_kernel_wrapper_functional]
    assert len(kept) == 1 and _cloned_groups(kept[0].kwargs["layouts"]) == 1  # one of its two groups
    assert _inductor_counts(codes)[0] == _reinplace_counts(graphs)[0] == 1, codes
    assert not re.search(r"_ft_functional_launch_\d+\(|functional_launch\.default\(", "\n".join(codes))
    assert re.search(r"_ft_clone_arguments_\d+\(|clone_arguments\.default\(", "\n".join(codes))
