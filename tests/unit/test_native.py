"""The native launch path (``_launch.c``, Note [the native launch path]) against the Python one.

Where a C compiler and Python's headers are found, the native path must be the one in use; every
launch, malformed ones included, must end exactly as through the Python path (same tensors, or
the same exception type and message), under tracing modes too; no object it touches may gain or
lose a reference; and the Python path, which stays the fallback, passes the launch tests on its own.
"""

from __future__ import annotations

import copy
import functools
import gc
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any, Literal

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from torch.fx.experimental.proxy_tensor import make_fx

import functional_triton as ft
from functional_triton import _native
from functional_triton import kernel as launch_path
from functional_triton.launch_spec import kernel_info
from functional_triton.side_table import kernel_side_table
from tests import kernels as K
from tests.unit.test_fuzz_launches import DOCUMENTED, build, launches

NATIVE = launch_path.NATIVE
ROOT = Path(__file__).resolve().parents[2]
needs_native = pytest.mark.skipif(NATIVE is None, reason="the native launch path is not built here")
pytestmark = pytest.mark.filterwarnings("ignore::functional_triton.functionalize.AnalysisWarning")


def python_path(kernel: Any) -> Any:
    """The Python launch path's wrapper for ``kernel`` (what a machine without a compiler uses)."""
    wrapper = launch_path._PyLauncher()
    wrapper.kernel = kernel
    wrapper.info = kernel_info(kernel)
    return wrapper


def _can_build() -> bool:
    include = sysconfig.get_paths().get("include")
    return (
        _native.why_not() is None
        and _native._compiler() is not None
        and include is not None
        and os.path.exists(os.path.join(include, "Python.h"))
    )


def test_the_native_path_is_in_use_wherever_it_can_be_built() -> None:
    wrapper = ft.wrap_triton(K.add_kernel)
    if _can_build():
        assert NATIVE is not None, "a C compiler and Python.h are here, but _launch.c was not loaded"
        assert isinstance(wrapper, NATIVE.Launcher)
        assert type(wrapper[(1,)]) is NATIVE.Bound is launch_path._BoundLaunch
    else:
        assert NATIVE is None
        assert type(wrapper[(1,)]) is launch_path._PyBoundLaunch


def test_native_can_be_switched_off_and_a_failed_build_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_native.ENV_VAR, "0")
    assert _native.load() is None
    monkeypatch.delenv(_native.ENV_VAR)
    monkeypatch.setenv(_native.CACHE_ENV_VAR, str(tmp_path))
    monkeypatch.setenv("CC", "false")  # a compiler that always fails
    assert _native.load() is None
    assert not list(tmp_path.rglob("*.so")), "a failed build must leave no module behind"


@pytest.mark.skipif(not _can_build(), reason="no C compiler or Python.h here")
def test_native_builds_into_its_cache_directory_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_native.CACHE_ENV_VAR, str(tmp_path))
    module = _native.load()
    assert module is not None and hasattr(module, "Bound") and hasattr(module, "Launcher")
    (built,) = tmp_path.rglob("_ft_launch*")
    stamp = built.stat().st_mtime_ns
    assert _native.load() is not None
    assert built.stat().st_mtime_ns == stamp, "a second load must reuse the built module"


def _outcome(run: Any) -> tuple[str, Any]:
    try:
        run()
        return "ok", None
    except DOCUMENTED as e:
        return "error", (type(e), str(e), type(e.__cause__))
    except Exception as e:  # noqa: BLE001 - whatever triton raises, both paths alike
        return "other", (type(e), str(e))


@needs_native
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy overflow inside the interpreter
@given(
    launches(),
    st.booleans(),
    st.integers(min_value=0, max_value=3),
    st.sampled_from([None, False, 0, True]),
)
def test_every_launch_ends_as_through_the_python_path(
    launch: dict[str, Any], by_run: bool, at: int, warmup: Any
) -> None:
    """Malformed launches included (test_fuzz_launches.py's): same tensors, or the same error.
    ``.run`` takes grid= at any place among the keywords, and a ``warmup=`` or none."""
    results = []
    for wrap in (ft.wrap_triton, python_path):
        args, kwargs = build(launch)
        wrapper = wrap(K.add_kernel)
        if by_run:
            items = list(kwargs.items())
            items.insert(min(at, len(items)), ("grid", launch["grid"]))
            if warmup is not None:
                items.insert(min(at // 2, len(items)), ("warmup", warmup))
            call = functools.partial(wrapper.run, *args, **dict(items))
        else:
            call = functools.partial(wrapper[launch["grid"]], *args, **kwargs)
        results.append((_outcome(call), args))
    (native, native_args), (python, python_args) = results
    assert native == python
    for a, b in zip(native_args, python_args):
        if isinstance(a, torch.Tensor) and not a.is_meta:
            assert torch.equal(a, b)


@needs_native
@pytest.mark.parametrize("mode", ["real", "fake", "symbolic"])
def test_traced_launches_record_the_same_graph(mode: Literal["real", "fake", "symbolic"]) -> None:
    def program(wrap: Any) -> Any:
        def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            wrap(K.add_kernel)[(1,)](x, y, out, 8, BLOCK=8)
            wrap(K.add_one_inplace).run(out, 8, grid=(1,), BLOCK=8)
            return out

        return f

    def described(gm: torch.fx.GraphModule) -> str:
        """The graph's code with each side-table index pair replaced by what it holds."""

        def entry(m: re.Match[str]) -> str:
            kernel, grid_fn = kernel_side_table.get_kernel(int(m.group(1)))
            return f"{kernel!r}, {grid_fn!r}, {kernel_side_table.get_constants(int(m.group(2)))!r}"

        return re.sub(r"kernel_idx = (\d+), constant_args_idx = (\d+)", entry, gm.code)

    x, y = torch.randn(8), torch.randn(8)
    gms = [make_fx(program(wrap), tracing_mode=mode)(x, y) for wrap in (ft.wrap_triton, python_path)]
    graphs = [described(gm) for gm in gms]
    assert graphs[0] == graphs[1]
    assert graphs[0].count("higher_order.ft_triton_kernel_wrapper_mutation(") == 2


@needs_native
def test_under_functionalize_the_launch_is_traced_as_through_the_python_path() -> None:
    def f(wrap: Any, x: torch.Tensor) -> torch.Tensor:
        wrap(K.add_one_inplace)[(1,)](x, 8, BLOCK=8)
        return x * 2

    x = torch.randn(8)
    expected = x.clone()
    K.add_one_inplace[(1,)](expected, 8, BLOCK=8)
    for wrap in (ft.wrap_triton, python_path):
        a = x.clone()
        out = torch.func.functionalize(lambda t, wrap=wrap: f(wrap, t))(a)
        assert torch.equal(a, expected) and torch.equal(out, expected * 2)


@needs_native
@pytest.mark.parametrize("meta", [False, True])
def test_parameters_launch_and_meta_parameters_are_refused_as_through_the_python_path(meta: bool) -> None:
    """``is_meta`` is read through TensorBase's descriptor for Tensor and Parameter alike."""
    outcomes = []
    base = torch.empty(8, device="meta") if meta else torch.randn(8)
    for wrap in (ft.wrap_triton, python_path):
        x = torch.nn.Parameter(base.clone(), requires_grad=False)
        outcomes.append((_outcome(lambda x=x, wrap=wrap: wrap(K.add_one_inplace)[(1,)](x, 8, BLOCK=8)), x))
    (native, x_native), (python, x_python) = outcomes
    assert native == python
    assert native[0] == ("error" if meta else "ok")
    if not meta:
        assert torch.equal(x_native, x_python)


def _counts(objects: list[Any]) -> list[int]:
    return [sys.getrefcount(o) for o in objects]


@needs_native
def test_no_reference_is_gained_or_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Launches that succeed, take the general path, fail in the kernel, or go to Python's run."""
    x, y, out = torch.randn(8), torch.randn(8), torch.empty(8)
    meta = torch.empty(8, device="meta")
    n, block, grid = int("8"), int("8"), (int("1"),)
    wrapper = ft.wrap_triton(K.add_kernel)
    info = wrapper.info
    watched = [K.add_kernel, info, x, y, out, meta, n, block, grid, wrapper]

    def launches() -> None:
        wrapper[grid](x, y, out, n, BLOCK=block)  # common case
        wrapper.run(x, y, out, n, grid=grid, BLOCK=block)  # run, grid= first
        wrapper.run(x, y, out, n, BLOCK=block, grid=grid)  # run, grid= last
        wrapper.run(x, y, out, n, warmup=False, grid=grid, BLOCK=block)  # run, warmup=False
        wrapper.run(x, y, out, n, BLOCK=block, grid=grid, warmup=False)  # run as kernel.run is called
        wrapper.run(x, y, out, n, block, grid=grid, warmup=False)  # the same, no other keyword
        wrapper.run(x, y, out, n, grid=grid, BLOCK=block, warmup=0)  # Python's run
        wrapper[list(grid)](x, y, out, n, BLOCK=block)  # the general path
        for bad in (
            lambda: wrapper[grid](x, y, meta, n, BLOCK=block),  # refused: meta
            lambda: wrapper[grid](x, y, out, n, BLOCK=block, FOO=1),  # refused: unknown keyword
            lambda: wrapper[grid](x, y, out, BLOCK=block),  # the kernel fails: missing argument
            lambda: wrapper.run(x, y, out, n, BLOCK=block),  # no grid
            lambda: wrapper.run(x, y, meta, n, BLOCK=block, grid=grid, warmup=False),  # refused: meta
            lambda: wrapper.run(x, y, out, BLOCK=block, grid=grid, warmup=False),  # the kernel fails
        ):
            with pytest.raises((TypeError, ValueError)):
                bad()

    launches()
    gc.collect()
    before = _counts(watched)
    bounds = sum(type(o) is NATIVE.Bound for o in gc.get_objects())
    for _ in range(50):
        launches()
    gc.collect()
    assert _counts(watched) == before
    assert sum(type(o) is NATIVE.Bound for o in gc.get_objects()) == bounds


@needs_native
def test_a_kernel_error_reaches_the_caller_as_through_the_python_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = torch.randn(8)
    raised: list[BaseException] = []

    def failing_run(*args: Any, **kwargs: Any) -> None:
        error = raised[-1]
        raise error

    monkeypatch.setattr(K.add_one_inplace, "run", failing_run, raising=False)
    for wrap in (ft.wrap_triton, python_path):
        raised.append(RuntimeError("inside the kernel"))
        with pytest.raises(RuntimeError) as info:
            wrap(K.add_one_inplace)[(1,)](x, 8, BLOCK=8)
        assert info.value is raised[-1]
        # Not an Exception: never handed to the failure path, passed through as raised.
        raised.append(KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt) as stop:
            wrap(K.add_one_inplace)[(1,)](x, 8, BLOCK=8)
        assert stop.value is raised[-1]


@needs_native
def test_an_error_raised_while_handling_a_kernel_error_keeps_it_as_its_context() -> None:
    x = torch.randn(8)
    errors = []
    for wrap in (ft.wrap_triton, python_path):
        with pytest.raises(TypeError) as info:
            wrap(K.add_one_inplace)[(1,)](x, BLOCK=8)  # n missing: the kernel fails, then we name it
        errors.append((str(info.value), type(info.value.__cause__), type(info.value.__context__)))
    assert errors[0] == errors[1]
    assert errors[0][1] is not type(None)


def _python_probes() -> bool:
    return bool(launch_path.dispatch_stack_len()) or launch_path.functorch_interpreter() is not None


def _probed_states() -> list[tuple[str, bool, bool]]:
    """(state, what the launch reads, what torch's Python probes say) in states a launch meets."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    seen: list[tuple[str, bool, bool]] = []

    def note(state: str) -> None:
        seen.append((state, NATIVE.probes(), _python_probes()))

    def inside(state: str) -> Any:
        def fn(x: torch.Tensor) -> torch.Tensor:
            note(state)
            return x * 2

        return fn

    note("no mode")
    with Passthrough():
        note("a dispatch mode")
        with Passthrough():
            note("two dispatch modes")
    note("after the modes")
    with FakeTensorMode():
        note("FakeTensorMode")
    make_fx(inside("make_fx"))(torch.ones(3))
    make_fx(inside("make_fx, fake"), tracing_mode="fake")(torch.ones(3))
    torch.vmap(inside("vmap"))(torch.ones(2, 3))
    torch.func.grad(lambda x: inside("grad")(x).sum())(torch.ones(3))
    torch.func.functionalize(inside("functionalize"))(torch.ones(3))
    torch.vmap(torch.vmap(inside("vmap of vmap")))(torch.ones(2, 2, 3))
    with Passthrough():
        torch.vmap(inside("vmap under a dispatch mode"))(torch.ones(2, 3))
    note("after the transforms")
    return seen


@needs_native
def test_the_probes_read_in_libtorch_answer_as_torch_s_python_probes() -> None:
    """Note [probes read in libtorch]: in every state, on this thread and another."""
    if sys.platform.startswith("linux"):
        # torch's Linux wheels export both functions: a fallback here would be a silent regression
        assert launch_path.NATIVE_PROBES, "the probes are read through Python on Linux"
    seen = _probed_states()
    assert [(state, native) for state, native, _ in seen] == [(state, python) for state, _, python in seen]
    assert [state for state, native, _ in seen if native] == [
        "a dispatch mode",
        "two dispatch modes",
        "FakeTensorMode",
        "make_fx",
        "make_fx, fake",
        "vmap",
        "grad",
        "functionalize",
        "vmap of vmap",
        "vmap under a dispatch mode",
    ]
    import threading

    on_thread: list[list[tuple[str, bool, bool]]] = []
    thread = threading.Thread(target=lambda: on_thread.append(_probed_states()))
    thread.start()
    thread.join()
    assert on_thread == [seen]


@needs_native
def test_probes_that_answer_differently_are_not_used() -> None:
    assert _native.probes_agree(_python_probes, _python_probes)
    assert not _native.probes_agree(lambda: False, _python_probes)  # blind to modes
    assert not _native.probes_agree(lambda: True, _python_probes)  # always active
    assert not _native.probes_agree(lambda: launch_path.dispatch_stack_len() > 0, _python_probes)  # no vmap
    assert not _native.probes_agree(lambda: launch_path.functorch_interpreter() is not None, _python_probes)
    try:  # switched off, the module asks Python: the same answers
        NATIVE.set_probes(0, 0)
        assert [(s, n) for s, n, _ in _probed_states()] == [(s, p) for s, _, p in _probed_states()]
    finally:
        assert _native.install_probes(NATIVE, _python_probes) == launch_path.NATIVE_PROBES


@needs_native
def test_wrap_triton_is_the_c_function_with_the_python_one_s_doc_and_errors() -> None:
    import inspect
    import pickle

    assert ft.wrap_triton is not launch_path._py_wrap_triton
    assert str(inspect.signature(ft.wrap_triton)) == "(kernel)"
    assert ft.wrap_triton.__doc__ == inspect.cleandoc(launch_path._py_wrap_triton.__doc__ or "")
    assert pickle.loads(pickle.dumps(ft.wrap_triton)) is ft.wrap_triton
    wrapper = ft.wrap_triton(K.add_kernel)
    assert ft.wrap_triton(wrapper) is wrapper
    for bad in (lambda x: x, 3, None):
        with pytest.raises(TypeError) as native_error:
            ft.wrap_triton(bad)
        with pytest.raises(TypeError) as python_error:
            launch_path._py_wrap_triton(bad)
        assert str(native_error.value) == str(python_error.value)


def _fresh_kernel(i: int) -> Any:
    """A new kernel object each call, every third with another signature."""
    import triton
    import triton.language as tl

    if i % 3:

        def one(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

        return triton.jit(one)

    def two(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    return triton.jit(two)


def test_a_kernel_made_where_a_dead_one_was_gets_its_own_description() -> None:
    """wrap_triton's lookup by address (in C, a cache of recent hits; Note [kernel keys]): kernels
    made and dropped in a loop reuse addresses; each wrapper must describe its own kernel, and
    wrapping must not keep a kernel alive."""
    import weakref

    addresses: set[int] = set()
    reused = 0
    for i in range(400):  # at least 60 kernels, and on until five took a dead one's address
        if i >= 60 and reused >= 5:
            break
        kernel = _fresh_kernel(i)
        reused += object.__hash__(kernel) in addresses
        addresses.add(object.__hash__(kernel))
        wrapper = ft.wrap_triton(kernel)
        again = ft.wrap_triton(kernel)  # the hit
        assert wrapper.info is again.info
        assert wrapper.info.arg_names == tuple(kernel.arg_names)
        x = torch.arange(8.0)
        y, want_y = torch.zeros(8), torch.zeros(8)
        want_x = x.clone()
        if len(kernel.arg_names) == 3:
            again[(1,)](x, 8, BLOCK=8)
            kernel[(1,)](want_x, 8, BLOCK=8)
        else:
            again[(1,)](x, y, 8, BLOCK=8)
            kernel[(1,)](want_x, want_y, 8, BLOCK=8)
        assert torch.equal(x, want_x) and torch.equal(y, want_y)
        ref = weakref.ref(kernel)
        del kernel, wrapper, again
        gc.collect()
        assert ref() is None, "wrapping kept the kernel alive"
    assert reused, "no address was reused: the test proves nothing here"


def test_copies_of_a_wrapper_wrap_the_same_kernel() -> None:
    wrapper = ft.wrap_triton(K.add_kernel)
    copied = copy.copy(wrapper)
    assert type(copied) is type(wrapper) and copied.kernel is K.add_kernel and copied.info is wrapper.info
    x, y = torch.randn(8), torch.randn(8)
    out, expected = torch.empty(8), torch.empty(8)
    copied[(1,)](x, y, out, 8, BLOCK=8)
    K.add_kernel[(1,)](x, y, expected, 8, BLOCK=8)
    assert torch.equal(out, expected)


def test_the_python_path_alone_passes_the_launch_tests() -> None:
    """The fallback of a machine without a C compiler: the launch tests in a process without it."""
    env = {**os.environ, _native.ENV_VAR: "0", "PYTHONPATH": str(ROOT)}
    check = subprocess.run(
        [sys.executable, "-c", "import functional_triton.kernel as k; assert k.NATIVE is None"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
    tests = [
        "tests/unit/test_kernel.py",
        "tests/unit/test_fuzz_launches.py",
        "tests/unit/test_launch_crashes.py",
        "tests/unit/test_public_api.py",
        "tests/compile/test_dynamo.py",
    ]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", *tests],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
