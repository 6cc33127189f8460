"""The Dask adapter on real dask.array / dask.bag / dask.delayed graphs,
compared with dask.get (the synchronous reference scheduler)."""
from operator import add, mul

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


def test_large_nodes_travel_as_data(client):
    big = b"x" * (17 << 20)                              # over a task config's 16 MiB
    assert client.get({"n": (len, big)}, "n") == len(big)
    #   client.submit sends a large argument as data too, with Dask's warning
    with pytest.warns(UserWarning, match=r"Large object of size 17\.00 MiB .*client\.scatter"):
        assert client.submit(len, big).result(60) == len(big)
    assert client.submit(len, client.scatter([big])[0]).result(60) == len(big)
