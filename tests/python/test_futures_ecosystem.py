"""squall futures where a concurrent.futures.Future is expected (issue 15):
callbacks, concurrent.futures.wait / as_completed, cancel, asyncio, await;
squall.wait; a client shared by threads; scatter. Tasks that must stay
running wait for a file the test creates (no timing assumptions)."""
import asyncio
import concurrent.futures as cf
import gc
import os
import threading
import time

import pytest

import squall

from conftest import TIMEOUT


def inc(x):
    return x + 1


def gate(path, value=None):
    """Runs until `path` exists (the test opens the gate)."""
    while not os.path.exists(path):
        time.sleep(0.005)
    return value


def fail(message):
    raise ValueError(message)


def open_gate(path):
    with open(path, "w"):
        pass


def test_is_a_concurrent_future_with_callbacks(client, tmp_path):
    g = str(tmp_path / "gate")
    f = client.submit(gate, g, 5)
    assert isinstance(f, cf.Future)
    called = []
    done = threading.Event()

    def callback(fut):
        called.append((fut, threading.current_thread().name))
        done.set()

    f.add_done_callback(callback)
    assert not f.done() and f.running() and not f.cancelled()
    open_gate(g)
    assert done.wait(TIMEOUT)
    assert called[0][0] is f and f.result() == 5
    # on a done future the callback runs at once, in this thread
    again = []
    f.add_done_callback(lambda fut: again.append(threading.current_thread()))
    assert again == [threading.current_thread()]


def test_concurrent_futures_wait_and_as_completed(client, tmp_path):
    g = str(tmp_path / "gate")
    fast = client.submit(inc, 1)
    slow = client.submit(gate, g, "slow")
    done, not_done = cf.wait([fast, slow], timeout=TIMEOUT, return_when=cf.FIRST_COMPLETED)
    assert fast in done and slow in not_done
    order = []
    open_gate(g)
    for fut in cf.as_completed([slow, fast], timeout=TIMEOUT):
        order.append(fut)
    assert set(order) == {fast, slow}
    done, not_done = cf.wait([fast, slow], timeout=TIMEOUT)
    assert not not_done and slow.result() == "slow"


def test_squall_wait_return_when(client, tmp_path):
    g = str(tmp_path / "gate")
    bad = client.submit(fail, "first")
    held = client.submit(gate, g)
    done, not_done = squall.wait([bad, held], timeout=TIMEOUT,
                                 return_when=squall.FIRST_EXCEPTION)
    assert done == {bad} and not_done == {held}
    assert isinstance(bad.exception(), ValueError)
    open_gate(g)
    done, not_done = squall.wait([bad, held], timeout=TIMEOUT)
    assert not not_done


def test_cancel_stops_the_task_and_its_dependents(client, tmp_path):
    g = str(tmp_path / "never")            # this gate is never opened
    waiter_done = []
    held = client.submit(gate, g)
    after = client.submit(inc, held)
    held.add_done_callback(lambda fut: waiter_done.append(fut.cancelled()))
    _, pending = cf.wait([held], timeout=0)
    assert pending == {held}
    assert held.cancel()
    assert held.cancelled() and held.done() and waiter_done == [True]
    with pytest.raises(cf.CancelledError):
        held.result()
    done, _ = cf.wait([held], timeout=TIMEOUT)
    assert held in done
    assert after.exception(TIMEOUT) is not None     # never runs
    # the cancelled task no longer holds a slot: the cluster runs the rest
    assert client.gather(client.map(inc, range(8)), timeout=TIMEOUT) == list(range(1, 9))
    finished = client.submit(inc, 1)
    assert finished.result(TIMEOUT) == 2
    assert not finished.cancel() and not finished.cancelled()


def test_asyncio_wrap_future_and_await(client, tmp_path):
    g = str(tmp_path / "gate")

    async def main():
        a = client.submit(inc, 41)
        b = client.submit(gate, g, "b")
        wrapped = asyncio.wrap_future(b)
        assert await a == 42
        assert not wrapped.done()
        open_gate(g)
        values = await asyncio.gather(wrapped, client.submit(inc, 1))
        return values

    assert asyncio.run(main()) == ["b", 2]


def test_threads_share_a_client(client):
    results = {}
    errors = []

    def work(n):
        try:
            futures = client.map(inc, range(n * 100, n * 100 + 50))
            total = sum(client.gather(futures, timeout=TIMEOUT))
            single = client.submit(inc, n).result(TIMEOUT)
            results[n] = (total, single)
        except Exception as exc:    # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not errors, errors
    assert results == {n: (sum(range(n * 100 + 1, n * 100 + 51)), n + 1) for n in range(4)}


def test_a_blocking_wait_lets_other_threads_through(client, tmp_path):
    g = str(tmp_path / "gate")
    held = client.submit(gate, g, "late")
    waiting = threading.Thread(target=held.result, args=(TIMEOUT,))
    waiting.start()
    # while that thread waits for the held task, this one's calls go through
    other = []
    t = threading.Thread(target=lambda: other.append(client.submit(inc, 1).result(TIMEOUT)))
    t.start()
    t.join(TIMEOUT / 2)
    try:
        assert other == [2], "a call from another thread waited behind a blocking result()"
        assert waiting.is_alive()
    finally:
        open_gate(g)
        waiting.join(TIMEOUT)
    assert held.result() == "late"


def test_future_del_from_another_thread_is_accounted(client):
    futures = client.map(inc, range(40))
    assert client.gather(futures, timeout=TIMEOUT)[-1] == 40
    box = [futures]
    del futures
    # collected in another thread, while this one goes on
    t = threading.Thread(target=lambda: (box.clear(), gc.collect()))
    t.start()
    t.join(TIMEOUT)
    keep = client.submit(inc, 1)
    assert keep.result(TIMEOUT) == 2
    assert client._live_futures == 1 and not client._dead


def test_done_submits_a_buffered_future(client):
    f = client.submit(inc, 1)
    deadline = time.monotonic() + TIMEOUT
    while not f.done() and time.monotonic() < deadline:
        pass
    assert f.result() == 2


def test_scatter(client):
    data = list(range(10000))
    [x] = client.scatter([data])            # a list scatters its items, as in Dask
    assert isinstance(x, squall.Future) and x.done() and x.result() is data
    futures = [client.submit(sum, x) for _ in range(5)] + [client.submit(len, x)]
    assert client.gather(futures, timeout=TIMEOUT) == [sum(data)] * 5 + [10000]
    many = client.scatter([1, 2, 3])
    assert client.gather(client.map(inc, many), timeout=TIMEOUT) == [2, 3, 4]
    named = client.scatter({"a": 1, "b": 2})
    assert set(named) == {"a", "b"}
    assert client.submit(lambda a, b: a + b, named["a"], named["b"]).result(TIMEOUT) == 3
