"""torch.export strict and non-strict; torch.export.save / load, in this process and in another."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import triton
import triton.language as tl

import functional_triton as ft
from functional_triton import portable
from tests.compile import kernels as k
from tests.mutation_kernels import same_timing

N = 40
ROOT = Path(__file__).resolve().parents[2]


class TwoLaunches(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        ft.wrap_triton(k.add_kernel)[(triton.cdiv(N, 16),)](x, y, out, N, BLOCK=16)
        ft.wrap_triton(k.add_one_inplace)[k.grid_of_meta](x, N, BLOCK=16)  # in place on an input
        ft.wrap_triton(k.scale_kernel)[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](
            out, out, N, 0.5, BLOCK=8
        )
        return out


def inputs():
    return torch.arange(N, dtype=torch.float32), torch.linspace(-1, 1, N)


def eager():
    x, y = inputs()
    out = TwoLaunches()(x, y)
    return out, x


def _same(program, label):
    x, y = inputs()
    out = program(x, y)
    want_out, want_x = eager()
    torch.testing.assert_close(out, want_out, rtol=0, atol=0, msg=lambda m: f"{label}: output: {m}")
    torch.testing.assert_close(x, want_x, rtol=0, atol=0, msg=lambda m: f"{label}: x after the call: {m}")


@pytest.mark.parametrize("strict", [False, True])
def test_export_records_the_mutation_operator_and_runs_like_eager(strict: bool) -> None:
    ep = torch.export.export(TwoLaunches(), inputs(), strict=strict)
    hops = [n.target for n in ep.graph.nodes if isinstance(n.target, torch._ops.HigherOrderOperator)]
    assert hops == [ft.triton_kernel_wrapper_mutation] * 3
    _same(ep.module(), f"export(strict={strict})")
    decomposed = ep.run_decompositions()
    assert ft.triton_kernel_wrapper_functional in [n.target for n in decomposed.graph.nodes]
    _same(decomposed.module(), f"export(strict={strict}).run_decompositions()")


@pytest.mark.parametrize("strict", [False, True])
def test_save_and_load_in_this_process(tmp_path: Path, strict: bool) -> None:
    ep = torch.export.export(TwoLaunches(), inputs(), strict=strict)
    torch.export.save(ep, tmp_path / "prog.pt2")
    _same(torch.export.load(tmp_path / "prog.pt2").module(), "loaded")


@triton.jit
def _scale_in_test_module(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3, mask=offs < n)


_LOADER = """
import os, sys, torch
sys.path[:0] = {paths!r}
if os.environ.get("FT_TEST_DEVICE", "cpu") == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"
import functional_triton  # noqa: F401  (the operators must exist before loading)
for name in {names!r}:
    try:
        program = torch.export.load(os.path.join({folder!r}, name + ".pt2")).module()
    except Exception as e:
        print(name, "load", type(e).__name__, e)
        continue
    try:
        args = torch.load(os.path.join({folder!r}, name + ".in"))
        out = program(*args)
        torch.save((out, args), os.path.join({folder!r}, name + ".out"))
        print(name, "ran")
    except Exception as e:
        print(name, "run", type(e).__name__, e)
"""


def _load_elsewhere(folder: Path, names: list[str], paths: list[str]) -> dict[str, str]:
    script = _LOADER.format(paths=paths, names=names, folder=str(folder))
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *paths])},
    )
    assert run.returncode == 0, run.stderr
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in run.stdout.splitlines() if " " in line}


def _changing_module(tmp_path: Path) -> tuple[Path, Any]:
    """A kernel module in tmp_path, imported: the test rewrites it after the export."""
    changing = tmp_path / "changing_kernels.py"
    changing.write_text(Path(k.__file__).read_text())
    sys.path.insert(0, str(tmp_path))
    try:
        import changing_kernels
    finally:
        sys.path.remove(str(tmp_path))
    return changing, changing_kernels


def test_save_load_in_another_process_finds_kernels_and_names_those_it_cannot(tmp_path: Path) -> None:
    changing, changing_kernels = _changing_module(tmp_path)

    class Changing(torch.nn.Module):
        def forward(self, x):
            ft.wrap_triton(changing_kernels.times_two_inplace)[(3,)](x, N, BLOCK=16)
            return x + 0

    class Gone(torch.nn.Module):
        def forward(self, x):
            out = torch.empty_like(x)
            ft.wrap_triton(changing_kernels.scale_kernel)[(3,)](x, out, N, 2.0, BLOCK=16)
            return out

    programs = {
        "good": (TwoLaunches(), inputs()),
        "changed": (Changing(), (torch.arange(N, dtype=torch.float32),)),
        "gone": (Gone(), (torch.arange(N, dtype=torch.float32),)),
    }
    for name, (module, args) in programs.items():
        torch.export.save(torch.export.export(module, args, strict=False), tmp_path / f"{name}.pt2")
        torch.save(args, tmp_path / f"{name}.in")
    # After the save: one kernel's body changes, another is renamed.
    text = changing.read_text()
    assert "* 2, mask=m)" in text and "def scale_kernel(" in text
    changing.write_text(
        text.replace("* 2, mask=m)", "* 4, mask=m)").replace("def scale_kernel(", "def scaled(")
    )

    said = _load_elsewhere(tmp_path, list(programs), [str(tmp_path)])
    assert said["good"] == "ran", said
    out, (x, _) = torch.load(tmp_path / "good.out")
    want_out, want_x = eager()
    torch.testing.assert_close(out, want_out, rtol=0, atol=0)
    torch.testing.assert_close(x, want_x, rtol=0, atol=0)
    # Named by torch.export.load itself, not when the program first runs.
    assert said["changed"].startswith("load LookupError "), said
    assert "kernel 'times_two_inplace' (module changing_kernels) changed since" in said["changed"], said
    assert said["gone"].startswith("load LookupError "), said
    assert "kernel 'scale_kernel' cannot be found after torch.export.load" in said["gone"], said


def test_save_names_a_kernel_defined_in_a_function(tmp_path: Path) -> None:
    @triton.jit
    def closure_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 5, mask=offs < n)

    class Closure(torch.nn.Module):
        def forward(self, x):
            ft.wrap_triton(closure_kernel)[(3,)](x, N, BLOCK=16)
            return x + 0

    ep = torch.export.export(Closure(), (torch.arange(N, dtype=torch.float32),), strict=False)
    x = torch.arange(N, dtype=torch.float32)
    torch.testing.assert_close(ep.module()(x), torch.arange(N, dtype=torch.float32) + 5, rtol=0, atol=0)
    with pytest.raises(
        RuntimeError,
        match=r"^torch.export.save: kernel '\S*<locals>\.closure_kernel'.*defined inside a function",
    ):
        torch.export.save(ep, tmp_path / "closure.pt2")


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (["__main__", "k", "0"], "lives in '__main__'"),
        (["mod", "f.<locals>.k", "0"], "defined inside a function"),
        (["mod", "<lambda>", "0"], "or is a lambda"),
    ],
)
def test_save_check_names_references_another_process_cannot_import(entry: list[str], reason: str) -> None:
    ref = json.dumps({"kernel": entry, "grid": None})
    with pytest.raises(
        RuntimeError, match=rf"torch.export.save: kernel '{re.escape(entry[1])}'.*{re.escape(reason)}"
    ):
        portable.check_savable(ref, "[]")
    with pytest.raises(RuntimeError, match="process-local index"):
        portable.check_savable(3, 4)
    with pytest.raises(RuntimeError, match="no literal form"):
        portable.check_savable(json.dumps({"kernel": ["m", "k", "0"], "grid": None}), "[('a', <object>)]")


def _make_grid():
    def grid(meta):
        return (triton.cdiv(meta["n"], meta["BLOCK"]),)

    return grid


class _Decorated(torch.nn.Module):
    """One launch of tests/compile/kernels.py's autotuned or heuristics kernel, with ``grid``."""

    def __init__(self, kernel: str, grid: Any) -> None:
        super().__init__()
        self.kernel, self.grid = kernel, grid

    def forward(self, x, out, y):
        ft.wrap_triton(getattr(k, self.kernel))[self.grid](x, out, y, x.numel(), BLOCK=64)
        return out + 1


def _decorated_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.arange(64.0), torch.zeros(64), torch.zeros(64)


@pytest.mark.parametrize(
    ("kernel", "grid", "grid_name"),
    [
        ("autotune_kernel", lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),), "<lambda>"),
        ("heuristics_kernel", _make_grid(), "_make_grid.<locals>.grid"),
    ],
    ids=["autotune_lambda", "heuristics_function"],
)
def test_save_names_a_grid_callable_defined_in_a_function(
    tmp_path: Path, kernel: str, grid: Any, grid_name: str
) -> None:
    # Autotune configs / heuristics feed the grid's meta, so a strict export keeps the callable
    # itself (Note [portable references]): another process would have to import it. (A non-strict
    # export evaluates it while tracing, where every config gives the same grid, and saves that.)
    ep = torch.export.export(_Decorated(kernel, grid), _decorated_inputs(), strict=True)
    (node,) = [n for n in ep.graph.nodes if n.target is ft.triton_kernel_wrapper_mutation]
    assert node.kwargs["grid"] is None and json.loads(node.kwargs["kernel_idx"])["grid"] is not None
    with pytest.raises(
        RuntimeError,
        match=rf"^torch.export.save: the grid callable of kernel '{kernel}' '{re.escape(grid_name)}' "
        r"\(module tests.compile.test_export\).*it was defined inside a function \(or is a lambda\)",
    ):
        torch.export.save(ep, tmp_path / "grid.pt2")


class _TimesTwo(torch.nn.Module):
    def __init__(self, kernel: Any) -> None:
        super().__init__()
        self.kernel = kernel

    def forward(self, x):
        ft.wrap_triton(self.kernel)[(3,)](x, N, BLOCK=16)
        return x + 0


def _kernel_module(folder: Path, name: str) -> Any:
    """A copy of tests/compile/kernels.py, imported as module ``name`` from ``folder``."""
    (folder / f"{name}.py").write_text(Path(k.__file__).read_text())
    sys.path.insert(0, str(folder))
    try:
        importlib.invalidate_caches()
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def test_load_names_a_kernel_whose_module_no_longer_imports(tmp_path: Path) -> None:
    modules = {
        "deleted": "deleted_kernels_module",
        "broken": "broken_kernels_module",
        "raising": "raising_kernels_module",
        "syntax": "syntax_kernels_module",
    }
    try:
        for program, module_name in modules.items():
            kernel = _kernel_module(tmp_path, module_name).times_two_inplace
            args = (torch.arange(N, dtype=torch.float32),)
            ep = torch.export.export(_TimesTwo(kernel), args, strict=False)
            torch.export.save(ep, tmp_path / f"{program}.pt2")
            torch.save(args, tmp_path / f"{program}.in")
    finally:
        for module_name in modules.values():
            sys.modules.pop(module_name, None)
    # After the save: one module's file is gone, the other's import fails.
    (tmp_path / "deleted_kernels_module.py").unlink()
    (tmp_path / "broken_kernels_module.py").write_text("import a_module_that_does_not_exist\n")
    (tmp_path / "raising_kernels_module.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "syntax_kernels_module.py").write_text("def broken(:\n")

    said = _load_elsewhere(tmp_path, list(modules), [str(tmp_path)])
    why = {
        "deleted": "No module named 'deleted_kernels_module'",
        "broken": "No module named 'a_module_that_does_not_exist'",
        "raising": "RuntimeError: boom at import",
        "syntax": "SyntaxError",
    }
    for program in modules:
        # Named by torch.export.load itself, not when the program first runs, whatever the import's error.
        assert said[program].startswith("load LookupError "), said
        assert "kernel 'times_two_inplace' cannot be found after torch.export.load" in said[program], said
        assert why[program] in said[program], said


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("kernel", ["autotune_kernel", "heuristics_kernel"])
def test_save_and_load_autotune_and_heuristics_kernels(tmp_path: Path, kernel: str, strict: bool) -> None:
    # Tune once first: benchmarking runs every config on the real arguments (their writes leak), so
    # every compared run must find the config already chosen.
    getattr(k, kernel)[k.grid_of_meta](*_decorated_inputs(), 64, BLOCK=64)
    x, out, y = _decorated_inputs()
    getattr(k, kernel)[k.grid_of_meta](x, out, y, 64, BLOCK=64)  # eager, the raw launch
    ep = torch.export.export(_Decorated(kernel, k.grid_of_meta), _decorated_inputs(), strict=strict)
    (node,) = [n for n in ep.graph.nodes if n.target is ft.triton_kernel_wrapper_mutation]
    # Strict keeps the (module-level) grid callable by reference; non-strict evaluates it while tracing.
    assert (json.loads(node.kwargs["kernel_idx"])["grid"] is not None) is strict
    torch.export.save(ep, tmp_path / "prog.pt2")
    # Forget the objects this process made its references from: loading then finds the kernel (and,
    # strict, its grid callable) by module, name and fingerprint, as another process would.
    with portable._lock:
        portable._made.clear()
        portable._resolved.clear()
    loaded = torch.export.load(tmp_path / "prog.pt2").module()
    args = _decorated_inputs()
    got = loaded(*args)
    # The output, then x, out and y after the call.
    torch.testing.assert_close((got, *args), (out + 1, x, out, y), rtol=0, atol=0)


@triton.autotune(
    configs=[triton.Config({"BLOCK": 8}), triton.Config({"BLOCK": 32})],
    key=["n"],
    do_bench=same_timing,
)
@triton.jit
def _tuned_times_two(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = 2 * x; its two configs give k.grid_of_meta two grids (5 and 2 programs for N = 40)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


class _TunedGrids(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        ft.wrap_triton(_tuned_times_two)[k.grid_of_meta](x, out, x.numel())
        return out


def test_non_strict_export_keeps_one_grid_per_config_and_save_refuses_it(tmp_path: Path) -> None:
    """README: a kernel whose autotune configs give different grids holds, under non-strict export,
    one grid per config; torch.export.save refuses that, naming the grid callable, and a strict export
    of the same program saves, loads and runs like the raw launch."""
    x = torch.arange(N, dtype=torch.float32)
    ep = torch.export.export(_TunedGrids(), (x,), strict=False)
    (node,) = [n for n in ep.graph.nodes if n.target is ft.triton_kernel_wrapper_mutation]
    assert node.kwargs["grid"] == ((5,), (2,)), node.kwargs["grid"]  # BLOCK=8, then BLOCK=32
    assert json.loads(node.kwargs["kernel_idx"])["grid"] is not None  # the node names a grid object
    with pytest.raises(
        RuntimeError,
        match=r"^torch.export.save: kernel '_tuned_times_two' was exported with one grid per autotune "
        r"config \(its grid callable grid_of_meta gives .* with strict=True",
    ):
        torch.export.save(ep, tmp_path / "non_strict.pt2")

    # The way out the README gives: strict export keeps the (module-level) callable itself.
    torch.export.save(torch.export.export(_TunedGrids(), (x,), strict=True), tmp_path / "strict.pt2")
    with portable._lock:  # load by module, name and fingerprint, as another process would
        portable._made.clear()
        portable._resolved.clear()
    expected = torch.empty_like(x)
    _tuned_times_two[k.grid_of_meta](x, expected, N)
    got = torch.export.load(tmp_path / "strict.pt2").module()(x)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
