"""Which tensor arguments a user Triton kernel may write.

The decorator stack (@triton.autotune, @triton.heuristics) is expanded into every jit launch it may run
(autotune hooks run on stand-ins: ``autotune_hooks.py``); ``ttir.py`` lowers each to a ``Program`` (its
TTIR, read into plain python objects), and a taint analysis over the program follows every pointer
argument through pointer arithmetic, control flow, reductions and calls to the ops that write memory.
Anything the analysis cannot follow makes the answer unknown (``written_names is None``): callers must
then treat every tensor argument as written.

Logging: ``functional_triton.mutation`` at DEBUG level records each result (kernel -> written names)
and, when the analysis gives up on a TTIR program, the reason, the op and the TTIR text.

Note [taint]
Every pointer-typed SSA value carries a set of *origins*: the indices of the function parameters its
address may derive from, plus negative ids for addresses the analysis cannot trace (loaded from memory,
made from an integer). Only pointer-typed values carry origins: an integer can become a pointer again
only through ``tt.int_to_ptr``, which is itself an untraceable origin. A write op adds the origins of its
pointer operands to the written set; a function's summary (written origins, origins of each returned
value) is applied at every ``tt.call``. Origins only grow, so each function is iterated to a fixpoint,
which handles loop-carried pointers without unrolling anything.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

import torch
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from . import _compat, autotune_hooks, ttir
from .ttir import Block, Op, Program, Spec
from .ttir import Unknown as _Unknown
from .ttir import describe as _describe

log = logging.getLogger(__name__)

# Kept under their old names (tests and benchmarks reach them through this module; monkeypatching
# `_generate_ttir` here replaces the frontend call below).
_generate_ttir = ttir.generate_ttir
_backend = ttir.analysis_backend
_interpreter_guard = ttir.interpreter_guard
_LOCK = ttir.LOCK


@dataclasses.dataclass(frozen=True)
class WriteAnalysis:
    """What a kernel launch may write.

    written_names: tensor arguments the kernel may write; None when unknown.
    reason: why the answer is unknown (short, human readable), else None.
    opaque_side_effects: the kernel may have effects not visible through its tensor arguments
        (writes through untraceable pointers, inline asm, prints/asserts): never dead-code eliminate it.
    writes_outside_arguments: the kernel may write memory that no argument's address leads to (through a
        pointer loaded from memory or made from an integer, or non-pure inline asm): no graph can order
        such writes, cloning the arguments does not cover them.
    """

    written_names: frozenset[str] | None
    reason: str | None
    opaque_side_effects: bool
    writes_outside_arguments: bool = False


def _unknown(reason: str) -> WriteAnalysis:
    return WriteAnalysis(written_names=None, reason=reason, opaque_side_effects=True)


def analyze_writes(kernel: object, args: Mapping[str, object]) -> WriteAnalysis:
    """The tensor arguments `kernel` may write when launched with `args`, or unknown with a reason.

    `kernel` is a @triton.jit function (or its interpreter version), possibly under @triton.autotune and
    @triton.heuristics; `args` maps the launch's parameter names to values. Tensor values are only
    inspected for their dtype. Never raises for a kernel it cannot analyse: it answers unknown.
    """
    result = _analyze_kernel(kernel, args)
    if log.isEnabledFor(logging.DEBUG):
        if result.written_names is None:
            log.debug("write analysis of %s: unknown (%s)", _kernel_name(kernel), result.reason)
        else:
            log.debug("write analysis of %s: writes %s", _kernel_name(kernel), sorted(result.written_names))
    return result


def _analyze_kernel(kernel: object, args: Mapping[str, object]) -> WriteAnalysis:
    try:
        plan = _expand(kernel, dict(args))
        written: set[str] = set(plan.reset_names)
        side_effects = False
        for leaf, leaf_args in plan.launches:
            result = _analyze_leaf(leaf, leaf_args)
            if result.written_names is None:
                return result
            written |= result.written_names
            side_effects = side_effects or result.opaque_side_effects
        return WriteAnalysis(frozenset(written), None, side_effects)
    except _Unknown as exc:
        return _unknown(str(exc))
    except Exception as exc:  # a bug here must not break a trace: unknown is always a safe answer
        return _unknown(f"mutation analysis failed: {_describe(exc)}")


def _kernel_name(kernel: object) -> str:
    while not isinstance(getattr(kernel, "__name__", None), str) and hasattr(kernel, "fn"):
        kernel = kernel.fn
    return str(getattr(kernel, "__name__", type(kernel).__name__))


# --- the decorator stack -> concrete launches -------------------------------------------------------

# Autotune x heuristics products beyond this are refused rather than analysed for minutes.
_MAX_LAUNCHES = 256


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Every (jit function, full argument dict) a launch may run, plus arguments zeroed by autotuning."""

    launches: tuple[tuple[object, dict[str, object]], ...]
    reset_names: frozenset[str]


def _expand(kernel: object, args: dict[str, object]) -> _Plan:
    if isinstance(kernel, Autotuner):
        return _expand_autotuner(kernel, args)
    if isinstance(kernel, Heuristics):
        return _expand_heuristics(kernel, args)
    if isinstance(kernel, (JITFunction, InterpretedFunction)):
        return _Plan(((kernel, args),), frozenset())
    raise _Unknown(f"unsupported kernel type {type(kernel).__name__}")


def _merge(plans: Iterable[_Plan]) -> _Plan:
    launches: list[tuple[object, dict[str, object]]] = []
    reset: set[str] = set()
    for plan in plans:
        launches.extend(plan.launches)
        reset |= plan.reset_names
        if len(launches) > _MAX_LAUNCHES:
            raise _Unknown(f"more than {_MAX_LAUNCHES} autotune/heuristic specializations")
    return _Plan(tuple(launches), frozenset(reset))


def _expand_autotuner(tuner: Autotuner, args: dict[str, object]) -> _Plan:
    # Any config may be chosen at run time, so the answer is the union over all of them (not configs[0]).
    launched, hook_written = _hooked_launches(tuner, args)
    # Triton launches with config.all_kwargs(): num_warps / num_stages may be kernel parameters.
    plans = [_expand(tuner.fn, {**state, **_compat.config_kwargs(config)}) for config, state in launched]
    # reset_to_zero arguments are zeroed while benchmarking and restore_value ones written back after
    # it (a write even when the value is the same: conservative); writes the kernel text does not show.
    names = [*tuner.reset_to_zero, *tuner.restore_value]
    defaults = frozenset(n for n in names if isinstance(args.get(n), torch.Tensor))
    return _merge([*plans, _Plan((), defaults | hook_written)])


# Distinct descriptor states that hooks may leave (Note [hook stand-ins]) beyond this are refused.
_MAX_HOOK_STATES = 16
_Launch = tuple[Any, dict[str, object]]  # (triton.Config, the arguments it launches with)


def _hooked_launches(tuner: Autotuner, args: dict[str, object]) -> tuple[list[_Launch], frozenset[str]]:
    """Each (config, arguments) a launch may run after the user's hooks ran, and what the hooks write.

    Hooks run on stand-ins (autotune_hooks.py, Note [hook stand-ins]). They may set descriptor
    metadata, which stays on the user's descriptor objects: every descriptor state any hook reaches
    from any reachable state is collected. A config with a pre_hook launches with the states its own
    hook leaves (Triton runs it right before that launch); with @triton.autotune hooks too, or without
    a pre_hook, a config may launch with any reachable state.
    """
    configs = list(tuner.configs)
    tuner_calls = _compat.autotuner_hook_calls(tuner)
    if not tuner_calls and all(config.pre_hook is None for config in configs):
        return [(config, args) for config in configs], frozenset()
    written: set[str] = set()
    states = {_state_key(args): args}
    after_own_hook: dict[int, set[Hashable]] = {}
    pending = list(states)
    while pending:
        key = pending.pop()
        for index, config in enumerate(configs):
            own: list[tuple[str, Any, dict[str, Any]]] = []
            if config.pre_hook is not None:
                own.append(("a triton.Config pre_hook", config.pre_hook, {}))
            for position, (what, hook, extra) in enumerate([*own, *tuner_calls]):
                nargs = {**states[key], **_compat.config_kwargs(config)}
                run = autotune_hooks.run_hook(hook, nargs, what, **extra)
                written |= run.written_names
                new_state = {**states[key], **{n: v for n, v in run.descriptors.items() if n in args}}
                new_key = _state_key(new_state)
                if own and position == 0:
                    after_own_hook.setdefault(index, set()).add(new_key)
                if new_key not in states:
                    if len(states) >= _MAX_HOOK_STATES:
                        raise _Unknown(f"autotune hooks leave more than {_MAX_HOOK_STATES} descriptor states")
                    states[new_key] = new_state
                    pending.append(new_key)
    launched: list[_Launch] = []
    for index, config in enumerate(configs):
        keys = after_own_hook[index] if index in after_own_hook and not tuner_calls else states.keys()
        launched.extend((config, states[key]) for key in keys)
    return launched, frozenset(written)


def _state_key(args: Mapping[str, object]) -> Hashable:
    holds, state = autotune_hooks.holds, autotune_hooks.descriptor_state
    return tuple(sorted((name, state(value)) for name, value in args.items() if holds(value)))


def _expand_heuristics(heuristics: Heuristics, args: dict[str, object]) -> _Plan:
    # Like Heuristics.run: in order, each heuristic sees the arguments and the earlier heuristics.
    variants = [args]
    for name, heuristic in heuristics.values.items():
        expanded: list[dict[str, object]] = []
        for variant in variants:
            try:
                value = heuristic(dict(variant))
            except Exception as exc:
                raise _Unknown(f"heuristic for '{name}' failed: {_describe(exc)}") from None
            expanded.extend({**variant, name: choice} for choice in _heuristic_choices(name, value))
        variants = expanded
    return _merge(_expand(heuristics.fn, variant) for variant in variants)


def _heuristic_choices(name: str, value: object) -> list[object]:
    # A symbolic boolean (e.g. n % 16 == 0 on a SymInt) may go either way: analyse both branches
    # instead of guarding on it.
    if isinstance(value, torch.SymBool):
        return [True, False]
    if isinstance(value, (torch.SymInt, torch.SymFloat)):
        raise _Unknown(f"heuristic for '{name}' returned a symbolic {type(value).__name__}")
    return [value]


# --- one jit function, one specialization -----------------------------------------------------------

# Results per underlying python function (weakly held, so kernels can be collected) and specialization.
_CACHE: weakref.WeakKeyDictionary[Callable[..., Any], dict[Hashable, WriteAnalysis]] = (
    weakref.WeakKeyDictionary()
)


def _analyze_leaf(leaf: object, args: Mapping[str, object]) -> WriteAnalysis:
    fn = leaf.fn  # type: ignore[attr-defined]  # JITFunction and InterpretedFunction both have .fn
    spec = ttir.specialize(fn, args)
    with _LOCK:
        per_fn = _CACHE.get(fn)
        if spec.key is not None and per_fn is not None and spec.key in per_fn:
            return per_fn[spec.key]
        result = _analyze_spec(leaf, spec)
        if spec.key is not None:
            _CACHE.setdefault(fn, {})[spec.key] = result
    return result


def _analyze_spec(leaf: object, spec: Spec) -> WriteAnalysis:
    name = _kernel_name(leaf)
    try:
        module = _generate_ttir(leaf, spec.signature, spec.constants)
    except Exception as exc:
        reason = f"TTIR generation failed: {_describe(exc)}"
        log.debug("write analysis of %s gave up: %s", name, reason)
        return _unknown(reason)
    try:
        program = ttir.read_module(module)
        ttir.check_arguments(program, spec)
    except Exception as exc:  # a TTIR shape the reader does not expect: unknown, never fewer writes
        reason = str(exc) if isinstance(exc, _Unknown) else f"TTIR analysis failed: {_describe(exc)}"
        _log_give_up(name, reason, None, module)
        return _unknown(reason)
    names = tuple(arg.name for arg in spec.ttir_args)
    return analyze_program(program, names, kernel_name=name, module=module)


def analyze_program(
    program: Program, arg_names: Sequence[str], *, kernel_name: str = "kernel", module: object = None
) -> WriteAnalysis:
    """The written names of a program whose entry function's i-th argument is `arg_names[i]`.

    Never raises: an op the analysis cannot follow answers unknown (logged at DEBUG level, with the
    TTIR text when `module`, the MLIR module the program was read from, is given).
    """
    try:
        summary = _TaintAnalysis(program).summary(program.entry)
    except Exception as exc:  # a program shape the analysis does not expect: unknown, never fewer writes
        reason = str(exc) if isinstance(exc, _Unknown) else f"TTIR analysis failed: {_describe(exc)}"
        _log_give_up(kernel_name, reason, getattr(exc, "op", None), module)
        return _unknown(reason)
    if summary.unknown is not None:
        _log_give_up(kernel_name, summary.unknown, summary.failed_op, module)
        return dataclasses.replace(_unknown(summary.unknown), writes_outside_arguments=summary.anywhere)
    untraced = sorted(origin for origin in summary.written if origin < 0)
    if untraced:
        reason = f"writes through a {summary.origins[untraced[0]]}"
        _log_give_up(kernel_name, reason, summary.failed_op, module)
        return dataclasses.replace(_unknown(reason), writes_outside_arguments=True)
    if any(i >= len(arg_names) for i in summary.written):
        raise AssertionError("functional_triton internal error: a written origin is not an argument")
    names = frozenset(arg_names[i] for i in summary.written)
    return WriteAnalysis(names, None, summary.side_effects)


def _log_give_up(kernel_name: str, reason: str, op: Op | None, module: object) -> None:
    if not log.isEnabledFor(logging.DEBUG):
        return
    where = "?" if op is None else _describe_op(op)
    text = "(no TTIR module)" if module is None else ttir.module_text(module)
    log.debug("write analysis of %s gave up at op %s: %s\nTTIR:\n%s", kernel_name, where, reason, text)


def _describe_op(op: Op) -> str:
    return f"{op.name}(operands={list(op.operands)}, results={list(op.results)})"


# --- the taint analysis (Note [taint]) -------------------------------------------------------------

_Origins = frozenset[int]
_NONE: _Origins = frozenset()

# Ops that write memory through their pointer operands. Every pointer operand counts (for tt.store
# the stored value may itself be a pointer in triton<=3.6): more writes, never fewer.
_WRITE_OPS = frozenset(
    {
        "tt.store",
        "tt.atomic_rmw",
        "tt.atomic_cas",
        "tt.atomic_store",
        "tt.descriptor_store",
        "tt.descriptor_reduce",
        "tt.descriptor_scatter",
        "tt.experimental_descriptor_store",
        "tt.experimental_tensormap_create",
    }
)
# Ops that read memory: a pointer they produce came from memory and cannot be traced.
_READ_OPS = frozenset(
    {
        "tt.load",
        "tt.atomic_load",
        "tt.atomic_poll",
        "tt.descriptor_load",
        "tt.descriptor_gather",
        "tt.experimental_descriptor_load",
        "tt.reinterpret_tensor_descriptor",
    }
)
# Ops whose pointer results derive only from their operands (base pointers; offsets carry nothing).
_DERIVE_OPS = frozenset(
    {
        "tt.addptr",
        "tt.splat",
        "tt.unsplat",
        "tt.broadcast",
        "tt.expand_dims",
        "tt.reshape",
        "tt.trans",
        "tt.cat",
        "tt.join",
        "tt.split",
        "tt.gather",
        "tt.bitcast",
        "arith.select",
        "tt.make_tensor_ptr",
        "tt.advance",
        "tt.make_tensor_descriptor",
    }
)
# Ops that touch pointers without producing or writing through one (terminators are read by their
# parent op; cf branches are handled per region; ub.poison is an undefined value).
_INERT_OPS = frozenset(
    {
        "tt.ptr_to_int",
        "ub.poison",
        "tt.return",
        "scf.yield",
        "scf.condition",
        "tt.reduce.return",
        "tt.scan.return",
        "cf.br",
        "cf.cond_br",
    }
)
# Observable without writing a tensor argument: the node must not be dead-code eliminated.
_EFFECT_OPS = frozenset({"tt.print", "tt.assert"})
_WRITE_WORDS = ("store", "atomic", "scatter", "write")
_MAX_PASSES = 100


@dataclasses.dataclass(frozen=True)
class _Summary:
    written: _Origins  # parameter indices (and negative untraced origins) that may be written
    returns: tuple[_Origins, ...]  # origins of each returned value
    unknown: str | None  # a possible write no origin describes (impure asm, unmodelled pointer op)
    side_effects: bool
    origins: Mapping[int, str]  # what each negative origin is, for messages
    anywhere: bool = False  # `unknown` is a write to any memory (non-pure inline asm), not only arguments
    failed_op: Op | None = None  # the op behind `unknown`, or the first write through an untraced origin


@dataclasses.dataclass
class _State:
    """One function's analysis in progress."""

    env: dict[int, _Origins] = dataclasses.field(default_factory=dict)
    written: set[int] = dataclasses.field(default_factory=set)
    returns: list[_Origins] = dataclasses.field(default_factory=list)
    unknown: str | None = None
    anywhere: bool = False  # see _Summary.anywhere
    side_effects: bool = False
    changed: bool = False
    failed_op: Op | None = None  # see _Summary.failed_op

    def of(self, values: Iterable[int]) -> _Origins:
        found: set[int] = set()
        for value in values:
            found |= self.env.get(value, _NONE)
        return frozenset(found)

    def add(self, value: int, origins: _Origins) -> None:
        old = self.env.get(value, _NONE)
        if not origins <= old:
            self.env[value] = old | origins
            self.changed = True

    def write(self, origins: _Origins, op: Op) -> None:
        if not origins <= self.written:
            self.written |= origins
            self.changed = True
        if self.failed_op is None and any(origin < 0 for origin in origins):
            self.failed_op = op

    def add_return(self, index: int, origins: _Origins) -> None:
        while len(self.returns) <= index:
            self.returns.append(_NONE)
        if not origins <= self.returns[index]:
            self.returns[index] |= origins
            self.changed = True

    def fail(self, reason: str, op: Op) -> None:
        if self.unknown is None:
            self.unknown = reason
            self.failed_op = op


class _UnknownAt(_Unknown):
    """An op of an unexpected form; `op` is the op, for the debug log."""

    def __init__(self, message: str, op: Op) -> None:
        super().__init__(message)
        self.op = op


class _TaintAnalysis:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.summaries: dict[str, _Summary] = {}
        self.active: set[str] = set()
        self.origins: dict[int, str] = {}  # negative origin -> description
        self.origin_of_op: dict[int, int] = {}  # id(Op) -> its negative origin (stable per op)

    def summary(self, name: str) -> _Summary:
        if name in self.summaries:
            return self.summaries[name]
        if name in self.active:
            return _Summary(_NONE, (), f"recursive call to '{name}'", True, self.origins)
        blocks = self.program.functions.get(name)
        if not blocks:
            return _Summary(_NONE, (), f"call to '{name}', which has no body", True, self.origins)
        self.active.add(name)
        try:
            result = self._run(blocks)
        finally:
            self.active.discard(name)
        self.summaries[name] = result
        return result

    def _run(self, blocks: tuple[Block, ...]) -> _Summary:
        state = _State()
        for index, arg in enumerate(blocks[0].args):
            if arg in self.program.pointers:
                state.add(arg, frozenset({index}))
        for _ in range(_MAX_PASSES):
            state.changed = False
            self._visit_region(blocks, state)
            if not state.changed:
                break
        else:
            state.fail("the analysis did not converge", blocks[0].ops[-1] if blocks[0].ops else Op("?"))
        return _Summary(
            frozenset(state.written),
            tuple(state.returns),
            state.unknown,
            state.side_effects,
            self.origins,
            state.anywhere,
            state.failed_op,
        )

    def _untraced(self, op: Op, what: str) -> _Origins:
        if id(op) not in self.origin_of_op:
            origin = -1 - len(self.origins)
            self.origin_of_op[id(op)] = origin
            self.origins[origin] = what
        return frozenset({self.origin_of_op[id(op)]})

    def _visit_region(self, blocks: Sequence[Block], state: _State) -> None:
        if len(blocks) > 1:
            # Unstructured control flow (an `if` that returns): successors are not exposed, so every
            # non-entry block argument may receive any value a branch in this region passes.
            passed = state.of(
                v
                for block in blocks
                for op in block.ops
                if op.name in ("cf.br", "cf.cond_br")
                for v in op.operands
            )
            for block in blocks[1:]:
                for arg in block.args:
                    if arg in self.program.pointers:
                        state.add(arg, passed)
        for block in blocks:
            for op in block.ops:
                try:
                    _OP_TABLE.get(op.name, _TaintAnalysis._visit_unknown)(self, op, state)
                except _UnknownAt:
                    raise  # the innermost op is the one to report
                except _Unknown as exc:
                    raise _UnknownAt(str(exc), op) from None

    # --- one handler per kind of op (the table below maps op names to them) ---

    def _visit_write(self, op: Op, state: _State) -> None:
        state.write(state.of(v for v in op.operands if v in self.program.pointers), op)
        self._results_untraced(op, state, f"pointer returned by {op.name}")

    def _visit_read(self, op: Op, state: _State) -> None:
        self._results_untraced(op, state, f"pointer loaded from memory ({op.name})")

    def _visit_derive(self, op: Op, state: _State) -> None:
        origins = state.of(op.operands)
        for result in op.results:
            if result in self.program.pointers:
                state.add(result, origins)

    def _visit_int_to_ptr(self, op: Op, state: _State) -> None:
        self._results_untraced(op, state, "pointer made from an integer (tt.int_to_ptr)")

    def _visit_return(self, op: Op, state: _State) -> None:
        for index, value in enumerate(op.operands):
            state.add_return(index, state.of([value]))

    def _visit_inline_asm(self, op: Op, state: _State) -> None:
        if not op.pure:
            state.fail("non-pure inline asm (tt.elementwise_inline_asm) may write any memory", op)
            state.anywhere = True
        self._results_untraced(op, state, "pointer returned by inline asm")

    def _visit_effect(self, op: Op, state: _State) -> None:
        state.side_effects = True

    def _visit_inert(self, op: Op, state: _State) -> None:
        pass

    def _visit_unknown(self, op: Op, state: _State) -> None:
        if op.regions:
            self._visit_unknown_region_op(op, state)
        elif any(word in op.name for word in _WRITE_WORDS):
            state.fail(f"unknown op {op.name} may write memory", op)
        elif any(v in self.program.pointers for v in (*op.operands, *op.results)):
            state.fail(f"unknown op {op.name} handles pointers", op)

    def _results_untraced(self, op: Op, state: _State, what: str) -> None:
        for result in op.results:
            if result in self.program.pointers:
                state.add(result, self._untraced(op, what))

    def _visit_unknown_region_op(self, op: Op, state: _State) -> None:
        # Writes inside are still seen (regions read outer values directly); only pointers flowing
        # through the op's own operands, block arguments or terminators are beyond the model.
        carried = [*op.operands, *op.results]
        for region in op.regions:
            for block in region:
                carried.extend(block.args)
                if block.ops:
                    carried.extend(block.ops[-1].operands)
        if any(v in self.program.pointers for v in carried):
            state.fail(f"op {op.name} carries pointers through its regions", op)
        for region in op.regions:
            self._visit_region(region, state)

    def _visit_call(self, op: Op, state: _State) -> None:
        if op.callee is None:
            state.fail("tt.call without a callee", op)
            return
        callee = self.summary(op.callee)
        if callee.unknown is not None:
            state.fail(callee.unknown, callee.failed_op or op)
            state.anywhere = state.anywhere or callee.anywhere
        state.side_effects = state.side_effects or callee.side_effects
        state.write(self._at_call(callee.written, op, state), op)
        for index, result in enumerate(op.results):
            if index < len(callee.returns):
                state.add(result, self._at_call(callee.returns[index], op, state))

    @staticmethod
    def _at_call(origins: _Origins, op: Op, state: _State) -> _Origins:
        """Callee origins in terms of the caller: parameter i becomes the origins of operand i."""
        mapped: set[int] = set()
        for origin in origins:
            if origin < 0:
                mapped.add(origin)
            elif origin < len(op.operands):
                mapped |= state.of([op.operands[origin]])
        return frozenset(mapped)

    def _visit_for(self, op: Op, state: _State) -> None:
        # scf.for %iv = lb to ub step s iter_args(%a = init...): body args (iv, a...), yield -> a / results
        body = _single_block(op, 0)
        inits, carried = op.operands[3:], body.args[1:]
        yielded = _terminator(body, "scf.yield")
        if not len(inits) == len(carried) == len(yielded) == len(op.results):
            raise _Unknown("unexpected scf.for form")
        for init, arg, out in zip(inits, carried, yielded):
            state.add(arg, state.of([init, out]))
        self._visit_region([body], state)
        for arg, out, result in zip(carried, yielded, op.results):
            state.add(result, state.of([arg, out]))

    def _visit_while(self, op: Op, state: _State) -> None:
        # before(args <- inits | after's yield) -> scf.condition(c, fwd...) -> after(args) and results
        before, after = _single_block(op, 0), _single_block(op, 1)
        forwarded = _terminator(before, "scf.condition")[1:]
        yielded = _terminator(after, "scf.yield")
        if not (
            len(before.args) == len(op.operands) == len(yielded)
            and len(forwarded) == len(after.args) == len(op.results)
        ):
            raise _Unknown("unexpected scf.while form")
        for arg, init, out in zip(before.args, op.operands, yielded):
            state.add(arg, state.of([init, out]))
        self._visit_region([before], state)
        for value, arg, result in zip(forwarded, after.args, op.results):
            state.add(arg, state.of([value]))
            state.add(result, state.of([value]))
        self._visit_region([after], state)

    def _visit_if(self, op: Op, state: _State) -> None:
        for index, region in enumerate(op.regions):
            if not region:
                continue  # an `if` without else and without results
            block = _single_block(op, index)
            self._visit_region([block], state)
            yielded = _terminator(block, "scf.yield")
            if len(yielded) != len(op.results):
                raise _Unknown("unexpected scf.if form")
            for value, result in zip(yielded, op.results):
                state.add(result, state.of([value]))

    def _visit_reduce(self, op: Op, state: _State) -> None:
        # The combine region gets (accumulated..., current...) for the N operands, returns N values.
        body = _single_block(op, 0)
        count = len(op.operands)
        returned = _terminator(body, op.name + ".return")
        if len(body.args) != 2 * count or len(returned) != count or len(op.results) != count:
            raise _Unknown(f"unexpected {op.name} form")
        for index, arg in enumerate(body.args):
            state.add(arg, state.of([op.operands[index % count], returned[index % count]]))
        self._visit_region([body], state)
        for operand, value, result in zip(op.operands, returned, op.results):
            state.add(result, state.of([operand, value]))


_Handler = Callable[[_TaintAnalysis, Op, _State], None]

# The one dispatch table: op name -> handler; an op not named here goes to _visit_unknown (it fails
# the analysis if it may write memory or handles pointers, and is inert otherwise).
_OP_TABLE: dict[str, _Handler] = {
    **dict.fromkeys(_WRITE_OPS, _TaintAnalysis._visit_write),
    **dict.fromkeys(_READ_OPS, _TaintAnalysis._visit_read),
    **dict.fromkeys(_DERIVE_OPS, _TaintAnalysis._visit_derive),
    **dict.fromkeys(_INERT_OPS, _TaintAnalysis._visit_inert),
    **dict.fromkeys(_EFFECT_OPS, _TaintAnalysis._visit_effect),
    "tt.int_to_ptr": _TaintAnalysis._visit_int_to_ptr,
    "tt.return": _TaintAnalysis._visit_return,
    "tt.elementwise_inline_asm": _TaintAnalysis._visit_inline_asm,
    "tt.call": _TaintAnalysis._visit_call,
    "scf.for": _TaintAnalysis._visit_for,
    "scf.while": _TaintAnalysis._visit_while,
    "scf.if": _TaintAnalysis._visit_if,
    "tt.reduce": _TaintAnalysis._visit_reduce,
    "tt.scan": _TaintAnalysis._visit_reduce,
}


def _single_block(op: Op, region: int) -> Block:
    if region >= len(op.regions) or len(op.regions[region]) != 1:
        raise _Unknown(f"unexpected {op.name} form (region {region} is not a single block)")
    return op.regions[region][0]


def _terminator(block: Block, name: str) -> tuple[int, ...]:
    if not block.ops or block.ops[-1].name != name:
        raise _Unknown(f"a block does not end in {name}")
    return block.ops[-1].operands
