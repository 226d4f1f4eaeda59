"""functional_triton: user-written Triton kernels as first-class citizens of AOTAutograd graphs.

Module map, in dispatch order (each imports only from those above it; README: Module map):
_compat, _logging -> side_table, descriptors, tuples, grid_watch -> launch_spec -> aliasing,
bounds, portable -> node -> dense -> hops -> fake_rules, functionalize, transforms, autograd ->
registrations -> kernel (the launch path) -> passes.reinplace, inductor, dynamo.
"""

from importlib.metadata import PackageNotFoundError, version

from . import dynamo, registrations  # noqa: F401  (register the rules and Dynamo's variables)
from ._logging import configure_from_env
from .functionalize import AnalysisWarning
from .hops import triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation
from .kernel import wrap_triton
from .passes.reinplace import reinplace_compiler

configure_from_env()  # FUNCTIONAL_TRITON_LOGS=debug (README: Logging)

try:
    __version__ = version("functional_triton")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "wrap_triton",
    "triton_kernel_wrapper_functional",
    "triton_kernel_wrapper_mutation",
    "reinplace_compiler",
    "AnalysisWarning",
]
