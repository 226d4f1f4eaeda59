"""torch.export strict and non-strict; torch.export.save / load, in this process and in another."""

from __future__ import annotations

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
