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
    assert "(broken-key)" in info.value.__cause__.task
    with pytest.raises(ValueError) as info:
        client.get(dsk, "broken-key")
    assert "(broken-key)" in str(info.value.__cause__)
