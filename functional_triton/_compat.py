"""Every torch/triton version probe, resolved once at import.

Each probe names the versions it was checked on. The package supports triton>=3.6 (torch 2.11 on the GPU
machine) and is developed against triton 3.9 (torch 2.13, CPU).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import triton


def _release(text: str) -> tuple[int, ...]:
    """'3.9.0+git1234' -> (3, 9, 0); (0,) when unparsable. (No packaging dependency at runtime.)"""
    match = re.match(r"(\d+(?:\.\d+)*)", text)
    return tuple(int(part) for part in match.group(1).split(".")) if match else (0,)


TRITON_VERSION: tuple[int, ...] = _release(triton.__version__)

# The IR builder and location bindings are the most direct evidence of what the frontend can emit.
from triton._C.libtriton import ir as _ir  # noqa: E402

# triton<=3.6: tl.make_block_ptr / tl.advance emit tt.make_tensor_ptr / tt.advance.
# triton 3.9 removed them ("Block pointers have been removed in favor of the tensor descriptor API").
# Goes when triton>=3.9 is the minimum (only tests read it; the analysis handles both).
HAS_BLOCK_POINTERS: bool = hasattr(_ir.builder, "create_make_block_ptr")

# triton 3.6 accepts !tt.ptr<!tt.ptr<f32>> (a pointer loaded from memory); triton 3.9 rejects pointee
# types that are not int/float with an MLIR assertion that aborts the process, so tests must not try.
# Versions between 3.6 and 3.9 are unverified; the bound is the first version seen to reject them.
# Only tests read it. Goes when triton>=3.9 is the minimum.
HAS_POINTER_TO_POINTER: bool = TRITON_VERSION < (3, 9)

# triton 3.9: ir.location.get_name() returns a function argument's name; triton 3.6 has no getter
# (argument names are then not cross-checked). Goes when triton>=3.9 is the minimum.
HAS_LOCATION_NAME: bool = hasattr(_ir.location, "get_name")


def _jit_registry() -> dict[str, Any] | None:
    # triton 3.9: JITFunction.__init__ stores every instance in this module-level dict (3.6 has none).
    import triton.runtime.jit as jit

    registry = getattr(jit, "_triton_jit_function_registry", None)
    return registry if isinstance(registry, dict) else None


JIT_FUNCTION_REGISTRY: dict[str, Any] | None = _jit_registry()


def _make_ir_takes_target() -> bool:
    # triton 3.6 and 3.9: ASTSource.make_ir(target, options, codegen_fns, module_map, context);
    # older releases had no target parameter. Always True for the supported triton>=3.6: can go.
    from triton.compiler.compiler import ASTSource

    return "target" in inspect.signature(ASTSource.make_ir).parameters


MAKE_IR_TAKES_TARGET: bool = _make_ir_takes_target()


def interpreter_enabled() -> bool:
    """Whether @triton.jit builds InterpretedFunction objects (TRITON_INTERPRET=1 before import)."""
    # triton 3.6 and 3.9 read the flag through triton.knobs; it is an environment read, so ask each time.
    knobs = getattr(triton, "knobs", None)
    return bool(knobs is not None and knobs.runtime.interpret)


def interpreter_patched_objects() -> list[object]:
    """The objects whose attributes triton's interpreter patches while an interpreted kernel runs.

    triton 3.6 and 3.9: runtime.interpreter._patch_lang patches members of triton.language, .core, .math,
    the tensor, dtype, condition and tensor_descriptor_base classes, and restores them after the run.
    An InterpretedFunction called outside a run patches them and never restores them.
    """
    import triton.language as tl

    core = tl.core
    names = ("tensor", "dtype", "condition", "tensor_descriptor_base")
    found: list[object] = [tl, core, getattr(tl, "math", None), *(getattr(core, n, None) for n in names)]
    return [obj for obj in found if obj is not None]


def _tensor_descriptor_type() -> type:
    # triton 3.6 and 3.9: host-side descriptors (triton.tools.tensor_descriptor.TensorDescriptor, since
    # triton 3.4). A descriptor argument becomes `tensordesc<dtype[block]>` in the signature and, in
    # TTIR, the !tt.tensordesc argument followed by one i32 per dim (shape) and one i64 per dim (strides).
    from triton.tools.tensor_descriptor import TensorDescriptor

    descriptor: type = TensorDescriptor
    return descriptor


TENSOR_DESCRIPTOR_TYPE: type | None = _tensor_descriptor_type()
# TTIR scalar arguments that follow a host-side descriptor's !tt.tensordesc argument, per dimension.
DESCRIPTOR_SCALARS_PER_DIM = 2


def register_ordered_effect(op: Any) -> None:
    """Register ``op`` as an ordered side effect, so AOTAutograd threads effect tokens through it.

    torch 2.13 and 2.11: ``torch._higher_order_ops.effects._register_effectful_op(op, EffectType.ORDERED)``.
    """
    from torch._higher_order_ops import effects

    effects._register_effectful_op(op, effects._EffectType.ORDERED)


def fx_sees_side_effect(op: Any) -> bool:
    """Whether ``torch.fx`` counts a call of ``op`` as impure (dead-code elimination keeps it).

    torch 2.13 consults ``torch.fx.node.has_side_effect``'s set for higher-order operators too;
    torch 2.11 answers False for a higher-order operator there and only reads the effects
    registry (seen on the GPU machine: make_fx graphs lost their kernel launches to DCE).
    """
    import torch

    graph = torch.fx.Graph()
    return bool(graph.call_function(op, (), {}).is_impure())


def current_dispatch_mode() -> Any:
    """The TorchDispatchMode a dispatch at the Python key would run next, or None.

    Checked on torch 2.13: ``torch.utils._python_dispatch._get_current_dispatch_mode`` (what
    ``HigherOrderOperator.dispatch`` itself consults at ``DispatchKey.Python``; torch 2.11 is
    expected to have it, as older releases do, and is checked by the GPU machine's run).
    """
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    return _get_current_dispatch_mode()


def pop_dispatch_mode() -> Any:
    """A context manager that pops the current dispatch mode (yielding it) and pushes it back after.

    Checked on torch 2.13: ``torch.utils._python_dispatch._pop_mode_temporarily`` (also what
    ``HigherOrderOperator.dispatch`` uses).
    """
    from torch.utils._python_dispatch import _pop_mode_temporarily

    return _pop_mode_temporarily()


def mode_rule_types(op: Any) -> tuple[type, ...] | None:
    """The mode types ``op`` has a Python-key rule for (``py_impl(ModeType)``, functionalization).

    Checked on torch 2.13: ``HigherOrderOperator.python_key_table`` maps them to their rules. None
    if a version lacks it: every mode is then left to torch's own dispatch (the behaviour before
    Note [modes that do not trace]).
    """
    table = getattr(op, "python_key_table", None)
    return tuple(k for k in table if isinstance(k, type)) if isinstance(table, dict) else None


def config_kwargs(config: Any) -> dict[str, Any]:
    """What a ``triton.Config`` binds into a launch: its kwargs plus num_warps, num_stages, ....

    triton 3.6 and 3.9: ``Autotuner.run`` launches ``fn.run(*args, **kwargs, **config.all_kwargs())``,
    so a kernel parameter named ``num_warps`` receives the config's value. Older releases had
    no ``all_kwargs`` and bound ``config.kwargs`` only.
    """
    all_kwargs = getattr(config, "all_kwargs", None)
    if callable(all_kwargs):
        return dict(all_kwargs())
    return dict(config.kwargs)


def _torch_dispatch_mode() -> type:
    # torch 2.11 and 2.13: the base class of Python dispatch modes (make_fx's own modes derive from it).
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


TorchDispatchMode: type = _torch_dispatch_mode()


def functorch_transforms() -> dict[str, Any]:
    """The torch.func transforms a higher-order operator needs a rule for, besides functionalize.

    torch 2.11 and 2.13: ``torch._functorch.pyfunctorch.TransformType`` (Vmap, Grad, Jvp), the keys
    of ``HigherOrderOperator.py_impl``; a transform without a rule fails with a bare KeyError.
    """
    from torch._functorch.pyfunctorch import TransformType

    names = {"Vmap": "vmap", "Grad": "grad", "Jvp": "jvp"}
    return {label: getattr(TransformType, key) for key, label in names.items() if hasattr(TransformType, key)}


def functorch_level(t: Any) -> int:
    """The torch.func level that wraps ``t`` (-1 for a plain tensor). torch 2.11 and 2.13."""
    import torch

    return int(torch._C._functorch.maybe_get_level(t))


def _numpy_release() -> tuple[int, ...]:
    import numpy

    return _release(numpy.__version__)


# triton 3.6's interpreter turns one-element arrays into ints, which numpy>=2.4 refuses (raw launches too:
# "TypeError('only 0-dimensional arrays can be converted to Python scalars')"): a loop over a runtime
# bound, and a grid callable computed from integer arguments (the interpreter passes them as arrays).
# Seen with numpy 2.4 and 2.5 on triton 3.6.0; numpy 2.3.5 works (with a DeprecationWarning), and so
# does triton 3.7.1 and later. Goes when triton>=3.7 is the minimum.
INTERPRETER_LOOPS_NEED_OLD_NUMPY: bool = TRITON_VERSION < (3, 7) and _numpy_release() >= (2, 4)
_INTERPRETER_LOOP_ERROR = "only 0-dimensional arrays can be converted to Python scalars"


def explain_interpreter_failure(error: BaseException) -> None:
    """Add a note to a raw interpreted launch's error that this triton/numpy pair is known to cause."""
    known = INTERPRETER_LOOPS_NEED_OLD_NUMPY and _INTERPRETER_LOOP_ERROR in str(error)
    if known and hasattr(error, "add_note"):  # python>=3.11
        error.add_note(
            f"triton {triton.__version__}'s interpreter cannot run loops over runtime bounds, nor grid "
            "callables computed from integer arguments, with numpy>=2.4 (raw launches fail the same "
            "way): install numpy<2.4, or triton>=3.7"
        )


def call_from_kernel(generator: Any, kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Emit a call of the JITFunction ``kernel`` from triton's code generator ``generator``.

    triton 3.6 and 3.9: ``CodeGenerator.call_Function`` calls an object marked ``__triton_builtin__``
    with ``_generator=<the CodeGenerator>`` when its signature has that parameter, and
    ``CodeGenerator.call_JitFunction(fn, args, kwargs)`` is what it runs for a JITFunction callee.
    Used by Note [wrapped kernels as callees] in kernel.py.
    """
    return generator.call_JitFunction(kernel, list(args), kwargs)


_BACKWARD_LEAF_WRITES: list[bool] = []


def backward_writes_to_leaf_inputs_supported() -> bool:
    """Whether AOTAutograd traces a backward that writes a forward input which is a leaf requiring grad.

    torch 2.13 replays such a backward mutation under ``no_grad`` (pytorch#178622); torch 2.11 replays it
    with grad mode on and raises "a leaf Variable that requires grad is being used in an in-place
    operation" (seen on the GPU machine with Liger's swiglu / geglu on leaf inputs). A behavioural probe
    (one tiny trace on the CPU, run once, on first use); read by the tests and, through
    ``backward_leaf_copy_back_fails``, by functionalization. Goes when torch>=2.13 is the minimum.
    """
    if not _BACKWARD_LEAF_WRITES:
        _BACKWARD_LEAF_WRITES.append(_probe_backward_leaf_writes())
    return _BACKWARD_LEAF_WRITES[0]


def backward_leaf_copy_back_fails() -> bool:
    """Whether AOTAutograd's copy-back of a backward write into a leaf input fails (the probe above).

    The library's rule asks while a trace is in progress (Note [backward writes to leaf inputs] in
    functionalize.py): the first time, the probe runs in a new thread, where no dispatch mode, no
    torch.func transform and no backward pass of the caller's thread is active (all thread-local).
    """
    if not _BACKWARD_LEAF_WRITES:
        import threading

        result: list[bool] = []
        thread = threading.Thread(target=lambda: result.append(backward_writes_to_leaf_inputs_supported()))
        thread.start()
        thread.join()
        if not result:  # the probe itself raised: torch 2.13 is the first version known to copy under no_grad
            import torch

            return tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13)
    return not _BACKWARD_LEAF_WRITES[0]


def _probe_backward_leaf_writes() -> bool:
    import torch
    from functorch.compile import aot_function, make_boxed_func

    class WritesSavedInput(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            (x,) = ctx.saved_tensors
            x.add_(1)
            return grad * 2

    def nop(gm: Any, _: Any) -> Any:
        return make_boxed_func(gm.forward)

    x = torch.zeros(2, device="cpu", requires_grad=True)
    try:
        aot_function(WritesSavedInput.apply, fw_compiler=nop, bw_compiler=nop)(x).sum().backward()
    except Exception as e:  # noqa: BLE001 - any other failure: let the tests show it
        return "leaf Variable" not in str(e)
    return True


def graph_uses_plain_codegen(gm: Any) -> bool:
    """Whether ``gm``'s code is generated by FX's plain ``CodeGen`` (not a pytree or other subclass).

    Reads ``Graph._codegen`` (private; checked on torch 2.13 and 2.14). Only a plain graph's
    function signature may be rewritten into the boxed convention (``passes/boxed.py``).
    """
    import torch.fx

    return type(getattr(gm.graph, "_codegen", None)) is torch.fx.CodeGen


def direct_operator_call(op: Any) -> Callable[..., Any] | None:
    """The C++ callable an aten ``OpOverload`` call ends in, or None where its ``__call__`` does more.

    ``OpOverload.__call__`` is ``return self._op(*args, **kwargs)`` (torch 2.11, 2.13); torch 2.14 adds a
    branch for ops with a PyObject fast path (``torch.library.custom_op``'s, ``_pyobj_dispatcher`` set),
    whose ``_op`` is then that path and ``_cpp_dispatch_handle`` the dispatcher's own entry. An op with
    no fast path (every aten op) calls the dispatcher's entry either way. Subclasses (TorchBind ops) and
    ops with the fast path keep their ``__call__``. Reads private attributes; checked on torch 2.11, 2.13
    and 2.14.
    """
    import torch

    if type(op) is not torch._ops.OpOverload or getattr(op, "_pyobj_dispatcher", None) is not None:
        return None
    call = getattr(op, "_cpp_dispatch_handle", None) or getattr(op, "_op", None)
    return call if callable(call) else None


def _python_bindings() -> dict[Any, tuple[Callable[..., Any], frozenset[str]]]:
    import torch

    aten, tensor, functions = torch.ops.aten, torch._C.TensorBase, torch._C._VariableFunctions
    none: frozenset[str] = frozenset()
    return {
        aten.view.default: (tensor.view, none),
        aten.t.default: (tensor.t, none),
        aten.transpose.int: (tensor.transpose, none),
        aten.permute.default: (tensor.permute, none),
        aten.expand.default: (tensor.expand, frozenset({"implicit"})),
        aten.unsqueeze.default: (tensor.unsqueeze, none),
        aten.detach.default: (tensor.detach, none),
        aten.mm.default: (functions.mm, none),
        aten.bmm.default: (functions.bmm, none),
        aten.addmm.default: (functions.addmm, frozenset({"beta", "alpha"})),
        aten.addmm_.default: (tensor.addmm_, frozenset({"beta", "alpha"})),
        # Not a constructor that ``torch.set_default_device`` fills a device into (the ``_like``
        # factories take the input's): the binding allocates what the operator would.
        aten.empty_like.default: (
            functions.empty_like,
            frozenset({"dtype", "layout", "device", "pin_memory", "memory_format"}),
        ),
    }


_BINDINGS: dict[Any, tuple[Callable[..., Any], frozenset[str]]] = {}


def python_binding(op: Any, keywords: Any = ()) -> Callable[..., Any] | None:
    """The Python binding (``Tensor.view``, ``torch.mm``) that calls exactly the aten ``OpOverload``
    ``op`` when given a graph call's arguments, or None.

    A binding parses its arguments with generated C++ and is ~0.4 us faster per call on the CPU host
    than the operator's own callable (``direct_operator_call``), which parses them against the schema.
    Listed here only are overloads that every binding call with the graph's arguments resolves to:
    tensors, ints and int lists positionally (the binding's other signatures take a dtype, names or
    a leading scalar), and the ``keywords`` listed, whose names the binding shares. Dispatch is the
    same (autograd, modes, subclasses' ``__torch_dispatch__``); a ``__torch_function__`` override or
    mode is called with the binding as ``func``, as for eager code calling it. Checked on torch 2.11,
    2.13 and 2.14.
    """
    if not _BINDINGS:
        _BINDINGS.update(_python_bindings())
    hit = _BINDINGS.get(op)
    if hit is None or not hit[1].issuperset(keywords):
        return None
    return hit[0]


# --- autotune hooks, run at analysis time on stand-in arguments (autotune_hooks.py) -----------------

import contextlib as _contextlib  # noqa: E402
from collections.abc import Iterator as _Iterator  # noqa: E402


@_contextlib.contextmanager
def outside_tracing() -> _Iterator[None]:
    """Run tensor ops unseen by any trace in progress: no ambient dispatch mode, no torch.func transform.

    Checked on torch 2.13 and 2.14.1: ``torch.utils._python_dispatch._disable_current_modes`` pops the
    Python modes (FakeTensorMode, ProxyTorchDispatchMode, FunctionalTensorMode) and pushes them back;
    ``torch._C._DisableFuncTorch`` excludes the torch.func (functorch) dispatch keys.
    """
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), torch._C._DisableFuncTorch():
        yield


def autotuner_hook_calls(tuner: Any) -> list[tuple[str, Any, dict[str, Any]]]:
    """The user hooks of an ``Autotuner`` as Triton calls them: (what, hook, keyword arguments).

    triton 3.8 and 3.9: ``Autotuner.__init__`` sets ``user_defined_pre_hook`` / ``user_defined_post_hook``
    when ``autotune(pre_hook=, post_hook=)`` are given (a user pre_hook replaces the default one that
    zeroes ``reset_to_zero`` and saves ``restore_value``); ``_bench`` calls ``pre_hook(full_nargs)`` and
    ``post_hook(full_nargs, exception=None)`` around each benchmarking run, and ``run`` calls
    ``pre_hook(full_nargs, reset_only=True)`` after benchmarking; ``full_nargs`` is the bound arguments
    plus the config's ``all_kwargs()``. A ``triton.Config``'s ``pre_hook(full_nargs)`` runs before every
    launch with that config (see ``config_kwargs``). ``run`` benchmarks, and so calls the autotune
    hooks, only with more than one config.
    """
    calls: list[tuple[str, Any, dict[str, Any]]] = []
    if len(getattr(tuner, "configs", ())) <= 1:
        return calls
    if getattr(tuner, "user_defined_pre_hook", False):
        calls.append(("an @triton.autotune pre_hook", tuner.pre_hook, {}))
        calls.append(("an @triton.autotune pre_hook", tuner.pre_hook, {"reset_only": True}))
    if getattr(tuner, "user_defined_post_hook", False):
        calls.append(("an @triton.autotune post_hook", tuner.post_hook, {"exception": None}))
    return calls


def hook_export_serialization(on_save: Any, on_load: Any) -> bool:
    """Call ``on_save(fx_node)`` before ``torch.export.save`` writes each call_function node, and
    ``on_load(target, {input name: value})`` after ``torch.export.load`` rebuilds each node.

    Either may raise: the exception is raised once the whole graph is written or rebuilt, outside
    torch's per-node wrapper (which turns it into a SerializeError, a RuntimeError that
    ``torch.export.load`` logs and replaces with a message naming nothing); an exception that
    is not a RuntimeError then reaches the caller as it is.

    Checked on torch 2.13 and 2.14.1: ``torch._export.serde.serialize``'s
    ``GraphModuleSerializer.handle_call_function(self, node)`` and ``.serialize_graph(self, gm)``,
    ``GraphModuleDeserializer.deserialize_node(self, serialized_node, target)`` (its inputs are
    ``NamedArgument``s with ``.name`` and ``.arg.value``) and
    ``GraphModuleDeserializer.deserialize_graph(self, serialized_graph)``; export has no public
    hook for a higher-order operator's arguments. False (nothing hooked) where one is missing:
    the same checks then happen when a loaded node first runs. Goes if export gains such a hook.
    """
    try:
        from torch._export.serde import serialize
    except ImportError:  # pragma: no cover
        return False
    ser: Any = getattr(serialize.GraphModuleSerializer, "handle_call_function", None)
    de_node: Any = getattr(serialize.GraphModuleDeserializer, "deserialize_node", None)
    ser_graph: Any = getattr(serialize.GraphModuleSerializer, "serialize_graph", None)
    de_graph: Any = getattr(serialize.GraphModuleDeserializer, "deserialize_graph", None)
    if None in (ser, ser_graph, de_node, de_graph) or getattr(ser, "_functional_triton_hook", False):
        return False

    def handle_call_function(self: Any, node: Any) -> Any:
        try:
            on_save(node)
        except Exception as e:  # raised after the graph, like on_load's
            self.__dict__.setdefault("_functional_triton_errors", []).append(e)
        return ser(self, node)

    def serialize_graph(self: Any, graph_module: Any) -> Any:
        graph = ser_graph(self, graph_module)
        errors = self.__dict__.pop("_functional_triton_errors", [])
        if errors:
            raise errors[0]
        return graph

    def deserialize_node(self: Any, serialized_node: Any, target: Any) -> Any:
        result = de_node(self, serialized_node, target)
        inputs = {}
        for named in getattr(serialized_node, "inputs", ()):
            try:
                inputs[named.name] = named.arg.value
            except AttributeError:
                continue
        try:
            on_load(target, inputs)
        except Exception as e:  # raised after the graph (see above)
            self.__dict__.setdefault("_functional_triton_errors", []).append(e)
        return result

    def deserialize_graph(self: Any, serialized_graph: Any) -> Any:
        graph = de_graph(self, serialized_graph)
        errors = self.__dict__.pop("_functional_triton_errors", [])
        if errors:
            raise errors[0]
        return graph

    handle_call_function._functional_triton_hook = True  # type: ignore[attr-defined]
    for cls, name, fn in (
        (serialize.GraphModuleSerializer, "handle_call_function", handle_call_function),
        (serialize.GraphModuleSerializer, "serialize_graph", serialize_graph),
        (serialize.GraphModuleDeserializer, "deserialize_node", deserialize_node),
        (serialize.GraphModuleDeserializer, "deserialize_graph", deserialize_graph),
    ):
        setattr(cls, name, fn)
    return True


def register_python_codegen(op_name: str, codegen: Any) -> bool:
    """Have Inductor's Python wrapper emit ``codegen(node, writeline)`` for fallback calls of the
    operator named ``op_name`` (``"torch.ops.ns.name.default"``), instead of an operator call.

    Checked on torch 2.13 and 2.14.1: ``torch._inductor.codegen.custom_extern_kernel_codegen``'s
    ``CUSTOM_EXTERN_KERNEL_CODEGEN`` (name -> ``CustomCodegen(python=...)``), read by
    ``PythonWrapperCodegen.generate_fallback_kernel``. False where it is missing (torch 2.11 has
    no such registry, to be checked there): generated code then calls the operator.
    """
    try:
        from torch._inductor.codegen.custom_extern_kernel_codegen import (
            CUSTOM_EXTERN_KERNEL_CODEGEN,
            CustomCodegen,
        )
    except ImportError:
        return False
    CUSTOM_EXTERN_KERNEL_CODEGEN[op_name] = CustomCodegen(python=codegen)
    return True


# --- private torch APIs of the dispatch path, each checked on torch 2.13.0 (and 2.11 on the GPU machine) ---
# Bound once: the launch path reads the first two on every eager launch.

import torch  # noqa: E402

# torch 2.11 and 2.13: the number of active TorchDispatchModes (make_fx, FakeTensorMode,
# FunctionalTensorMode); a builtin Dynamo graph-breaks on, so only the (skipped) launch path calls it.
dispatch_stack_len: Callable[[], int] = torch._C._len_torch_dispatch_stack
# torch 2.11 and 2.13: the innermost torch.func interpreter (functionalize, vmap, grad), or None.
functorch_interpreter: Callable[[], Any] = torch._C._functorch.peek_interpreter_stack


def tensor_check(tensors: Sequence[Any]) -> Callable[..., bool] | None:
    """One C++ call that answers whether tensors match ``tensors`` exactly, or None.

    Dynamo's ``TensorGuards`` (torch 2.11, 2.13, 2.14): per tensor the Python type, dispatch keys
    (under the thread's dispatch state at the check), dtype, device, ``requires_grad``, sizes and
    strides, the last two as static ints here. ``check(*ts)`` raises TypeError for another count.
    """
    try:
        from torch._C._dynamo.guards import TensorGuards

        make: Any = TensorGuards  # (its stub types the per-tensor lists as one flat list)
        sizes = [list(t.shape) for t in tensors]
        strides = [list(t.stride()) for t in tensors]
        guards = make(*tensors, dynamic_dims_sizes=sizes, dynamic_dims_strides=strides)
    except (ImportError, TypeError, RuntimeError, SystemError):  # another torch: the Python checks
        return None
    check: Callable[..., bool] = guards.check
    return check


def has_python_key(t: Any) -> bool:
    """Whether tensor ``t`` dispatches to the Python key (a subclass). torch 2.11 and 2.13."""
    return bool(torch._C._dispatch_keys(t).has("Python"))


def is_functional_tensor(t: Any) -> bool:
    """Whether ``t`` is a functionalization wrapper (torch.func.functionalize). torch 2.11 and 2.13."""
    return bool(torch._is_functional_tensor(t))


def storage_id(t: Any) -> int:
    """An id shared by exactly the tensors that share a storage (functional storages when traced).

    torch 2.11 and 2.13: ``UntypedStorage._cdata``, the address of the C++ storage implementation.
    """
    return int(t.untyped_storage()._cdata)


def in_backward_pass() -> bool:
    """Whether autograd's engine is running a backward now. torch 2.13: ``_current_graph_task_id``."""
    return bool(torch._C._current_graph_task_id() != -1)


def functionalize_reapplies_views() -> bool:
    """C++ functionalization's setting: views kept (``remove="mutations"``) or replaced by copies.

    torch 2.11 and 2.13: ``torch._C._functionalization_reapply_views_tls``.
    """
    return bool(torch._C._functionalization_reapply_views_tls())


def threads_effect_tokens(mode: Any) -> bool:
    """Whether a functionalization mode threads effect tokens (FunctionalTensorMode: ``_tokens``)."""
    return hasattr(mode, "_tokens")


def thread_effect_token(mode: Any, op: Any, args: tuple[Any, ...]) -> None:
    """Call the ordered-effect ``op`` through ``mode``'s effect tokens, as AOTAutograd records effects.

    torch 2.11 and 2.13: ``torch._higher_order_ops.effects.handle_effects(allow_token_discovery,
    tokens, op, args, kwargs)`` with ``FunctionalTensorMode._allow_token_discovery`` / ``._tokens``.
    """
    from torch._higher_order_ops.effects import handle_effects

    handle_effects(mode._allow_token_discovery, mode._tokens, op, args, {})


class FunctionalizeContext(Protocol):
    """What a ``py_functionalize_impl`` rule is handed (torch's ``BaseFunctionalizeAPI``).

    torch 2.11 and 2.13: ``torch._subclasses.functional_tensor`` ``PythonFunctionalizeAPI`` (AOTAutograd;
    its ``mode`` is the FunctionalTensorMode), ``CppFunctionalizeAPI`` and ``FunctorchFunctionalizeAPI``
    (torch.func.functionalize; its ``interpreter``). ``mode`` and ``interpreter`` are read with getattr.
    """

    def wrap_tensors(self, args: Any) -> Any: ...
    def unwrap_tensors(self, args: Any) -> Any: ...
    def redispatch_to_next(self) -> AbstractContextManager[Any]: ...
    def replace(self, input_tensor: Any, output_tensor: Any) -> None: ...
    def commit_update(self, tensor: Any) -> None: ...
    def sync(self, tensor: Any) -> None: ...
    def mark_mutation_hidden_from_autograd(self, tensor: Any) -> None: ...


def fake_tensor_mode_type() -> type:
    """torch 2.11 and 2.13: ``torch._subclasses.fake_tensor.FakeTensorMode``."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode


# torch 2.11 and 2.13: the dispatcher's key enum, the base class of higher-order operators (API.md
# names it), and the op type whose ``is_view`` says an aten op returns a view of its first argument.
from torch._C import DispatchKey as DispatchKey  # noqa: E402
from torch._ops import HigherOrderOperator as HigherOrderOperator  # noqa: E402
from torch._ops import OpOverload  # noqa: E402
from torch.utils import _pytree  # noqa: E402

pytree = _pytree  # tree_map, tree_flatten, tree_unflatten


def is_view_op(target: Any) -> bool:
    """Whether an FX node's target is an aten op that returns a view of its first argument."""
    return isinstance(target, OpOverload) and bool(target.is_view)


# --- torch's own ops in training graphs (passes/torch_ops.py) ------------------------------------


def inplace_variant(op: Any) -> Any:
    """The aten in-place overload ``op_`` that computes what the functional aten ``op`` computes, or None.

    Reads ``OpOverload._schema`` (checked on torch 2.11, 2.13 and 2.14, as ``torch.fx.passes.reinplace``
    does): ``op`` must be a non-view aten op with no mutable argument, one Tensor result and no
    random-number tag; ``op_`` must take the same argument types, write its first argument only and
    return it. Cached per op.
    """
    if op not in _INPLACE_VARIANTS:
        _INPLACE_VARIANTS[op] = _find_inplace_variant(op)
    return _INPLACE_VARIANTS[op]


_INPLACE_VARIANTS: dict[Any, Any] = {}


def _find_inplace_variant(op: Any) -> Any:
    import torch

    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
        return None
    schema = op._schema
    if torch.Tag.nondeterministic_seeded in op.tags or not schema.arguments:
        return None
    if any(a.alias_info is not None for a in schema.arguments) or len(schema.returns) != 1:
        return None
    ret = schema.returns[0]
    if ret.alias_info is not None or str(ret.type) != "Tensor":
        return None
    packet = getattr(torch.ops.aten, op._opname + "_", None)
    if packet is None:
        return None
    for name in packet.overloads():
        candidate = getattr(packet, name)
        cs = candidate._schema
        first = cs.arguments[0].alias_info if cs.arguments else None
        if (
            first is not None
            and first.is_write
            and all(a.alias_info is None for a in cs.arguments[1:])
            and len(cs.arguments) == len(schema.arguments)
            and all(a.type == b.type and a.name == b.name for a, b in zip(cs.arguments, schema.arguments))
            and len(cs.returns) == 1
            and cs.returns[0].alias_info is not None
            and cs.returns[0].alias_info.before_set == first.before_set
        ):
            return candidate
    return None


def known_equal(a: Any, b: Any) -> bool:
    """Whether ints or SymInts ``a`` and ``b`` are equal for every shape the graph may see (no guard added).

    ``torch.fx.experimental.symbolic_shapes.statically_known_true`` (torch 2.11 to 2.14).
    """
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return bool(statically_known_true(a == b))


# --- functionalization and symbolic shapes (view chains, unbacked sizes) ---


def inner_as_strided_in_view_chain(t: Any) -> bool | None:
    """Whether the functional tensor ``t``'s view chain has an ``as_strided`` after its first view.

    torch refuses to commit a mutation through such a view ("mutation on a view chain of length 2,
    where view 1 was an as_strided() call"), at any position but the first. torch 2.13 and 2.14:
    ``torch._C._functionalization.get_view_meta_sequence(wrapper)`` lists the chain, one
    ``as_strided_ViewMeta`` per as_strided; under AOTAutograd the wrapper is ``FunctionalTensor.elem``.
    None where the binding is missing (then the caller must assume the worst).
    """
    import torch

    module = getattr(torch._C, "_functionalization", None)
    get_chain = getattr(module, "get_view_meta_sequence", None)
    as_strided_meta = getattr(module, "as_strided_ViewMeta", None)
    if get_chain is None or as_strided_meta is None:
        return None
    wrapper = getattr(t, "elem", t)
    if not torch._is_functional_tensor(wrapper):
        return False
    return any(isinstance(meta, as_strided_meta) for meta in list(get_chain(wrapper))[1:])


def view_chain(t: Any) -> list[Any] | None:
    """The functional tensor ``t``'s chain of views from its storage's base (``ViewMeta``s).

    torch 2.13 and 2.14: ``torch._C._functionalization.get_view_meta_sequence``; under
    AOTAutograd the wrapper is ``FunctionalTensor.elem``. None where the binding is missing or
    ``t`` is not functional. Each entry's ``as_tuple()`` starts (has_symbolic_inputs,
    reapply_views, inverse_return_mode), then the view op's own arguments.
    """
    import torch

    get_chain = getattr(getattr(torch._C, "_functionalization", None), "get_view_meta_sequence", None)
    wrapper = getattr(t, "elem", t)
    if get_chain is None or not torch._is_functional_tensor(wrapper):
        return None
    return list(get_chain(wrapper))


def view_meta_name(meta: Any) -> str:
    """The view op a ``ViewMeta`` records (``slice_Tensor``, ``t``, ``as_strided``, ...)."""
    return type(meta).__name__.removesuffix("_ViewMeta")


def view_meta_args(meta: Any) -> tuple[Any, ...]:
    """The view op's own arguments in a ``ViewMeta`` (after the three flags)."""
    return tuple(meta.as_tuple()[3:])


def replay_views(value: Any, chain: Sequence[Any]) -> Any:
    """``value`` through the view ops of ``chain`` as real views (not ``*_copy`` ops).

    torch 2.13 and 2.14: a ``ViewMeta`` is rebuilt from its ``as_tuple()`` with reapply_views
    (entry 1) set, and ``torch._C._functionalization.apply_view_meta_sequence`` runs the chain.
    """
    import torch

    module = torch._C._functionalization
    metas = []
    for meta in chain:
        flags = meta.as_tuple()
        metas.append(type(meta)((flags[0], True, *flags[2:])))
    return module.apply_view_meta_sequence(value, metas)


def _symbolic_predicates() -> tuple[Any, Any, Any]:
    # torch 2.11, 2.13 and 2.14: torch.fx.experimental.symbolic_shapes.guard_or_false / guard_or_true
    # (decide a SymBool, guarding only on backed symbols; an undecidable expression over unbacked
    # symbols answers the default instead of raising GuardOnDataDependentSymNode) and
    # statically_known_true (never guards). Fallbacks for releases without them: bool() guards on
    # backed symbols, and a data-dependent failure answers the conservative default.
    from torch.fx.experimental import symbolic_shapes as shapes

    def fallback(default: bool) -> Any:
        def decide(expr: Any) -> bool:
            try:
                return bool(expr)
            except shapes.GuardOnDataDependentSymNode:
                return default

        return decide

    return (
        getattr(shapes, "guard_or_false", fallback(False)),
        getattr(shapes, "guard_or_true", fallback(True)),
        getattr(shapes, "statically_known_true", fallback(False)),
    )


guard_or_false, guard_or_true, statically_known_true = _symbolic_predicates()
