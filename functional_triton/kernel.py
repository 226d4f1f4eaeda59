"""``wrap_triton``: one adapter over every kind of Triton kernel, and the launch path.

Eager launches (no tracing mode, plain tensors) go straight to ``kernel[grid](...)``
with no dispatcher work; anything else becomes a ``triton_kernel_wrapper_mutation``
call that tracing modes can record. A launch is classified once (``launch_spec.classify``);
this module sits on top of the operators and imports downwards only.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from . import _native
from ._compat import (
    call_from_kernel,
    dispatch_stack_len,
    explain_interpreter_failure,
    functorch_interpreter,
    is_functional_tensor,
)
from .aliasing import traced_geometry
from .hops import triton_kernel_wrapper_mutation
from .launch_spec import (
    _CONSTANT_TYPES,
    _TRACEABLE_TYPES,
    GridType,
    KernelInfo,
    KernelWrapper,
    LaunchKind,
    LaunchSpec,
    _grid_tensors,
    _infos,
    _triton_kernel_types,
    bind_arguments,
    check_grid,
    checked_grid_fn,
    classify,
    kernel_info,
    kernel_key,
    make_launch_spec,
    trace_grid,
)
from .node import GEOMETRY_KEY, MutationNode
from .portable import exported_grid, node_indices

_PLAIN = LaunchKind.PLAIN
_Parameter = torch.nn.Parameter


def _refuse_meta(
    kernel: Any, info: KernelInfo, grid: GridType, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """An eager launch (no mode) given a meta tensor: raise naming it, never launch.

    Meta tensors hold no data. The interpreter's raw launch raises on them; a compiled kernel's
    raw launch takes their null data pointer and faults the device (an illegal memory access
    that poisons the CUDA context), so the wrapped launch refuses before launching. Reaching the
    operator's meta rule instead would do nothing, silently.
    """
    meta = [n for n, v in bind_arguments(info, args, kwargs).items() if isinstance(v, Tensor) and v.is_meta]
    if not meta or any(
        isinstance(v, Tensor) and not v.is_meta and type(v) not in (Tensor, _Parameter)
        for v in (*args, *kwargs.values())
    ):
        return  # a tensor subclass (fake, functional) takes the operator's path
    make_launch_spec(kernel, info, grid, args, kwargs)  # mixed devices raise naming the argument
    raise ValueError(
        f"argument '{meta[0]}' of {info.name} is a meta tensor: it holds no data, so the kernel "
        "cannot run on it (trace the program with FakeTensorMode or make_fx to run it without data)"
    )


def _is_traced(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """The slower, complete check: any functional tensor among the arguments."""
    return any(
        isinstance(v, Tensor) and is_functional_tensor(v)
        for values in (args, kwargs.values())
        for v in values
    )


def mutation_node(spec: LaunchSpec, proxy_of: Callable[[Any], Any] = lambda v: v) -> MutationNode:
    """The mutation node of a traced launch: side-table entries made, geometry recorded.

    Both ways of tracing a launch build their node here: the dispatcher's (``launch_traced``)
    and Dynamo's (dynamo.py), which maps traced values to its proxies with ``proxy_of``.
    """
    if spec.traced_grid is not None:  # Note [traced grids]
        grid, grid_fn = spec.traced_grid
    else:
        exported = exported_grid(spec)  # Note [portable references]
        grid, grid_fn = (None, exported) if callable(exported) else (tuple(exported), None)
    geometry = tuple(
        (name, traced_geometry(t)) for name, t in spec.tensors.items() if isinstance(t, Tensor)
    )  # Note [traced geometry]
    kernel_idx, constant_args_idx = node_indices(
        spec.kernel, grid_fn, {**spec.constants, GEOMETRY_KEY: geometry}
    )
    node_grid = None if grid is None else tuple(proxy_of(g) for g in grid)
    return MutationNode(
        kernel_idx, constant_args_idx, node_grid, {n: proxy_of(v) for n, v in spec.tensors.items()}
    )


def launch_traced(spec: LaunchSpec, *, classified: bool) -> None:
    """Record a launch as a mutation-operator call (tracing modes take it from here).

    ``classified``: the launch was found not plain (``classify``), so the operator dispatches
    without looking again; else (a functional tensor found after a raw launch failed) it looks.
    """
    node = mutation_node(spec)
    if classified:
        triton_kernel_wrapper_mutation.dispatch_node(node)
    else:
        triton_kernel_wrapper_mutation(**node.as_kwargs())


def _launch(
    kernel: Any,
    info: KernelInfo,
    grid: GridType,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    kind: LaunchKind,
) -> Any:
    if isinstance(grid, list):  # compiled triton takes lists; its interpreter does not
        grid = tuple(grid)
    if kind is _PLAIN:
        if type(grid) is tuple and 0 < len(grid) < 4:
            for g in grid:  # the common grid, 1 to 3 ints, needs no more checking
                if type(g) is not int:
                    check_grid(grid)
                    break
        else:
            check_grid(grid)
        if kwargs and not info.keyword_names.issuperset(kwargs):  # the interpreter would silently drop it
            bind_arguments(info, args, kwargs)
        if callable(grid):
            grid = checked_grid_fn(grid, _grid_tensors(info, args, kwargs))
        try:
            return kernel.run(*args, grid=grid, warmup=False, **kwargs)  # what kernel[grid](...) runs
        except Exception as e:
            return _after_failure(e, kernel, info, grid, args, kwargs)
    if kind is LaunchKind.TRACED_VALUES:  # no mode: a meta tensor must not reach a meta rule
        _refuse_meta(kernel, info, grid, args, kwargs)
    return _launch_traced(kernel, info, grid, args, kwargs, classified=True)


def _general(
    kernel: Any, info: KernelInfo, grid: GridType, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """A launch the common case does not take: the native path's way back (Note [the native launch path])."""
    return _launch(kernel, info, grid, args, kwargs, classify(args, kwargs))


def _after_failure(
    error: Exception,
    kernel: Any,
    info: KernelInfo,
    grid: GridType,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    """A raw launch raised: trace it if a functional tensor slipped through, else explain it."""
    if _is_traced(args, kwargs):
        return _launch_traced(kernel, info, grid, args, kwargs, classified=False)
    # Name the argument if the launch itself was malformed; else the kernel's own error.
    try:
        spec = make_launch_spec(kernel, info, grid, args, kwargs)
    except (TypeError, ValueError) as ours:
        raise ours from error
    meta = [n for n, t in spec.tensors.items() if isinstance(t, Tensor) and t.is_meta]
    if meta:
        raise ValueError(
            f"argument '{meta[0]}' of {info.name} is a meta tensor: it holds no data, so the kernel "
            "cannot run on it (trace the program with FakeTensorMode or make_fx to run it without data)"
        ) from error
    explain_interpreter_failure(error)
    raise error


def _launch_traced(
    kernel: Any,
    info: KernelInfo,
    grid: GridType,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    classified: bool,
) -> None:
    if isinstance(grid, list):
        grid = tuple(grid)
    spec = make_launch_spec(kernel, info, grid, args, kwargs)
    # Only a grid callable reads the bound arguments (a second bind per traced launch otherwise).
    bound = bind_arguments(info, args, kwargs) if callable(grid) else {}
    launch_traced(
        dataclasses.replace(spec, traced_grid=trace_grid(kernel, grid, bound)), classified=classified
    )


_new_object = object.__new__


def _warmup(
    kernel: Any, info: KernelInfo, grid: GridType, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``.run(..., warmup=True)``: compile without launching, as the raw kernel does.

    Eager: exactly the raw call (it returns what triton returns). Traced: nothing runs, so
    nothing is recorded (a launch recorded here would write what eager leaves alone); the
    arguments are still checked, naming the argument as a launch would.
    """
    if classify(args, kwargs) is _PLAIN:
        return kernel.run(*args, grid=grid, warmup=True, **kwargs)
    make_launch_spec(kernel, info, grid, args, kwargs)
    return None


class _PyBoundLaunch:
    """``wrap_triton(k)[grid]``: calling it launches (Dynamo handles it by type: dynamo.py).

    The Python launch path; ``_launch.c``'s ``Bound`` is the same where it is built (Note [the
    native launch path]).
    """

    __slots__ = ("_kernel", "_info", "_grid")
    _kernel: Any
    _info: KernelInfo
    _grid: GridType

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The launch, ``kernel[grid](*args, **kwargs)``: the common eager case inlined, else ``_launch``.

        This runs on every launch of the Python path (``.run(grid=)`` calls it too; ``_launch.c``
        makes the same checks in the same order). The common case: no dispatch mode,
        no functorch transform, a grid of 1 to 3 ints, plain tensors (not meta) and constants, and
        no keyword that the interpreter would drop silently (compiled triton raises on an unknown
        keyword, naming it, before it compiles; ``_after_failure`` then names it as ``_launch``
        would). It runs exactly what ``kernel[grid](...)`` runs. Any other value or state takes
        ``_launch``, which checks everything. The tests are ordered by how often they decide (ints
        and tensors first); the positional and the keyword values take the same test, written out
        twice (``classify`` states it once): a helper's frame per launch costs more than the test.
        """
        kernel, info, grid = self._kernel, self._info, self._grid
        if type(grid) is tuple and not dispatch_stack_len() and functorch_interpreter() is None:
            n = len(grid)
            if n == 1:
                simple = type(grid[0]) is int
            elif n == 2:
                simple = type(grid[0]) is int and type(grid[1]) is int
            else:
                simple = n == 3 and type(grid[0]) is int and type(grid[1]) is int and type(grid[2]) is int
            if simple:
                for v in args:
                    t = type(v)
                    if t is int:
                        continue
                    if t is Tensor or t is _Parameter:
                        if v.is_meta:
                            break
                    elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
                        break
                else:
                    if kwargs and info.interpreted and not info.keyword_names.issuperset(kwargs):
                        return _launch(kernel, info, grid, args, kwargs, classify(args, kwargs))
                    for v in kwargs.values():
                        t = type(v)
                        if t is int:
                            continue
                        if t is Tensor or t is _Parameter:
                            if v.is_meta:
                                break
                        elif t not in _CONSTANT_TYPES and isinstance(v, _TRACEABLE_TYPES):
                            break
                    else:
                        try:
                            return kernel.run(*args, grid=grid, warmup=False, **kwargs)
                        except Exception as e:
                            return _after_failure(e, kernel, info, grid, args, kwargs)
        return _launch(kernel, info, grid, args, kwargs, classify(args, kwargs))


_py_launch_bound = _PyBoundLaunch.__call__


class _PyLauncher:
    """The base of ``TritonKernel`` on the Python launch path: ``[grid]`` and ``run``."""

    __slots__ = ("kernel", "info")
    kernel: Any
    info: KernelInfo

    def __getitem__(self, grid: GridType) -> Callable[..., Any]:
        bound = _new_object(_PyBoundLaunch)  # per launch: no __init__ frame
        bound._kernel = self.kernel
        bound._info = self.info
        bound._grid = grid
        return bound

    def run(self, *args: Any, grid: GridType | None = None, warmup: Any = False, **kwargs: Any) -> Any:
        """Launch like ``kernel.run(*args, grid=grid, warmup=False, **kwargs)``.

        ``warmup=True`` compiles without launching, as the raw kernel does (``_warmup``).
        """
        if grid is None:
            raise TypeError(f"{self.info.name}.run() needs a grid: pass grid=(n,) or grid=callable")
        if warmup:
            return _warmup(self.kernel, self.info, grid, args, kwargs)
        bound = _new_object(_PyBoundLaunch)
        bound._kernel = self.kernel
        bound._info = self.info
        bound._grid = grid
        return _py_launch_bound(bound, *args, **kwargs)


# Note [the native launch path] (_native.py): the same two objects in C where they can be built.
NATIVE: Any = _native.NATIVE
if TYPE_CHECKING:  # the Python classes describe both
    _LauncherBase = _PyLauncher
    _BoundLaunch = _PyBoundLaunch
else:
    _LauncherBase = _PyLauncher if NATIVE is None else NATIVE.Launcher
    _BoundLaunch = _PyBoundLaunch if NATIVE is None else NATIVE.Bound


# Note [wrapped kernels as callees]
# A wrapped ``@triton.jit`` helper stays callable from other kernels, as the helper itself is:
# replacing a module's ``silu`` by ``wrap_triton(silu)`` must not break the kernels that call
# ``silu(x)``. Three callers look the name up:
#   - the interpreter runs the caller as Python and calls the object: ``__call__`` calls the kernel;
#   - triton's code generator accepts a global that is a JITFunction or a triton builtin, and calls
#     a builtin with its own generator when the signature asks for ``_generator``: ``__call__``
#     then emits the call of the wrapped JITFunction, exactly as for the helper itself
#     (``_compat.call_from_kernel``);
#   - the dependency finder behind a caller's cache key hashes the objects an "aggregate" lists in
#     ``hash_attrs``: the wrapped kernel, so editing the helper still invalidates its callers.
# The wrapper is not a JITFunction subclass on purpose: Dynamo would then take it for a raw
# kernel and route its launches through PyTorch's own operator instead of this library's.


class TritonKernel(_LauncherBase, KernelWrapper):
    """A Triton kernel whose launches tracing can see. Made by ``wrap_triton``.

    ``[grid]`` and ``run(..., grid=)`` come from its base: ``_launch.c``'s ``Launcher``, or
    ``_PyLauncher`` where that is not built (Note [the native launch path]).
    """

    __slots__ = ()
    # Note [wrapped kernels as callees]: the markers triton reads (triton 3.6 and 3.9).
    __triton_builtin__ = True
    __triton_aggregate__ = True

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.info = kernel_info(kernel)

    @property
    def hash_attrs(self) -> tuple[Any, ...]:
        """What a caller's cache key hashes for this object (Note [wrapped kernels as callees])."""
        return (self.kernel,)

    def __call__(self, *args: Any, _generator: Any = None, **kwargs: Any) -> Any:
        """Called from inside another kernel: behave like the wrapped kernel there."""
        if _generator is not None:  # triton's code generator (Note [wrapped kernels as callees])
            return call_from_kernel(_generator, self.kernel, args, kwargs)
        return self.kernel(*args, **kwargs)  # the interpreter; outside a kernel, triton's own error

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        """Copies and pickles are ``wrap_triton(kernel)`` again (the slots are not state)."""
        return (wrap_triton, (self.kernel,))

    def __repr__(self) -> str:
        return f"wrap_triton({self.info.name})"


def _what(obj: object) -> str:
    name = getattr(obj, "__name__", None)
    kind = type(obj).__name__
    return f"{kind} '{name}'" if name else kind


def _py_wrap_triton(kernel: Any) -> TritonKernel:
    """Make a Triton kernel's launches visible to tracing (make_fx, functionalize, AOTAutograd).

    Args:
        kernel: a ``@triton.jit``, ``@triton.autotune`` or ``@triton.heuristics`` kernel
            (stacked too), or the ``InterpretedFunction`` ``@triton.jit`` returns under
            ``TRITON_INTERPRET=1``.

    Returns:
        A kernel launched as ``wrap_triton(k)[grid](*args)`` or
        ``wrap_triton(k).run(*args, grid=grid)``: in eager exactly ``k[grid](*args)``;
        under tracing a ``triton_kernel_wrapper_mutation`` call.

    Raises:
        TypeError: ``kernel`` is not a Triton kernel.

    Example:
        >>> import functional_triton as ft
        >>> ft.wrap_triton(add_kernel)[(n // 128,)](x, y, out, n, BLOCK=128)  # doctest: +SKIP
    """
    # The per-launch path (``wrap_triton(k)[grid](...)`` made on every call): a kernel described
    # before passed the type check below; a new wrapper is all it costs (none is cached: a cached
    # wrapper would keep its kernel alive). An entry of ``_infos`` leaves in its kernel's weakref
    # callback, which runs before the kernel's memory (and so its key, Note [kernel keys]) can be
    # reused: an entry found under ``kernel_key(kernel)`` is this kernel's. Where the native path
    # is built, the public wrap_triton is this lookup in C, then ``_wrap_new`` (below).
    hit = _infos.get(kernel_key(kernel))
    if hit is not None:
        wrapper = _new_object(TritonKernel)
        wrapper.kernel = kernel
        wrapper.info = hit[1]
        return wrapper
    return _wrap_new(kernel)


def _wrap_new(kernel: Any) -> TritonKernel:
    """wrap_triton for a kernel not described before (or a TritonKernel, or not a kernel)."""
    if isinstance(kernel, TritonKernel):
        return kernel
    if not isinstance(kernel, _triton_kernel_types()):
        hint = " (missing @triton.jit?)" if inspect.isfunction(kernel) else ""
        raise TypeError(
            "wrap_triton() expects a @triton.jit, @triton.autotune or @triton.heuristics "
            f"kernel, got {_what(kernel)}{hint}"
        )
    return TritonKernel(kernel)


# The public wrap_triton: the Python function above, or where the native path is built (Note [the
# native launch path]) the same in C (the lookup, then _wrap_new) with the same doc. Dynamo knows
# both (dynamo.py). Either is named wrap_triton (repr, Dynamo's messages, pickling by name).
_py_wrap_triton.__name__ = _py_wrap_triton.__qualname__ = "wrap_triton"
wrap_triton: Callable[[Any], TritonKernel] = (
    _py_wrap_triton
    if NATIVE is None
    else NATIVE.make_wrap_triton(
        _wrap_new, "wrap_triton(kernel)\n--\n\n" + inspect.cleandoc(_py_wrap_triton.__doc__ or ""), __name__
    )
)


__all__ = ["wrap_triton", "TritonKernel"]


if NATIVE is not None:
    NATIVE.configure(
        _general,
        _after_failure,
        _PyLauncher.run,
        dispatch_stack_len,
        functorch_interpreter,
        Tensor,
        _Parameter,
        _TRACEABLE_TYPES,
        _infos,
        TritonKernel,
    )
    # Note [probes read in libtorch]
    NATIVE_PROBES = _native.install_probes(NATIVE, _native.python_modes_active)
else:
    NATIVE_PROBES = False
