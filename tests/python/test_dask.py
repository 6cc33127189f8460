"""The Dask adapter on real dask.array / dask.bag / dask.delayed graphs,
compared with dask.get (the synchronous reference scheduler)."""
from operator import add, mul, truediv

import pytest

import squall

dask = pytest.importorskip("dask")
np = pytest.importorskip("numpy")


def test_plain_dict_graph(client):
    dsk = {"x": 1, "y": (add, "x", 1), "z": (sum, ["x", "y", (mul, "y", 2)]), "w": "z",
           ("t", 0): (add, "w", 1)}
    for keys in ("z", ["x", "w"], [["x", "y"], ("t", 0)]):
        assert client.get(dsk, keys) == dask.get(dsk, keys)


def test_dask_array(client):
    import dask.array as da
    x = da.random.RandomState(1).random_sample((40, 30), chunks=(10, 10))
    y = (x @ x.T + 1).mean(axis=0)
    ours = dask.compute(y, scheduler=client.get)[0]
    ref = dask.compute(y, scheduler=dask.get)[0]
    assert np.allclose(ours, ref)


def test_dask_bag(client):
    import dask.bag as db
    b = db.from_sequence(range(1000), npartitions=8)
    total = b.map(lambda v: v * v).filter(lambda v: v % 3 == 0).sum()
    freq = db.from_sequence(list("squallsquall"), npartitions=3).frequencies()
    assert total.compute(scheduler=client.get) == total.compute(scheduler=dask.get)
    assert sorted(freq.compute(scheduler=client.get)) == sorted(freq.compute(scheduler=dask.get))


def test_dask_delayed_and_config(client):
    from dask import delayed

    @delayed
    def square(v):
        return v * v

    parts = [square(i) for i in range(10)]
    total = delayed(sum)(parts)
    with dask.config.set(scheduler=client.get):
        assert total.compute() == sum(i * i for i in range(10))
    assert dask.compute(parts, scheduler=client.get)[0] == \
        list(dask.compute(parts, scheduler=dask.get)[0])


def test_dask_errors_name_keys(client):
    def broken(v):
        raise ValueError("bad value %s" % v)

    dsk = {"source": 1, "broken-key": (broken, "source"), "final": (add, "broken-key", 1)}
    with pytest.raises(ValueError, match="bad value 1") as info:
        client.get(dsk, "final")
    # broken-key was fused into final's task (a linear chain): a note names it
    assert "(final)" in info.value.__cause__.task
    assert any("'broken-key'" in note for note in info.value.__notes__)
    with pytest.raises(ValueError) as info:
        client.get(dsk, "broken-key")
    assert "(broken-key)" in str(info.value.__cause__)


def make_generator(n):
    return (i * i for i in range(n))


def make_lock():
    import threading
    return threading.Lock()


def identity(v):
    return v is not None


def test_linear_chains_keep_unpicklable_intermediates(client):
    from dask import delayed
    # legacy graph: the generator never leaves its task
    dsk = {"n": 5, "gen": (make_generator, "n"), "total": (sum, "gen")}
    assert client.get(dsk, "total") == 30
    # dask.delayed: the same through dask.compute
    gen = delayed(make_generator)(4)
    assert dask.compute(delayed(sum)(gen), scheduler=client.get)[0] == 14
    # a longer chain, all in one task
    lock_chain = {"l": (make_lock,), "held": (identity, "l"), "out": (str, "held")}
    assert client.get(lock_chain, "out") == "True"


def test_an_unpicklable_value_that_must_move_says_why(client):
    two_readers = {"l": (make_lock,), "a": (identity, "l"), "b": (identity, "l")}
    with pytest.raises(TypeError, match="cannot be pickled") as info:
        client.get(two_readers, ["a", "b"])
    message = str(info.value)
    assert "another task reads them" in message and "lock" in message
    assert any("(l)" in note for note in info.value.__notes__), info.value.__notes__
    with pytest.raises(TypeError, match="cannot be pickled"):
        client.get({"l": (make_lock,)}, "l")            # fetched by the client


def test_large_nodes_travel_as_data(client, monkeypatch):
    big = b"x" * (17 << 20)                              # over a task config's 16 MiB
    assert client.get({"n": (len, big)}, "n") == len(big)
    #   in a fused chain, and in a fused reduction's branch
    assert client.get({"n": (len, big), "m": (add, "n", 1)}, "m") == len(big) + 1
    from squall import dask as sqdask
    monkeypatch.setattr(sqdask, "_enough_tasks", lambda c: 1)
    assert client.get({"n": (len, big), "k": (add, 1, 1), "s": (add, "n", "k")}, "s") == \
        len(big) + 2
    #   and in a bundle (n read by a and b only: one task, two outputs)
    assert client.get({"n": (len, big), "a": (add, "n", 1), "b": (add, "n", 2)},
                      ["a", "b"]) == (len(big) + 1, len(big) + 2)
    #   client.submit sends a large argument as data too, with Dask's warning
    with pytest.warns(UserWarning, match=r"Large object of size 17\.00 MiB .*client\.scatter"):
        assert client.submit(len, big).result(60) == len(big)
    assert client.submit(len, client.scatter([big])[0]).result(60) == len(big)


def locks(*held):
    return sum(hasattr(h, "acquire") for h in held)


def test_reductions_fuse_their_branches_when_the_cluster_has_enough_of_them(client,
                                                                            monkeypatch):
    from squall import dask as sqdask
    # Unpicklable branches read by one reduction: they run in one task only
    # when the fan-in is fused (else they would have to be pickled).
    dsk = {"n": 3}
    for i in range(3):
        dsk[("lock", i)] = (make_lock,)
    dsk["all"] = (locks, ("lock", 0), ("lock", 1), ("lock", 2))
    dsk["out"] = (add, "all", "n")
    monkeypatch.setattr(sqdask, "_enough_tasks", lambda c: 1)
    made = []
    real = sqdask.Session._py_task

    def counting(self, *args, **kwargs):
        made.append(args[-1])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(sqdask.Session, "_py_task", counting)
    assert client.get(dsk, "out") == 6
    assert made == ["all", "out"]           # locks, branches and their reduction: one task
    # Enough fan-ins wanted and too few made: the branches stay tasks and
    # their locks must be pickled to reach the reduction (only the last
    # step, "out", absorbs "all", a partial step reading several tasks).
    monkeypatch.setattr(sqdask, "_enough_tasks", lambda c: 2)
    made.clear()
    with pytest.raises(TypeError, match="cannot be pickled"):
        client.get(dsk, "out")
    assert sorted(made) == sorted(["out"] + [str(("lock", i)) for i in range(3)])


def test_fused_reductions_give_the_same_values_and_errors(client, monkeypatch):
    import dask.array as da
    from squall import dask as sqdask
    monkeypatch.setattr(sqdask, "_enough_tasks", lambda c: 1)
    x = da.random.RandomState(5).random_sample((60, 60), chunks=(10, 10))
    for y in ((x @ x.T).sum(), (x + x.T).mean(axis=0), x.std()):
        assert np.allclose(dask.compute(y, scheduler=client.get)[0],
                           dask.compute(y, scheduler=dask.get)[0])

    def broken(v):
        raise ValueError("bad branch %s" % v)

    dsk = {"a": (add, 1, 1), "b": (broken, 2), "c": (add, 3, 3),
           "total": (sum, ["a", "b", "c"])}
    with pytest.raises(ValueError, match="bad branch 2") as info:
        client.get(dsk, "total")
    assert "(total)" in info.value.__cause__.task
    assert any("'b'" in note and "'total'" in note for note in info.value.__notes__)
    # a branch somebody asked for, or read twice, stays a task of its own
    dsk = {"a": (add, 1, 1), "b": (add, 2, 2), "c": (mul, "b", 10),
           "total": (sum, ["a", "b", "c"])}
    assert client.get(dsk, ["total", "a"]) == dask.get(dsk, ["total", "a"])


def test_fan_in_groups_in_the_graph():
    from squall import dask as sqdask
    # r is read twice (never absorbed); p0..p3 feed s0/s1 (fan-ins); t reads
    # both fan-in groups (not absorbed again); u extends t's group linearly.
    deps = {"r": [], "p0": ["r"], "p1": ["r"], "p2": ["r"], "p3": ["r"],
            "q0": ["p0"], "s0": ["q0", "p1"], "s1": ["p2", "p3"], "t": ["s0", "s1"],
            "u": ["t"]}
    order = ["r", "p0", "q0", "p1", "s0", "p2", "p3", "s1", "t", "u"]
    opts = sqdask._Options({}, {})
    group_of, fanned = sqdask._groups(order, deps, lambda k: False, {"u"}, opts, 1)
    assert group_of["s0"] == ["p0", "q0", "p1", "s0"]
    assert group_of["s1"] == ["p2", "p3", "s1"]
    assert group_of["u"] == ["t", "u"] and group_of["r"] == ["r"]
    assert fanned == {id(group_of["s0"]), id(group_of["s1"])}
    members, outer = sqdask._group_members(group_of["s0"], deps, {k: k for k in deps})
    assert outer == ["r"]
    assert members == [("p0", "p0", []), ("q0", "q0", ["p0"]), ("p1", "p1", []),
                       ("s0", "s0", ["q0", "p1"])]
    # three fan-ins wanted, two found: none
    group_of, fanned = sqdask._groups(order, deps, lambda k: False, {"u"}, opts, 3)
    assert not fanned and group_of["s0"] == ["s0"] and group_of["q0"] == ["p0", "q0"]
    # the cluster's size is asked for only when there is a fan-in to fuse
    group_of, fanned = sqdask._groups(["r", "p0", "q0"], deps, lambda k: False, {"q0"}, opts,
                                      lambda: pytest.fail("asked"))
    assert not fanned and group_of["q0"] == ["r", "p0", "q0"]
    group_of, fanned = sqdask._groups(order, deps, lambda k: False, {"u"}, opts, lambda: 2)
    assert len(fanned) == 2


def holds(lock):
    return hasattr(lock, "acquire")


def test_tasks_sharing_an_input_made_for_them_run_as_one_task(client, monkeypatch):
    from squall import dask as sqdask
    # A lock read by two wanted readers: with bundles, the lock and both
    # readers are one task with two outputs, so the lock is never pickled.
    dsk = {"l": (make_lock,), "a": (holds, "l"), "b": (holds, "l")}
    monkeypatch.setattr(sqdask, "_enough_tasks", lambda c: 1)
    made = []
    real = sqdask.Session._py_task

    def counting(self, *args, **kwargs):
        made.append((args[-1], args[3]))            # (name, outputs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(sqdask.Session, "_py_task", counting)
    assert client.get(dsk, ["a", "b"]) == (True, True)
    assert made == [("b", 2)]
    # (x + x.T).mean()'s shape: each random block is read by its own sum
    # and by the transposed one; no block is a task of its own, and the
    # value is the reference scheduler's.
    import dask.array as da
    x = da.random.RandomState(7).random_sample((60, 60), chunks=(10, 10))
    y = (x + x.T).mean()
    made.clear()
    assert np.allclose(dask.compute(y, scheduler=client.get)[0],
                       dask.compute(y, scheduler=dask.get)[0])
    import re
    bare = re.compile(r"random_sample-[0-9a-f]+'")     # not Dask's random_sample-mean_chunk
    assert made and not any(bare.search(name) for name, _ in made), made
    # the 15 pairs (i, j), (j, i), i < j, of 6 x 6 blocks: two blocks and
    # their two sums each, not whole partial steps of the reduction
    assert sum(n == 2 for _, n in made) == 15, made
    # Fewer bundles than the cluster's measure of enough: not made, and the
    # lock must be pickled to reach its two readers.
    monkeypatch.setattr(sqdask, "_enough_tasks", lambda c: 2)
    made.clear()
    with pytest.raises(TypeError, match="cannot be pickled"):
        client.get(dsk, ["a", "b"])
    assert ("l", 1) in made


def test_a_bundle_whose_cycle_check_walks_too_far_is_not_made(monkeypatch):
    from squall import _daskbundle as B
    # r read by a and b; b also reads the end of a chain of 20 nodes after
    # r that does not come from r: no cycle, found by walking the chain
    deps = {"r": [], "a": ["r"]}
    deps.update({"n%d" % i: (["n%d" % (i - 1)] if i else []) for i in range(20)})
    deps["b"] = ["r", "n19"]
    order = ["r", "a"] + ["n%d" % i for i in range(20)] + ["b"]
    index = {k: i for i, k in enumerate(order)}
    members = ["r", "a", "b"]
    assert not B._cyclic(members, set(members), deps, index)
    # with a walk of 10 allowed it gives up, and says "cyclic": no bundle
    monkeypatch.setattr(B, "_CYCLE_WALK_MAX", 10)
    assert B._cyclic(members, set(members), deps, index)


def test_bundles_in_the_graph():
    from squall import _daskbundle as B
    from squall import dask as sqdask
    opts = sqdask._Options({}, {})
    same = opts.same

    def groups(order, deps, wanted):
        return sqdask._groups(order, deps, lambda k: False, wanted, opts, 0)[0]

    # r read by a and b; b also reads c, which reads a (wanted, so not in
    # a's group): one task of r, a, b would read c, made from a: a cycle.
    deps = {"r": [], "a": ["r"], "c": ["a"], "b": ["r", "c"]}
    order = ["r", "a", "c", "b"]
    g = groups(order, deps, {"a", "b", "c"})
    assert B.bundles(order, deps, g, {"a", "b", "c"}, same, 1) == {}
    # without c: r, a, b are one bundle; r is let go after b, its last reader
    deps = {"r": [], "a": ["r"], "b": ["r"], "t": ["a", "b"]}
    order = ["r", "a", "b", "t"]
    g = groups(order, deps, {"t"})
    got = B.bundles(order, deps, g, {"t"}, same, 1)
    bundle = got["r"]
    assert bundle.members == ["r", "a", "b"] and bundle.outputs == ["a", "b"]
    members, outer = B.bundle_members(bundle, deps, {k: k for k in deps})
    assert outer == [] and members == [("r", "r", []), ("a", "a", []), ("b", "b", ["r"])]
    assert B.bundles(order, deps, g, {"t"}, same, 2) == {}         # too few
    # a bundle's members are in no other group, and absorbed by none
    g2, fanned = sqdask._groups(order, deps, lambda k: False, {"t"}, opts, 1, got)
    assert set(g2) == {"t"} and g2["t"] == ["t"] and not fanned
    # b has other task options than r (dask.annotate): not bundled
    assert B.bundles(order, deps, g, {"t"}, lambda a, b: b != "b", 1) == {}
    # an input read by more tasks than a bundle holds stays a task (and the
    # graph is not even looked at for bundles)
    deps = {"r": []}
    deps.update({"p%d" % i: ["r"] for i in range(B._GROUPS_MAX)})
    order = list(deps)
    g = groups(order, deps, set(order[1:]))
    assert B.bundles(order, deps, g, set(order[1:]), same, 1) == {}
    assert not B.any_candidate(order, deps, lambda k: False, set(order[1:]))
    del deps["p0"]
    assert B.any_candidate(order[:1] + order[2:], deps, lambda k: False, set(order[2:]))
    assert not B.any_candidate(order[:1] + order[2:], deps, lambda k: k == "r", set(order[2:]))
    # tasks in an order where each bundle's outputs come before their readers
    deps = {"r": [], "a": ["r"], "x": ["a"], "b": ["r"]}
    order = ["r", "a", "x", "b"]
    g = groups(order, deps, {"x", "b", "a"})
    got = B.bundles(order, deps, g, {"x", "b", "a"}, same, 1)
    assert got["r"].outputs == ["a", "b"]
    unit = lambda k: id(got[k]) if k in got else id(g[k])
    assert B.unit_order(order, deps, unit) == ["r", "a", "b", "x"]


def test_the_cluster_cpus_are_asked_once_for_graphs_in_a_row(client, monkeypatch):
    from squall import dask as sqdask
    asked = []
    real = type(client).governors

    def counting(self):
        asked.append(1)
        return real(self)

    monkeypatch.setattr(type(client), "governors", counting)
    monkeypatch.setattr(sqdask, "_CPUS_KEPT_S", 3600.0)
    dsk = {"s": (sum, [("p", i) for i in range(4)])}
    dsk.update({("p", i): (add, ("q", i), 1) for i in range(4)})
    dsk.update({("q", i): (mul, i, 2) for i in range(4)})
    for _ in range(3):
        assert client.get(dsk, "s") == dask.get(dsk, "s")
    assert len(asked) == 1
    # once the count is older than that, it is asked again
    monkeypatch.setattr(sqdask, "_CPUS_KEPT_S", 0.0)
    assert client.get(dsk, "s") == dask.get(dsk, "s")
    assert len(asked) == 2


def _submits_counted(monkeypatch):
    """The number of tasks made at each Session.submit of client.get, as
    a list that grows while the test runs."""
    from squall import dask as sqdask
    sent = []
    real = sqdask.Session.submit

    def counting(self):
        sent.append(self._n_tasks)
        return real(self)

    monkeypatch.setattr(sqdask.Session, "submit", counting)
    return sent


def test_a_graph_first_tasks_are_submitted_while_the_rest_are_made(client, monkeypatch):
    from squall import dask as sqdask
    sent = _submits_counted(monkeypatch)
    monkeypatch.setattr(sqdask, "_EARLY_TASKS", 3)
    # ten tasks read by a sum made after them: the first three go on their
    # own, and their values are still there for the sum (kept till all is
    # submitted)
    dsk = {("p", i): (mul, i, 3) for i in range(10)}
    dsk["s"] = (sum, [("p", i) for i in range(10)])
    for _ in range(3):
        sent.clear()
        assert client.get(dsk, "s") == 135
        assert sent[:2] == [3, 11], sent             # tasks made at each submit
    # wanted keys among the first ones come back too
    keys = [("p", i) for i in range(10)] + ["s"]
    assert client.get(dsk, keys) == dask.get(dsk, keys)
    # and the same for a graph of bundles
    import dask.array as da
    monkeypatch.setattr(sqdask, "_enough_tasks", lambda c: 1)
    x = da.random.RandomState(7).random_sample((60, 60), chunks=(10, 10))
    y = (x + x.T).mean()
    assert np.allclose(dask.compute(y, scheduler=client.get)[0],
                       dask.compute(y, scheduler=dask.get)[0])


def test_a_reduction_last_step_absorbs_its_partial_steps():
    from squall import dask as sqdask
    opts = sqdask._Options({}, {})
    # c0..c7 the work (they read no task), p0 and p1 partial steps, t the
    # last one, read by the alias "out" only
    deps = {"c%d" % i: [] for i in range(8)}
    deps.update({"p0": ["c0", "c1", "c2", "c3"], "p1": ["c4", "c5", "c6", "c7"],
                 "t": ["p0", "p1"], "out": ["t"]})
    order = list(deps)
    is_data = lambda k: k == "out"                                  # noqa: E731
    # enough fan-ins: every partial step absorbs its branches, as before
    g, fanned = sqdask._groups(order, deps, is_data, {"out"}, opts, 2)
    assert g["p0"] == ["c0", "c1", "c2", "c3", "p0"] and len(fanned) == 2
    # too few: only the last step absorbs the partial ones, one hop fewer
    # after the work's end; the work stays a task each, to run in parallel
    g, fanned = sqdask._groups(order, deps, is_data, {"out"}, opts, 8)
    assert g["t"] == ["p0", "p1", "t"] and fanned == {id(g["t"])}
    assert all(g["c%d" % i] == ["c%d" % i] for i in range(8))
    members, outer = sqdask._group_members(g["t"], deps, {k: k for k in deps})
    assert outer == ["c%d" % i for i in range(8)]
    assert members[-1] == ("t", "t", ["p0", "p1"])
    # a last step whose branches read no task (they may be the work): none
    deps2 = {"a": [], "b": [], "t": ["a", "b"]}
    g, fanned = sqdask._groups(list(deps2), deps2, lambda k: False, {"t"}, opts, 8)
    assert g["t"] == ["t"] and not fanned
    # fan_in 0 (futures' graphs): nothing fused
    g, fanned = sqdask._groups(order, deps, is_data, {"out"}, opts, 0)
    assert g["t"] == ["t"] and not fanned


def test_a_reduction_last_step_absorbs_the_partial_steps_below_its_own(monkeypatch):
    from squall import dask as sqdask
    from squall import _daskfuse
    opts = sqdask._Options({}, {})
    # 16 blocks (b) read by 8 work tasks (w); 4 first partial steps (p) of
    # 2 each, 2 second ones (q), the last step t
    deps = {"b%d" % i: [] for i in range(16)}
    deps.update({"w%d" % i: ["b%d" % (2 * i), "b%d" % (2 * i + 1)] for i in range(8)})
    deps.update({"p%d" % i: ["w%d" % (2 * i), "w%d" % (2 * i + 1)] for i in range(4)})
    deps.update({"q%d" % i: ["p%d" % (2 * i), "p%d" % (2 * i + 1)] for i in range(2)})
    deps["t"] = ["q0", "q1"]
    order = list(deps)
    work = {k for k in deps if k[0] in "bw"}

    def groups():
        # too few fan-ins for all (100 wanted); the work in bundles
        return sqdask._groups(order, deps, lambda k: False, {"t"}, opts, 100, work)
    g, fanned = groups()
    # t takes its own partial steps and those below them, which read only
    # bundles' outputs, in dependency order
    assert g["t"] == ["p0", "p1", "q0", "p2", "p3", "q1", "t"], g["t"]
    assert fanned == {id(g["t"])}
    members, outer = sqdask._group_members(g["t"], deps, {k: k for k in deps})
    assert outer == ["w%d" % i for i in range(8)]
    assert [m[0] for m in members] == g["t"]
    # work that is no bundle's (w reads tasks: it might be a partial step
    # or work of its own): one level, as before, and the rest tasks each
    g, fanned = sqdask._groups(order, deps, lambda k: False, {"t"}, opts, 100)
    assert g["t"] == ["q0", "q1", "t"] and g["p0"] == ["p0"] and g["w0"] == ["w0"]
    # past _TAIL_STEPS_MAX partial steps: one level too
    monkeypatch.setattr(_daskfuse, "_TAIL_STEPS_MAX", 5)
    g, fanned = groups()
    assert g["t"] == ["q0", "q1", "t"] and g["p0"] == ["p0"]


def test_mean_of_a_sum_with_its_transpose_runs_its_combines_in_the_last_task(client,
                                                                             monkeypatch):
    import dask.array as da
    from squall import dask as sqdask
    sent = _submits_counted(monkeypatch)
    # bench/data_heavy.py's mean at a small size: 8 x 8 blocks, bundled in
    # 36 tasks (28 of two blocks and their transposes, 8 of a diagonal
    # block), whose mean_chunks the 16 combines and the aggregate's 4 read:
    # those 20 steps are one task with the aggregate, 37 in all (53 when
    # only the aggregate's 4 were absorbed)
    monkeypatch.setattr(sqdask, "_enough_tasks", lambda c: 8)
    x = da.random.RandomState(5).random_sample((80, 80), chunks=(10, 10))
    y = (x + x.T).mean()
    assert np.allclose(dask.compute(y, scheduler=client.get)[0],
                       dask.compute(y, scheduler=dask.get)[0])
    assert sent[-1] == 37, sent


def test_a_graph_with_much_data_submits_its_first_tasks_sooner(client, monkeypatch):
    from squall import dask as sqdask
    sent = _submits_counted(monkeypatch)
    monkeypatch.setattr(sqdask, "_EARLY_TASKS", 8)
    # ten blocks the client holds (a frame's partitions), each read by a
    # task together with a block made before it: once the data made is
    # over _EARLY_BYTES the 2nd and 4th tasks are submitted too, not only
    # the 8th, and every block made so far is kept for the later readers
    monkeypatch.setattr(sqdask, "_EARLY_BYTES", 3 * 8 * 1000)
    blocks = [np.full(1000, i, dtype=np.float64) for i in range(10)]
    dsk = {("d", i): blocks[i] for i in range(10)}
    dsk.update({("p", i): (np.dot, ("d", i), ("d", max(i - 3, 0))) for i in range(10)})
    dsk["s"] = (sum, [("p", i) for i in range(10)])
    want = dask.get(dsk, "s")
    for _ in range(3):
        sent.clear()
        assert client.get(dsk, "s") == want
        # tasks made at each submit; the 1st block alone is under the bytes
        assert sent[:4] == [2, 4, 8, 11], sent
    # under the bytes: only the 8th, as before
    monkeypatch.setattr(sqdask, "_EARLY_BYTES", 10 ** 9)
    sent.clear()
    assert client.get(dsk, "s") == want
    assert sent[:2] == [8, 11], sent


def test_data_found_in_the_constant_cache_does_not_submit_the_first_tasks_sooner(cluster,
                                                                                  monkeypatch):
    from squall import dask as sqdask
    sent = _submits_counted(monkeypatch)
    monkeypatch.setattr(sqdask, "_EARLY_TASKS", 8)
    monkeypatch.setattr(sqdask, "_EARLY_BYTES", 3 << 20)
    # ten blocks of 1 MiB (memory files the client's cache keeps): made
    # the first time, they are over _EARLY_BYTES by the 4th task; found in
    # the cache the second time, nothing is made, and the early submits'
    # round trips would only delay the rest
    n = (1 << 20) // 8
    blocks = [np.full(n, i, dtype=np.float64) for i in range(10)]
    dsk = {("d", i): blocks[i] for i in range(10)}
    dsk.update({("p", i): (np.dot, ("d", i), ("d", max(i - 3, 0))) for i in range(10)})
    dsk["s"] = (sum, [("p", i) for i in range(10)])
    want = dask.get(dsk, "s")
    client = cluster.client()
    try:
        assert client.get(dsk, "s") == want
        assert sent[:4] == [2, 4, 8, 11], sent
        hits = client.constant_cache_stats()["hits"]
        sent.clear()
        assert client.get(dsk, "s") == want
        assert client.constant_cache_stats()["hits"] == hits + 10
        assert sent[:2] == [8, 11], sent
        # one block new among the cached ones: under the bytes still
        blocks[0] = np.full(n, -1.0)
        dsk[("d", 0)] = blocks[0]
        sent.clear()
        assert client.get(dsk, "s") == dask.get(dsk, "s")
        assert sent[:2] == [8, 11], sent
    finally:
        client.close()


#   docs/protocol.md: objects of at most inline_max bytes (4096 unless the
#   broker is told otherwise) ride inside control messages.
INLINE_MAX = 4096


def _functions_pickled(monkeypatch):
    """{module.name: bytes} of the functions the client pickles for its
    Python tasks from now on."""
    from squall import _session_build
    seen = {}
    real = _session_build.function_bytes

    def recording(fn):
        data = real(fn)
        seen["%s.%s" % (fn.__module__, fn.__qualname__)] = len(data)
        return data
    monkeypatch.setattr(_session_build, "function_bytes", recording)
    return seen


def _legacy_nodes(dsk):
    """squall.dask._nodes as with a Dask that has no dask._task_spec (or
    none at all): the legacy graph as it is."""
    return dict(dsk), False


def test_the_function_each_task_calls_is_small(client, monkeypatch):
    # Pickled by value, it goes to each governor once a session (inline in
    # its first ASSIGN there), then to the executor with every task: each
    # kind of task calls a function of its own, with nothing else in it.
    from squall import dask as sqdask
    import dask.array as da
    seen = _functions_pickled(monkeypatch)
    monkeypatch.setattr(sqdask, "_enough_tasks", lambda c: 1)
    x = da.random.RandomState(3).random_sample((40, 40), chunks=(10, 10))
    for y in ((x + x.T).mean(), x.sum()):           # bundles, fused reductions
        assert np.allclose(dask.compute(y, scheduler=client.get)[0],
                           dask.compute(y, scheduler=dask.get)[0])
    dsk = {"n": 3, "a": (add, "n", 1), "b": (mul, "a", 2), "c": (add, "b", "n")}
    assert client.get(dsk, ["c", "b"]) == dask.get(dsk, ["c", "b"])   # chains
    runners = ["squall._daskrun." + n for n in ("run", "run_chain", "run_group", "run_bundle")]
    assert all(size <= INLINE_MAX // 2 for size in seen.values()), seen
    assert sorted(seen) == sorted(runners), seen
    # legacy graphs' functions carry the expressions' evaluation too
    monkeypatch.setattr(sqdask, "_nodes", _legacy_nodes)
    seen.clear()
    assert client.get(dsk, ["c", "b"]) == dask.get(dsk, ["c", "b"])
    dsk = {"l": (make_lock,), "a": (holds, "l"), "b": (holds, "l"),
           "s": (add, "a", "b"), "t": (add, "s", 1)}
    assert client.get(dsk, ["a", "b", "t"]) == (True, True, 3)      # a bundle
    dsk = {"k": (add, 1, 1), "m": (mul, 2, 3), "s": (add, "k", "m")}
    assert client.get(dsk, "s") == 8                                # a fused reduction
    assert all(size <= INLINE_MAX - 512 for size in seen.values()), seen
    assert sorted(seen) == sorted(r.replace("_daskrun", "_daskrun_legacy") for r in runners), \
        seen


def test_legacy_graphs_without_task_spec(client, monkeypatch):
    # squall.dask without dask._task_spec: the legacy graph's expressions
    # are evaluated by _daskrun_legacy, in every kind of task
    from squall import dask as sqdask
    from squall import _session_build
    monkeypatch.setattr(sqdask, "_nodes", _legacy_nodes)
    monkeypatch.setattr(sqdask, "_enough_tasks", lambda c: 1)
    dsk = {"x": 1, "y": (add, "x", 1), "z": (sum, ["x", "y", (mul, "y", 2)]), "w": "z",
           ("t", 0): (add, "w", 1)}
    for keys in ("z", ["x", "w"], [["x", "y"], ("t", 0)]):
        assert client.get(dsk, keys) == dask.get(dsk, keys)
    # a chain, a bundle and a fused reduction, whose locks never leave
    # their task
    assert client.get({"l": (make_lock,), "held": (identity, "l"), "out": (str, "held")},
                      "out") == "True"
    assert client.get({"l": (make_lock,), "a": (holds, "l"), "b": (holds, "l")},
                      ["a", "b"]) == (True, True)
    dsk = {"n": 3, ("lock", 0): (make_lock,), ("lock", 1): (make_lock,),
           "all": (locks, ("lock", 0), ("lock", 1)), "out": (add, "all", "n")}
    assert client.get(dsk, "out") == 5

    def broken(v):
        raise ValueError("bad value %s" % v)

    with pytest.raises(ValueError, match="bad value 1") as info:
        client.get({"s": 1, "broken-key": (broken, "s"), "final": (add, "broken-key", 1)},
                   "final")
    assert any("'broken-key'" in note for note in info.value.__notes__)
    # nodes over a task config's bound travel as data (the bound made
    # small here): a single node, a chain, a fused reduction, a bundle
    monkeypatch.setattr(_session_build, "_CONFIG_MAX", 1 << 16)
    big = b"x" * (1 << 17)
    assert client.get({"n": (len, big)}, "n") == len(big)
    assert client.get({"n": (len, big), "m": (add, "n", 1)}, "m") == len(big) + 1
    assert client.get({"n": (len, big), "k": (add, 1, 1), "s": (add, "n", "k")}, "s") == \
        len(big) + 2
    assert client.get({"n": (len, big), "a": (add, "n", 1), "b": (add, "n", 2)},
                      ["a", "b"]) == (len(big) + 1, len(big) + 2)


def test_executors_need_no_squall(tmp_path, monkeypatch):
    # The functions squall.dask's tasks call are pickled by value: executors
    # that cannot import squall run every kind of task (Dask's own
    # functions only here: this module imports squall).
    import importlib.util
    import os
    import sys
    import dask.array as da
    from conftest import cluster_options
    from squall import dask as sqdask
    from squall import _session_build
    options = cluster_options()
    python = options.pop("python", sys.executable)
    paths = [p for p in sys.path if p and os.path.isdir(p)
             and not os.path.exists(os.path.join(p, "squall"))]
    wrapper = tmp_path / "python"
    wrapper.write_text("#!/bin/sh\nPYTHONPATH='%s' exec '%s' \"$@\"\n"
                       % (os.pathsep.join(paths), python))
    wrapper.chmod(0o755)
    monkeypatch.setattr(sqdask, "_enough_tasks", lambda c: 1)
    with squall.LocalCluster(governors=2, cpus=1, python=str(wrapper), **options) as cluster:
        client = cluster.client()
        assert client.get({"spec": (importlib.util.find_spec, "squall")}, "spec") is None
        x = da.random.RandomState(3).random_sample((40, 40), chunks=(10, 10))
        for y in ((x + x.T).mean(), x.sum(), (x + 1).T.max()):
            assert np.allclose(dask.compute(y, scheduler=client.get)[0],
                               dask.compute(y, scheduler=dask.get)[0])
        with pytest.raises(ZeroDivisionError) as info:
            client.get({"n": 0, "q": (truediv, 1, "n"), "r": (add, "q", 1)}, "r")
        assert any("'q'" in note for note in info.value.__notes__)
        # a graph holding futures: heads pickled by the argument template
        y = client.persist(x)
        assert np.allclose(dask.compute((y + y.T).mean(), scheduler=client.get)[0],
                           dask.compute((x + x.T).mean(), scheduler=dask.get)[0])
        # a node sent as data (the config's bound made small here)
        monkeypatch.setattr(_session_build, "_CONFIG_MAX", 1 << 16)
        big = b"x" * (1 << 17)
        assert client.get({"n": (len, big), "m": (add, "n", 1)}, "m") == len(big) + 1
        # a legacy graph (a Dask without dask._task_spec)
        monkeypatch.setattr(sqdask, "_nodes", _legacy_nodes)
        dsk = {"n": 3, "a": (add, "n", 1), "b": (mul, "a", 2), "c": (add, "b", "n"),
               "d": (add, "a", 1)}
        assert client.get(dsk, ["c", "d"]) == dask.get(dsk, ["c", "d"])
        client.close()
    assert cluster.exit_codes and all(c == 0 for c in cluster.exit_codes.values()), \
        cluster.exit_codes
