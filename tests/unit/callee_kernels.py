"""Kernels that call a helper through a module global, as Liger's kernels call ``silu``.

``helper`` is the global the callers look up; tests replace it by ``ft.wrap_triton(helper)``.
The ``*_src`` functions are plain Python for tests that build compiled-triton JITFunctions
(``@triton.jit`` returns interpreter objects under TRITON_INTERPRET=1).
"""

from typing import Any

import triton
import triton.language as tl


@triton.jit
def helper(x):
    return x * 2 + 1


@triton.jit
def caller(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, helper(tl.load(x_ptr + offsets, mask=mask)), mask=mask)


def helper_src(x):
    return x * 2 + 1


def other_helper_src(x):
    return x * 3


def caller_src(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, compiled_helper(tl.load(x_ptr + offsets, mask=mask)), mask=mask)


compiled_helper: Any = None  # set by the tests to a (wrapped) JITFunction over helper_src
