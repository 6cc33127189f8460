"""Actors (issue 17, seed 003's "bound to a single worker because it has
state"): state across calls, order of calls made from two threads, data
objects in and out, resources held while the actor lives, and a governor
SIGKILLed under an actor with and without restarts.

Over 800 lines: every actor case shares this file's cluster fixtures and
its helpers for calls made in runs and batches; split by theme, the
batching cases would need them in a third module."""
import gc
import os
import signal
import socket
import struct
import tempfile
import threading
import time
import warnings

import pytest

import squall
from conftest import TIMEOUT, cluster_options, run_example, until


@squall.actor
class Counter:
    def __init__(self, start=0):
        self.n = start
        self.calls = 0

    def add(self, k=1):
        self.n += k
        return self.n

    def seq(self, tag):
        """The place of this call among all the calls this instance ran."""
        self.calls += 1
        return self.calls, tag

    def boom(self):
        raise ValueError("boom at %d" % self.n)

    def governor_pid(self):
        return os.getppid()     # the executor's parent is its governor

    def wait_for(self, started, gate):
        open(started, "w").close()
        while not os.path.exists(gate):
            time.sleep(0.01)
        return self.n

    def add_one(self, blob):
        """add(1), with a (large) argument."""
        self.n += 1
        return self.n

    def total(self, values):
        return sum(values) + self.n

    def blob(self, size):
        return b"x" * size

    def exit_now(self):
        os._exit(3)

    def calls_behind(self, started, n):
        """Runs until n more calls are written to this executor (peeked at
        on its socket, unread: they came while it ran)."""
        import _squall_executor as ex
        open(started, "w").close()
        while True:
            try:
                data = ex._sock.recv(1 << 16, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                data = b""
            pos = count = 0
            while pos + 8 <= len(data):
                pos += 8 + struct.unpack_from("<Q", data, pos)[0]
                count += pos <= len(data)
            if count >= n:
                return count
            time.sleep(0.005)

    def take_alarm(self):
        """SIGALRM is the instance's now."""
        signal.signal(signal.SIGALRM, lambda signum, frame: None)

    def warn(self, tag):
        warnings.warn("warned %s" % tag)
        return tag

    def ignore_warnings(self):
        warnings.simplefilter("ignore")
        return "ignoring"

    def lock(self):
        return threading.Lock()

    def adder(self, k):
        return lambda x: x + k      # by value: cloudpickle


class Reader:
    """Takes large arguments: what each call saw, in the order they ran."""

    def __init__(self):
        self.calls = 0

    def take(self, tag, value):
        self.calls += 1
        flags = getattr(value, "flags", None)
        return (self.calls, tag, type(value).__name__, len(value),
                None if flags is None else flags.writeable, os.getppid())

    def boom(self, value):
        raise ValueError("boom with %d bytes" % len(value))

    def governor_pid(self):
        return os.getppid()


class Broken:
    def __init__(self):
        raise RuntimeError("cannot start")

    def ping(self):
        return 1



def governor_proc(cluster, pid):
    procs = [p for p in cluster.governors if p.pid == pid]
    assert procs, "the actor's governor %d is not one of the cluster's" % pid
    return procs[0]


def test_state_and_order_of_calls_from_two_threads():
    """10 000 calls from two threads run in the order they were made; the
    instance keeps its state across them."""
    with squall.LocalCluster(governors=2, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = Counter.start(client, 5)
        assert counter.add(2).result(TIMEOUT) == 7
        made = []                   # futures in the order the calls were made
        order = threading.Lock()

        def caller(name):
            for i in range(5000):
                with order:
                    made.append(counter.seq((name, i)))

        threads = [threading.Thread(target=caller, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        results = client.gather(made, timeout=TIMEOUT)
        assert [r[0] for r in results] == list(range(1, 10001))
        for name in ("a", "b"):
            assert [r[1][1] for r in results if r[1][0] == name] == list(range(5000))
        assert counter.add(0).result(TIMEOUT) == 7
        counter.stop()
        client.close()
    assert cluster.exit_codes["broker"] == 0, cluster.exit_codes


def test_calls_take_and_return_data_objects_and_raise():
    with squall.LocalCluster(governors=2, cpus=2, **cluster_options()) as cluster:
        client = cluster.client()
        counter = client.actor(Counter, 1, key="tally")
        values = client.submit(lambda n: list(range(n)), 5)
        total = counter.total(values)               # a task's output goes in
        doubled = client.submit(lambda x: 2 * x, total)   # a call's result goes on
        assert doubled.result(TIMEOUT) == 2 * (10 + 1)
        # a method that raises fails its own call only
        with pytest.raises(ValueError, match="boom at 1"):
            counter.boom().result(TIMEOUT)
        assert counter.add(1).result(TIMEOUT) == 2
        with pytest.raises(AttributeError):
            counter.no_such_method
        counter.stop()
        with pytest.raises(squall.SquallError, match="stopped"):
            counter.add(1)
        client.close()


def test_calls_of_an_actor_that_cannot_start_fail_naming_it():
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        broken = client.actor(Broken, key="broken")
        with pytest.raises(squall.ActorLost) as info:
            broken.ping().result(TIMEOUT)
        assert "broken" in str(info.value) and "cannot start" in str(info.value)
        # the governor is free again
        assert client.submit(lambda: 3).result(TIMEOUT) == 3
        client.close()


def test_an_actor_holds_its_cpus_until_it_stops():
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = Counter.start(client, 0)
        assert counter.add(1).result(TIMEOUT) == 1
        waiting = client.submit(lambda: "ran")
        # The actor's calls go on (they run on its cpu) while the task waits
        # for the only cpu, which the actor holds.
        for i in range(20):
            assert counter.add(1).result(TIMEOUT) == i + 2
        assert not waiting.done()
        counter.stop()
        assert waiting.result(TIMEOUT) == "ran"
        client.close()


def test_gather_of_calls_needs_no_cpu_the_actor_holds():
    """client.gather of many calls joins their results in gather tasks;
    those took a cpu, and the actor holds the only one for good, so the
    gather hung (also on builds before issue 26). gather's timeout turns a
    hang into a failure."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = Counter.start(client, 0)
        calls = [counter.add(1) for _ in range(50)]
        assert client.gather(calls, timeout=TIMEOUT) == list(range(1, 51))
        # as_completed and wait fetch each call's result on its own
        more = [counter.add(1) for _ in range(10)]
        assert sorted(f.result(TIMEOUT) for f in squall.as_completed(more, timeout=TIMEOUT)) \
            == list(range(51, 61))
        last = [counter.add(1) for _ in range(10)]
        done, not_done = squall.wait(last, timeout=TIMEOUT)
        assert not not_done and sorted(f.result(0) for f in done) == list(range(61, 71))
        assert client.gather({"a": last[:5], "b": last[5:]}, timeout=TIMEOUT) \
            == {"a": list(range(61, 66)), "b": list(range(66, 71))}
        counter.stop()
        client.close()


def test_gather_of_finished_tasks_while_an_actor_holds_every_cpu():
    """Results already made are gathered while an actor holds every cpu of
    the cluster: gathering them runs nothing that needs a cpu."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        futures = client.map(lambda x: x * 3, range(40))
        until(lambda: all(f.done() for f in futures), "the tasks to finish")
        counter = Counter.start(client, 0)
        assert counter.add(1).result(TIMEOUT) == 1      # the actor holds the cpu now
        waiting = client.submit(lambda: "ran")
        assert client.gather(futures, timeout=TIMEOUT) == [x * 3 for x in range(40)]
        assert not waiting.done()       # the cpu was the actor's throughout
        counter.stop()
        assert waiting.result(TIMEOUT) == "ran"
        client.close()


def test_gather_while_an_actor_fills_its_tenants_cpu_cap():
    """--tenant-quota cpus=1: the actor fills the tenant's cap for good, with
    cpus free on the governor. A task waiting over the cap held its tenant's
    queue, and gather's tasks behind it never ran."""
    with squall.LocalCluster(governors=1, cpus=2, broker_args=["--tenant-quota", "*:cpus=1"],
                             **cluster_options()) as cluster:
        client = cluster.client()
        futures = client.map(lambda x: x * 2, range(10))
        until(lambda: all(f.done() for f in futures), "the tasks to finish")
        counter = Counter.start(client, 0)
        assert counter.add(1).result(TIMEOUT) == 1
        waiting = client.submit(lambda: "ran")      # over the cap, ahead of the gathers
        assert client.gather(futures, timeout=TIMEOUT) == [x * 2 for x in range(10)]
        assert client.gather([counter.add(1) for _ in range(20)], timeout=TIMEOUT) \
            == list(range(2, 22))
        assert not waiting.done()
        counter.stop()
        assert waiting.result(TIMEOUT) == "ran"
        client.close()


def test_an_actor_given_no_cpus_leaves_them_to_tasks():
    """cpus=0 (README: an actor that should not hold a cpu while idle): tasks
    run beside it on the only cpu."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = client.actor(Counter, 5, cpus=0)
        assert counter.add(1).result(TIMEOUT) == 6      # it runs
        assert client.submit(lambda: "ran").result(TIMEOUT) == "ran"
        assert counter.add(1).result(TIMEOUT) == 7      # and lived throughout
        counter.stop()
        client.close()


def _size_and_governor(data):
    return len(data), os.getppid()      # the executor's parent is its governor


def test_a_call_result_is_read_where_a_cpu_is_free():
    """A task reading a 2.7 MB result of a call runs while the actor lives:
    the actor holds its governor's only cpu for good, so the task goes to
    the idle governor and copies the bytes there, rather than wait behind
    the actor (issue 26: it never ran)."""
    with squall.LocalCluster(governors=2, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = Counter.start(client, 0)
        actor_pid = counter.governor_pid().result(TIMEOUT)
        size, pid = client.submit(_size_and_governor, counter.blob(2_700_000)).result(TIMEOUT)
        assert size == 2_700_000
        assert pid != actor_pid
        assert counter.add(1).result(TIMEOUT) == 1      # the actor lived throughout
        counter.stop()
        client.close()


def test_a_dropped_handle_stops_its_actor():
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = Counter.start(client, 0)
        assert counter.add(1).result(TIMEOUT) == 1
        del counter
        gc.collect()
        # Only once the actor let its cpu go can this run.
        assert client.submit(lambda: "ran").result(TIMEOUT) == "ran"
        client.close()


def _gated(counter):
    """A call of counter that runs until the returned gate file exists,
    once it started (polled, with a deadline)."""
    where = tempfile.mkdtemp(prefix="squall-actor-")
    started, gate = os.path.join(where, "started"), os.path.join(where, "gate")
    call = counter.wait_for(started, gate)
    until(lambda: os.path.exists(started), "the call to start")
    return call, gate


def test_calls_made_like_the_last_one_keep_their_values_names_and_order():
    """Calls of plain values after the first of their method in a batch
    are copies of it with their own arguments (Session._call_like): two
    methods interleaved, with calls that cannot be copies (keywords, a
    long string) among them, each runs once, in order, with its own
    arguments, named as its method."""
    from squall._pickling import py_config_call, py_config_call_head
    from squall._pickling import _bin
    for method, template in (("add", b"\x80\x05"), ("m" * 40, b"t" * 300)):
        assert py_config_call_head(7, method) + _bin(template) == \
            py_config_call(7, method, template)
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = client.actor(Counter, key="tally")
        long = "x" * (1 << 16)
        made, expected, n = [], [], 0
        for i in range(600):
            if i % 50 == 7:
                made.append(counter.add(k=0))
                expected.append(n)
            elif i % 50 == 8:
                made.append(counter.seq(long))
                expected.append(None)
            elif i % 2:
                made.append(counter.seq("t%d" % i))
                expected.append(None)
            else:
                made.append(counter.add(i))
                n += i
                expected.append(n)
        results = client.gather(made, timeout=TIMEOUT)
        places = [r[0] for r, e in zip(results, expected) if e is None]
        assert places == list(range(1, len(places) + 1))
        for i, (r, e) in enumerate(zip(results, expected)):
            if e is not None:
                assert r == e, (i, r, e)
            elif i % 50 == 8:
                assert r[1] == long
            else:
                assert r[1] == "t%d" % i
        assert {f.key for f in made} == {"tally.add", "tally.seq"}
        client.close()


def test_gathered_calls_finish_their_futures_for_waiters_callbacks_and_later_reads():
    """gather finishes a chunk's futures together (Future._set_values):
    those nobody waits on without a lock each, the others the usual way.
    Each kind must come out done with its own value: a future with a
    done-callback, futures another thread waits on, one already read, and
    the plain rest (which concurrent.futures.wait and as_completed must
    then see as finished, not pending)."""
    import concurrent.futures as cf
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = Counter.start(client, 0)
        running, gate = _gated(counter)
        calls = [counter.add(1) for _ in range(300)]
        called = {}
        for i in range(0, 300, 7):
            calls[i].add_done_callback(lambda f, i=i: called.__setitem__(i, f.result()))
        waited, box = calls[100:110], []
        waiter = threading.Thread(target=lambda: box.append(cf.wait(waited, timeout=TIMEOUT)))
        waiter.start()
        open(gate, "w").close()
        assert running.result(TIMEOUT) == 0
        assert calls[5].result(TIMEOUT) == 6
        assert client.gather(calls, timeout=TIMEOUT) == list(range(1, 301))
        waiter.join(TIMEOUT)
        assert not waiter.is_alive() and len(box[0].done) == 10 and not box[0].not_done
        assert called == {i: i + 1 for i in range(0, 300, 7)}
        assert all(f.done() and not f.cancelled() and f.exception() is None for f in calls)
        done, not_done = cf.wait(calls, timeout=0)
        assert len(done) == 300 and not not_done
        assert sorted(f.result() for f in cf.as_completed(calls, timeout=0)) == \
            list(range(1, 301))
        client.close()


def _inc(x):
    return x + 1


def test_calls_made_like_the_last_one_are_added_again_after_a_refused_batch():
    """The broker refuses a batch for one task in it (an input deleted):
    the actor calls around it, copies of their method's last call
    (Session._call_like), are added again, the first of each method the
    plain way (its model was in the refused batch), the rest as copies of
    that; each runs once, in order, with its own arguments and name."""
    with squall.LocalCluster(governors=1, cpus=2, **cluster_options()) as cluster:
        client = cluster.client()
        counter = client.actor(Counter, key="again")
        assert counter.add(0).result(TIMEOUT) == 0
        gone = client.submit(_inc, 1)
        assert gone.result(TIMEOUT) == 2
        gone.delete()
        session = counter._session
        copied = []
        like = session._call_like

        def counted(model, head, args):
            tid = like(model, head, args)
            copied.append(tid is not None)
            return tid

        session._call_like = counted
        #   The client's lock held: all leave in one batch, which the
        #   broker refuses whole for the task given the deleted object.
        with client._lock:
            made = [counter.seq("b%d" % i) for i in range(6)]
            made += [counter.add(i) for i in range(1, 4)]
            refused = client.submit(_inc, gone)
            made += [counter.seq("a%d" % i) for i in range(6)]
            made += [counter.add(i) for i in range(4, 7)]
            before = copied.count(True)
        assert before == 5 + 2 + 6 + 3     # all but the first of each method
        with pytest.raises(squall.SquallError, match="refused the task of"):
            refused.result(TIMEOUT)
        results = client.gather(made, timeout=TIMEOUT)
        #   Added again: copies once more, but for the first of each method
        #   (not even tried: its model was void).
        assert copied == [True] * (2 * before), copied
        seqs = [r for r in results if isinstance(r, tuple)]
        assert [tag for _, tag in seqs] == ["b%d" % i for i in range(6)] + \
            ["a%d" % i for i in range(6)]
        assert [place for place, _ in seqs] == list(range(1, 13))
        adds = [r for r in results if not isinstance(r, tuple)]
        assert adds == [1, 3, 6, 10, 15, 21]
        assert {f.key for f in made} == {"again.add", "again.seq"}
        session._call_like = like
        client.close()


def test_calls_made_like_the_last_one_reach_the_library_once_per_batch():
    """Copies of a method's last call wait in the client (Session._likes)
    and reach the library in one sq_tasks_like when anything next uses it:
    a task submitted between them, another method, the submit. Each keeps
    the id it was given and its place: values, names and order as made."""
    from squall import _lib as L
    with squall.LocalCluster(governors=1, cpus=2, **cluster_options()) as cluster:
        client = cluster.client()
        counter = client.actor(Counter, key="bulk")
        assert counter.add(0).result(TIMEOUT) == 0
        real, seen = L.sq_tasks_like, []

        def counted(h, model, n, configs, ends, first):
            seen.append(n)
            return real(h, model, n, configs, ends, first)

        L.sq_tasks_like = counted
        try:
            with client._lock:      # one batch
                made = [counter.add(1) for _ in range(300)]
                between = client.submit(_inc, 41)
                made += [counter.add(1) for _ in range(200)]
                made += [counter.seq("s%d" % i) for i in range(3)]
                made += [counter.add(2) for _ in range(4)]
            counter._session.submit()
        finally:
            L.sq_tasks_like = real
        #   The first of each method is made the plain way: the model of
        #   the others. Each run of copies goes when the library is next
        #   used: by the task, seq's model, the first seq copy's own
        #   change of model (the add copies), the submit.
        assert seen == [299, 200, 2, 4], seen
        assert between.result(TIMEOUT) == 42
        results = client.gather(made, timeout=TIMEOUT)
        assert results[:500] == list(range(1, 501))
        assert results[500:503] == [(1, "s0"), (2, "s1"), (3, "s2")]
        assert results[503:] == [502, 504, 506, 508]
        assert [f.key for f in made] == ["bulk.add"] * 500 + ["bulk.seq"] * 3 + ["bulk.add"] * 4
        assert len({f.task_id for f in made}) == len(made)
        client.close()


def test_copied_calls_the_library_refuses_fail_alone():
    """The library refuses copied calls only when out of memory or ids:
    then those calls fail, each with the error, their futures naming no
    id, and what used the library goes on: the task that made the copies
    leave, the calls after them run, in order."""
    from squall import _lib as L
    with squall.LocalCluster(governors=1, cpus=2, **cluster_options()) as cluster:
        client = cluster.client()
        counter = client.actor(Counter, key="short")
        assert counter.add(0).result(TIMEOUT) == 0
        real, seen = L.sq_tasks_like, []

        def refusing(h, model, n, configs, ends, first):
            seen.append(n)
            if len(seen) == 1:
                return 21           # SQ_E_NOMEM (common/squall_codes.h)
            return real(h, model, n, configs, ends, first)

        L.sq_tasks_like = refusing
        try:
            with client._lock:
                made = [counter.add(1) for _ in range(10)]
                between = client.submit(_inc, 1)     # uses the library: the copies go first
                after = [counter.add(10) for _ in range(5)]
            counter._session.submit()
        finally:
            L.sq_tasks_like = real
        #   The task gave the library's next id again: the later calls are
        #   copies once more.
        assert seen == [9, 5], seen
        assert between.result(TIMEOUT) == 2
        assert made[0].result(TIMEOUT) == 1
        for f in made[1:]:
            with pytest.raises(squall.SquallError):
                f.result(TIMEOUT)
            assert f.task_id == 0
        assert client.gather(after, timeout=TIMEOUT) == [11, 21, 31, 41, 51]
        assert counter.add(0).result(TIMEOUT) == 51
        del made, f
        gc.collect()
        assert counter.add(1).result(TIMEOUT) == 52
        client.close()


def test_calls_run_back_to_back_keep_their_own_warnings_and_outputs():
    """Calls written to the executor while another runs then run back to
    back (executor.py's _call_quick, warnings recorded across them): each
    result carries its own call's warnings only, a call that changes the
    warnings filters changes them for itself only, a failure in the middle
    fails its call alone, and results that a plain pickle does not cover
    (a large one in a memory file, one by cloudpickle, one that cannot be
    pickled) come as they do from a single call."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = Counter.start(client, 0)
        assert counter.add(0).result(TIMEOUT) == 0
        where = tempfile.mkdtemp(prefix="squall-actor-")
        first = counter.calls_behind(os.path.join(where, "first"), 9)
        until(lambda: os.path.exists(os.path.join(where, "first")), "the first call to start")
        calls = [counter.warn("a"), counter.warn("b"), counter.ignore_warnings(),
                 counter.warn("c"), counter.boom(), counter.blob(3 << 20), counter.lock(),
                 counter.adder(5), counter.warn("d")]
        client.submit(lambda: 0)        # the calls leave with this submit
        assert first.result(TIMEOUT) >= 9

        def read(future):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    value = future.result(TIMEOUT)
                except Exception as exc:    # noqa: BLE001 - compared below
                    value = exc
            return value, [str(w.message) for w in caught if "warned" in str(w.message)]

        got = [read(f) for f in calls]
        assert got[0] == ("a", ["warned a"])
        assert got[1] == ("b", ["warned b"])
        assert got[2] == ("ignoring", [])
        assert got[3] == ("c", ["warned c"])
        assert isinstance(got[4][0], ValueError) and "boom" in str(got[4][0])
        assert got[5] == (b"x" * (3 << 20), [])
        assert isinstance(got[6][0], Exception) and "cannot be pickled" in str(got[6][0])
        assert got[7][0](1) == 6 and got[7][1] == []
        assert got[8] == ("d", ["warned d"])
        assert counter.add(2).result(TIMEOUT) == 2
        client.close()


def test_calls_in_flight_keep_their_order_failures_and_replies():
    """Calls go to the actor's governor many at a time and are written to
    its executor ahead of the one running: 2 000 calls with failures among
    them still run in order, each failing alone, each result its own."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = Counter.start(client, 0)
        made = []
        for i in range(2000):
            made.append(counter.boom() if i % 97 == 0 else counter.seq(i))
        for i, f in enumerate(made):
            if i % 97 == 0:
                with pytest.raises(ValueError, match="boom"):
                    f.result(TIMEOUT)
            else:
                assert f.result(TIMEOUT) == (i + 1 - (i // 97 + 1), i)
        client.close()


def test_a_stopped_call_behind_a_running_one_gives_no_reply_to_another():
    """Calls queued behind a running call, one of them cancelled: the
    others get their own replies, in order, and the actor lives on."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = Counter.start(client, 0)
        running, gate = _gated(counter)
        behind = [counter.seq(tag) for tag in "abcdef"]
        client.submit(lambda: 0)        # the calls leave with this submit
        behind[1].cancel()
        behind[4].cancel()
        until(lambda: behind[1].cancelled() and behind[4].cancelled(), "the cancels")
        open(gate, "w").close()
        assert running.result(TIMEOUT) == 0
        got = [f.result(TIMEOUT) for i, f in enumerate(behind) if i not in (1, 4)]
        assert [tag for _, tag in got] == ["a", "c", "d", "f"]
        places = [place for place, _ in got]
        assert places == sorted(places) and places[0] == 1, places
        assert counter.add(1).result(TIMEOUT) == 1
        client.close()


def _quick_then_gated(client, counter):
    """Three quick calls and one that runs until a gate opens, all
    written to the executor while calls_behind runs (so read at once):
    the quick ones' replies, which may go together, come while the gated
    one runs."""
    assert counter.add(0).result(TIMEOUT) == 0
    where = tempfile.mkdtemp(prefix="squall-actor-")
    started, gate = os.path.join(where, "started"), os.path.join(where, "gate")
    first = counter.calls_behind(os.path.join(where, "first"), 4)
    until(lambda: os.path.exists(os.path.join(where, "first")), "the first call to start")
    quick = [counter.add(1) for _ in range(3)]
    gated = counter.wait_for(started, gate)
    client.submit(lambda: 0)        # the calls leave with this submit
    try:
        assert first.result(TIMEOUT) >= 4
        assert [f.result(TIMEOUT) for f in quick] == [1, 2, 3]
        until(lambda: os.path.exists(started), "the gated call to start")
    finally:
        open(gate, "w").close()
    assert gated.result(TIMEOUT) == 3


def test_a_result_does_not_wait_for_the_call_behind_it():
    """The executor sends the replies of quick calls run back to back
    together: one held so goes all the same while the call behind it runs
    on (which could wait for the client to have that result)."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        _quick_then_gated(client, Counter.start(client, 0))
        client.close()


def test_an_actor_that_takes_sigalrm_gets_its_replies_at_once():
    """The executor bounds how long it holds a reply with SIGALRM: an
    instance that installed its own handler has its replies sent at once."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = Counter.start(client, 0)
        counter.take_alarm().result(TIMEOUT)
        _quick_then_gated(client, counter)
        client.close()


def test_calls_queued_behind_a_dying_executor_are_lost():
    """The executor exits while calls wait behind the running one (on the
    governor or written to the executor): every one fails with ActorLost."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = client.actor(Counter, key="dies")
        running, gate = _gated(counter)
        exits = counter.exit_now()
        behind = [counter.add(1) for _ in range(50)]
        client.submit(lambda: 0)
        open(gate, "w").close()
        for f in [exits] + behind:
            with pytest.raises(squall.ActorLost, match="dies"):
                f.result(TIMEOUT)
        assert running.result(TIMEOUT) == 0
        client.close()


def test_an_executor_that_exits_loses_at_most_its_held_replies():
    """The executor holds the replies of quick calls for up to 2 ms
    (docs/architecture.md): one that exits loses those, and those calls
    fail with ActorLost although they ran. Quick calls run back to back,
    then one that exits: each call before it returned its own value or
    failed with ActorLost, those that returned come first, none hangs; it
    and every call behind it fail with ActorLost."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = client.actor(Counter, key="exits")
        early = [counter.add(1) for _ in range(300)]
        where = tempfile.mkdtemp(prefix="squall-actor-")
        started = os.path.join(where, "started")
        #   Runs until the quick calls and the exit are written to the
        #   executor, which then runs them back to back (their replies held).
        first = counter.calls_behind(started, 6)
        until(lambda: os.path.exists(started), "the first call to start")
        quick = [counter.add(1) for _ in range(5)]
        exits = counter.exit_now()
        behind = [counter.add(1) for _ in range(20)]
        client.submit(lambda: 0)        # the calls leave with this submit
        expected = [lambda v, i=i: v == i + 1 for i in range(300)]
        expected.append(lambda v: v >= 6)
        expected += [lambda v, i=i: v == 301 + i for i in range(5)]
        returned = []
        for f, good in zip(early + [first] + quick, expected):
            try:
                value = f.result(TIMEOUT)
            except squall.ActorLost as exc:
                assert "exits" in str(exc)
                returned.append(False)
            else:
                assert good(value), (len(returned), value)
                returned.append(True)
        assert returned == sorted(returned, reverse=True), "a reply after one lost"
        for f in [exits] + behind + [counter.add(1)]:
            with pytest.raises(squall.ActorLost, match="exits"):
                f.result(TIMEOUT)
        client.close()
    assert cluster.exit_codes["broker"] == 0, cluster.exit_codes


def _kill_under_actor(restarts, then, big=False):
    """Starts an actor, SIGKILLs its governor while a call runs there: that
    call fails with ActorLost naming the actor, and so do the calls made
    behind it that had gone to that governor; those that had not run, in
    order, on the restarted instance if any. Then then(client, counter,
    pid of the dead governor, how many of the calls behind it ran)."""
    with squall.LocalCluster(governors=2, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        counter = Counter.options(max_restarts=restarts, key="victim").start(client, 100)
        assert counter.add(1).result(TIMEOUT) == 101
        pid = counter.governor_pid().result(TIMEOUT)
        proc = governor_proc(cluster, pid)
        where = tempfile.mkdtemp(prefix="squall-actor-")
        started = os.path.join(where, "started")
        in_flight = counter.wait_for(started, os.path.join(where, "never"))
        until(lambda: os.path.exists(started), "the call to start")
        #   big: with 1 MiB arguments (put on that governor unless the
        #   actor restarts: then they ride with the call, so that a call
        #   waiting for the new instance does not lose them with it).
        behind = [counter.add_one(b"z" * (1 << 20)) if big else counter.add(1)
                  for _ in range(20)]
        client.submit(lambda: 0)        # they leave with this submit
        proc.send_signal(signal.SIGKILL)
        proc.wait(TIMEOUT)
        with pytest.raises(squall.ActorLost) as info:
            in_flight.result(TIMEOUT)
        assert "victim" in str(info.value)
        ran = []
        for f in behind:
            try:
                ran.append(f.result(TIMEOUT))
            except squall.ActorLost as exc:
                assert not ran and "victim" in str(exc), "lost after one that ran"
        assert ran == list(range(101, 101 + len(ran)))
        then(client, counter, pid, len(ran))
        client.close()
    assert cluster.exit_codes["broker"] == 0, cluster.exit_codes


def test_governor_killed_under_an_actor_without_restarts():
    def then(client, counter, pid, ran):
        assert ran == 0
        with pytest.raises(squall.ActorLost) as info:
            counter.add(1).result(TIMEOUT)
        assert "victim" in str(info.value)
    _kill_under_actor(0, then)


def test_governor_killed_under_an_actor_taking_large_arguments():
    def then(client, counter, pid, ran):
        assert ran == 0
    _kill_under_actor(0, then, big=True)


def test_governor_killed_under_an_actor_with_a_restart_taking_large_arguments():
    def then(client, counter, old_pid, ran):
        assert counter.add_one(b"z" * (1 << 20)).result(TIMEOUT) == 101 + ran
        assert counter.governor_pid().result(TIMEOUT) != old_pid
        counter.stop()
    _kill_under_actor(1, then, big=True)


def test_governor_killed_under_an_actor_with_a_restart():
    def then(client, counter, old_pid, ran):
        # the constructor ran again, on the other governor: state from 100
        assert counter.add(1).result(TIMEOUT) == 101 + ran
        assert counter.governor_pid().result(TIMEOUT) != old_pid
        assert counter.add(1).result(TIMEOUT) == 102 + ran
        counter.stop()
    _kill_under_actor(1, then)


def test_the_example_runs():
    out = run_example("actors.py")
    assert "updates applied: 160" in out
    assert "learned w=3.00 b=0.50" in out


MIB = 1 << 20


def test_large_arguments_go_to_the_actors_governor_and_are_read_in_place():
    """Arguments of 1 MiB or more leave the call's config: the client puts
    them on the actor's governor, which hands them to the executor as
    shared segments (a numpy array arrives read-only: a view of the
    governor's memory, not a copy), and such calls still go many at a
    time, in order, among small ones, a failing one failing alone."""
    np = pytest.importorskip("numpy")
    with squall.LocalCluster(governors=2, cpus=2, **cluster_options()) as cluster:
        client = cluster.client()
        reader = client.actor(Reader, key="reader")
        gov_pid = reader.governor_pid().result(TIMEOUT)
        where = reader._governor()
        assert where in [g["id"] for g in client.governors()], where
        array = np.arange(MIB // 8, dtype=np.float64)
        made, want = [], []
        for i in range(60):
            kind = i % 5
            if kind == 0:
                made.append(reader.take(i, b"b" * MIB))
                want.append(("bytes", MIB, None))
            elif kind == 1:
                made.append(reader.take(i, bytearray(MIB)))
                want.append(("bytearray", MIB, None))
            elif kind == 2:
                made.append(reader.take(i, array))
                want.append(("ndarray", MIB // 8, False))
            elif kind == 3:
                made.append(reader.take(i, "small"))
                want.append(("str", 5, None))
            else:
                made.append(reader.boom(b"x" * MIB))
                want.append(None)
        place = 0
        for i, (f, w) in enumerate(zip(made, want)):
            if w is None:
                with pytest.raises(ValueError, match="boom with %d bytes" % MIB):
                    f.result(TIMEOUT)
                continue
            place += 1
            assert f.result(TIMEOUT) == (place, i) + w + (gov_pid,)
        assert reader.take("x", b"y" * MIB).result(TIMEOUT)[0] == place + 1
        #   Where the client puts large arguments is the actor's governor.
        assert client.submit(os.getppid, workers=[where]).result(TIMEOUT) == gov_pid
        client.close()


def test_a_preferred_governor_that_is_gone_leaves_the_constant_elsewhere():
    """sq_object_prefer_governor: a constant goes to that governor when it
    is there, elsewhere when it is not, and the submit succeeds either
    way (sq_object_set_governor fails the submit instead)."""
    from squall import _lib as L
    with squall.LocalCluster(governors=2, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        ids = sorted(int(g["id"]) for g in client.governors())
        s = client.session()
        there = s.blob(b"t" * MIB)
        s._check(L.sq_object_prefer_governor(s._h, there.id, ids[1]))
        gone = s.blob(b"g" * MIB)
        s._check(L.sq_object_prefer_governor(s._h, gone.id, 4242))
        there.keep()
        gone.keep()
        s.submit()
        assert s.place(there, timeout=TIMEOUT) == [ids[1]]
        assert s.place(gone, timeout=TIMEOUT)[0] in ids
        assert gone.fetch(TIMEOUT) == b"g" * MIB
        s.close()
        client.close()
