"""Every torch/triton version probe, resolved once at import.

Each probe names the versions it was checked on. The package supports triton>=3.6 (torch 2.11 on the GPU
machine) and is developed against triton 3.9 (torch 2.13, CPU).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

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


def _tensor_descriptor_type() -> type | None:
    # triton 3.6 and 3.9: host-side descriptors (triton.tools.tensor_descriptor.TensorDescriptor). A
    # descriptor argument becomes `tensordesc<dtype[block]>` in the signature and, in TTIR, the
    # !tt.tensordesc argument followed by one i32 per dim (shape) and one i64 per dim (strides).
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:
        return None
    return TensorDescriptor


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


# triton 3.6's interpreter cannot run a loop over a runtime bound with numpy>=2.4 (raw launches too:
# "TypeError('only 0-dimensional arrays can be converted to Python scalars')"); seen with numpy 2.4 on
# triton 3.6.0, fine with numpy 2.3.5 and with triton 3.7.1 and later. Goes when triton>=3.7 is the minimum.
INTERPRETER_LOOPS_NEED_OLD_NUMPY: bool = TRITON_VERSION < (3, 7) and _numpy_release() >= (2, 4)
_INTERPRETER_LOOP_ERROR = "only 0-dimensional arrays can be converted to Python scalars"


def explain_interpreter_failure(error: BaseException) -> None:
    """Add a note to a raw interpreted launch's error that this triton/numpy pair is known to cause."""
    known = INTERPRETER_LOOPS_NEED_OLD_NUMPY and _INTERPRETER_LOOP_ERROR in str(error)
    if known and hasattr(error, "add_note"):  # python>=3.11
        error.add_note(
            f"triton {triton.__version__}'s interpreter cannot run loops over runtime bounds with "
            "numpy>=2.4 (raw launches fail the same way): install numpy<2.4, or triton>=3.7"
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
    (one tiny trace on the CPU, run once, on first use); only tests read it. Goes when torch>=2.13 is the
    minimum.
    """
    if not _BACKWARD_LEAF_WRITES:
        _BACKWARD_LEAF_WRITES.append(_probe_backward_leaf_writes())
    return _BACKWARD_LEAF_WRITES[0]


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
