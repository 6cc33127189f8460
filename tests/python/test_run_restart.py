"""client.run (a function on every governor's executors, results by
governor) and client.restart (fresh executors, results kept or dropped),
as Dask's Client.run and Client.restart. Tenants: test_isolation.py."""
import concurrent.futures
import os

import pytest

import squall
from squall import _clusterwide
from conftest import TIMEOUT, cluster_options, key_client, until


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
            _clusterwide.run(client, pid, (), {}, None, "raise", 0.3)    # run's 30 s, shorter
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
        # answers stay on the governors, which the client reads directly
        # (RUNREAD, 4 MiB a read): 4 MiB an executor, 8 MiB a governor
        big = client.run(blob, 4 << 20)
        assert pids_of(big) == ran and values_of(big) == [b"x" * (4 << 20)] * 4
        del big
        # a governor keeps 64 MiB of answers at most: one that does not fit
        # is its executor's error
        with pytest.raises(squall.SquallError, match="too large.*64 MiB"):
            client.run(blob, 65 << 20)
        out = client.run(blob, 33 << 20, on_error="return")
        kept = [v for v in values_of(out) if isinstance(v, bytes)]
        refused = [v for v in values_of(out) if isinstance(v, squall.SquallError)]
        assert len(kept) == 2 and len(refused) == 2, [type(v) for v in values_of(out)]
        assert all(len(by_pid) == 2 for by_pid in out.values())   # one of each governor's two
        assert "too large" in str(refused[0])
        del out, kept
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


def _answer_after(gate, mark):
    """Governor A's answer waits for the test; B's comes at once."""
    open(os.path.join(mark, "%d" % os.getpid()), "w").close()
    if os.path.exists(os.path.join(mark, "slow-%d" % os.getpid())):
        wait_for_file(gate)
    return os.getpid()


def test_run_answers_of_a_governor_gone_before_the_fetch_are_lost_not_the_others(tmp_path):
    """The answers stay on the governors until the client reads them: a
    governor that answered and died before the client read is reported as
    its lost answers (one error, pid 0), the other governor's still come."""
    with squall.LocalCluster(governors=2, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        other = cluster.client()
        govs = sorted(client.governors(), key=lambda g: int(g["id"]))
        slow, dying = govs
        # one live executor on each
        first = {g["name"]: client.submit(pid, workers=int(g["id"])).result(TIMEOUT) for g in govs}
        mark, gate = tmp_path / "mark", str(tmp_path / "gate")
        mark.mkdir()
        (mark / ("slow-%d" % first[slow["name"]])).touch()
        pool = concurrent.futures.ThreadPoolExecutor(1)
        running = pool.submit(other.run, _answer_after, gate, str(mark), on_error="return")
        until(lambda: (mark / str(first[dying["name"]])).exists(), "the dying governor's answer")
        # Its RAN went to the broker before this task's FINISHED (one
        # connection, in order; one executor): once the result is here the
        # broker knows it answered.
        assert client.submit(pid, workers=int(dying["id"])).result(TIMEOUT) == first[dying["name"]]
        proc = cluster.governors[int(dying["name"].rsplit("-", 1)[1]) - 1]
        proc.kill()
        proc.wait(TIMEOUT)
        open(gate, "w").close()
        out = running.result(TIMEOUT)
        pool.shutdown()
        assert out[slow["name"]] == {first[slow["name"]]: first[slow["name"]]}, out
        lost = out[dying["name"]]
        assert list(lost) == [0] and isinstance(lost[0], squall.SquallError), out
        assert "answers of governor %s were lost" % dying["id"] in str(lost[0]), str(lost[0])
        other.close()
        client.close()


def test_a_runs_answers_are_read_only_with_its_clients_capability(tmp_path):
    """RUN's reply says where each governor keeps its answers, with a
    capability for the client that ran it and that run: another tenant's
    client presenting it, or its own for another run, is refused
    (SQ_E_DENIED) and reads nothing; the owner reads the answers."""
    zmq = pytest.importorskip("zmq")
    msgpack = pytest.importorskip("msgpack")
    import signal
    import zmq.auth
    from zmq.utils import z85
    from squall import _pickling

    def curve(sock, secret_file, server_public):
        public, secret = zmq.auth.load_certificate(secret_file)
        sock.curve_publickey, sock.curve_secretkey = public, secret
        sock.curve_serverkey = server_public

    def call(sock, message, frames=1):
        sock.send(msgpack.packb(message, use_bin_type=True))
        assert sock.poll(TIMEOUT * 1000), "no reply to %r" % (message[:2],)
        parts = sock.recv_multipart()
        assert len(parts) == frames or msgpack.unpackb(parts[0], raw=False, strict_map_key=False)[2] != 0, parts
        return msgpack.unpackb(parts[0], raw=False, strict_map_key=False), parts[1:]

    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        authorized = cluster._keys["authorized"]
        bob_key = squall.keygen("bob-run", authorized, "client", "team-b")
        cluster.broker.send_signal(signal.SIGHUP)
        client = cluster.client()
        client.submit(pid).result(TIMEOUT)          # a live executor of the tenant
        broker_public, _ = zmq.auth.load_certificate(cluster.broker_key)
        ctx = zmq.Context()
        socks = []

        def dealer(secret_file, server_public, endpoint):
            s = ctx.socket(zmq.DEALER)
            s.linger = 0
            curve(s, secret_file, server_public)
            s.connect(endpoint)
            socks.append(s)
            return s

        try:
            def run(secret_file):
                broker = dealer(secret_file, broker_public, cluster.address)
                hello, _ = call(broker, [1, 1, 2, "client", "raw"])
                assert hello[2] == 0, hello
                fn = _pickling.dumps((pid, (), {}))
                reply, _ = call(broker, [86, 2, 10000, fn])
                assert reply[2] == 0, reply
                run_id, governors = reply[3]
                ((gov, (answers, size, where)),) = governors.items()
                assert where[0] == gov and len(where[3]) == 41
                return run_id, answers, size, where

            alice_run, answers, size, where = run(cluster.secret_key)
            assert answers == 1 and size > 0
            until(lambda: key_client(cluster, bob_key), "the broker to take bob's key").close()
            bob_run, answers, _, bob_where = run(bob_key)
            assert answers == 0 and bob_run != alice_run       # no executor of bob's tenant
            _, endpoint, governor_key, capability = where
            assert len(capability) == 41
            server = z85.encode(governor_key)

            def runread(secret_file, run_id, cap):
                sock = dealer(secret_file, server, endpoint)
                reply, payload = call(sock, [94, 7, run_id, 0, 1 << 20, cap], frames=2)
                return reply, payload

            # bob with alice's capability; bob's capability for alice's run
            for who, run_id, cap in ((bob_key, alice_run, capability),
                                     (bob_key, alice_run, bob_where[3]),
                                     (cluster.secret_key, alice_run, bob_where[3])):
                reply, payload = runread(who, run_id, cap)
                assert reply[2] == 24 and not payload, reply         # SQ_E_DENIED
            # alice with hers: the answers, [[pid, ok, pickled result]]
            reply, payload = runread(cluster.secret_key, alice_run, capability)
            assert reply[2] == 0 and reply[3] == [size, size, True], reply
            ((executor, ok, raw),) = msgpack.unpackb(payload[0], raw=False)
            assert ok and pickle_loads(raw) == executor
            # read to the end: no longer kept
            reply, _ = runread(cluster.secret_key, alice_run, capability)
            assert reply[2] == 6, reply                               # SQ_E_UNKNOWN_ID
        finally:
            for s in socks:
                s.close()
            ctx.term()
        client.close()


def pickle_loads(raw):
    import pickle
    return pickle.loads(raw)
