"""Hypothesis strategies that draw whole programs, not tensors.

A ``Program`` is plain data with a readable (and pasteable) repr: the shapes of hidden
base tensors, the graph inputs (each a chain of view ops on a base), a list of steps
(derive a view, compute an intermediate, allocate a fresh buffer, mutate with a torch
in-place op, launch a kernel on named values), the names the program returns, and which
no_grad values to check. ``build(program)`` turns it into ``prog(wrap, *inputs)`` and
``make_inputs()`` for ``tests.harness.check_matches_eager``; ``program.source()`` prints
it as Python; ``build(program, native=True)`` replaces every launch by torch ops that do
the same (an oracle for what AOTAutograd itself supports, see test_equivalence.py).

The strategy simulates every step on real (tiny) tensors while it draws, so it only
draws legal views, knows which values share storage, and steers around the documented
limits of the library:

- (1) functionalize(remove="mutations_and_views") rebuilds distinct kernel arguments that
  share storage with a written argument only when one of them is a view all the others are
  views of, with strides its copy keeps, and refuses the others (README):
  ``facts(program).views_refused`` says whether a program passes such arguments; the test
  then checks "functionalize_views" on its own, accepting that refusal (never a wrong answer).
- (2) a kernel writing a requires_grad graph input leaves that input's .grad zeros
  instead of None when nothing else gives it gradient: whenever a launch writes the
  storage of such an input, the strategy appends ``g_x = x * 2`` (after every launch)
  and returns it, so the input always gets a real gradient.
- (3) torch.func.functionalize does not support graph inputs that alias each other:
  ``modes_for`` leaves both functionalize modes out for those programs.

and around a limit the README added after these tests found it (see ``facts``): a torch
in-place op on a non-contiguous graph input makes the library refuse distinct aliases of it
in one launch (accepted by the test only where ``facts`` predicts it);

and around limits of torch 2.13 itself, which fail the same way with plain torch ops:

- AOTAutograd cannot regenerate an output that is a (non-identity) view of aliasing graph
  inputs once one of them is mutated: such programs return only the inputs themselves
  and values with storage of their own.
- Functionalization cannot replay a mutation through a view chain in which ``as_strided``
  follows another view. The library carries a kernel's write through such a chain to the
  view's base (AOTAutograd), but torch's own in-place ops cannot: torch in-place ops are
  never drawn on such views (``_Sim.chained``), and under torch.func.functionalize (no
  bases) the library refuses such a kernel write, so ``facts(program).chain_write`` leaves
  the functionalize modes out (the test checks that it refuses). Under AOTAutograd a write
  through such a chain that a ``detach()`` cut from its base may be refused (README Known
  limits): ``facts(program).detached_chain_write`` says where, and only there the test
  accepts that refusal (never a wrong answer). as_strided is drawn on
  any view of a storage the program owns whole (an intermediate, a fresh buffer, an input
  that is its whole base), which keeps it from reaching into a hidden base beyond a graph
  input's elements.
- A boolean-mask selection (``Mask``, ``v = x[x % 2 == 0]``) has a data-dependent size:
  programs with one are traced with ``dynamic=True`` (``aot_kwargs``; FakeTensor refuses
  them in static mode) and also under make_fx symbolic; no view is drawn of such a value
  (a view with a concrete size would guard on the unbacked size, in torch itself), and none
  is drawn where graph inputs alias each other (torch 2.13's AOTAutograd with dynamic=True
  fails on aliasing inputs, "s21 ... is not tracked with proxy", with plain torch ops too).
- ``reshape`` may view or copy, and torch.func.functionalize reports contiguous strides
  for a mutated input (eager keeps them), so the two can disagree: ``Reshape`` is drawn
  only where ``view`` is legal, and a copy is spelled out as ``CopyView``.
- make_fx(functionalize(f)) returns fresh outputs, so an output that is a requires_grad
  input loses requires_grad there: ``modes_for`` leaves functionalize modes out.

Other rules keep eager well defined and deterministic on a GPU: values are integer
valued float32; no view is self-overlapping (as_strided draws only non-overlapping
strides); torch in-place ops only touch storage no requires_grad value shares (eager
autograd would refuse, or a saved tensor's version would trip); an atomic accumulator is
never empty; a launch gets four programs only when its tensor arguments share no
storage (kernels.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import json
import math
import os
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import torch
from hypothesis import strategies as st

from tests.property import kernels as PK

MAX_NUMEL = 64  # every tensor here has at most this many elements (one CHUNK of 64 lanes)
MAX_DIM = 3  # kernels see at most three dims


# --- view ops ---------------------------------------------------------------------------------------


def _index(dim: int, item: str) -> str:
    return "[" + ", ".join([":"] * dim + [item]) + "]"


@dataclasses.dataclass(frozen=True)
class Slice:
    dim: int
    start: int
    stop: int
    step: int = 1

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t[(slice(None),) * self.dim + (slice(self.start, self.stop, self.step),)]

    def source(self) -> str:
        step = f":{self.step}" if self.step != 1 else ""
        return _index(self.dim, f"{self.start}:{self.stop}{step}")


@dataclasses.dataclass(frozen=True)
class Permute:
    dims: tuple[int, ...]

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t.permute(self.dims)

    def source(self) -> str:
        return f".permute{self.dims}"


@dataclasses.dataclass(frozen=True)
class Select:
    dim: int
    index: int

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t.select(self.dim, self.index)

    def source(self) -> str:
        return f".select({self.dim}, {self.index})"


@dataclasses.dataclass(frozen=True)
class Unsqueeze:
    dim: int

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t.unsqueeze(self.dim)

    def source(self) -> str:
        return f".unsqueeze({self.dim})"


@dataclasses.dataclass(frozen=True)
class View:
    shape: tuple[int, ...]

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t.view(self.shape)

    def source(self) -> str:
        return f".view({self.shape})"


@dataclasses.dataclass(frozen=True)
class Reshape:
    """Drawn only where ``view`` is legal in eager, so it is a view (torch leaves view-or-copy
    unspecified, and torch.func.functionalize reports contiguous strides for a mutated input,
    turning an eager copy into a view: a program must not depend on which it gets)."""

    shape: tuple[int, ...]

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t.reshape(self.shape)

    def source(self) -> str:
        return f".reshape({self.shape})"


@dataclasses.dataclass(frozen=True)
class CopyView:
    """Where ``view`` is illegal: an explicit contiguous copy, then the view (new storage, a root)."""

    shape: tuple[int, ...]

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t.clone(memory_format=torch.contiguous_format).view(self.shape)

    def source(self) -> str:
        return f".clone(memory_format=torch.contiguous_format).view({self.shape})"


@dataclasses.dataclass(frozen=True)
class AsStrided:
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t.as_strided(self.size, self.stride, self.offset)

    def source(self) -> str:
        return f".as_strided({self.size}, {self.stride}, {self.offset})"


@dataclasses.dataclass(frozen=True)
class Detach:
    """Shares storage, drops autograd history: an alias that does not require grad."""

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t.detach()

    def source(self) -> str:
        return ".detach()"


ViewOp = Slice | Permute | Select | Unsqueeze | View | Reshape | CopyView | AsStrided | Detach


# --- steps --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Derive:
    """``name = src<view>``."""

    name: str
    src: str
    view: ViewOp

    def run(self, env: dict[str, Any], wrap: Any) -> None:
        env[self.name] = self.view.apply(env[self.src])

    def source(self) -> str:
        return f"{self.name} = {self.src}{self.view.source()}"


COMPUTE_OPS: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], str]] = {
    "mul2": (lambda t: t * 2, "{} * 2"),
    "add1": (lambda t: t + 1, "{} + 1"),
    "clone": (lambda t: t.clone(), "{}.clone()"),  # keeps the strides of a dense input
    "sum": (lambda t: t.sum(), "{}.sum()"),
    # Saves its input for backward, so a later raw write to it shows in eager's gradient.
    "mul_mod": (lambda t: t * (t % 2), "{0} * ({0} % 2)"),
}


@dataclasses.dataclass(frozen=True)
class Compute:
    """``name = op(src)``: an intermediate with its own storage (differentiable)."""

    name: str
    src: str
    op: str

    def run(self, env: dict[str, Any], wrap: Any) -> None:
        env[self.name] = COMPUTE_OPS[self.op][0](env[self.src])

    def source(self) -> str:
        return f"{self.name} = " + COMPUTE_OPS[self.op][1].format(self.src)


TORCH_INPLACE_OPS: dict[str, tuple[Callable[[torch.Tensor], Any], str]] = {
    "add_": (lambda t: t.add_(1), "{}.add_(1)"),
    "mul_": (lambda t: t.mul_(2), "{}.mul_(2)"),
}


@dataclasses.dataclass(frozen=True)
class TorchInplace:
    """``target.add_(1)`` / ``target.mul_(2)``: a torch mutation between kernel mutations.

    Drawn only on storage that no requires_grad value shares (eager autograd would refuse it,
    or its version counter would trip a saved tensor).
    """

    target: str
    op: str

    def run(self, env: dict[str, Any], wrap: Any) -> None:
        TORCH_INPLACE_OPS[self.op][0](env[self.target])

    def source(self) -> str:
        return TORCH_INPLACE_OPS[self.op][1].format(self.target)


@dataclasses.dataclass(frozen=True)
class Fresh:
    """``name = torch.zeros_like(like)`` (same strides when ``like`` is dense), or ``torch.zeros(shape)``."""

    name: str
    like: str | None = None
    shape: tuple[int, ...] = (1,)

    def run(self, env: dict[str, Any], wrap: Any) -> None:
        env[self.name] = torch.zeros_like(env[self.like]) if self.like else torch.zeros(self.shape)

    def source(self) -> str:
        return f"{self.name} = " + (
            f"torch.zeros_like({self.like})" if self.like else f"torch.zeros({self.shape})"
        )


MASK_OPS: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], str]] = {
    "even": (lambda t: t[t % 2 == 0], "{0}[{0} % 2 == 0]"),
    "not3": (lambda t: t[t % 3 != 0], "{0}[{0} % 3 != 0]"),
}


@dataclasses.dataclass(frozen=True)
class Mask:
    """``name = src[pred(src)]``: a 1-d copy whose size depends on the data (unbacked when traced)."""

    name: str
    src: str
    pred: str

    def run(self, env: dict[str, Any], wrap: Any) -> None:
        env[self.name] = MASK_OPS[self.pred][0](env[self.src])

    def source(self) -> str:
        return f"{self.name} = " + MASK_OPS[self.pred][1].format(self.src)


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    fn: Any
    roles: tuple[str, ...]  # per tensor argument: "in", "inout", "out", "acc" (a bare pointer)
    written: frozenset[int]  # positions the kernel may write


KERNELS: dict[str, KernelSpec] = {
    "inplace": KernelSpec(PK.inplace_kernel, ("inout",), frozenset({0})),
    "copy": KernelSpec(PK.copy_kernel, ("in", "out"), frozenset({1})),
    "write_then_read": KernelSpec(PK.write_then_read_kernel, ("inout", "in", "out"), frozenset({0, 2})),
    "halves": KernelSpec(PK.halves_kernel, ("inout", "inout"), frozenset({0, 1})),
    "two_writes": KernelSpec(PK.two_writes_kernel, ("inout", "inout"), frozenset({0, 1})),
    "atomic_sum": KernelSpec(PK.atomic_sum_kernel, ("in", "acc"), frozenset({1})),
    "read_only": KernelSpec(PK.read_only_kernel, ("in",), frozenset()),
}


def _flat_read(t: torch.Tensor, n: int, other: float) -> torch.Tensor:
    """t's elements in row-major order (a copy), padded with ``other`` to n."""
    out = torch.full((n,), other)
    k = min(n, t.numel())
    out[:k] = t.reshape(-1)[:k]
    return out


def _iota(t: torch.Tensor) -> torch.Tensor:
    return torch.arange(t.numel(), dtype=t.dtype).view(t.shape)


def _native_copy(a: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_((_flat_read(a, out.numel(), 0) + 1).view(out.shape))


def _native_write_then_read(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    a.copy_(_iota(a) + 100)
    out.copy_(_flat_read(b, out.numel(), -1).view(out.shape))


def _native_halves(a: torch.Tensor, b: torch.Tensor) -> None:
    a.copy_(torch.where(_iota(a) < a.numel() // 2, _iota(a) + 1000, a))
    b.copy_(torch.where(_iota(b) >= b.numel() // 2, _iota(b) + 2000, b))


def _native_two_writes(a: torch.Tensor, b: torch.Tensor) -> None:
    a.add_(1)
    b.mul_(2)


def _native_atomic_sum(a: torch.Tensor, acc: torch.Tensor) -> None:
    acc[(0,) * acc.dim()].add_(a.sum())


NATIVE: dict[str, Callable[..., None]] = {
    "inplace": lambda a: a.mul_(2).add_(1),
    "copy": _native_copy,
    "write_then_read": _native_write_then_read,
    "halves": _native_halves,
    "two_writes": _native_two_writes,
    "atomic_sum": _native_atomic_sum,
    "read_only": lambda a: None,
}


def layout(t: torch.Tensor) -> tuple[int, ...]:
    """(numel, size[1], size[2], stride[0..2]) after padding to 3 dims; read at trace time."""
    pad = MAX_DIM - t.dim()
    size = (1,) * pad + tuple(t.shape)
    stride = (0,) * pad + tuple(t.stride())
    # An empty view may have a zero size; its lanes are all masked, but elem() divides by sizes.
    # torch.sym_max: no guard on a data-dependent (unbacked) size (a Mask value's).
    return (t.numel(), torch.sym_max(size[1], 1), torch.sym_max(size[2], 1), *stride)


@dataclasses.dataclass(frozen=True)
class Launch:
    """``wrap(kernel)[grid](*args, CHUNK=64 // programs)``, each strided argument followed by its layout.

    ``grid_fn``: the grid as a callable of the meta-parameters instead of a tuple;
    ``by_keyword``: every argument passed by name; ``no_grad``: launched under ``torch.no_grad()``.
    """

    kernel: str
    args: tuple[str, ...]
    programs: int = 1
    grid_fn: bool = False
    by_keyword: bool = False
    no_grad: bool = False

    def run(self, env: dict[str, Any], wrap: Any) -> None:
        if wrap is None:  # simulation: only metadata matters
            return
        spec = KERNELS[self.kernel]
        flat: list[Any] = []
        for name, role in zip(self.args, spec.roles):
            t = env[name]
            flat.append(t)
            if role != "acc":
                flat.extend(layout(t))
        programs = self.programs
        grid: Any = (lambda meta: (64 // meta["CHUNK"],)) if self.grid_fn else (programs,)
        chunk = MAX_NUMEL // programs
        with torch.no_grad() if self.no_grad else contextlib.nullcontext():
            if self.by_keyword:
                names = list(inspect.signature(spec.fn.fn).parameters)
                wrap(spec.fn)[grid](**dict(zip(names, flat)), CHUNK=chunk)
            else:
                wrap(spec.fn)[grid](*flat, CHUNK=chunk)

    def run_native(self, env: dict[str, Any]) -> None:
        """The same launch in torch ops (an oracle for what AOTAutograd itself supports)."""
        with torch.no_grad():  # a raw launch is invisible to autograd
            NATIVE[self.kernel](*(env[a] for a in self.args))

    def source(self) -> str:
        grid = "[lambda meta: (64 // meta['CHUNK'],)]" if self.grid_fn else f"[({self.programs},)]"
        if self.by_keyword:
            params = [
                p for p in inspect.signature(KERNELS[self.kernel].fn.fn).parameters if p.endswith("_ptr")
            ]
            args = ", ".join(f"{p}={a}" for p, a in zip(params, self.args))
        else:
            args = ", ".join(self.args)
        call = f"launch {self.kernel}{grid}({args}, CHUNK={MAX_NUMEL // self.programs})"
        return f"with torch.no_grad(): {call}" if self.no_grad else call


Step = Derive | Compute | Fresh | Launch | TorchInplace | Mask


# --- programs -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Input:
    """A graph input: ``base[base_index]`` through ``views``. Inputs on the same base alias each other."""

    name: str
    base: int = 0
    views: tuple[ViewOp, ...] = ()
    requires_grad: bool = False


@dataclasses.dataclass(frozen=True)
class Program:
    bases: tuple[tuple[int, ...], ...]
    inputs: tuple[Input, ...]
    steps: tuple[Step, ...]
    returns: tuple[str, ...]
    no_grad: tuple[bool, ...] = (False, True)

    def source(self) -> str:
        lines = []
        for k, shape in enumerate(self.bases):
            numel = math.prod(shape)
            lines.append(f"base{k} = (torch.arange({numel}.) + {100 * k}).reshape({shape})")
        for inp in self.inputs:
            chain = "".join(v.source() for v in inp.views)
            how = "" if aliasing_bases(self)[inp.base] else ".detach()"
            rg = ".requires_grad_()" if inp.requires_grad else ""
            lines.append(f"{inp.name} = base{inp.base}{chain}{how}{rg}")
        lines.append(f"def f({', '.join(i.name for i in self.inputs)}):")
        lines += [f"    {s.source()}" for s in self.steps]
        lines.append(f"    return {', '.join(self.returns)}")
        lines.append(f"no_grad in {self.no_grad}")
        return "\n".join(lines)


def aliasing_bases(program: Program) -> list[bool]:
    """Per base: whether two graph inputs are views of it (they then alias each other)."""
    counts = [0] * len(program.bases)
    for inp in program.inputs:
        counts[inp.base] += 1
    return [c > 1 for c in counts]


def make_base(k: int, shape: tuple[int, ...]) -> torch.Tensor:
    return (torch.arange(math.prod(shape), dtype=torch.float32) + 100 * k).reshape(shape)


def make_inputs_fn(program: Program) -> Callable[[], tuple[torch.Tensor, ...]]:
    shared = aliasing_bases(program)

    def make_inputs() -> tuple[torch.Tensor, ...]:
        bases = [make_base(k, s) for k, s in enumerate(program.bases)]
        out = []
        for inp in program.inputs:
            t = bases[inp.base]
            for v in inp.views:
                t = v.apply(t)
            if not shared[inp.base]:
                # A leaf with the view's geometry (strides, storage offset), so it can require grad.
                t = t.detach().requires_grad_(inp.requires_grad)
            out.append(t)
        return tuple(out)

    return make_inputs


def run_program(
    program: Program, wrap: Any, inputs: Sequence[torch.Tensor], native: bool = False
) -> tuple[Any, ...]:
    env: dict[str, Any] = {inp.name: t for inp, t in zip(program.inputs, inputs)}
    for step in program.steps:
        if native and isinstance(step, Launch):
            step.run_native(env)
        else:
            step.run(env, wrap)
    return tuple(env[r] for r in program.returns)


def build(
    program: Program, native: bool = False
) -> tuple[Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]]]:
    """``(prog, make_inputs)`` for check_matches_eager; ``native``: launches replaced by torch ops."""

    def prog(wrap: Any, *inputs: torch.Tensor) -> tuple[Any, ...]:
        return run_program(program, wrap, inputs, native)

    return prog, make_inputs_fn(program)


# --- running in a child process ------------------------------------------------------------------


def run_isolated(fn: Callable[[], Any]) -> list[str]:
    """Run ``fn()`` in a forked child; return the strings it reported, raise what it raised.

    Launches with a wrong geometry write past the end of a buffer and corrupt the heap
    ("double free or corruption"), which kills the whole test session; in a child, a crash
    is an ordinary failure (and Hypothesis can shrink it). ``fn`` may return a list of
    strings (e.g. Hypothesis events to record in the parent). Runs inline without ``os.fork``
    and on a GPU (a forked child cannot use CUDA that its parent initialised).
    """
    if not hasattr(os, "fork") or torch.cuda.is_initialized() or torch.get_default_device().type != "cpu":
        return list(fn() or [])
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into the test runner
        status = 0
        try:
            os.close(read_end)
            payload: dict[str, Any] = {"reports": list(fn() or [])}
        except BaseException as error:  # noqa: BLE001  (everything goes back to the parent)
            payload = {
                "error": "".join(traceback.format_exception(error))[-6000:],
                "type": type(error).__name__,
            }
            status = 1
        with os.fdopen(write_end, "w") as out:
            json.dump(payload, out)
        os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as inp:
        text = inp.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        raise AssertionError(
            f"the program crashed the interpreter (signal {os.WTERMSIG(status)}); {text[-2000:]}"
        )
    no_report: dict[str, Any] = {"error": f"child exited with {status} and no report", "type": "?"}
    payload = json.loads(text) if text else no_report
    if "error" in payload:
        raise AssertionError(f"in the child process, {payload['type']}:\n{payload['error']}")
    return list(payload["reports"])


# --- facts about a program (from a metadata-only run) -------------------------------------------------


def _storage(t: torch.Tensor) -> int:
    """Shared by exactly the tensors that share storage (empty ones included), as the library keys them."""
    return int(t.untyped_storage()._cdata)


@dataclasses.dataclass(frozen=True)
class Facts:
    aliasing_inputs: bool  # limit (3)
    views_refused: bool  # limit (1): a launch passes distinct aliases of a written argument (may refuse)
    returns_grad_input: bool  # under no_grad, an output is a graph input that requires grad
    restride_refusal: bool  # README: distinct aliases of a non-contiguous input after a torch in-place op
    chain_write: bool = False  # a launch writes a view whose chain has as_strided after another view
    unbacked: bool = False  # a Mask step: traced with dynamic=True (aot_kwargs)
    detached_chain_write: bool = False  # ... and that view's chain has a detach() (README: may refuse)


def chained_views(program: Program) -> set[str]:
    """Values whose view chain (from their functional base) has ``as_strided`` after another view.

    Graph inputs, intermediates and fresh buffers are bases (chain length 0); ``Derive`` adds one
    view to its source's chain.
    """
    depth: dict[str, int] = {}
    chained: set[str] = set()
    for step in program.steps:
        if isinstance(step, Derive):
            depth[step.name] = depth.get(step.src, 0) + 1
            after_a_view = depth.get(step.src, 0) >= 1
            if step.src in chained or (isinstance(step.view, AsStrided) and after_a_view):
                chained.add(step.name)
    return chained


def detached_views(program: Program) -> set[str]:
    """Values with a ``detach()`` anywhere in their chain of views (``Derive`` steps)."""
    detached: set[str] = set()
    for step in program.steps:
        if isinstance(step, Derive) and (isinstance(step.view, Detach) or step.src in detached):
            detached.add(step.name)
    return detached


def refused_with_views_as_copies(spec: KernelSpec, tensors: Sequence[torch.Tensor]) -> bool:
    """Limit (1): a storage written by the launch is reached through two distinct tensor objects."""
    return any(
        t is not tensors[w] and _storage(t) == _storage(tensors[w]) for w in spec.written for t in tensors
    )


def facts(program: Program) -> Facts:
    """What a metadata-only run (no kernels, under no_grad) tells about the program.

    Storage sharing in eager is storage sharing in every trace: every view op here is a
    view in eager and when traced, and every copy (CopyView, Compute, Fresh) a copy.

    README "Known limits" (found by these tests): after a torch in-place op on a
    non-contiguous graph input, torch's functionalization gives views made from it
    contiguous metadata, so the library refuses (NotImplementedError) distinct aliases of it
    passed to one kernel: ``restride_refusal`` says a program may hit that.
    """
    tensors = make_inputs_fn(program)()
    env: dict[str, Any] = dict(zip((i.name for i in program.inputs), tensors))
    strided_inputs = {_storage(t) for t in tensors if not t.is_contiguous()}
    restrided: set[int] = set()
    refused = restride_refusal = False
    with torch.no_grad():
        for step in program.steps:
            if isinstance(step, Launch):
                tensors_now = [env[a] for a in step.args]
                spec = KERNELS[step.kernel]
                distinct_aliases = refused_with_views_as_copies(spec, tensors_now)
                refused |= distinct_aliases
                restride_refusal |= distinct_aliases and any(_storage(t) in restrided for t in tensors_now)
            if isinstance(step, TorchInplace) and _storage(env[step.target]) in strided_inputs:
                restrided.add(_storage(env[step.target]))
            step.run(env, None)
    returns_grad_input = any(env[r].requires_grad for r in program.returns)
    chained = chained_views(program)
    chain_write = any(
        isinstance(s, Launch) and any(s.args[w] in chained for w in KERNELS[s.kernel].written)
        for s in program.steps
    )
    unbacked = any(isinstance(s, Mask) for s in program.steps)
    detached = detached_views(program) & chained
    detached_chain_write = any(
        isinstance(s, Launch) and any(s.args[w] in detached for w in KERNELS[s.kernel].written)
        for s in program.steps
    )
    return Facts(
        any(aliasing_bases(program)),
        refused,
        returns_grad_input,
        restride_refusal,
        chain_write,
        unbacked,
        detached_chain_write,
    )


def aot_kwargs(program: Program) -> dict[str, Any]:
    """Keyword arguments for check_matches_eager: ``dynamic=True`` for data-dependent sizes."""
    return {"dynamic": True} if facts(program).unbacked else {}


AOT_MODES = ("aot_function", "aot_module", "reinplace", "reinplace_keep")


def modes_for(program: Program) -> tuple[str, ...]:
    """The harness modes a program is checked under (see the module docstring for the limits).

    The AOTAutograd modes (``reinplace`` and ``reinplace_keep`` are aot_function with
    ``ft.reinplace_compiler``) and plain make_fx always; the functionalize modes as allowed.
    """
    f = facts(program)
    always = (*AOT_MODES, "make_fx")
    if f.aliasing_inputs or f.chain_write:  # limit (3); a write through an as_strided chain
        return always
    if f.returns_grad_input:
        # make_fx(functionalize(f)) returns fresh tensors (torch's semantics), so an output that is
        # a requires_grad input in eager comes back not requiring grad; the harness compares
        # requires_grad, so only the modes that regenerate aliases can check such a program.
        return always
    modes = (*always, "functionalize", *(("symbolic",) if f.unbacked else ()))
    return (*modes, "functionalize_views")  # limit (1): test_equivalence accepts its refusal


# --- drawing ------------------------------------------------------------------------------------------


def _shapes_of(numel: int) -> list[tuple[int, ...]]:
    """Every shape of 1 to 3 dims with this many elements, fewest dims first."""
    divisors = [d for d in range(1, numel + 1) if numel % d == 0]
    out: list[tuple[int, ...]] = [(numel,)]
    out += [(a, numel // a) for a in divisors]
    out += [(a, b, numel // (a * b)) for a in divisors for b in divisors if (numel // a) % b == 0]
    return out


@st.composite
def base_shapes(draw: st.DrawFn) -> tuple[int, ...]:
    """1 to 3 dims, each 1 to 6, at least 2 and at most MAX_NUMEL elements."""
    shape: list[int] = []
    for _ in range(draw(st.integers(1, MAX_DIM))):
        shape.append(draw(st.integers(1, min(6, MAX_NUMEL // math.prod(shape)))))
    if math.prod(shape) < 2:
        shape[-1] = 2
    return tuple(shape)


@st.composite
def as_strided_ops(draw: st.DrawFn, storage_numel: int) -> AsStrided:
    """A non-overlapping as_strided view (inner stride 1 or 2, outer stride past the inner extent)."""
    inner = draw(st.integers(1, min(6, storage_numel)))
    s_in = draw(st.sampled_from([1, 2])) if 2 * inner - 1 <= storage_numel else 1
    extent_in = (inner - 1) * s_in + 1
    two_d = draw(st.booleans()) and extent_in < storage_numel
    if not two_d:
        offset = draw(st.integers(0, storage_numel - extent_in))
        return AsStrided((inner,), (s_in,), offset)
    s_out = draw(st.integers(extent_in, storage_numel - 1))
    outer = draw(st.integers(1, 1 + (storage_numel - extent_in) // s_out))
    extent = (outer - 1) * s_out + extent_in
    offset = draw(st.integers(0, storage_numel - extent))
    if draw(st.booleans()):  # the transposed order: same elements, column-major walk
        return AsStrided((inner, outer), (s_in, s_out), offset)
    return AsStrided((outer, inner), (s_out, s_in), offset)


@st.composite
def view_ops(draw: st.DrawFn, t: torch.Tensor, root: bool) -> ViewOp:
    """A view op legal on ``t``; as_strided (``root``) only on a storage the program owns whole.

    as_strided may follow other views (a chain torch's functionalization cannot commit a
    mutation through: the library updates the base, see the module docstring).
    """
    kinds = ["slice", "permute", "select", "unsqueeze", "view", "as_strided", "detach"]
    nonempty = [d for d in range(t.dim()) if t.shape[d] > 0]
    if not nonempty:
        kinds.remove("slice")
        kinds.remove("select")
    if t.dim() < 2:
        kinds.remove("permute")
    if t.dim() >= MAX_DIM:
        kinds.remove("unsqueeze")
    if not root or _storage_numel(t) == 0:
        kinds.remove("as_strided")
    kind = draw(st.sampled_from(kinds))
    if kind == "slice":
        dim = draw(st.sampled_from(nonempty))
        n = t.shape[dim]
        start = draw(st.integers(0, n - 1))
        empty = draw(st.sampled_from([False] * 3 + [True]))  # now and then an empty view
        stop = start if empty else draw(st.integers(start + 1, n))
        return Slice(dim, start, stop, draw(st.sampled_from([1, 2])))
    if kind == "permute":
        return Permute(tuple(draw(st.permutations(range(t.dim())))))
    if kind == "select":
        dim = draw(st.sampled_from(nonempty))
        return Select(dim, draw(st.integers(0, t.shape[dim] - 1)))
    if kind == "unsqueeze":
        return Unsqueeze(draw(st.integers(0, t.dim())))
    if kind == "view":
        shape = draw(st.sampled_from(_shapes_of(t.numel())))
        try:
            t.view(shape)
        except RuntimeError:
            return CopyView(shape)
        return Reshape(shape) if draw(st.booleans()) else View(shape)
    if kind == "as_strided":
        return draw(as_strided_ops(_storage_numel(t)))
    return Detach()


def _storage_numel(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes() // t.element_size()


class _Sim:
    """The program drawn so far, run on real tensors (kernels skipped: they change no metadata)."""

    def __init__(self, program_inputs: Sequence[Input], tensors: Sequence[torch.Tensor], roots: set[str]):
        self.env: dict[str, torch.Tensor] = {i.name: t for i, t in zip(program_inputs, tensors)}
        self.roots = roots  # values that own their whole storage and are no view
        self.root_storages = {_storage(self.env[r]) for r in roots}  # as_strided may view these
        self.unbacked: set[str] = set()  # Mask values (data-dependent sizes): no views of them
        self.steps: list[Step] = []
        self.written: set[int] = set()  # storages some launch writes
        self.counter = itertools.count(1)

    def names(self) -> list[str]:
        return list(self.env)

    def add(self, step: Step) -> None:
        step.run(self.env, None)
        if isinstance(step, (Compute, Fresh)):  # not CopyView: a view (of its clone) already
            self.roots.add(step.name)
            self.root_storages.add(_storage(self.env[step.name]))
        if isinstance(step, Mask) or (isinstance(step, Fresh) and step.like in self.unbacked):
            self.unbacked.add(step.name)
        if isinstance(step, Compute) and step.src in self.unbacked:
            self.unbacked.add(step.name)
        self.steps.append(step)

    def chained(self) -> set[str]:
        return chained_views(Program((), (), tuple(self.steps), ()))

    def new_name(self) -> str:
        return f"v{next(self.counter)}"

    def derive(self, draw: st.DrawFn, src: str) -> str:
        if src in self.unbacked:  # a view with a concrete size would guard on the data-dependent one
            return src
        name = self.new_name()
        t = self.env[src]
        owned = _storage(t) in self.root_storages and _storage_numel(t) > 0
        if owned and src not in self.roots and draw(st.integers(0, 3)) == 0:
            # a view of an owned storage: as_strided now makes a chain (issue 15), drawn often
            self.add(Derive(name, src, draw(as_strided_ops(_storage_numel(t)))))
        else:
            self.add(Derive(name, src, draw(view_ops(t, owned))))
        return name


def _draw_arg(draw: st.DrawFn, sim: _Sim, role: str, earlier: list[str]) -> str:
    """A kernel argument: an existing value, an earlier argument again, a new view, a fresh buffer."""
    names = sim.names()
    if role == "acc":  # the kernel always adds into the first element: it must exist
        names = [n for n in names if sim.env[n].numel() > 0]
        earlier = [n for n in earlier if sim.env[n].numel() > 0]
    choices = ["existing", "new_view"] if names else []
    related = [
        n
        for n in names
        if n not in earlier and any(_storage(sim.env[n]) == _storage(sim.env[e]) for e in earlier)
    ]
    if earlier:
        choices += ["same_as_earlier", "view_of_earlier"]
    if related:
        choices.append("alias_of_earlier")
    if role in ("out", "acc") or not choices:
        choices.insert(0, "fresh")
    chained = [n for n in sim.chained() if role != "acc" or sim.env[n].numel() > 0]
    if chained and role in ("inout", "out"):
        choices.append("chained")  # a write through an as_strided chain (issue 15)
    how = draw(st.sampled_from(choices))
    if how == "chained":
        return draw(st.sampled_from(chained))
    if how == "fresh":
        name = sim.new_name()
        if role == "acc":
            sim.add(Fresh(name, shape=draw(st.sampled_from([(1,), ()]))))
        else:
            sim.add(Fresh(name, like=draw(st.sampled_from(sim.names()))))
        return name
    if how == "same_as_earlier":
        return draw(st.sampled_from(earlier))
    if how == "alias_of_earlier":
        return draw(st.sampled_from(related))
    src = draw(st.sampled_from(earlier if how == "view_of_earlier" else names))
    if how in ("new_view", "view_of_earlier"):
        name = sim.derive(draw, src)
        if role != "acc" or sim.env[name].numel() > 0:
            return name
    return src


@st.composite
def launches(draw: st.DrawFn, sim: _Sim) -> None:
    kernel = draw(st.sampled_from(list(KERNELS)))
    spec = KERNELS[kernel]
    args: list[str] = []
    for role in spec.roles:
        args.append(_draw_arg(draw, sim, role, args))
    storages = [_storage(sim.env[a]) for a in args]
    programs = 1
    if len(set(storages)) == len(storages):  # no shared storage: programs never touch one element
        programs = draw(st.sampled_from([1, 4]))
    sim.written |= {storages[w] for w in spec.written}
    sim.add(
        Launch(kernel, tuple(args), programs, draw(st.booleans()), draw(st.booleans()), draw(st.booleans()))
    )


@st.composite
def inputs(draw: st.DrawFn) -> tuple[tuple[tuple[int, ...], ...], tuple[Input, ...]]:
    """One input, two independent ones, or two aliasing views of one base."""
    kind = draw(st.sampled_from(["one", "two", "aliasing"]))
    bases = [draw(base_shapes())]
    if kind == "two":
        bases.append(draw(base_shapes()))
    names = ["x"] if kind == "one" else ["x", "y"]
    result = []
    for k, name in enumerate(names):
        base = k if kind == "two" else 0
        t = make_base(base, bases[base])
        views: list[ViewOp] = []
        for _ in range(draw(st.integers(0, 2))):
            # as_strided only on a base nobody else sees: the input then is the whole base.
            v = draw(view_ops(t, root=False))
            if isinstance(v, (CopyView, Detach)):  # a copy is no view of the base; detach comes later
                continue
            views.append(v)
            t = v.apply(t)
        rg = kind != "aliasing" and draw(st.booleans())
        result.append(Input(name, base, tuple(views), rg))
    return tuple(bases), tuple(result)


@st.composite
def programs(draw: st.DrawFn, max_steps: int = 8) -> Program:
    bases, program_inputs = draw(inputs())
    proto = Program(bases, program_inputs, (), ())
    tensors = make_inputs_fn(proto)()
    shared = aliasing_bases(proto)
    roots = {
        inp.name
        for inp in program_inputs
        if not shared[inp.base] and not inp.views  # the input is its whole base, no view
    }
    sim = _Sim(program_inputs, tensors, roots)
    n_steps = draw(st.integers(1, max_steps))
    for _ in range(n_steps):
        # AOTAutograd with dynamic=True fails on aliasing graph inputs ("s21 ... is not tracked with
        # proxy", plain torch ops too): Mask (traced dynamic) only where inputs do not alias.
        kinds = ["launch", "derive", "compute", "torch_inplace", *(() if any(shared) else ("mask",))]
        kind = draw(st.sampled_from(kinds))
        if kind == "launch":
            draw(launches(sim))
        elif kind == "torch_inplace":
            grad_storages = {_storage(t) for t in sim.env.values() if t.requires_grad}
            chained = sim.chained()  # torch cannot commit its own mutation through those
            targets = [n for n, t in sim.env.items() if _storage(t) not in grad_storages and n not in chained]
            if targets:
                target = draw(st.sampled_from(targets))
                sim.written.add(_storage(sim.env[target]))
                sim.add(TorchInplace(target, draw(st.sampled_from(list(TORCH_INPLACE_OPS)))))
        elif kind == "derive":
            sim.derive(draw, draw(st.sampled_from(sim.names())))
        elif kind == "mask":
            src = draw(st.sampled_from(sim.names()))
            sim.add(Mask(sim.new_name(), src, draw(st.sampled_from(list(MASK_OPS)))))
        else:
            op = draw(st.sampled_from(list(COMPUTE_OPS)))
            sim.add(Compute(sim.new_name(), draw(st.sampled_from(sim.names())), op))
    if not any(isinstance(s, Launch) for s in sim.steps):
        draw(launches(sim))
    returnable = sim.names()
    input_storages = {_storage(t) for t in tensors}
    if any(shared) and input_storages & sim.written:
        # AOTAutograd (torch 2.13) cannot regenerate an output that is a view of graph inputs
        # that alias each other once one of them is mutated ("incorrect out shape after
        # application of ViewMeta sequence"), with plain torch ops too: return the inputs
        # themselves, or values with storage of their own.
        returnable = [
            n
            for n in returnable
            if n in {i.name for i in program_inputs} or _storage(sim.env[n]) not in input_storages
        ]
    returns = list(draw(st.lists(st.sampled_from(returnable), min_size=1, max_size=3)))
    if draw(st.booleans()):
        # Observe every launch's effect: return each written value with storage of its own
        # (written inputs and their views are compared by the harness anyway).
        for step in sim.steps:
            if isinstance(step, Launch):
                for w in KERNELS[step.kernel].written:
                    name = step.args[w]
                    if _storage(sim.env[name]) not in input_storages and name not in returns:
                        returns.append(name)
    # Limit (2): a written requires_grad input also gets gradient from a use after every launch.
    for inp, t in zip(program_inputs, tensors):
        if inp.requires_grad and _storage(t) in sim.written:
            name = f"g_{inp.name}"
            sim.add(Compute(name, inp.name, "mul2"))
            returns.append(name)
    no_grad = draw(st.sampled_from([(False, True), (True,), (False,)]))
    return Program(bases, program_inputs, tuple(sim.steps), tuple(returns), no_grad)
