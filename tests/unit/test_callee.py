"""A wrapped @triton.jit helper called from another kernel behaves like the helper itself.

Note [wrapped kernels as callees] in functional_triton/kernel.py.
"""

from __future__ import annotations

import pytest
import torch
from triton.runtime.jit import JITFunction

import functional_triton as ft
from functional_triton import mutation
from tests.harness import check_matches_eager
from tests.unit import callee_kernels as C


def _program(wrap, x):
    out = torch.empty_like(x)
    wrap(C.caller)[(2,)](x, out, x.numel(), BLOCK=8)
    return out


def test_wrapped_helper_runs_inside_the_caller_eager_and_traced(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.arange(12, dtype=torch.float32)
    expected = _program(lambda k: k, x)
    monkeypatch.setattr(C, "helper", ft.wrap_triton(C.helper))
    torch.testing.assert_close(_program(lambda k: k, x), expected, rtol=0, atol=0)
    check_matches_eager(_program, lambda: (torch.arange(12, dtype=torch.float32),))


def test_analysis_reads_through_a_wrapped_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "helper", ft.wrap_triton(C.helper))
    x = torch.zeros(4)
    result = mutation.analyze_writes(C.caller, {"x_ptr": x, "out_ptr": x.clone(), "n": 4, "BLOCK": 8})
    assert result.written_names == frozenset({"out_ptr"})


def _ttir_and_key(helper: object) -> tuple[str, str]:
    """Compiled triton's code generator and cache key for caller_src with ``helper`` as its global."""
    from triton._C.libtriton import ir
    from triton.compiler.compiler import ASTSource

    C.compiled_helper = helper
    caller = JITFunction(C.caller_src)
    backend, options, target = mutation._backend()
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    source = ASTSource(
        caller, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {(3,): 8}, {}
    )
    # Other tests' interpreted kernels leave triton.language patched (Note [interpreter guard]).
    with mutation._interpreter_guard({}):
        module = source.make_ir(
            target, options, backend.get_codegen_implementation(options), backend.get_module_map(), context
        )
    return str(module), caller.cache_key


def test_compiled_code_generator_calls_a_wrapped_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "compiled_helper", None)
    raw_ttir, _ = _ttir_and_key(JITFunction(C.helper_src))
    wrapped_ttir, key = _ttir_and_key(ft.wrap_triton(JITFunction(C.helper_src)))
    assert "helper_src" in wrapped_ttir
    assert wrapped_ttir == raw_ttir
    # The caller's cache key covers the wrapped helper's source.
    _, other_key = _ttir_and_key(ft.wrap_triton(JITFunction(C.other_helper_src)))
    assert other_key != key


def test_wrapped_kernel_called_outside_a_kernel_raises_like_the_kernel() -> None:
    with pytest.raises(Exception) as raw_error:
        JITFunction(C.helper_src)(1)
    with pytest.raises(type(raw_error.value)):
        ft.wrap_triton(JITFunction(C.helper_src))(1)
