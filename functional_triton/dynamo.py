"""torch.compile capture: Dynamo records wrapped launches as ``triton_kernel_wrapper_mutation``.

Note [Dynamo capture]
Dynamo must never trace the launch path (it is Python over kernel objects, weak
references and locks, and below it is triton's interpreter). Instead Dynamo is taught
three objects, each through its own VariableTracker:

- ``wrap_triton`` itself (by identity): calling it on a kernel Dynamo holds gives a
  wrapper variable (the kernel object is guarded by identity);
- a ``TritonKernel`` made outside the compiled function (by type, guarded by identity):
  ``[grid]`` gives a bound-launch variable, ``.run(..., grid=)`` launches;
- a ``_BoundLaunch`` made outside (by type, guarded by identity): calling it launches.

A launch binds and checks its arguments with the eager path's own ``make_launch_spec``,
fed with Dynamo's example values (fake tensors, SymInts), so every error names the
argument exactly as in eager; it registers the kernel and the constants in the side
table and emits one ``triton_kernel_wrapper_mutation`` node whose ``kwargs`` hold the
proxies of the tensor and symbolic arguments. AOTAutograd then runs this library's
functionalization on that node, as for any other trace.

A grid that is a Python constant (a tuple of ints, a module-level function, a lambda
whose closure Dynamo can rebuild as constants) is kept as it is: a callable goes to the
side table and is evaluated when the graph runs, on the real arguments, as in eager.
A grid tuple with SymInts is passed as graph values. A grid callable that closes over
traced values (a SymInt from ``x.numel()`` under dynamic shapes) is evaluated by Dynamo
on the launch's arguments, once, when no autotune config or heuristic feeds its meta;
otherwise the launch is not captured.

Where a launch cannot be captured (an argument Dynamo cannot hand over, a bad launch),
Dynamo graph-breaks with one warning naming the kernel and the reason, and the launch
runs eagerly. So that Dynamo does not trace that eager call (nor triton's interpreter
below it), the launch path's entry points are marked to be skipped by Dynamo together
with every frame they call (``skip_launch_path``); eager launches do not pay for this.

Private symbols used (checked on torch 2.13.0; each is probed, and capture is off with
a warning at the first compile if one is missing):
- ``torch._dynamo.variables.builder.VariableBuilder._type_dispatch_impl`` and
  ``._id_dispatch`` (cached dicts: type / id -> wrapping function), ``.install_guards``;
- ``torch._dynamo.variables.base.VariableTracker`` (``call_function``, ``call_method``,
  ``mp_subscript_impl`` on 2.13, ``call_method("__getitem__")`` before it, ``_nonvar_fields``);
- ``torch._dynamo.variables`` ``ConstantVariable``, ``ConstDictVariable``, ``TritonKernelVariable``,
  ``UserFunctionVariable`` (subclassed), ``TMADescriptorStableVariable``,
  ``CreateTMADescriptorStableVariable``;
- ``torch._dynamo.guards.GuardBuilder.ID_MATCH``, ``install_guard``;
- ``torch._dynamo.exc.unimplemented`` (keyword form of 2.13) or ``Unsupported``;
- ``tx.output.create_proxy``;
- ``torch._C._dynamo.eval_frame.set_code_exec_strategy`` with ``torch._dynamo.types.FrameExecStrategy``.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import torch

# Private (see the module's docstring; every supported torch has them):
from torch._dynamo import exc as _exc
from torch._dynamo.guards import GuardBuilder, install_guard
from torch._dynamo.variables.base import VariableTracker
from torch._dynamo.variables.builder import VariableBuilder
from torch._dynamo.variables.functions import UserFunctionVariable

from .descriptors import descriptor_type, is_descriptor, rebuild
from .hops import triton_kernel_wrapper_mutation
from .inductor import register as register_inductor_lowering
from .kernel import TritonKernel, _BoundLaunch, _py_wrap_triton, _PyBoundLaunch, mutation_node, wrap_triton
from .launch_spec import LaunchSpec, bind_arguments, make_launch_spec, trace_grid

log = logging.getLogger(__name__)

HAS_DYNAMO_HOOKS = hasattr(VariableBuilder, "_type_dispatch_impl") and hasattr(
    VariableBuilder, "_id_dispatch"
)


class CaptureWarning(UserWarning):
    """A launch under torch.compile could not be recorded in the graph and runs eagerly."""


class _NotCaptured(Exception):
    """Internal: this launch cannot be captured; carries the reason."""


_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _graph_break(kernel_name: str, reason: str) -> NoReturn:
    """One warning per (kernel, reason), then a Dynamo graph break naming both."""
    with _warned_lock:
        first = (kernel_name, reason) not in _warned
        _warned.add((kernel_name, reason))
    if first:
        warnings.warn(
            f"torch.compile cannot record the launch of {kernel_name} in the graph ({reason}); "
            "it runs eagerly after a graph break",
            CaptureWarning,
            stacklevel=2,
        )
    message = f"functional_triton: launch of {kernel_name} not captured: {reason}"
    try:  # torch 2.13 (and 2.11): the keyword form
        _exc.unimplemented(
            gb_type="functional_triton launch", context=kernel_name, explanation=message, hints=[]
        )
    except TypeError:  # an older positional form
        raise _exc.Unsupported(message) from None


# --- from Dynamo's variables to Python values ------------------------------------------


def _is_tensor(vt: Any) -> bool:
    # torch 2.13: VariableTracker.is_tensor(); older releases: isinstance TensorVariable.
    if hasattr(vt, "is_tensor"):
        return bool(vt.is_tensor())
    from torch._dynamo.variables import TensorVariable

    return isinstance(vt, TensorVariable)


def _is_symbolic(vt: Any) -> bool:
    # torch 2.13: VariableTracker.is_symnode_like(); older releases: isinstance SymNodeVariable.
    if hasattr(vt, "is_symnode_like"):
        return bool(vt.is_symnode_like())
    from torch._dynamo.variables import SymNodeVariable

    return isinstance(vt, SymNodeVariable)


def _type_name(vt: Any) -> str:
    try:
        return vt.python_type().__name__  # type: ignore[no-any-return]
    except NotImplementedError:
        return type(vt).__name__


class _Values:
    """Python values for a launch's variables, and the proxies behind the traced ones."""

    def __init__(self, tx: Any) -> None:
        self.tx = tx
        self.proxies: dict[int, Any] = {}  # id(example value) -> proxy

    def traced(self, vt: Any) -> Any:
        proxy = vt.as_proxy()
        value = proxy.node.meta.get("example_value")
        if value is None:
            raise _NotCaptured(f"no example value for {vt}")
        self.proxies[id(value)] = proxy
        return value

    def value(self, name: str, vt: Any, constexpr: bool = False) -> Any:
        vt = vt.realize() if hasattr(vt, "realize") else vt
        if vt.is_python_constant():
            return vt.as_python_constant()
        if constexpr and _is_symbolic(vt) and hasattr(vt, "evaluate_expr"):
            # A constexpr is compiled into the kernel: specialise it, with a guard, so that
            # another value recompiles instead of launching the kernel built for this one.
            return vt.evaluate_expr()
        if _is_tensor(vt) or _is_symbolic(vt):
            return self.traced(vt)
        descriptor = self.descriptor(vt)
        if descriptor is not None:
            return descriptor
        raise _NotCaptured(f"argument '{name}' is a {_type_name(vt)}, which Dynamo cannot hand over")

    def descriptor(self, vt: Any) -> Any:
        """A host TensorDescriptor (unchecked) over the base's example value, or None."""
        try:  # torch 2.13: Dynamo's own variable for an in-graph TensorDescriptor.from_tensor
            from torch._dynamo.variables.functions import TMADescriptorStableVariable
        except ImportError:
            TMADescriptorStableVariable = ()  # type: ignore[assignment,misc]
        if isinstance(vt, TMADescriptorStableVariable):  # TensorDescriptor.from_tensor(t, block) in-graph
            base = self.traced(vt.tensor)
            block = tuple(vt.block_shape.as_python_constant())
            meta = (tuple(base.shape), tuple(base.stride()), block, "zero", False)
            return rebuild(base, meta, checked=False)
        value = getattr(vt, "value", None)
        if not is_descriptor(value):
            return None
        # Read through Dynamo, so that each field is guarded.
        fields = ("shape", "strides", "block_shape", "padding", "round_f32_to_tf32")
        names = [f for f in fields if hasattr(value, f)]
        read = {f: self.attribute(vt, f).as_python_constant() for f in names}
        base = self.traced(self.attribute(vt, "base"))
        padding, round_tf32 = str(read.get("padding", "zero")), bool(read.get("round_f32_to_tf32", False))
        shape, strides, block = (tuple(read[f]) for f in ("shape", "strides", "block_shape"))
        return rebuild(base, (shape, strides, block, padding, round_tf32), checked=False)

    def attribute(self, vt: Any, name: str) -> Any:
        """``getattr(vt, name)`` as Dynamo traces it (guarded); the same call on 2.11 to 2.14."""
        from torch._dynamo.variables import ConstantVariable

        getattr_vt = VariableTracker.build(self.tx, getattr)
        return getattr_vt.call_function(self.tx, [vt, ConstantVariable.create(name)], {})

    def proxy_of(self, value: Any) -> Any:
        """The proxy of a traced value, the value itself for a constant."""
        return self.proxies.get(id(value), value)


def _grid_value(values: _Values, wrapper: TritonKernel, grid: Any, bound: dict[str, Any]) -> Any:
    """A grid as the launch path takes it: a constant, a tuple with SymInts, or a callable."""
    grid = grid.realize() if hasattr(grid, "realize") else grid
    exporting = torch.compiler.is_exporting() and not wrapper.info.provided_names
    if grid.is_python_constant() and not (exporting and callable(grid.as_python_constant())):
        return grid.as_python_constant()
    items = getattr(grid, "items", None)
    if isinstance(items, list):  # a tuple/list variable with traced entries
        return tuple(values.value(f"grid[{i}]", item) for i, item in enumerate(items))
    if grid.is_python_constant():  # exporting: a callable needs a portable reference, a tuple none
        return _evaluate_grid(values, grid, bound)
    if wrapper.info.provided_names:
        raise _NotCaptured(
            "its grid callable closes over traced values and autotune configs or heuristics feed its meta"
        )
    return _evaluate_grid(values, grid, bound)


def _evaluate_grid(values: _Values, grid: Any, bound: dict[str, Any]) -> tuple[Any, ...]:
    """Call a grid callable Dynamo could not turn into a constant, on the launch's arguments."""
    from torch._dynamo.variables import ConstDictVariable

    tx = values.tx
    meta = {VariableTracker.build(tx, k): v for k, v in bound.items()}
    # torch 2.13 and 2.11 take ConstDictVariable(items, user_cls=dict); 2.14 has no user_cls (dict)
    result = grid.call_function(tx, [ConstDictVariable(meta)], {})
    items = getattr(result, "items", None)
    if not isinstance(items, list):
        raise _NotCaptured(f"its grid callable returned {_type_name(result)}, not a tuple")
    return tuple(values.value(f"grid[{i}]", item) for i, item in enumerate(items))


# --- emitting the node ----------------------------------------------------------------


def _emit(tx: Any, values: _Values, spec: LaunchSpec) -> None:
    register_inductor_lowering()  # before any backend sees the graph (Note [Inductor lowering])
    node = mutation_node(spec, values.proxy_of)  # the launch path's own node (geometry included)
    tx.output.create_proxy("call_function", triton_kernel_wrapper_mutation, (), node.as_kwargs())


def _launch(tx: Any, wrapper: TritonKernel, grid: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """Record one launch (Note [Dynamo capture]); graph-break with a warning if impossible."""
    from torch._dynamo.variables import ConstantVariable

    info = wrapper.info
    values = _Values(tx)
    try:
        constexprs = info.constexpr_names
        names = info.arg_names + ("*",) * len(args)
        py_args = [values.value(n, a, n in constexprs) for n, a in zip(names, args)]
        py_kwargs = {k: values.value(k, v, k in constexprs) for k, v in kwargs.items()}
        bound_vts = _bound_variables(info.arg_names, args, kwargs)
        if isinstance(grid, VariableTracker):
            grid = _grid_value(values, wrapper, grid, bound_vts)
        if isinstance(grid, list):
            grid = tuple(grid)
        spec = make_launch_spec(wrapper.kernel, info, grid, py_args, py_kwargs)
        # A bad grid, or a grid callable writing a tensor, raises now (Note [traced grids]).
        trace_grid(wrapper.kernel, grid, bind_arguments(info, py_args, py_kwargs))
    except (_NotCaptured, TypeError, ValueError, RuntimeError) as e:
        _graph_break(info.name, str(e))
    _emit(tx, values, spec)
    log.debug("captured a launch of %s", info.name)
    return ConstantVariable.create(None)


def _bound_variables(names: Sequence[str], args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Positional and keyword argument variables by parameter name (for a grid's meta)."""
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


# --- the variables --------------------------------------------------------------------


def _python_kernel(tx: Any, vt: Any) -> Any:
    """The Python kernel object a variable stands for, guarded by identity."""
    from torch._dynamo.variables.functions import TritonKernelVariable

    vt = vt.realize() if hasattr(vt, "realize") else vt
    if isinstance(vt, TritonKernelVariable):  # JITFunction / Autotuner: Dynamo guards them by id
        return vt.kernel
    if isinstance(vt, KernelVariable):
        return vt.wrapper
    value = getattr(vt, "value", None)  # UserDefinedObjectVariable: Heuristics, InterpretedFunction
    if value is not None and getattr(vt, "source", None) is not None:
        install_guard(vt.source.make_guard(GuardBuilder.ID_MATCH))
        return value
    if vt.is_python_constant():
        return vt.as_python_constant()
    return None


class WrapTritonVariable(UserFunctionVariable):
    """``functional_triton.wrap_triton`` as Dynamo sees it: a function (hashable, comparable), our call."""

    def __init__(self, **kwargs: Any) -> None:
        fn: Any = _py_wrap_triton  # a Python function, as UserFunctionVariable asks (the same doc and call)
        super().__init__(fn, **kwargs)

    # A constant, so that `wrap is ft.wrap_triton` and the like fold away.
    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return wrap_triton

    # The public function (a C function where the native path is built) wherever Dynamo asks for
    # the object itself: as a dict key or set member (torch 2.11: get_python_hash() and
    # is_python_equal(); 2.13+: hash_impl, asked of types with their own tp_hash, and
    # is_python_equal()), for get_function() and for type(wrap). A dict built from Python holds
    # the key as that object, so its hash and equality must be the object's, not _py_wrap_triton's.
    def get_function(self) -> Any:
        return wrap_triton

    def hash_impl(self, tx: Any) -> tuple[int, bool]:
        return hash(wrap_triton), False

    def get_python_hash(self) -> int:
        return hash(wrap_triton)

    def is_python_equal(self, other: object) -> bool:
        return (
            isinstance(other, VariableTracker)
            and other.is_python_constant()
            and other.as_python_constant() is wrap_triton
        )

    def python_type(self) -> type:
        return type(wrap_triton)

    def call_function(self, tx: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        kernel = _python_kernel(tx, args[0]) if len(args) == 1 and not kwargs else None
        if kernel is None:
            _graph_break("wrap_triton()", "its argument is not a kernel Dynamo can name")
        try:
            wrapper = wrap_triton(kernel)
        except TypeError as e:
            _graph_break("wrap_triton()", str(e))
        return KernelVariable(wrapper)


class KernelVariable(VariableTracker):
    """A ``TritonKernel``: ``[grid]`` binds a grid, ``.run(..., grid=)`` launches."""

    _nonvar_fields = {"wrapper", *getattr(VariableTracker, "_nonvar_fields", ())}

    def __init__(self, wrapper: TritonKernel, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wrapper = wrapper

    def python_type(self) -> type:
        return TritonKernel

    def as_python_constant(self) -> Any:
        return self.wrapper

    def mp_subscript_impl(self, tx: Any, key: Any) -> Any:  # torch 2.13: kernel[grid]
        return BoundLaunchVariable(self.wrapper, key)

    def call_method(self, tx: Any, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        if name == "__getitem__" and len(args) == 1:  # torch < 2.13: kernel[grid]
            return BoundLaunchVariable(self.wrapper, args[0])
        if name == "run":
            kwargs = dict(kwargs)
            grid = kwargs.pop("grid", None)
            warmup = kwargs.pop("warmup", None)
            if warmup is not None and (not warmup.is_python_constant() or warmup.as_python_constant()):
                # Compiling without launching has nothing to record; eager does exactly that.
                _graph_break(self.wrapper.info.name, "run(warmup=True) compiles without launching")
            if grid is None:
                _graph_break(self.wrapper.info.name, "run() needs a grid: pass grid=(n,) or grid=callable")
            return _launch(tx, self.wrapper, grid, args, kwargs)
        return super().call_method(tx, name, list(args), kwargs)


class BoundLaunchVariable(VariableTracker):
    """``wrap_triton(k)[grid]``: calling it launches. ``grid`` is a variable or a Python value."""

    _nonvar_fields = {"wrapper", "grid_value", *getattr(VariableTracker, "_nonvar_fields", ())}

    def __init__(self, wrapper: TritonKernel, grid: Any, grid_value: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wrapper = wrapper
        self.grid = grid  # a VariableTracker, or None when grid_value holds the Python grid
        self.grid_value = grid_value

    def python_type(self) -> type:
        return _BoundLaunch

    def call_function(self, tx: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        grid = self.grid if self.grid is not None else self.grid_value
        return _launch(tx, self.wrapper, grid, args, kwargs)


# --- registration ---------------------------------------------------------------------


def _wrap_kernel(builder: Any, value: TritonKernel) -> Any:
    guards = builder.install_guards(GuardBuilder.ID_MATCH) or {}
    return KernelVariable(value, source=builder.source, **guards)


def _wrap_bound(builder: Any, value: _BoundLaunch) -> Any:
    guards = builder.install_guards(GuardBuilder.ID_MATCH) or {}
    wrapper = TritonKernel(value._kernel)
    return BoundLaunchVariable(wrapper, None, value._grid, source=builder.source, **guards)


def _wrap_wrap_triton(builder: Any, value: Any) -> Any:
    return WrapTritonVariable(source=builder.source, **(builder.install_guards(GuardBuilder.ID_MATCH) or {}))


def _launch_path_codes() -> list[Any]:
    """The Python frames an eager launch starts: the Python launch path's, the native path's way
    back into Python, and the Triton kernels' own ``run``, which ``_launch.c`` calls from C (Note
    [the native launch path]): a frame Dynamo would otherwise try to compile, tracing into Triton.
    The last holds for raw launches too, whichever path is built (README, torch.compile)."""
    from . import kernel
    from .launch_spec import _triton_kernel_types

    codes = [
        kernel._PyBoundLaunch.__call__.__code__,
        kernel._PyLauncher.run.__code__,
        kernel._PyLauncher.__getitem__.__code__,
        kernel._py_wrap_triton.__code__,
        kernel._wrap_new.__code__,
        kernel._general.__code__,
        kernel._after_failure.__code__,
    ]
    for cls in _triton_kernel_types():
        run = getattr(getattr(cls, "run", None), "__code__", None)
        if run is not None:
            codes.append(run)
    return codes


def skip_launch_path() -> bool:
    """Have Dynamo run the eager launch path without tracing it or anything it calls."""
    try:
        from torch._C._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy
    except ImportError:  # an older torch: a graph-broken launch may be traced (interpreter only)
        return False
    for code in _launch_path_codes():
        set_code_exec_strategy(code, FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP))
    return True


def _register_descriptor_factory() -> None:
    """``TensorDescriptor.from_tensor`` as Dynamo's own descriptor variable, where Dynamo has none.

    Dynamo handles it only when it finds a GPU that supports host descriptors
    (``torch.utils._triton.has_triton_tensor_descriptor_host_tma``); elsewhere (the CPU
    interpreter) it would trace the dataclass, whose check reads a fake tensor's data pointer.
    """
    try:
        from torch._dynamo.variables.functions import CreateTMADescriptorStableVariable
        from torch.utils._triton import has_triton_tensor_descriptor_host_tma
    except ImportError:  # then descriptors made inside a compiled function are not captured
        return
    cls = descriptor_type()
    if cls is None or has_triton_tensor_descriptor_host_tma():
        return

    factory: Any = cls.from_tensor  # type: ignore[attr-defined]
    VariableBuilder._id_dispatch()[id(factory)] = lambda builder, value: CreateTMADescriptorStableVariable()


def register() -> bool:
    """Teach Dynamo the three objects of Note [Dynamo capture]; False if its hooks are missing."""
    if not HAS_DYNAMO_HOOKS:
        return False
    for trace_numpy in (False, True):
        table: dict[Any, Callable[..., Any]] = VariableBuilder._type_dispatch_impl(trace_numpy)
        table[TritonKernel] = _wrap_kernel
        table[_BoundLaunch] = _wrap_bound
        table[_PyBoundLaunch] = _wrap_bound
    VariableBuilder._id_dispatch()[id(wrap_triton)] = _wrap_wrap_triton  # the public one
    VariableBuilder._id_dispatch()[id(_py_wrap_triton)] = _wrap_wrap_triton  # the same where native
    _register_descriptor_factory()
    skip_launch_path()
    return True


REGISTERED = register()


# Note [functional_triton backend]
# ``torch.compile(f, backend="functional_triton")``: AOTAutograd with ``reinplace_compiler``
# for the forward, backward and inference graphs, and graph-input mutations kept in the
# inference graph, so the pass can launch in place on them too (Note [reinplacing]). The
# graph then runs as is (no Inductor: its lowering cannot take the in-place launches'
# argument checks). Registered under that name when Dynamo has a registry.
def functional_triton_backend(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
    """The ``"functional_triton"`` torch.compile backend (Note [functional_triton backend])."""
    from torch._dynamo.backends.common import aot_autograd

    from .functionalize import _ORDER_KEEPING
    from .passes.reinplace import reinplace_compiler

    backend = aot_autograd(
        fw_compiler=reinplace_compiler,
        bw_compiler=reinplace_compiler,
        inference_compiler=reinplace_compiler,
        keep_inference_input_mutations=True,
    )
    _ORDER_KEEPING.active = True  # AOTAutograd's default partitioner (Note [backward writes to leaf inputs])
    try:
        return backend(gm, example_inputs, **kwargs)
    finally:
        _ORDER_KEEPING.active = False


def _register_backend() -> None:
    from torch._dynamo import list_backends, register_backend

    if "functional_triton" not in list_backends(exclude_tags=()):
        register_backend(name="functional_triton")(functional_triton_backend)


if REGISTERED:
    _register_backend()
