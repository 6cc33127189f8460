"""The executors' input cache (issue 29; docs/architecture.md, "Input
cache"): a task that does not change its inputs (every Dask node) may be
handed a value its executor kept, unpickled, from an earlier task, instead
of a copy; the governor decides what is kept, forgets it when the object
leaves its store, and bounds it. Observed from inside the tasks: whether a
task got the very object an earlier one did, and how many values the
executor keeps (its `cached_inputs()`)."""
import os
import signal

import pytest

import squall
import squall.dask as sd
from conftest import TIMEOUT, clean_exit, cluster_options, until

dask = pytest.importorskip("dask")
np = pytest.importorskip("numpy")


def make(n, value):
    import numpy
    return numpy.full(n, float(value))


def seen(a, *_):
    """(whether an earlier task of this executor got this very object, the
    values the executor keeps, the array's sum). Keeps the object for the
    next one to compare."""
    import builtins
    import _squall_executor
    held = builtins.__dict__.setdefault("_squall_test_seen", [])
    again = any(x is a for x in held)
    held.append(a)
    return again, _squall_executor.cached_inputs(), float(a.sum())


def forget_seen():
    import builtins
    builtins.__dict__.pop("_squall_test_seen", None)
    return os.getpid()


def count(a, *_):
    import _squall_executor
    return _squall_executor.cached_inputs(), float(a.sum())


def kept():
    import _squall_executor
    return _squall_executor.cached_inputs()


def bump(a):
    """Changes its input in place: only right for a task that was given a
    copy."""
    a += 1
    return float(a.sum())


def die_once(path, *_):
    if not os.path.exists(path):
        open(path, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return os.getpid()


def pid(*_):
    return os.getpid()


@pytest.fixture
def one():
    c = squall.LocalCluster(governors=1, cpus=1, **cluster_options())
    with c:
        yield c.client()
    clean_exit(c)


@pytest.fixture
def sharing():
    before = sd.SHARE_INPUTS, sd.BUNDLES
    yield
    sd.SHARE_INPUTS, sd.BUNDLES = before


N = 20000                               # 160 KB: copied, not a segment


def _readers(n_readers, size=N):
    graph = {"a": (make, size, 2.0)}
    for i in range(n_readers):
        graph["r%d" % i] = (seen, "a", i)
    return graph, ["r%d" % i for i in range(n_readers)]


def test_a_block_read_by_many_tasks_is_unpickled_once_and_forgotten_with_its_object(
        one, sharing):
    client = one
    graph, keys = _readers(8)
    got = client.get(graph, keys)
    assert [s for _, _, s in got] == [2.0 * N] * 8
    #   One executor: the readers were given the object one of the first
    #   two was (the first may have taken it straight from the task that
    #   made it, a chain: then the second's is the one kept).
    assert sum(again for again, _, _ in got) >= 6, got
    assert all(again and n >= 1 for again, n, _ in got[2:]), got
    client.submit(forget_seen).result(timeout=TIMEOUT)
    #   client.get let go of "a": the store freed it, the executor forgets it.
    until(lambda: client.submit(kept).result(timeout=TIMEOUT) == 0,
          "the executor to forget the freed object's value")


def test_without_sharing_every_task_gets_a_copy(one, sharing):
    client = one
    sd.SHARE_INPUTS = False
    graph, keys = _readers(5)
    got = client.get(graph, keys)
    assert [(again, n, s) for again, n, s in got] == [(False, 0, 2.0 * N)] * 5
    client.submit(forget_seen).result(timeout=TIMEOUT)
    #   So a task may change its input: the others do not see it.
    graph = {"a": (make, N, 1.0), "b0": (bump, "a"), "b1": (bump, "a"), "b2": (bump, "a")}
    assert list(client.get(graph, ["b0", "b1", "b2"])) == [2.0 * N] * 3


def test_results_are_equal_with_and_without_the_cache(one, sharing):
    import dask.array as da
    client = one
    x = da.random.RandomState(5).random_sample((600, 600), chunks=(100, 100))
    y = (x @ x.T).sum() + (x + x.T).mean()
    want = dask.compute(y, scheduler="threads")[0]
    for share in (True, False, True):
        sd.SHARE_INPUTS = share
        assert np.isclose(dask.compute(y, scheduler=client.get)[0], want), share


def test_the_cache_is_bounded(one, sharing):
    client = one
    sd.BUNDLES = False                  # else each a%d and its readers are one task
    size = 75000                        # 600 KB pickles: 53 fit in 32 MiB
    graph = {}
    keys = []
    for i in range(120):
        graph["a%d" % i] = (make, size, i)
        for j in range(2):
            graph["r%d_%d" % (i, j)] = (count, "a%d" % i, j)
            keys.append("r%d_%d" % (i, j))
    got = client.get(graph, keys)
    assert [s for _, s in got] == [float(size * (k // 2)) for k in range(240)]
    most = max(n for n, _ in got)
    assert 1 <= most <= (32 << 20) // (size * 8), most
    until(lambda: client.submit(kept).result(timeout=TIMEOUT) == 0,
          "the executor to forget every freed object's value")


def test_a_killed_executor_takes_its_cache_with_it(one, sharing, tmp_path):
    client = one
    marker = str(tmp_path / "died")
    graph = {"a": (make, N, 3.0), "r0": (seen, "a", 0), "r1": (seen, "a", 1),
             "r2": (seen, "a", 2), "die": (die_once, marker, "a", "r0", "r1", "r2"),
             "r3": (seen, "a", "die"), "r4": (seen, "a", 4, "r3")}
    got = client.get(graph, ["r0", "r1", "r2", "die", "r3", "r4"], retries=2)
    assert os.path.exists(marker)
    (_, _, s0), _, (again2, _, s2), after, (_, _, s3), (again4, _, s4) = got
    assert (s0, s2, s3, s4) == (3.0 * N,) * 4
    assert again2
    #   The executor after the kill (its first reader unpickles a copy of
    #   its own: nothing of the dead one's cache is named) keeps it anew.
    assert again4
    assert after == client.submit(pid).result(timeout=TIMEOUT)


class Keeper:
    """An actor: asks its executor what it keeps."""

    def kept(self):
        import _squall_executor
        return _squall_executor.cached_inputs(), os.getpid()


def test_an_actor_executor_keeps_nothing_of_the_tasks_before(one, sharing):
    client = one
    a = client.submit(make, N, 4.0)            # alive: the executor keeps it
    graph = {"r%d" % i: (seen, a, i) for i in range(3)}
    assert [s for _, _, s in client.get(graph, list(graph))] == [4.0 * N] * 3
    executor = client.submit(forget_seen).result(timeout=TIMEOUT)
    assert client.submit(kept).result(timeout=TIMEOUT) >= 1
    keeper = client.actor(Keeper)
    #   The actor took that executor; it forgot what it kept with the
    #   actor's own frame (an actor's calls carry no forgets).
    assert keeper.kept().result(timeout=TIMEOUT) == (0, executor)
    assert float(a.result(timeout=TIMEOUT).sum()) == 4.0 * N


def mark(a, *_):
    """Keeps the object this task was given, to be compared later."""
    import builtins
    builtins.__dict__.setdefault("_squall_test_before", []).append(a)
    return os.getpid()


def fresh(a, *_):
    """(whether this object is none of those marked, the executor's pid,
    the array's sum)."""
    import builtins
    before = builtins.__dict__.get("_squall_test_before", [])
    return not any(x is a for x in before), os.getpid(), float(a.sum())


def test_an_object_replaced_on_a_governor_is_not_served_from_the_cache(sharing):
    """Same key, new store generation: the object moved away from a
    governor and back is a new copy there, and its readers get that copy,
    never the value the executor kept of the old one."""
    c = squall.LocalCluster(governors=2, cpus=1, **cluster_options())
    with c:
        client = c.client()
        govs = sorted((int(g["id"]), g["name"]) for g in client.governors())
        (g1, _), (g2, name2) = govs
        a = client.submit(make, N, 5.0, workers=[name2])
        s = a._session
        assert s.place(a, [g2], move=True, timeout=TIMEOUT) == [g2]
        graph = {"m%d" % i: (mark, a, i) for i in range(3)}
        marked = set(client.get(graph, list(graph), workers=[name2]))
        there = client.submit(kept, workers=[name2])
        assert there.result(timeout=TIMEOUT) >= 1, "the value was not kept: nothing to test"
        #   Away: the store on g2 drops it and its executor forgets it...
        assert s.place(a, [g1], move=True, timeout=TIMEOUT) == [g1]
        until(lambda: client.submit(kept, workers=[name2]).result(timeout=TIMEOUT) == 0,
              "g2's executor to forget the object moved away")
        #   ...and back: the same key, a new copy (generation) on g2.
        assert s.place(a, [g2], move=True, timeout=TIMEOUT) == [g2]
        graph = {"f%d" % i: (fresh, a, i) for i in range(3)}
        got = client.get(graph, list(graph), workers=[name2])
        assert [(new, total) for new, _, total in got] == [(True, 5.0 * N)] * 3, got
        #   The same executor as before: it held the old value's objects.
        assert {p for _, p, _ in got} <= marked, (got, marked)
    clean_exit(c)
