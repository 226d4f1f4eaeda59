"""@triton.jit stand-ins for the libdevice functions Liger uses; on the interpreter those are stubs.

Module-level so that ``tl`` is a global of each function, as triton requires.
"""

import triton
import triton.language as tl


@triton.jit
def rsqrt(x):
    return tl.rsqrt(x)


@triton.jit
def tanh(x):
    return 2 * tl.sigmoid(2 * x) - 1
