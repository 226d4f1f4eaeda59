"""Launch overheads at the limit, measured side by side in one run (issue #16).

  eager launch:  raw ``kernel[grid](...)`` vs ``ft.wrap_triton(kernel)[grid](...)`` (wrapper made
                 on every call, as users write it), a kept wrapper, a kept ``[grid]`` (the checks
                 alone), ``.run(grid=...)``, an autotuned and a heuristics kernel, and
                 ``torch.library.wrap_triton`` (GPU only: under the interpreter PyTorch's wrapper
                 returns the raw kernel).
  replayed:      graphs of 1, 10 and 100 launches of a tiny kernel through aot_function and
                 ``ft.reinplace_compiler``, against the same program of raw launches and against
                 AOTAutograd's own cost (an aot_function graph with no kernel, and the same
                 program with an aten op in place of each launch).
  tracing:       aot_function compile time for 10, 100 and 1000 launches (per launch: flat
                 when linear).

GPU: ``python benchmarks/bench_launch.py --gpu`` (real launches; eager launches queued, graphs
synchronised after every call). Without ``--gpu``: CPU host figures on Triton's interpreter, with
every kernel's ``run`` replaced by a no-op on both sides, so the figures are the host time of the
launch path itself (what this library adds is ``ft - raw``), not the interpreter's. ``--quick``
skips the 1000-launch trace; ``--profile`` prints cProfile's top functions for each part;
``--pieces`` prints only where an eager launch's host time goes (``timeit`` of its pieces, every
kernel's ``run`` a no-op on both sides, on the GPU too); ``--one`` only the one-launch graphs, three
times, synchronised and queued, each program also followed by 20 us of host work before the
synchronisation (which leaves the device idle by then: what remains is the host's); ``--eager``
only the eager launches; ``--split`` only the one-launch graphs' host time split at the graph's
edges: AOTAutograd's wrapper before the graph, the graph, the wrapper after it.
"""

from __future__ import annotations

import cProfile
import functools
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

GPU = "--gpu" in sys.argv
PROFILE = "--profile" in sys.argv
PIECES = "--pieces" in sys.argv
ONE = "--one" in sys.argv
EAGER = "--eager" in sys.argv
SPLIT = "--split" in sys.argv
if not GPU and os.path.basename(sys.argv[0]).startswith("bench_"):  # imported: see bench_graphs.py
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from functorch.compile import aot_function, make_boxed_func  # noqa: E402

import functional_triton as ft  # noqa: E402
from functional_triton.launch_spec import _infos, kernel_key  # noqa: E402


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


@triton.jit
def add_one_out(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


autotuned = triton.autotune(configs=[triton.Config({"BLOCK": 1024})], key=["n"])(add_kernel)
with_heuristics = triton.heuristics({"BLOCK": lambda args: 1024})(add_kernel)


def _no_op_run(*args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
    return None


if not GPU:  # host time only: the interpreter's own run would dwarf the launch path
    for _k in (add_kernel, add_one, add_one_out):
        _k.run = _no_op_run


def sync() -> None:
    if GPU:
        torch.cuda.synchronize()


def samples_side_by_side(
    cases: dict[str, Callable[[], Any]], n: int, rounds: int = 9, each: bool = False, host: bool = False
) -> dict[str, list[float]]:
    """Per round, the mean seconds per call of every case; the cases interleaved in every round, in
    reverse order every other round (so no case always follows the same one).

    ``each``: synchronise after every call (the host's time counts in full), else once per round.
    ``host``: synchronise after every call but time the calls alone (each starts on an idle device).
    """
    for fn in cases.values():
        for _ in range(max(n // 10, 2)):
            fn()
    sync()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    order = list(cases.items())
    for _ in range(rounds):
        for name, fn in order:
            if host:
                spent = 0.0
                for _ in range(n):
                    t0 = time.perf_counter()
                    fn()
                    spent += time.perf_counter() - t0
                    sync()
                samples[name].append(spent / n)
                continue
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
                if each:
                    sync()
            sync()
            samples[name].append((time.perf_counter() - t0) / n)
        order.reverse()
    return samples


def side_by_side(
    cases: dict[str, Callable[[], Any]], n: int, rounds: int = 9, each: bool = False, host: bool = False
) -> dict[str, float]:
    """Median over rounds of the mean seconds per call (``samples_side_by_side``)."""
    samples = samples_side_by_side(cases, n, rounds, each, host)
    return {name: statistics.median(s) for name, s in samples.items()}


def paired_ratio(a: list[float], b: list[float]) -> float:
    """Median over rounds of b / a, each round's two figures measured in that round."""
    return statistics.median(y / x for x, y in zip(a, b))


def ratio_quartiles(a: list[float], b: list[float]) -> str:
    """The first and third quartiles of the rounds' b / a, as ``[q1, q3]``."""
    q = statistics.quantiles([y / x for x, y in zip(a, b)], n=4)
    return f"[{q[0]:.3f}, {q[2]:.3f}]"


def _per_round(
    samples: dict[str, list[float]], launches: int, of: Callable[[dict[str, float]], float]
) -> float:
    """Median over rounds of ``of(round's figures)`` in us per launch (all cases measured in each round)."""
    rounds = len(next(iter(samples.values())))
    return (
        statistics.median(of({k: v[i] for k, v in samples.items()}) for i in range(rounds)) / launches * 1e6
    )


def profile(label: str, fn: Callable[[], Any], calls: int, top: int = 15) -> None:
    if not PROFILE:
        return
    print(f"  cProfile, {label} ({calls} calls), top {top} by own time:")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def python_wrap(kernel: Any, _new: Any = object.__new__, _cls: Any = ft.kernel._PyLauncher) -> Any:
    """``wrap_triton``'s Python path (a machine without a C compiler: Note [the native launch path]):
    its cache lookup and one object (of the base class: no ``TritonKernel`` is made that way)."""
    hit = _infos[kernel_key(kernel)]
    wrapper = _new(_cls)
    wrapper.kernel = kernel
    wrapper.info = hit[1]
    return wrapper


def eager_launches() -> None:
    dev = "cuda" if GPU else "cpu"
    x, y, out = (torch.ones(4096, device=dev) for _ in range(3))
    n = 2000 if GPU else 20000
    w = ft.wrap_triton(add_kernel)
    wt = ft.wrap_triton
    raw_bound, ft_bound = add_kernel[(4,)], w[(4,)]
    pairs: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        (
            "wrap_triton(k)[grid](...) per call",
            lambda: add_kernel[(4,)](x, y, out, 4096, BLOCK=1024),
            lambda: wt(add_kernel)[(4,)](x, y, out, 4096, BLOCK=1024),
        ),
        (
            "the same, Python path (no C compiler)",
            lambda: add_kernel[(4,)](x, y, out, 4096, BLOCK=1024),
            lambda: python_wrap(add_kernel)[(4,)](x, y, out, 4096, BLOCK=1024),
        ),
        (
            "w[grid](...) wrapper kept",
            lambda: add_kernel[(4,)](x, y, out, 4096, BLOCK=1024),
            lambda: w[(4,)](x, y, out, 4096, BLOCK=1024),
        ),
        (
            "w[grid] kept, called",
            lambda: raw_bound(x, y, out, 4096, BLOCK=1024),
            lambda: ft_bound(x, y, out, 4096, BLOCK=1024),
        ),
        (
            "wrap_triton(k).run(..., grid=)",
            lambda: add_kernel.run(x, y, out, 4096, BLOCK=1024, grid=(4,), warmup=False),
            lambda: wt(add_kernel).run(x, y, out, 4096, BLOCK=1024, grid=(4,), warmup=False),
        ),
        (
            "autotuned, per call",
            lambda: autotuned[(4,)](x, y, out, 4096),
            lambda: wt(autotuned)[(4,)](x, y, out, 4096),
        ),
        (
            "heuristics, per call",
            lambda: with_heuristics[(4,)](x, y, out, 4096),
            lambda: wt(with_heuristics)[(4,)](x, y, out, 4096),
        ),
    ]
    cases: dict[str, Callable[[], Any]] = {}
    for name, raw, wrapped in pairs:
        cases["raw " + name] = raw
        cases["ft " + name] = wrapped
    if GPU:
        cases["torch.library.wrap_triton(k)[grid](...)"] = lambda: torch.library.wrap_triton(add_kernel)[
            (4,)
        ](x, y, out, 4096, BLOCK=1024)
    samples = samples_side_by_side(cases, n, rounds=15)
    t = {name: statistics.median(s) for name, s in samples.items()}
    what = "us per launch (queued)" if GPU else "host us per launch, kernels' run a no-op"
    print(
        f"eager launch ({what}, medians of 15 rounds): raw, ft, ft - raw, ft / raw (median of the rounds'"
        " ratios [quartiles])"
    )
    for name, _, _ in pairs:
        t_raw, t_ft = t["raw " + name], t["ft " + name]
        ratio = paired_ratio(samples["raw " + name], samples["ft " + name])
        diff = (t_ft - t_raw) * 1e6
        quartiles = ratio_quartiles(samples["raw " + name], samples["ft " + name])
        print(f"  {name:38s} {t_raw * 1e6:7.2f} {t_ft * 1e6:7.2f} {diff:+7.2f}  {ratio:6.3f}x {quartiles}")
    if GPU:
        raw_name = "raw wrap_triton(k)[grid](...) per call"
        t_raw = t[raw_name]
        t_torch = t["torch.library.wrap_triton(k)[grid](...)"]
        ratio = paired_ratio(samples[raw_name], samples["torch.library.wrap_triton(k)[grid](...)"])
        print(
            f"  {'torch.library.wrap_triton(k)[grid](...)':38s} {t_raw * 1e6:7.2f} {t_torch * 1e6:7.2f} "
            f"{(t_torch - t_raw) * 1e6:+7.2f}  {ratio:6.3f}x"
        )
    else:
        print("  torch.library.wrap_triton: returns the raw kernel under the interpreter (GPU only)")
    profile("ft wrap_triton(k)[grid](...) per call", pairs[0][2], 20000)


def nop(gm: torch.fx.GraphModule, _: Any) -> Any:
    return make_boxed_func(gm.forward)


def same_runner(gm: torch.fx.GraphModule, _: Any) -> Any:
    """The graphs without launches run as ``reinplace_compiler`` runs its graphs (inputs freed at last
    use, aten operators called directly: Note [direct operator calls]), so that ``net`` compares the
    launches alone."""
    from functional_triton.passes.boxed import boxed_freeing_inputs

    return boxed_freeing_inputs(gm)


def _chain(launches: int, wrap: Callable[[Any], Any] | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """``wrap=None``: the same program without its launches (its other ops alone)."""

    def f(x: torch.Tensor) -> torch.Tensor:
        for _ in range(launches):
            out = torch.empty_like(x)
            if wrap is not None:
                wrap(add_one_out)[(1,)](x, out, x.numel(), BLOCK=64)
            x = out
        return x

    return f


def _chain_aten(launches: int) -> Callable[[torch.Tensor], torch.Tensor]:
    def f(x: torch.Tensor) -> torch.Tensor:
        for _ in range(launches):
            out = torch.empty_like(x)
            out.copy_(x)  # one aten op in place of each launch
            x = out
        return x

    return f


def _in_place(launches: int, wrap: Callable[[Any], Any] | None) -> Callable[[torch.Tensor], torch.Tensor]:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x + 0  # an intermediate: every launch on it is reinplaced
        if wrap is not None:
            for _ in range(launches):
                wrap(add_one)[(1,)](y, y.numel(), BLOCK=64)
        return y

    return f


def replayed_graphs() -> None:
    dev = "cuda" if GPU else "cpu"
    x = torch.zeros(64, device=dev)
    print(
        "replayed graphs (us per call; aot_function, inference; "
        + ("GPU)" if GPU else "CPU host, kernels' run a no-op)")
    )
    print("  launches  program              raw    ft+rp  aot-empty  aot-aten   excess/launch     net/launch")
    print(f"  {'':32s}(synchronised){'':23s}sync  queued   sync  queued    host")
    print("  (synchronised: waits for the device after every call; queued: calls back to back, one wait")
    print("   per round, so with these tiny kernels the time is the host's; aot-aten: empty_like + copy_")
    print("   per launch; excess = (ft+rp - raw - aot-empty) / launches; net: the other ops removed on")
    print("   both sides, ((ft+rp - aot-rest) - (raw - rest)) / launches, rest = the program without its")
    print("   launches, eager and as an aot_function graph; the aot- graphs run as reinplace_compiler runs")
    print("   its graphs, without its passes; host: the calls' own time, synchronised after each call but")
    print("   not timing the wait, so each call starts on an idle device: issue 16's host time per call;")
    print("   raw .. aot-aten: medians over rounds; excess and net: the median of the rounds' own values)")
    if not GPU:
        print("  (CPU host: nothing runs on a device, so the queued columns repeat the synchronised ones)")

    def compiled(f: Callable[..., Any], compiler: Any) -> Callable[[], Any]:
        g = aot_function(f, fw_compiler=compiler, keep_inference_input_mutations=True)
        g(x)
        return lambda: g(x)

    def eager(f: Callable[[torch.Tensor], Any]) -> Callable[[], Any]:
        return lambda: f(x)

    empty = compiled(lambda t: t, same_runner)
    for launches in (1, 10, 100):
        for label, make in (("out (empty_like)", _chain), ("in place", _in_place)):
            cases = {
                "raw": eager(make(launches, lambda k: k)),
                "ft+rp": compiled(make(launches, ft.wrap_triton), ft.reinplace_compiler),
                "aot-empty": empty,
                "aot-aten": compiled(_chain_aten(launches), same_runner),
                "rest": eager(make(launches, None)),
                "aot-rest": compiled(make(launches, None), same_runner),
            }
            n, rounds = ((300 if launches < 100 else 100), 15) if GPU else (max(3000 // launches, 20), 9)
            synced = samples_side_by_side(cases, n, rounds, each=True)
            queued = samples_side_by_side(cases, n, rounds) if GPU else synced  # nothing to queue on a CPU
            hosted = samples_side_by_side(cases, n, rounds, host=True) if GPU else synced
            # excess and net per round, from that round's figures, then the median over rounds
            excess = [
                _per_round(t, launches, lambda r: r["ft+rp"] - r["raw"] - r["aot-empty"])
                for t in (synced, queued, hosted)
            ]
            net = [
                _per_round(t, launches, lambda r: (r["ft+rp"] - r["aot-rest"]) - (r["raw"] - r["rest"]))
                for t in (synced, queued, hosted)
            ]
            cols = " ".join(
                f"{statistics.median(synced[c]) * 1e6:8.1f}"
                for c in ("raw", "ft+rp", "aot-empty", "aot-aten")
            )
            print(
                f"  {launches:8d}  {label:16s} {cols}  {excess[0]:7.2f} {excess[1]:7.2f}"
                f"  {net[0]:6.2f} {net[1]:7.2f} {net[2]:7.2f}"
            )
            if launches == 100 and label == "in place":
                profile("ft+rp, 100 in-place launches", cases["ft+rp"], 50)


def _captured_runner(rewrite: Callable[[torch.fx.GraphModule], None] | None, into: list[Any]) -> Any:
    """An AOTAutograd compiler running the graph as ``reinplace_compiler`` does (without its
    passes where ``rewrite`` is None), keeping the module that runs in ``into``."""
    from functional_triton.passes.boxed import boxed_freeing_inputs

    def keep(runs: torch.fx.GraphModule) -> None:
        if rewrite is not None:
            rewrite(runs)
        into.append(runs)

    return lambda gm, _: boxed_freeing_inputs(gm, rewrite=keep)


def _rest_then_raw_launch(in_place: bool) -> Any:
    """An AOTAutograd compiler running the program without its launch as ``same_runner`` does, then
    the raw launch the program makes (``k[grid](...)``) inside AOTAutograd's wrapper: the reference
    for a reinplaced graph's launch that keeps the wrapper's and the launch's own host time."""

    def compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        inner = same_runner(gm, example_inputs)

        def run(args: list[Any]) -> Any:
            x = args[0]
            out = inner(args)
            if in_place:
                add_one[(1,)](out[0], out[0].numel(), BLOCK=64)
            else:
                add_one_out[(1,)](x, out[0], x.numel(), BLOCK=64)
            return out

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    return compiler


def _boxed_call(forward: Callable[[list[Any]], Any], x: torch.Tensor) -> Any:
    return forward([x])  # a new list per call: the runner clears it


def one_launch() -> None:
    """The one-launch rows of ``replayed_graphs``, repeated, with the eager ft program beside them,
    and their pieces: each graph run without AOTAutograd's runtime wrapper, and the launch site
    against the raw ``k.run`` on the same tensors."""
    from functional_triton.passes.reinplace import _runnable

    dev = "cuda" if GPU else "cpu"
    x = torch.zeros(64, device=dev)

    def then_20us(f: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            result = f()
            end = time.perf_counter() + 20e-6
            while time.perf_counter() < end:
                pass
            return result

        return run

    def net(t: dict[str, float], suffix: str) -> float:
        ft_rp, aot_rest = t["ft+rp" + suffix], t["aot-rest" + suffix]
        return ((ft_rp - aot_rest) - (t["raw" + suffix] - t["rest" + suffix])) * 1e6

    print(
        "one launch (us per call; net as in the replayed graphs; +20us: 20 us of host work after a call;"
        " graph net: the same with the graphs run without AOTAutograd's wrapper; aot-rest+raw: the"
        " program without its launch as an aot_function graph, then its raw launch inside AOTAutograd's"
        " wrapper; site - k.run: the launch site against the raw k.run on the same tensors)"
    )
    for label, make in (("in place", _in_place), ("out (empty_like)", _chain)):
        ft_runs: list[Any] = []
        rest_runs: list[Any] = []
        compiled = functools.partial(
            aot_function(
                make(1, ft.wrap_triton),
                fw_compiler=functools.partial(
                    ft.reinplace_compiler, inner=_captured_runner(_runnable, ft_runs)
                ),
                keep_inference_input_mutations=True,
            ),
            x,
        )
        rest = aot_function(
            make(1, None), fw_compiler=_captured_runner(None, rest_runs), keep_inference_input_mutations=True
        )
        rest_launch = aot_function(
            make(1, None),
            fw_compiler=_rest_then_raw_launch(make is _in_place),
            keep_inference_input_mutations=True,
        )
        compiled(), rest(x), rest_launch(x)
        site = getattr(ft_runs[0], "_ft_launch_site_0")  # noqa: B009 (set by bind_launch_sites)
        kernel = site.kernel
        tensors = (x + 0,) if make is _in_place else (x, torch.empty_like(x))
        args = [*tensors, x.numel()]
        cases: dict[str, Callable[[], Any]] = {
            "raw": functools.partial(make(1, lambda k: k), x),
            "ft eager": functools.partial(make(1, ft.wrap_triton), x),
            "ft+rp": compiled,
            "rest": functools.partial(make(1, None), x),
            "aot-rest": functools.partial(rest, x),
            "aot-rest+raw": functools.partial(rest_launch, x),
        }
        cases.update({name + " +20us": then_20us(fn) for name, fn in list(cases.items())})
        cases["ft+rp graph"] = functools.partial(_boxed_call, ft_runs[0].forward, x)
        cases["aot-rest graph"] = functools.partial(_boxed_call, rest_runs[0].forward, x)
        cases["site"] = functools.partial(site.launch, *tensors)
        cases["k.run"] = functools.partial(kernel.run, *args, grid=(1,), warmup=False, BLOCK=64)
        modes = (("synchronised", True, False), ("queued", False, False), ("host", False, True))
        for mode, each, host in modes if GPU else modes[:1]:
            for _ in range(3):
                t = side_by_side(cases, 1000 if GPU else 200, each=each, host=host)
                graph_net = ((t["ft+rp graph"] - t["aot-rest graph"]) - (t["raw"] - t["rest"])) * 1e6
                print(
                    f"  {label:16s} {mode:12s} net {net(t, ''):6.2f}  +20us net {net(t, ' +20us'):6.2f}"
                    f"  graph net {graph_net:6.2f}  ft+rp - aot-rest+raw"
                    f" {(t['ft+rp'] - t['aot-rest+raw']) * 1e6:5.2f}"
                    f"  site - k.run {(t['site'] - t['k.run']) * 1e6:5.2f}"
                    f"  ft eager - raw {(t['ft eager'] - t['raw']) * 1e6:5.2f}   "
                    + " ".join(f"{k}={v * 1e6:.1f}" for k, v in t.items() if not k.endswith("us"))
                )


def _stamped(compiler: Any, stamps: list[int]) -> Any:
    """``compiler``, its boxed graph function stamping ``perf_counter_ns`` on entry and exit."""

    def outer(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        run = compiler(gm, example_inputs)

        def timed(args: list[Any]) -> Any:
            stamps.append(time.perf_counter_ns())
            result = run(args)
            stamps.append(time.perf_counter_ns())
            return result

        timed._boxed_call = True  # type: ignore[attr-defined]
        return timed

    return outer


def wrapper_split() -> None:
    """The one-launch graphs' host time (synchronised before each call, the wait not timed) split
    at the graph's edges: AOTAutograd's runtime wrapper before the graph, the graph, the wrapper
    after it; for the reinplaced graph, the launch-free graph and the launch-free graph with the
    raw launch inside (``--one``'s ft+rp, aot-rest, aot-rest+raw), with the eager programs beside."""
    from functional_triton.passes.reinplace import _runnable

    dev = "cuda" if GPU else "cpu"
    x = torch.zeros(64, device=dev)
    ns = time.perf_counter_ns
    stamps: list[int] = []
    print(
        "one launch, host time split at the graph's edges (us; synchronised before each call, the wait"
        " not timed; medians over 15 rounds of each round's median of 300 calls): pre = AOTAutograd's"
        " wrapper before the graph, post = after it"
    )
    for label, make in (("in place", _in_place), ("out (empty_like)", _chain)):
        graphs = {
            "ft+rp": aot_function(
                make(1, ft.wrap_triton),
                fw_compiler=_stamped(
                    functools.partial(ft.reinplace_compiler, inner=_captured_runner(_runnable, [])), stamps
                ),
                keep_inference_input_mutations=True,
            ),
            "aot-rest": aot_function(
                make(1, None), fw_compiler=_stamped(same_runner, stamps), keep_inference_input_mutations=True
            ),
            "aot-rest+raw": aot_function(
                make(1, None),
                fw_compiler=_stamped(_rest_then_raw_launch(make is _in_place), stamps),
                keep_inference_input_mutations=True,
            ),
        }
        eager = {"raw": make(1, lambda k: k), "rest": make(1, None)}
        for f in [*graphs.values(), *eager.values()]:
            for _ in range(20):
                f(x)
        parts: dict[str, list[tuple[float, float, float]]] = {name: [] for name in graphs}
        whole: dict[str, list[float]] = {name: [] for name in eager}
        for rnd in range(15):
            order = list(graphs.items())
            for name, f in order[::-1] if rnd % 2 else order:
                pre, mid, post = [], [], []
                for _ in range(300):
                    sync()
                    stamps.clear()
                    t0 = ns()
                    f(x)
                    t3 = ns()
                    t1, t2 = stamps
                    pre.append(t1 - t0)
                    mid.append(t2 - t1)
                    post.append(t3 - t2)
                parts[name].append((statistics.median(pre), statistics.median(mid), statistics.median(post)))
            for name, f in eager.items():
                times = []
                for _ in range(300):
                    sync()
                    t0 = ns()
                    f(x)
                    times.append(ns() - t0)
                whole[name].append(statistics.median(times))
        print(f"  {label}")
        for name, rows in parts.items():
            pre_us, mid_us, post_us = (statistics.median(r[i] for r in rows) / 1e3 for i in range(3))
            print(
                f"    {name:14s} pre {pre_us:6.2f}  graph {mid_us:6.2f}  post {post_us:6.2f}"
                f"  total {pre_us + mid_us + post_us:6.2f}"
            )
        print("    eager " + "  ".join(f"{n} {statistics.median(v) / 1e3:6.2f}" for n, v in whole.items()))


def tracing_cost(counts: tuple[int, ...]) -> None:
    dev = "cuda" if GPU else "cpu"

    def prog(launches: int, wrap: Callable[[Any], Any]) -> Callable[..., Any]:
        def f(x: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
            for _ in range(launches):
                out = torch.empty_like(x)
                wrap(add_kernel)[(1,)](x, zero, out, x.numel(), BLOCK=64)
                x = out
            return x

        return f

    # PyTorch's own path traces only compiled kernels (it returns the raw kernel under the interpreter).
    paths: dict[str, Callable[[Any], Any]] = {"ft": ft.wrap_triton}
    if GPU:
        paths["torch.library.wrap_triton"] = torch.library.wrap_triton
    print("tracing (aot_function compile, first call, excluding the graph's run), side by side:")
    x, zero = torch.ones(64, device=dev), torch.zeros(64, device=dev)
    for wrap in paths.values():
        aot_function(prog(1, wrap), fw_compiler=nop)(x, zero)  # warm the caches for this specialization
    for launches in counts:
        per_launch = {}
        for label, wrap in paths.items():
            compiled = aot_function(prog(launches, wrap), fw_compiler=nop)
            t0 = time.perf_counter()
            compiled(x, zero)  # compiles, then runs
            total = time.perf_counter() - t0
            t1 = time.perf_counter()
            compiled(x, zero)
            trace = total - (time.perf_counter() - t1)
            per_launch[label] = trace / launches
            print(
                f"  {launches:5d} launches, {label:26s}: {trace * 1e3:9.1f} ms "
                f"({trace / launches * 1e3:6.2f} ms per launch)"
            )
        if len(per_launch) > 1:
            ratio = per_launch["ft"] / per_launch["torch.library.wrap_triton"]
            print(f"  {launches:5d} launches, ft / PyTorch's path: {ratio:.2f}x")
    if PROFILE:
        compiled = aot_function(prog(100, ft.wrap_triton), fw_compiler=nop)
        profile("aot_function tracing of 100 launches", lambda: compiled(x, zero), 1, top=25)


def eager_pieces() -> None:
    """``timeit`` (best of 7) of the eager launch's pieces, every kernel's ``run`` a no-op."""
    import timeit

    from functional_triton import kernel as launch_path

    dev = "cuda" if GPU else "cpu"
    x, y, out = (torch.ones(4096, device=dev) for _ in range(3))
    grid = (4,)
    args: tuple[Any, ...] = (x, y, out, 4096)
    w = ft.wrap_triton(add_kernel)
    bound, raw_bound = w[grid], add_kernel[grid]
    assert isinstance(bound, launch_path._BoundLaunch)
    native = "native" if launch_path.NATIVE is not None else "Python (no C compiler here)"

    def probes() -> Any:
        return launch_path.dispatch_stack_len() or launch_path.functorch_interpreter()

    def argument_checks() -> None:  # the launch path's loop over the arguments (_BoundLaunch.__call__)
        for v in args:
            t = type(v)
            if t is int:
                continue
            if t is torch.Tensor and v.is_meta:
                break

    py_w = python_wrap(add_kernel)
    py_bound = py_w[grid]
    pieces: dict[str, Callable[[], Any]] = {
        "raw k[grid](...)": lambda: add_kernel[grid](x, y, out, 4096, BLOCK=1024),
        "ft wrap_triton(k)[grid](...)": lambda: ft.wrap_triton(add_kernel)[grid](x, y, out, 4096, BLOCK=1024),
        "the same, Python path": lambda: python_wrap(add_kernel)[grid](x, y, out, 4096, BLOCK=1024),
        "raw k[grid] kept, called": lambda: raw_bound(x, y, out, 4096, BLOCK=1024),
        "ft w[grid] kept, called": lambda: bound(x, y, out, 4096, BLOCK=1024),
        "the same, Python path ": lambda: py_bound(x, y, out, 4096, BLOCK=1024),
        "k.run(...) itself": lambda: add_kernel.run(x, y, out, 4096, BLOCK=1024, grid=grid, warmup=False),
        "ft w.run(...) kept, as k.run": lambda: w.run(x, y, out, 4096, BLOCK=1024, grid=grid, warmup=False),
        "ft wrap_triton(k).run(...), as k.run": lambda: ft.wrap_triton(add_kernel).run(
            x, y, out, 4096, BLOCK=1024, grid=grid, warmup=False
        ),
        "ft wrap_triton(k).run(..., grid=) first": lambda: ft.wrap_triton(add_kernel).run(
            x, y, out, 4096, grid=grid, BLOCK=1024
        ),
        "k.run(...), ints for the pointers": lambda: add_kernel.run(
            1, 2, 3, 4096, BLOCK=1024, grid=grid, warmup=False
        ),
        "ft w.run(...) kept, the same ints": lambda: w.run(
            1, 2, 3, 4096, BLOCK=1024, grid=grid, warmup=False
        ),
        "wrap_triton(k)": lambda: ft.wrap_triton(add_kernel),
        "kernel_key(k) (object.__hash__)": lambda: kernel_key(add_kernel),
        "id(k) (an audit event)": lambda: id(add_kernel),
        "w[grid]": lambda: w[grid],
        "k[grid]": lambda: add_kernel[grid],
        "the two mode probes": probes,
        "the loop over four arguments": argument_checks,
        "x.is_meta": lambda: x.is_meta,
        "an empty lambda (subtract)": lambda: None,
    }
    saved = add_kernel.__dict__.get("run")
    add_kernel.run = _no_op_run
    try:
        where = "GPU host" if GPU else "CPU host"
        print(f"eager launch pieces ({where}, {native} path, kernels' run a no-op; best of 7, ns):")
        for name, fn in pieces.items():
            best = min(timeit.repeat(fn, number=20000, repeat=7)) / 20000
            print(f"  {name:36s} {best * 1e9:8.1f}")
    finally:
        if saved is None:
            del add_kernel.run
        else:
            add_kernel.run = saved


def main() -> None:
    print(
        f"torch {torch.__version__}, triton {triton.__version__}, "
        f"{torch.cuda.get_device_name() if GPU else 'CPU host figures (interpreter, kernels a no-op)'}"
    )
    if PIECES:
        eager_pieces()
        return
    if ONE:
        one_launch()
        return
    if SPLIT:
        wrapper_split()
        return
    eager_launches()
    if EAGER:
        return
    replayed_graphs()
    tracing_cost((10, 100) if "--quick" in sys.argv else (10, 100, 1000))


if __name__ == "__main__":
    main()
