"""The kernel side table: registration, sharing of equal entries, lifetime, TableIndex, threads."""

from __future__ import annotations

import copy
import gc
import pickle
import threading
from typing import Any

import pytest
import triton
import triton.language as tl

from functional_triton.side_table import KernelSideTable, TableIndex, kernel_side_table
from tests import kernels as K


@triton.jit
def side_table_add_one(x_ptr, n, BLOCK: tl.constexpr):
    """add_one_inplace, launched by no other test: the global table's counts below are this file's
    (Inductor keeps the entries of the launches it lowered for the life of the process)."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


@pytest.fixture
def table() -> KernelSideTable:
    """A private table, so other tests' entries do not change the counts."""
    return KernelSideTable()


def grid_fn(meta: dict[str, Any]) -> tuple[int]:
    return (1,)


def test_add_kernel_and_get(table: KernelSideTable) -> None:
    idx = table.add_kernel(K.add_kernel, None)
    assert isinstance(idx, TableIndex) and isinstance(idx, int)
    kernel, grid = table.get_kernel(idx)
    assert kernel is K.add_kernel and grid is None
    idx2 = table.add_kernel(K.add_one_inplace, grid_fn)
    assert int(idx2) != int(idx)
    kernel2, grid2 = table.get_kernel(idx2)
    assert kernel2 is K.add_one_inplace and grid2 is grid_fn
    # Lookup also works with the plain integer generated code sees.
    assert table.get_kernel(int(idx2))[0] is K.add_one_inplace
    assert len(table) == 2


def test_same_kernel_and_grid_share_an_index(table: KernelSideTable) -> None:
    a = table.add_kernel(K.add_kernel, grid_fn)
    b = table.add_kernel(K.add_kernel, grid_fn)
    c = table.add_kernel(K.add_kernel, None)
    d = table.add_kernel(K.two_writes, grid_fn)
    assert int(a) == int(b)
    assert len({int(a), int(c), int(d)}) == 3
    assert len(table) == 3


def test_add_constants_and_get(table: KernelSideTable) -> None:
    consts = {"n": 8, "BLOCK": 4, "scale": 0.5, "name": "x"}
    idx = table.add_constants(consts)
    got = table.get_constants(idx)
    assert got == consts
    assert [type(v) for v in got.values()] == [type(v) for v in consts.values()]
    consts["n"] = 99  # the table keeps its own copy
    assert table.get_constants(idx)["n"] == 8


def test_equal_constants_share_an_index(table: KernelSideTable) -> None:
    a = table.add_constants({"n": 8, "BLOCK": 4})
    b = table.add_constants({"BLOCK": 4, "n": 8})  # order does not matter
    c = table.add_constants({"n": 8, "BLOCK": 8})
    assert int(a) == int(b)
    assert int(a) != int(c)
    assert len(table) == 2


@pytest.mark.parametrize(
    "left, right",
    [(1, 1.0), (1, True), (1.0, True), (0, False), (0, 0.0)],
    ids=["int-float", "int-bool", "float-bool", "zero-false", "zero-zerofloat"],
)
def test_equal_values_of_distinct_types_do_not_share(table: KernelSideTable, left: Any, right: Any) -> None:
    a = table.add_constants({"v": left})
    b = table.add_constants({"v": right})
    assert int(a) != int(b)
    assert type(table.get_constants(a)["v"]) is type(left)
    assert type(table.get_constants(b)["v"]) is type(right)


def test_unhashable_constants_are_stored(table: KernelSideTable) -> None:
    value = [1, 2]
    idx = table.add_constants({"lst": value})
    assert table.get_constants(idx) == {"lst": [1, 2]}


def test_entries_disappear_when_unreferenced(table: KernelSideTable) -> None:
    idx = table.add_constants({"n": 123})
    kidx = table.add_kernel(K.add_kernel, grid_fn)
    raw, kraw = int(idx), int(kidx)
    assert len(table) == 2
    del idx
    gc.collect()
    assert len(table) == 1
    with pytest.raises(AssertionError, match="internal error"):
        table.get_constants(raw)
    del kidx
    gc.collect()
    assert len(table) == 0
    with pytest.raises(AssertionError, match="internal error"):
        table.get_kernel(kraw)


def test_entry_lives_while_any_index_refers_to_it(table: KernelSideTable) -> None:
    a = table.add_constants({"n": 5})
    b = table.add_constants({"n": 5})
    del a
    gc.collect()
    assert len(table) == 1
    assert table.get_constants(b) == {"n": 5}
    c = table.add_constants({"n": 5})
    assert int(c) == int(b)


def test_re_adding_after_collection_gets_a_working_entry(table: KernelSideTable) -> None:
    idx = table.add_constants({"n": 6})
    del idx
    gc.collect()
    again = table.add_constants({"n": 6})
    assert table.get_constants(again) == {"n": 6}
    assert len(table) == 1


def test_table_does_not_keep_kernel_alive_beyond_index(table: KernelSideTable) -> None:
    import weakref

    class Probe:
        pass

    probe = Probe()
    ref = weakref.ref(probe)
    idx = table.add_kernel(probe, None)
    del probe
    gc.collect()
    assert ref() is not None  # the index keeps the entry, which keeps the kernel
    del idx
    gc.collect()
    assert ref() is None


def test_table_index_copy_and_deepcopy_return_itself() -> None:
    idx = kernel_side_table.add_constants({"n": 42, "copy_test": True})
    assert copy.copy(idx) is idx
    assert copy.deepcopy(idx) is idx
    holder: dict[str, Any] = {"kernel_idx": idx, "nested": [idx]}
    deep = copy.deepcopy(holder)
    assert deep["kernel_idx"] is idx and deep["nested"][0] is idx


def test_table_index_pickles_as_plain_int() -> None:
    idx = kernel_side_table.add_constants({"n": 43, "pickle_test": True})
    restored = pickle.loads(pickle.dumps(idx))
    assert type(restored) is int
    assert restored == int(idx)


def test_table_index_repr_is_the_int() -> None:
    idx = kernel_side_table.add_constants({"n": 44, "repr_test": True})
    assert repr(idx) == repr(int(idx))
    assert str(idx) == str(int(idx))
    assert f"kernel_idx = {idx!r}" == f"kernel_idx = {int(idx)}"


def test_threads_adding_concurrently(table: KernelSideTable) -> None:
    n_threads, per_thread = 8, 200
    errors: list[BaseException] = []
    results: list[list[tuple[int, int, TableIndex, TableIndex]]] = [[] for _ in range(n_threads)]
    barrier = threading.Barrier(n_threads)

    def work(t: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                shared = table.add_constants({"i": i})  # every thread adds the same dicts
                own = table.add_constants({"t": t, "i": i})  # and its own
                results[t].append((t, i, shared, own))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    flat = [r for rs in results for r in rs]
    assert len(flat) == n_threads * per_thread
    # Equal dicts got one index across threads; distinct dicts distinct indices.
    shared_by_i: dict[int, set[int]] = {}
    for _t, i, shared, _own in flat:
        shared_by_i.setdefault(i, set()).add(int(shared))
    assert all(len(s) == 1 for s in shared_by_i.values())
    own_indices = {int(own) for *_, own in flat}
    assert len(own_indices) == n_threads * per_thread
    assert not own_indices & {next(iter(s)) for s in shared_by_i.values()}
    assert len(table) == per_thread + n_threads * per_thread
    for t, i, shared, own in flat:
        assert table.get_constants(shared) == {"i": i}
        assert table.get_constants(own) == {"t": t, "i": i}
    results.clear()
    del flat, t, i, shared, own, _t, _own
    gc.collect()
    assert len(table) == 0


# --- through tracing -------------------------------------------------------------------------------


def _traced_inplace() -> Any:
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    import functional_triton as ft

    def prog(x: Any) -> Any:
        ft.wrap_triton(side_table_add_one)[(1,)](x, 6, BLOCK=8)
        return x

    return make_fx(prog)(torch.zeros(8))


def test_repeated_traces_share_entries_and_graphs_keep_them_alive() -> None:
    import torch

    import functional_triton as ft

    gc.collect()
    before = len(kernel_side_table)
    gm1 = _traced_inplace()
    after_one = len(kernel_side_table)
    assert after_one == before + 2  # one kernel entry, one constants entry
    gm2 = _traced_inplace()
    assert len(kernel_side_table) == after_one
    (n1,) = [n for n in gm1.graph.nodes if n.target is ft.triton_kernel_wrapper_mutation]
    (n2,) = [n for n in gm2.graph.nodes if n.target is ft.triton_kernel_wrapper_mutation]
    assert int(n1.kwargs["kernel_idx"]) == int(n2.kwargs["kernel_idx"])
    assert int(n1.kwargs["constant_args_idx"]) == int(n2.kwargs["constant_args_idx"])
    del gm1, n1
    gc.collect()
    # gm2 still refers to both entries: it still runs, like the raw kernel.
    x, x_raw = torch.arange(8.0), torch.arange(8.0)
    gm2(x)
    side_table_add_one[(1,)](x_raw, 6, BLOCK=8)
    torch.testing.assert_close(x, x_raw, rtol=0, atol=0)
    assert len(kernel_side_table) == after_one
    del gm2, n2
    gc.collect()
    assert len(kernel_side_table) == before


def test_entry_freed_by_a_collection_inside_add_does_not_deadlock() -> None:
    """An entry whose last holder is cyclic garbage dies in whatever allocation triggers a
    collection, possibly one inside ``_add``, which holds the table's lock; the entry's
    weakref callback then takes that lock again on the same thread."""
    table = KernelSideTable()

    def work() -> None:
        holder: list[Any] = [table.add_constants({"only": "garbage"})]
        holder.append(holder)  # only the garbage collector frees this entry
        del holder
        with table._lock:  # as inside _add
            gc.collect()

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "the side table deadlocked in its own weakref callback"
    assert len(table) == 0
