"""Dask distributed's client API on squall: compute, persist, futures of
collections given to submit, progress, dask.annotate, large submit
arguments, and the asynchronous client."""
import asyncio
import io
import os
import pty
import subprocess
import sys
import warnings

import pytest

import squall
import squall.dask

dask = pytest.importorskip("dask")
np = pytest.importorskip("numpy")
da = pytest.importorskip("dask.array")


def test_compute_returns_futures(client):
    x = da.arange(1000, chunks=100)
    total = client.compute(x.sum())
    assert isinstance(total, squall.Future)
    assert total.result(60) == sum(range(1000))
    a, b, plain = client.compute([x.sum(), x.mean(), 7])
    assert plain == 7                       # not a collection: returned as it is
    assert client.gather([a, b]) == [sum(range(1000)), np.mean(np.arange(1000))]
    assert client.compute(x.max(), sync=True) == 999
    # futures of collections are arguments of client.submit like any future
    assert client.submit(lambda s, m: s + m, a, b).result(60) == sum(range(1000)) + 499.5


def test_compute_delayed_failure_raises_its_exception(client):
    @dask.delayed
    def broken(v):
        raise KeyError("no %s" % v)
    f = client.compute(broken(3) + 1)
    with pytest.raises(KeyError, match="no 3"):
        f.result(60)


def read_counter(path):
    with open(path) as f:
        return int(f.read())


def bump(path):
    n = read_counter(path) + 1
    with open(path, "w") as f:
        f.write(str(n))
    return n


def test_persist_keeps_parts_on_the_cluster(client, tmp_path):
    counter = str(tmp_path / "runs")
    with open(counter, "w") as f:
        f.write("0")

    def part(i):
        # one byte appended per run (O_APPEND: runs on two governors at
        # once cannot lose one, as a read-then-write count could)
        with open(counter, "a") as f:
            f.write("x")
        return np.full(10, i)

    def runs():
        return os.path.getsize(counter) - 1

    x = da.concatenate([da.from_delayed(dask.delayed(part)(i), (10,), int) for i in range(4)])
    y = client.persist(x)
    assert type(y) is type(x) and y.shape == x.shape
    parts = squall.dask.futures_of(y)
    assert len(parts) == 4 and all(isinstance(f, squall.Future) for f in parts)
    squall.wait(parts, timeout=60)
    assert runs() == 4
    # later computations read the persisted parts where they are: the parts
    # are not computed again, by client.compute or by dask.compute
    assert client.compute(y.sum()).result(60) == 10 * sum(range(4))
    assert dask.compute((y * 2).sum(), scheduler=client.get)[0] == 20 * sum(range(4))
    assert (y + 1).compute(scheduler=client.get).tolist() == \
        [i + 1 for i in range(4) for _ in range(10)]
    assert runs() == 4
    # the parts live on governors (64 KiB each: not inline at the broker)
    big = client.persist(da.ones((4, 8192), chunks=(1, 8192)))
    held = [f.where(60) for f in squall.dask.futures_of(big)]
    assert all(h for h in held), held
    assert float(client.compute(big.sum(), sync=True)) == 4 * 8192


def test_graphs_are_searched_for_futures_once_one_was_made(client, monkeypatch):
    # No Future made in the process: no graph can hold one, and client.get
    # sends its first tasks without searching every node's arguments.
    from squall import _futures
    monkeypatch.setattr(_futures, "made_any", False)
    searched = []
    real = squall.dask._has_futures

    def search(graph, spec):
        searched.append(len(graph))
        return real(graph, spec)

    monkeypatch.setattr(squall.dask, "_has_futures", search)
    x = da.arange(40, chunks=10)
    assert dask.compute(x.sum(), scheduler=client.get)[0] == sum(range(40))
    assert searched == []
    y = client.persist(x + 1)                       # futures of its parts
    assert _futures.made_any
    assert dask.compute(y.sum(), scheduler=client.get)[0] == sum(range(1, 41))
    assert len(searched) == 1


def test_progress_follows_compute_and_persist(client):
    x = client.persist(da.arange(200, chunks=10) + 1)
    out = io.StringIO()
    squall.dask.progress(x, stream=out, timeout=60)
    text = out.getvalue()
    assert "20/20 tasks (100%)" in text, text
    f = client.compute((da.arange(100, chunks=10) * 2).sum())
    out = io.StringIO()
    squall.dask.progress(f, stream=out, timeout=60)
    last = out.getvalue().rstrip("\n").split("\r")[-1]
    n = int(last.split("/")[1].split()[0])
    assert n > 1 and ("%d/%d tasks (100%%)" % (n, n)) in last, out.getvalue()
    assert f.done()
    # no stream given: stderr, terminal or not (a notebook's is not one)
    import sys
    out = io.StringIO()
    saved, sys.stderr = sys.stderr, out
    try:
        squall.dask.progress(client.compute(da.ones(30, chunks=10).sum()), timeout=60)
    finally:
        sys.stderr = saved
    assert "tasks (100%)" in out.getvalue()


PROGRAM = r"""
import sys, dask, dask.array as da, squall
with squall.LocalCluster(governors=1, cpus=2, dashboard=False) as cluster:
    client = cluster.client()
    x = da.arange(3000, chunks=10)
    (total,) = dask.compute(x.sum(), scheduler=client.get)
    print("TOTAL", total, flush=True)
"""


def test_client_progress_bar_follows_dask_compute(cluster):
    """On a terminal, a dask.compute of a graph of 100 tasks or more shows
    the client's progress bar (as a session's wait_all does)."""
    from conftest import cluster_options
    if cluster_options():
        pytest.skip("the program starts its own cluster without the sanitizer wrapper")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", PROGRAM], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave, env=dict(os.environ))
    os.close(slave)
    import select
    import time
    chunks = []
    deadline = time.monotonic() + 120
    #   Read until the program has exited and the terminal has nothing more
    #   (a process it started may keep the terminal open a little longer).
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:             # every writer closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    out, _ = proc.communicate(timeout=max(1, deadline - time.monotonic()))
    os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, text
    assert b"TOTAL %d" % sum(range(3000)) in out
    assert "tasks (100%)" in text and "[####" in text, text


def test_annotations_map_to_task_options(client, monkeypatch):
    seen = {}
    original = squall.Session._add_task

    def spy(self, kind, inputs, n_outputs, config, options, name, content_types):
        seen[name] = dict(options or {})
        return original(self, kind, inputs, n_outputs, config, options, name, content_types)
    monkeypatch.setattr(squall.Session, "_add_task", spy)

    @dask.delayed
    def one(v):
        return v + 1

    # made inside the block: the graph's own annotations (per key)
    with dask.annotate(retries=3, priority=7, resources={"cpus": 1}):
        marked = one(1)
    plain = one(2)
    total = dask.delayed(lambda a, b: a + b)(marked, plain)
    assert client.compute(total).result(60) == 5
    marked_opts = [o for n, o in seen.items() if n.startswith("one") and o.get("priority") == 7]
    assert marked_opts and marked_opts[0]["max_retries"] == 3 \
        and marked_opts[0]["resources"] == {"cpus": 1}, seen
    assert any(n.startswith("one") and "priority" not in o for n, o in seen.items()), seen
    # computed inside the block: every task of the computation, through
    # dask.compute(scheduler=client.get) as through client.compute
    seen.clear()
    x = da.arange(40, chunks=10).sum()
    with dask.annotate(priority=-4, retries=1):
        assert dask.compute(x, scheduler=client.get)[0] == sum(range(40))
    assert seen and all(o.get("priority") == -4 and o.get("max_retries") == 1
                        for o in seen.values()), seen
    seen.clear()
    with dask.annotate(priority=2):
        assert client.compute(x).result(60) == sum(range(40))
    assert seen and all(o.get("priority") == 2 for o in seen.values()), seen


def flaky(path):
    """Fails on its first run, succeeds after (a file counts the runs)."""
    n = bump(path)
    if n == 1:
        raise RuntimeError("first attempt fails")
    return n


def test_retries_annotation_is_honoured(client, tmp_path):
    counter = str(tmp_path / "flaky")
    with open(counter, "w") as f:
        f.write("0")
    with dask.annotate(retries=1):
        assert client.compute(dask.delayed(flaky)(counter)).result(60) == 2
    with open(counter, "w") as f:
        f.write("0")
    with pytest.raises(RuntimeError, match="first attempt"):
        client.compute(dask.delayed(flaky)(counter)).result(60)


def test_unsupported_annotation_warned_once(client):
    parts = [dask.delayed(abs)(-i) for i in range(30)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with dask.annotate(fifo_timeout="100ms", priority=1):
            assert sum(client.compute(parts, sync=True)) == sum(range(30))
            assert sum(dask.compute(parts, scheduler=client.get)[0]) == sum(range(30))
    about = [w for w in caught if "fifo_timeout" in str(w.message)]
    # once per computation (two here), not once per task (thirty each)
    assert len(about) == 2, [str(w.message) for w in caught]
    assert "not honoured by squall" in str(about[0].message)
    with pytest.warns(UserWarning, match="actors=... is not honoured"):
        client.compute(parts[0], actors=True).result(60)


def payload(i):
    """Big enough to be stored on the governor that ran it (not inline)."""
    return bytes([i % 256]) * 10000


def test_workers_annotation_restricts_governors(client):
    governors = sorted(client.governors(), key=lambda g: g["id"])
    assert len(governors) >= 2
    target = governors[-1]
    # by name, inside dask.annotate: every task of the block runs there
    with dask.annotate(workers=[target["name"]]):
        parts = [dask.delayed(payload)(i) for i in range(12)]
    futures = client.compute(parts)
    assert [f.result(60) for f in futures] == [payload(i) for i in range(12)]
    assert all(f.where() == [target["id"]] for f in futures), [f.where() for f in futures]
    # by id, as client.submit's and client.map's option
    other = governors[0]
    f = client.submit(payload, 3, workers=other["id"])
    assert f.result(60) == payload(3) and f.where() == [other["id"]]
    fs = client.map(payload, range(8), workers=[target["name"]])
    assert all(x.result(60) and x.where() == [target["id"]] for x in fs)
    # compute(workers=...) restricts the whole computation
    total = client.compute(dask.delayed(payload)(5), workers=other["name"])
    assert total.result(60) == payload(5) and total.where() == [other["id"]]


def test_workers_annotation_loose_and_unknown(client):
    # allow_other_workers=True: a governor that is not there is only a
    # preference; the task runs elsewhere
    with dask.annotate(workers=[4000000000], allow_other_workers=True):
        x = dask.delayed(payload)(7)
    assert client.compute(x).result(60) == payload(7)
    assert client.submit(payload, 8, workers=[4000000000],
                         allow_other_workers=True).result(60) == payload(8)
    # a name no governor has is refused at once, naming it
    with pytest.raises(ValueError, match="no-such-governor"):
        client.submit(payload, 1, workers="no-such-governor")
    with pytest.raises(ValueError, match="workers must be"):
        client.submit(payload, 1, workers=[])
    # a task restricted to governors that are not connected waits for them
    # (nothing runs it elsewhere): still pending while another task finishes
    stuck = client.submit(payload, 9, workers=[4000000000])
    assert client.submit(payload, 10).result(60) == payload(10)
    if stuck.done():        # only once --resource-wait (60 s) is spent
        with pytest.raises(squall.SquallError, match="on governor 4000000000"):
            stuck.result(0)
    stuck.cancel()


def test_large_submit_arguments_travel_as_data(client):
    big = np.arange(3 << 20, dtype=np.float64)              # 24 MiB
    with pytest.warns(UserWarning, match=r"Large object of size 24\.00 MiB"):
        f = client.submit(lambda a, k=None: float(a.sum()) + k, big, k=1.0)
    assert f.result(60) == float(big.sum()) + 1.0
    # a value whose size only pickling tells (a list): the same, after it
    many = list(range(5_000_000))
    with pytest.warns(UserWarning, match="Large object"):
        assert client.submit(len, many).result(120) == len(many)
    # small values stay in the task's config, without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert client.submit(len, b"x" * 1000).result(60) == 1000


def test_asynchronous_client(cluster):
    async def main():
        client = squall.Client(cluster.address, secret_key=cluster.secret_key,
                               broker_key=cluster.broker_key, asynchronous=True)
        assert client.asynchronous
        client = await client
        try:
            f = client.submit(lambda v: v * 2, 21)
            assert await f == 42
            assert await client.gather([f, client.submit(abs, -3)]) == [42, 3]
            total = client.compute(da.arange(100, chunks=25).sum())
            assert await total == sum(range(100))
            assert await client.compute(da.arange(10, chunks=5).sum(), sync=True) == 45
            # the loop runs while the client waits
            ticks = []

            async def tick():
                for _ in range(3):
                    ticks.append(1)
                    await asyncio.sleep(0)
            slow = client.submit(sum, range(10))
            both = await asyncio.gather(client.gather(slow), tick())
            assert both[0] == 45 and len(ticks) == 3
            # run and restart are awaitable too
            ran = await client.run(len, "ab")       # {governor: {pid: result}}
            assert {v for by_pid in ran.values() for v in by_pid.values()} == {2}
            await client.restart(keep_results=True)
            assert await f == 42
        finally:
            await client.close()
        assert not client._h.value
        async with squall.Client(cluster.address, secret_key=cluster.secret_key,
                                 broker_key=cluster.broker_key, asynchronous=True) as c2:
            assert await c2.submit(len, "abc") == 3
        assert not c2._h.value
        c3 = await cluster.client(asynchronous=True)
        assert await c3.submit(abs, -1) == 1
    asyncio.run(main())
    # outside a running loop, close() of an asynchronous client closes at once
    c4 = squall.Client(cluster.address, secret_key=cluster.secret_key,
                       broker_key=cluster.broker_key, asynchronous=True)
    assert c4.close() is None and not c4._h.value


def test_dask_refuses_the_asynchronous_client_as_scheduler(cluster):
    async def main():
        c = await cluster.client(asynchronous=True)
        with pytest.raises(RuntimeError):
            dask.compute(da.ones(4).sum(), scheduler=c)
    asyncio.run(main())
