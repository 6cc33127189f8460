"""client.run (a function on every governor's executors, results by
governor) and client.restart (fresh executors, results kept or dropped),
as Dask's Client.run and Client.restart. Tenants: test_isolation.py."""
import concurrent.futures
import os

import pytest

import squall
from conftest import TIMEOUT, cluster_options, until


def pid():
    return os.getpid()


def divide(a, b):
    return a / b


def fmt(a, b=0):
    return "%s-%s" % (a, b)


def blob(n):
    return b"x" * n


def with_timeout(timeout=0):
    return timeout


def plant(value):
    import builtins
    builtins.squall_run_planted = value
    return os.getpid()


def planted():
    import builtins
    return getattr(builtins, "squall_run_planted", None)


def _sleep(seconds):
    import time
    time.sleep(seconds)


def alive(p):
    try:
        os.kill(p, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is gone for our purpose (its governor reaps it)
    try:
        with open("/proc/%d/stat" % p) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pids_of(out):
    """The executors' pids of client.run's {governor: {pid: result}}."""
    return {p for by_pid in out.values() for p in by_pid}


def values_of(out):
    return [v for by_pid in out.values() for v in by_pid.values()]


def gated(gate, started):
    open(os.path.join(started, str(os.getpid())), "w").close()
    return wait_for_file(gate)


def test_run_on_every_executor(tmp_path):
    with squall.LocalCluster(governors=2, cpus=2, **cluster_options()) as cluster:
        client = cluster.client()
        other = cluster.client()        # the same tenant, another connection
        govs = client.governors()
        names = {g["name"] for g in govs}
        assert len(names) == 2
        # no executor of the tenant ran anything yet: nothing to reach
        assert client.run(pid) == {n: {} for n in names}
        # two tasks running at once on each governor: two executors each
        gate, started = str(tmp_path / "gate"), tmp_path / "started"
        started.mkdir()
        tasks = [client.submit(gated, gate, str(started), workers=int(g["id"]), key="gated")
                 for g in govs for _ in range(2)]
        until(lambda: len(os.listdir(started)) == 4, "4 tasks to start")
        # busy executors answer between tasks: the run waits for them
        pool = concurrent.futures.ThreadPoolExecutor(1)
        busy = pool.submit(other.run, pid)
        with pytest.raises(squall.SquallError) as info:
            client._run(pid, (), {}, None, "raise", 0.3)    # run's 30 s, shorter
        assert info.value.code == 16 and "2 governor(s) did not answer" in str(info.value)
        assert not busy.done()
        open(gate, "w").close()
        ran = {t.result(TIMEOUT) for t in tasks}
        assert len(ran) == 4
        out = busy.result(TIMEOUT)
        pool.shutdown()
        assert set(out) == names and pids_of(out) == ran, (out, ran)
        assert all(len(by_pid) == 2 and all(k == v for k, v in by_pid.items())
                   for by_pid in out.values()), out
        # idle now: at once, every executor once
        out = client.run(pid)
        assert pids_of(out) == ran and sum(map(len, out.values())) == 4
        # keywords are the function's, even those named as task options
        assert values_of(client.run(fmt, 1, b=2)) == ["1-2"] * 4
        assert values_of(client.run(with_timeout, timeout=7)) == [7] * 4
        # the function's exception comes back as itself
        with pytest.raises(ZeroDivisionError):
            client.run(divide, 1, 0)
        out = client.run(divide, 1, 0, on_error="return")
        assert pids_of(out) == ran and all(isinstance(e, ZeroDivisionError)
                                           for e in values_of(out))
        assert client.run(divide, 1, 0, on_error="ignore") == {n: {} for n in names}
        one = sorted(names)[0]
        assert set(client.run(pid, workers=[one])) == {one}
        with pytest.raises(ValueError, match="on_error"):
            client.run(pid, on_error="skip")
        # answers stay small (the broker relays them): 64 KiB a governor
        # together; one that does not fit is its executor's error
        assert values_of(client.run(blob, 16 << 10)) == [b"x" * (16 << 10)] * 4
        with pytest.raises(squall.SquallError, match="too large.*64 KiB"):
            client.run(blob, 100 << 10)
        out = client.run(blob, 40 << 10, on_error="return")
        kept = [v for v in values_of(out) if isinstance(v, bytes)]
        refused = [v for v in values_of(out) if isinstance(v, squall.SquallError)]
        assert len(kept) == 2 and len(refused) == 2, out      # one of each governor's two
        assert all(len(by_pid) == 2 for by_pid in out.values()), out
        assert "too large" in str(refused[0])
        # a function too large to send is refused before anything runs
        with pytest.raises(squall.SquallError):
            client.run(fmt, b"x" * (2 << 20))
        other.close()
        client.close()


def test_restart_gives_fresh_executors_and_keeps_results(client):
    before = {client.submit(pid).result(TIMEOUT) for _ in range(4)}
    before |= pids_of(client.run(pid))
    client.run(plant, "planted")
    kept = client.submit(fmt, 5)
    assert kept.result(TIMEOUT) == "5-0"
    client.restart(keep_results=True)
    # it returned once every governor said so: the old executors are gone
    assert not any(alive(p) for p in before), before
    # no executor that ran this client's tasks runs another: new ones run
    # what comes
    after = {client.submit(pid).result(TIMEOUT) for _ in range(4)}
    after |= pids_of(client.run(pid))
    assert not after & before, (before, after)
    assert set(values_of(client.run(planted))) == {None}
    # results kept: the future still has its value, and feeds a new task
    assert kept.result(TIMEOUT) == "5-0"
    assert client.submit(fmt, kept, b=1).result(TIMEOUT) == "5-0-1"


def wait_for_file(path):
    import time
    while not os.path.exists(path):
        time.sleep(0.01)
    return os.getpid()


def test_restart_waits_for_busy_executors_to_end(client, tmp_path):
    # keep_results=True: a running task finishes in its old executor, and
    # restart returns only once that executor is gone too; before, its
    # governor has not confirmed: a timeout names it
    gate = str(tmp_path / "gate")
    started = str(tmp_path / "started")
    busy = client.submit(lambda: (open(started, "w").close(), wait_for_file(gate))[1])
    until(lambda: os.path.exists(started), "the task to start")
    names = [g["name"] for g in client.governors()]
    with pytest.raises(squall.SquallError) as info:
        client.restart(keep_results=True, timeout=0.5)
    assert info.value.code == 16, info.value                # SQ_E_TIMEOUT
    # the one governor whose executor is busy, by name; the other confirmed
    assert "1 governor(s) did not say" in str(info.value), info.value
    assert sum(n in str(info.value) for n in names) == 1, (names, info.value)
    open(gate, "w").close()
    old = busy.result(TIMEOUT)
    client.restart(keep_results=True)
    assert not alive(old)


def test_restart_drops_results_by_default(client):
    done = client.submit(fmt, 6)
    assert done.result(TIMEOUT) == "6-0"
    running = client.submit(_sleep, 600)
    client.restart()
    # every future of the client is cancelled, a value fetched before too
    # (Dask's), and the running one
    with pytest.raises(concurrent.futures.CancelledError):
        done.result(TIMEOUT)
    with pytest.raises(concurrent.futures.CancelledError):
        running.result(TIMEOUT)
    # the client goes on with new futures
    assert client.submit(fmt, 7).result(TIMEOUT) == "7-0"
    client.submit(fmt, 0).result(TIMEOUT)     # an executor of the tenant to reach
    assert set(values_of(client.run(fmt, 8))) == {"8-0"}


def mark(directory):
    open(os.path.join(directory, str(os.getpid())), "w").close()
    return os.getpid()


def test_run_and_restart_leave_out_a_governor_that_leaves(tmp_path):
    # RUN and RESTART wait for every governor (the broker's one fan-out):
    # one that leaves meanwhile is left out, the others' answers kept
    import signal
    with squall.LocalCluster(governors=3, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        other = cluster.client()            # the same tenant, another connection
        by_name = {"local-%d" % (i + 1): p for i, p in enumerate(cluster.governors)}
        started = str(tmp_path / "started")
        os.mkdir(started)
        marks = str(tmp_path / "marks")
        os.mkdir(marks)
        gates = [str(tmp_path / "gate1"), str(tmp_path / "gate2")]
        # local-1 busy until its gate; local-2 and local-3 have idle executors
        busy = [client.submit(gated, gates[0], started, workers=["local-1"])]
        idle = {n: client.submit(pid, workers=[n]).result(TIMEOUT)
                for n in ("local-2", "local-3")}
        until(lambda: len(os.listdir(started)) == 1, "the gated task to start")
        pool = concurrent.futures.ThreadPoolExecutor(2)
        run = pool.submit(other.run, mark, marks)
        # the others ran it: the RUN reached every governor; local-1's waits
        until(lambda: len(os.listdir(marks)) == 2, "local-2 and local-3 to run it")
        assert not run.done()
        by_name["local-1"].send_signal(signal.SIGKILL)
        out = run.result(TIMEOUT)
        assert out["local-2"] == {idle["local-2"]: idle["local-2"]}, out
        assert out["local-3"] == {idle["local-3"]: idle["local-3"]}, out
        assert not out.get("local-1"), out
        # RESTART: local-3's idle executor stops at once, local-2's busy one
        # is waited for until local-2 leaves
        busy.append(client.submit(gated, gates[1], started, workers=["local-2"]))
        until(lambda: len(os.listdir(started)) == 2, "the second gated task to start")
        restart = pool.submit(other.restart, True)
        until(lambda: not alive(idle["local-3"]), "local-3's executor to stop")
        assert not restart.done()
        by_name["local-2"].send_signal(signal.SIGKILL)
        assert restart.result(TIMEOUT) is None
        for gate in gates:
            open(gate, "w").close()
        pool.shutdown()
        other.close()
        client.close()
