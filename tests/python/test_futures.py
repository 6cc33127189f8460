"""Dask/Ray-style futures."""
import time

import pytest

import squall

from conftest import TIMEOUT, finalised_under_lock, until


def inc(x):
    return x + 1


def slow(x, seconds):
    time.sleep(seconds)
    return x


def boom(x):
    raise KeyError(x)


def test_submit_result_done(client):
    f = client.submit(inc, 1)
    assert f.result(TIMEOUT) == 2
    assert f.done()
    assert f.exception(TIMEOUT) is None
    g = client.submit(lambda a, b=0: a * b, 6, b=7)
    assert g.result(TIMEOUT) == 42


def test_futures_as_arguments_stay_on_the_cluster(client):
    a = client.submit(inc, 1)
    b = client.submit(inc, a)
    c = client.submit(lambda xs, d: sum(xs) + d["k"], [a, b], {"k": a})
    assert c.result(TIMEOUT) == 2 + 3 + 2
    chain = client.submit(inc, 0)
    for _ in range(50):
        chain = client.submit(inc, chain)
    assert chain.result(TIMEOUT) == 51


def test_map_gather_nested(client):
    futures = client.map(inc, range(500))
    assert client.gather(futures, timeout=TIMEOUT) == list(range(1, 501))
    pairs = client.map(lambda a, b: a * b, range(5), range(5, 10))
    nested = client.gather({"p": pairs, "one": futures[0], "t": (futures[1],)})
    assert nested == {"p": [0, 6, 14, 24, 36], "one": 1, "t": (2,)}


def test_failures_exception_and_gather(client):
    bad = client.submit(boom, "key")
    after = client.submit(inc, bad)
    with pytest.raises(KeyError) as info:
        bad.result(TIMEOUT)
    assert isinstance(info.value.__cause__, squall.RemoteTraceback)
    assert "in boom" in info.value.__cause__.traceback
    assert isinstance(after.exception(TIMEOUT), KeyError)
    assert "task %d" % bad.task_id in str(after.exception().__cause__)
    assert after.done()
    futures = client.map(inc, range(10)) + [after]
    with pytest.raises(KeyError):
        client.gather(futures, timeout=TIMEOUT)


def gated(x, gate):
    """Returns x once the test opens the gate (a file)."""
    import os
    deadline = time.monotonic() + 120
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
    return x


def test_result_timeout_and_as_completed(client, tmp_path):
    #   "late" ends only once "early" came out of as_completed: the order
    #   is the tasks', whatever the machine's speed (a 2 s sleep was not
    #   always longer than an executor's start on a loaded machine).
    gate = str(tmp_path / "gate")
    s = client.submit(gated, "late", gate)
    with pytest.raises(squall.TimeoutError):
        s.result(timeout=0.05)
    assert not s.done()
    fast = client.submit(slow, "early", 0.0)
    order = []
    try:
        for f in squall.as_completed([s, fast], timeout=TIMEOUT):
            order.append(f.result())
            open(gate, "w").close()
    finally:
        open(gate, "w").close()
    assert order == ["early", "late"]


def test_options_cpus_retries_key(client):
    f = client.submit(inc, 1, cpus=1, max_retries=2, key="my-inc", priority=1)
    assert f.result(TIMEOUT) == 2
    assert f.key == "my-inc"
    # no governor has 1000 cpus: it waits for one (--resource-wait) asking for them
    big = client.submit(inc, 1, cpus=1000)
    until(lambda: any(w["task"] == big.task_id and w["needs"] == "cpus=1000"
                      for w in client.info()["resource_waits"]), "the 1000-cpu task to wait")
    big.cancel()
    futures = client.map(inc, range(3), cpus=1, max_retries=1)
    assert client.gather(futures) == [1, 2, 3]


def test_many_futures_released(client):
    for _ in range(3):
        assert sum(client.gather(client.map(inc, range(2000)), timeout=TIMEOUT)) == \
            sum(range(1, 2001))


def test_a_session_collected_in_a_thread_the_lock_holder_waits_for(client):
    """The garbage collector runs a session's finaliser in any thread, maybe
    one the holder of the client's lock waits for (Thread.start waits for
    the new thread): the finaliser must not wait for the lock (a deadlock
    seen in CI), and the session is closed once the lock is let go."""
    from squall._session import Session
    session = Session(client)          # held by nothing else
    handle = session._h
    assert handle.value
    box = [session]
    del session
    #   A session is in cycles, so the collector finalises it, there
    finalised_under_lock(box, client._lock, handle, "session")


@pytest.mark.parametrize("kind", ["Client", "TaskClient"])
def test_a_client_collected_in_a_thread_the_lock_holder_waits_for(cluster, kind):
    """The same for a client's own finaliser (a task's client's too): it
    neither waits for its lock nor joins a thread that takes it; the
    connection closes once the lock is let go."""
    from squall import _worker
    cls = squall.Client if kind == "Client" else _worker._task_client_class()
    client = cls(cluster.address, secret_key=cluster.secret_key, broker_key=cluster.broker_key)
    assert isinstance(client.info(), dict)
    lock, handle = client._lock, client._h
    assert handle.value
    box = [client]
    del client
    finalised_under_lock(box, lock, handle, "client")


def test_a_dropped_client_is_closed_without_close(cluster):
    """A client that submitted (so its flusher thread runs) and that the
    user drops without close() is collected: its finaliser closes the
    connection (the broker counts one client less), and the flusher ends.
    The flusher held it strongly before, so it never was."""
    import gc
    import weakref
    keys = dict(secret_key=cluster.secret_key, broker_key=cluster.broker_key)
    with squall.Client(cluster.address, **keys) as watcher:
        before = watcher.info()["clients"]
        client = squall.Client(cluster.address, **keys)
        until(lambda: watcher.info()["clients"] == before + 1, "the new client counted")
        assert client.submit(inc, 1).result(TIMEOUT) == 2
        flusher = client._flusher
        assert flusher is not None and flusher.is_alive()
        ref = weakref.ref(client)
        del client
        until(lambda: (gc.collect(), ref() is None)[1], "the dropped client collected")
        until(lambda: watcher.info()["clients"] == before, "the dropped client's connection closed")
        until(lambda: not flusher.is_alive(), "the dropped client's flusher ended")


def _wait_for_gate(started, gate):
    import os
    open(started, "w").close()
    while not os.path.exists(gate):
        time.sleep(0.01)
    return "through"


def test_gather_of_made_results_does_not_wait_for_a_cpu(tmp_path):
    """Results already made are gathered while a task that waits for the
    test holds the only cpu: gather's joining tasks take no cpu (they
    waited for it to end before)."""
    import os
    from conftest import cluster_options
    started, gate = str(tmp_path / "started"), str(tmp_path / "gate")
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        futures = client.map(inc, range(30))
        until(lambda: all(f.done() for f in futures), "the tasks to finish")
        blocker = client.submit(_wait_for_gate, started, gate)
        until(lambda: os.path.exists(started), "the blocking task to start")
        assert client.gather(futures, timeout=TIMEOUT) == list(range(1, 31))
        assert not blocker.done()
        open(gate, "w").close()
        assert blocker.result(TIMEOUT) == "through"
        client.close()
