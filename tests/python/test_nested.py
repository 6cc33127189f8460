"""Tasks that submit tasks (issue 28): squall.get_client() inside a task,
its key (docs/security.md, "Tasks that submit tasks"), secede/rejoin, a
child's exception, cancelling the parent."""
import os
import signal
import sys
import tempfile
import time

import pytest

import squall
from conftest import TIMEOUT, cluster_options, run_example, tenant_client, until


@pytest.fixture(scope="module")
def nested_cluster():
    c = squall.LocalCluster(governors=2, cpus=1, **cluster_options())
    with c:
        yield c
    assert c.exit_codes and all(code == 0 for code in c.exit_codes.values()), c.exit_codes


def fib(n):
    if n < 2:
        return n
    client = squall.get_client()
    a = client.submit(fib, n - 1)
    b = client.submit(fib, n - 2)
    return a.result() + b.result()


def _fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def chain(n):
    """A recursion n deep: each level waits on the next."""
    if n == 0:
        return 0
    return squall.get_client().submit(chain, n - 1).result() + 1


def test_recursion_deeper_than_cpus(nested_cluster):
    # 2 cpus, 12 levels each waiting on the next: without secede the third
    # level would wait for ever for a cpu
    client = nested_cluster.client()
    assert client.submit(chain, 12).result(timeout=TIMEOUT * 4) == 12


def test_fibonacci_small(nested_cluster):
    client = nested_cluster.client()
    assert client.submit(fib, 10).result(timeout=TIMEOUT * 4) == _fib(10)


@pytest.mark.skipif(not os.environ.get("SQUALL_TEST_NESTED_FIB22"),
                    reason="about 57 000 nested tasks: set SQUALL_TEST_NESTED_FIB22=1 (ctest does in the plain build)")
def test_fibonacci_22():
    # 2 governors x 1 cpu, every call a task: exact
    with squall.LocalCluster(governors=2, cpus=1, **cluster_options()) as c:
        client = c.client()
        start = time.monotonic()
        assert client.submit(fib, 22).result(timeout=3 * 3600) == _fib(22) == 17711
        print("fib(22): %d tasks in %.1f s" % (2 * _fib(23) - 1, time.monotonic() - start))


class Odd(Exception):
    """An exception of the test's own, to see it arrive as itself."""


def raising(n):
    raise Odd("odd %d" % n)


def catching(n):
    try:
        squall.get_client().submit(raising, n).result()
    except Odd as exc:
        return "caught " + str(exc)
    return "not raised"


def passing_on(n):
    return squall.get_client().submit(raising, n).result()


def test_child_exception_reaches_parent_as_itself(nested_cluster):
    client = nested_cluster.client()
    assert client.submit(catching, 3).result(timeout=TIMEOUT) == "caught odd 3"
    with pytest.raises(Odd, match="odd 4"):
        client.submit(passing_on, 4).result(timeout=TIMEOUT)


def tenant_and_admin(_):
    """The task client's tenant, and what an admin-only request gives it."""
    c = squall.get_client()
    tenant = c.info()["tenant"]["name"]
    try:
        c.retire(999999)
        retire = "allowed"
    except squall.SquallError as exc:
        retire = exc.code
    return tenant, retire


def test_task_client_is_the_submitters_tenant_and_no_more(nested_cluster, tmp_path):
    admin = nested_cluster.client()
    # the test's client is an admin of tenant "client": its task's client is
    # of that tenant but no admin (SQ_E_DENIED, 24)
    assert admin.info()["tenant"]["name"] == "client"
    assert admin.submit(tenant_and_admin, 0).result(timeout=TIMEOUT) == ("client", 24)
    other = tenant_client(nested_cluster, "other", "other")
    try:
        assert other.submit(tenant_and_admin, 1).result(timeout=TIMEOUT) == ("other", 24)
    finally:
        other.close()


def leak_key(_):
    """A task that takes its client's key pair and hands it out (as a
    malicious one could): it works while the task runs, and must be worth
    nothing once the task is over."""
    from squall import _worker
    keys = sys.modules["_squall_executor"].credential()
    c = _worker._connect(os.environ["SQUALL_TASK_BROKER"], keys, 10.0)
    tenant = c.info()["tenant"]["name"]
    c.close()
    return keys, tenant


def _write_cert(path, public, secret=None):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("metadata\ncurve\n    public-key = \"%s\"\n" % public)
        if secret:
            f.write("    secret-key = \"%s\"\n" % secret)


def test_task_key_dies_with_its_attempt(nested_cluster, tmp_path):
    client = nested_cluster.client()
    (public, secret, broker), tenant = client.submit(leak_key, 0).result(timeout=TIMEOUT)
    assert tenant == "client"
    key = str(tmp_path / "leaked.key")
    _write_cert(key, public, secret)
    with pytest.raises(squall.ConnectionError) as info:
        squall.Client(nested_cluster.address, secret_key=key, broker_key=nested_cluster.broker_key,
                      timeout=5.0, resume=0)
    assert info.value.code == 24, info.value


def sleeper(path):
    with open(path, "w") as f:
        f.write("started")
    time.sleep(600)
    return "slept"


def parent_of_sleeper(path):
    return squall.get_client().submit(sleeper, path).result()


def test_cancelling_the_parent_cancels_its_children(nested_cluster):
    client = nested_cluster.client()
    path = os.path.join(tempfile.mkdtemp(prefix="squall-nested-"), "child")
    parent = client.submit(parent_of_sleeper, path)
    until(lambda: os.path.exists(path), "the child to start")
    parent.cancel()
    # the parent's executor is killed with it, its client's key dies with
    # its attempt, and the session its children live in closes: the child
    # is stopped (its executor killed), and nothing runs any more
    until(lambda: all(g["running"] == 0 for g in client.info()["governors"]),
          "every task to stop")


def leave_a_child(path):
    squall.get_client().submit(sleeper, path)
    return "left"


def test_a_child_nobody_holds_is_cancelled_when_its_parent_returns(nested_cluster, tmp_path):
    # the parent's end (not a periodic sweep) closes its children's
    # session, which cancels the child left running (it sleeps 600 s)
    client = nested_cluster.client()
    parent = client.submit(leave_a_child, str(tmp_path / "child"))
    assert parent.result(timeout=TIMEOUT) == "left"
    name = "nested/%d/%d" % (parent._session.id, parent._tid)
    until(lambda: not [j for j in client.jobs() if j["name"] == name] or None,
          "the children's session to close with its task")
    until(lambda: all(g["running"] == 0 for g in client.info()["governors"]),
          "the child to be stopped")


def test_nested_example():
    out = run_example("nested.py")
    assert "fib(12) = 144" in out
    assert "the child said: fib of a negative number: -1" in out
    assert "futures a task returned: [0, 1, 1, 2, 3, 5, 8, 13] summed by another task: 33" in out


def add(x, y):
    return x + y


def pass_futures_on(n):
    # a child's future given to another child: the value goes from one to
    # the other over the data plane, never through this task
    c = squall.get_client()
    a = c.submit(add, n, 1)
    b = c.submit(add, a, 10)
    return b.result()


def test_futures_made_in_a_task_passed_to_other_tasks(nested_cluster):
    client = nested_cluster.client()
    assert client.submit(pass_futures_on, 5).result(timeout=TIMEOUT) == 16


def _record(directory, name):
    """Appends this run (its governor's pid: an executor's parent) to the
    file of `name`."""
    with open(os.path.join(directory, name), "a") as f:
        f.write("%d\n" % os.getppid())


def tree_node(directory, path, depth, width):
    _record(directory, "node-" + path)
    if depth == 0:
        # running until the test opens the gate (after the kill)
        while not os.path.exists(os.path.join(directory, "gate")):
            time.sleep(0.01)
        return 1
    c = squall.get_client()
    children = [c.submit(tree_node, directory, path + str(i), depth - 1, width)
                for i in range(width)]
    return sum(f.result() for f in children)


def test_tree_with_a_governor_killed(tmp_path):
    # 3 x 3 x 3 leaves under 13 parents on 2 governors; one is SIGKILLed
    # while leaves run (they wait for a gate the test opens after the kill:
    # one on each cpu once two have started). Every node runs at least once, and at most once on
    # each governor: a node that ran twice did so because its first run was
    # on the killed governor (the broker ran it again). A parent run again
    # finds the children its first run made (their session "nested/S/T"
    # outlives the run) and does not run them again; results are small, held
    # by the broker, so none is lost with the governor and run again.
    directory = str(tmp_path)
    with squall.LocalCluster(governors=2, cpus=1, **cluster_options()) as c:
        client = c.client()
        root = client.submit(tree_node, directory, "r", 3, 3)
        leaves = ["r" + a + b + d for a in "012" for b in "012" for d in "012"]
        until(lambda: sum(os.path.exists(os.path.join(directory, "node-" + x))
                          for x in leaves) >= 2, "leaves to run", timeout=TIMEOUT * 4)
        victim = c._governors[0]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        open(os.path.join(directory, "gate"), "w").close()
        assert root.result(timeout=TIMEOUT * 4) == 27

    def runs(name):
        with open(os.path.join(directory, "node-" + name)) as f:
            return [int(line) for line in f.read().split()]

    nodes = ["r"] + [x[:k] for x in leaves for k in range(2, 5)]
    for node in sorted(set(nodes)):
        mine = runs(node)
        assert mine, "node %s never ran" % node
        assert mine.count(victim.pid) <= 1 and len(mine) - mine.count(victim.pid) <= 1, \
            "node %s ran %d times (%s), more than once on a governor (killed: %d)" \
            % (node, len(mine), mine, victim.pid)


def appending_child(path, i):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"%d\n" % i)
    finally:
        os.close(fd)
    return i * i


def parent_killed_once(directory):
    """Submits 3 children and waits for them; its first run then says so
    (the file "first") and waits to be killed with its governor; the run
    after returns."""
    with open(os.path.join(directory, "parent"), "a") as f:
        f.write("%d\n" % os.getppid())
    c = squall.get_client()
    children = [c.submit(appending_child, os.path.join(directory, "children"), i)
                for i in range(3)]
    total = sum(f.result() for f in children)
    try:
        os.close(os.open(os.path.join(directory, "first"), os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return total
    time.sleep(600)             # until its governor is killed
    return -1


def test_a_parent_run_again_finds_its_children(tmp_path):
    # the parent's governor is SIGKILLed after its children finished, before
    # it returned: the broker runs it again on the other governor, where it
    # submits the same children in the same order and gets their results
    # without running them again
    directory = str(tmp_path)
    with squall.LocalCluster(governors=2, cpus=1, **cluster_options()) as c:
        client = c.client()
        parent = client.submit(parent_killed_once, directory)
        until(lambda: os.path.exists(os.path.join(directory, "first")),
              "the children to finish", timeout=TIMEOUT * 4)
        with open(os.path.join(directory, "parent")) as f:
            first = int(f.read().split()[0])
        victim, = [g for g in c._governors if g.pid == first]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        assert parent.result(timeout=TIMEOUT * 4) == 0 + 1 + 4
    with open(os.path.join(directory, "parent")) as f:
        parents = [int(x) for x in f.read().split()]
    assert len(parents) == 2 and parents[0] == victim.pid != parents[1], parents
    with open(os.path.join(directory, "children")) as f:
        assert sorted(f.read().split()) == ["0", "1", "2"]


def blocked_on_fifo(path):
    """Runs until the test writes to the fifo `path`."""
    with open(path) as f:
        return f.read()


def test_a_childrens_session_is_its_tenants_and_ends_with_its_task(nested_cluster, tmp_path):
    # "nested/S/T" may be opened (detached) only for a task T of session S
    # that has not ended and is of the opener's tenant; it closes when that
    # task ends
    client = nested_cluster.client()
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    task = client.submit(blocked_on_fifo, fifo)
    name = "nested/%d/%d" % (task._session.id, task._tid)
    other = tenant_client(nested_cluster, "other-children", "other")
    try:
        with pytest.raises(squall.SquallError) as info:
            other.session(name=name, detached=True)
        assert info.value.code == 4, info.value
    finally:
        other.close()
    for bad in ("nested/%d/%d" % (task._session.id, task._tid + 1000),
                "nested/%d/0%d" % (task._session.id, task._tid), "nested/x"):
        with pytest.raises(squall.SquallError) as info:
            client.session(name=bad, detached=True)
        assert info.value.code == 4, (bad, info.value)
    with pytest.raises(squall.SquallError) as info:
        client.session(name=name)
    assert info.value.code == 4, info.value
    children = client.session(name=name, detached=True)
    children.detach()
    assert [j["name"] for j in client.jobs() if j["name"] == name] == [name]

    def writer():
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:         # ENXIO: the task has not opened it yet
            return None
    fd = until(writer, "the task to run")
    os.write(fd, b"done")
    os.close(fd)
    assert task.result(timeout=TIMEOUT) == "done"
    until(lambda: not [j for j in client.jobs() if j["name"] == name] or None,
          "the children's session to close with its task")


def return_a_future(n):
    return squall.get_client().submit(add, n, 1)


def return_futures(n):
    c = squall.get_client()
    fs = [c.submit(add, n, i) for i in range(3)]
    return {"list": fs, "one": fs[0], "nested": {"x": [c.submit(add, fs[1], 100)]}}


def return_gated(gate):
    """Returns the future of a child still blocked on the file `gate`: the
    task ends (and its children's session with it) before the child does."""
    return squall.get_client().submit(wait_for_file, gate)


def wait_for_file(path):
    while not os.path.exists(path):
        time.sleep(0.01)
    with open(path) as f:
        return f.read()


def test_a_future_returned_by_a_task(nested_cluster):
    # the child's output becomes an object of the caller's session (ADOPT):
    # the caller waits on it, fetches it, passes it to a task it submits
    # afterwards
    client = nested_cluster.client()
    f = client.submit(return_a_future, 1).result(timeout=TIMEOUT)
    assert isinstance(f, squall.Future)
    assert f.result(timeout=TIMEOUT) == 2
    assert client.submit(add, f, 10).result(timeout=TIMEOUT) == 12
    got = client.submit(return_futures, 5).result(timeout=TIMEOUT)
    assert [x.result(timeout=TIMEOUT) for x in got["list"]] == [5, 6, 7]
    assert got["one"] is got["list"][0]          # one future per object
    assert got["nested"]["x"][0].result(timeout=TIMEOUT) == 106
    assert client.gather(got["list"]) == [5, 6, 7]
    assert client.submit(sum, got["list"]).result(timeout=TIMEOUT) == 18
    # a future of a plain client still cannot be pickled
    with pytest.raises(TypeError, match="cannot be pickled"):
        import pickle
        pickle.dumps(f)


def test_a_returned_future_outlives_its_task(nested_cluster, tmp_path):
    client = nested_cluster.client()
    gate = str(tmp_path / "gate")
    parent = client.submit(return_gated, gate)
    child = parent.result(timeout=TIMEOUT)      # the parent ended, the child runs
    assert not child.done()
    later = client.submit(add, child, "!")      # waits for the child
    with open(gate + ".tmp", "w") as f:
        f.write("open")
    os.rename(gate + ".tmp", gate)
    assert child.result(timeout=TIMEOUT) == "open"
    assert later.result(timeout=TIMEOUT) == "open!"


def test_an_adopted_childrens_session_closes_with_its_callers_only(nested_cluster, tmp_path):
    # what a task returned is read from its children's session: that
    # outlives the task, cannot be closed or forgotten by hand, and closes
    # with the caller's session
    from squall import _lib as L
    client = nested_cluster.client()
    gate = str(tmp_path / "gate")
    parent = client.submit(return_gated, gate)
    child = parent.result(timeout=TIMEOUT)
    name = "nested/%d/%d" % (parent._session.id, parent._tid)
    job, = [j for j in client.jobs() if j["name"] == name]
    for call in (L.sq_client_forget, L.sq_client_close_session):
        assert call(client._h, job["id"]) == 4          # SQ_E_INVALID
    open(gate, "w").close()
    assert child.result(timeout=TIMEOUT) == ""
    assert [j["id"] for j in client.jobs() if j["name"] == name] == [job["id"]]
    parent._session.close()
    until(lambda: not [j for j in client.jobs() if j["name"] == name] or None,
          "the children's session to close with its caller's")


def test_a_returned_child_raising_raises_as_itself(nested_cluster):
    client = nested_cluster.client()
    f = client.submit(lambda n: squall.get_client().submit(raising, n), 3).result(timeout=TIMEOUT)
    with pytest.raises(Odd, match="odd 3"):
        f.result(timeout=TIMEOUT)


def return_many(n):
    c = squall.get_client()
    return c.map(add, range(n), range(n))


def test_returned_futures_leave_nothing_behind(nested_cluster):
    # the objects the caller adopted go when it drops their futures, one by
    # one while its session stays open (the client unkeeps dropped futures'
    # objects 256 at a time), and with the session; the children's session
    # closes with it
    client = nested_cluster.client()
    keeper = client.submit(add, 1, 2)
    assert keeper.result(timeout=TIMEOUT) == 3
    objects, sessions = client.info()["objects"], client.info()["sessions"]
    got = client.submit(return_many, 300).result(timeout=TIMEOUT * 4)
    assert client.gather(got) == [2 * i for i in range(300)]
    assert client.info()["objects"] >= objects + 300
    del got
    import gc
    gc.collect()
    client.submit(add, 0, 0).result(timeout=TIMEOUT)   # a submit sends the unkeeps
    # left: the parent's output and the last submit's (freed in the next batch)
    until(lambda: client.info()["objects"] <= objects + 4 or None,
          "the adopted objects to be freed (%d before)" % objects)
    assert client.info()["sessions"] == sessions + 1        # the children's, until:
    del keeper
    gc.collect()
    client.submit(add, 0, 0).result(timeout=TIMEOUT)   # a new session: the old one closed
    until(lambda: client.info()["sessions"] <= sessions or None,
          "the caller's session and its task's children's to close")


def return_many_counting_adopts(n, log):
    """return_many, writing to the file `log` how many ids each ADOPT its
    client sends carries."""
    import sys
    from squall import _lib as L
    adopt = L.sq_adopt

    def counted(handle, ids, n_ids, session, adopted):
        with open(log, "a") as f:
            f.write("%d\n" % n_ids)
        return adopt(handle, ids, n_ids, session, adopted)

    def restore():
        L.sq_adopt = adopt

    L.sq_adopt = counted
    sys.modules["_squall_executor"].at_task_end(restore)
    return return_many(n)


def test_returned_futures_are_adopted_in_batches(nested_cluster, tmp_path):
    # 1100 futures returned: two ADOPTs (at most 1024 ids each), not 1100
    client = nested_cluster.client()
    log = str(tmp_path / "adopts")
    got = client.submit(return_many_counting_adopts, 1100, log).result(timeout=TIMEOUT * 4)
    assert client.gather(got, timeout=TIMEOUT * 4) == [2 * i for i in range(1100)]
    with open(log) as f:
        assert sorted(int(line) for line in f) == [76, 1024]
    assert len({f.key for f in got}) == 1100


class _Forged:
    def __init__(self, session, oid):
        self.args = (session, oid)

    def __reduce__(self):
        from squall import _futures
        return (_futures._adopted_future, self.args)


def test_another_tenant_cannot_use_a_returned_future(nested_cluster, tmp_path):
    import pickle
    from squall import _futures
    client = nested_cluster.client()
    f = client.submit(return_a_future, 7).result(timeout=TIMEOUT)
    assert f.result(timeout=TIMEOUT) == 8
    other = tenant_client(nested_cluster, "other-adopt", "other")
    try:
        mine = other._futures_session()
        # the caller's session id in a pickle: not the other's session
        with _futures.unpickling(mine), pytest.raises(squall.SquallError, match="belongs to"):
            pickle.loads(pickle.dumps(_Forged(f._session.id, f._oid)))
        # the same id in its own session names nothing
        with _futures.unpickling(mine):
            forged = pickle.loads(pickle.dumps(_Forged(mine.id, f._oid)))
        with pytest.raises(squall.SquallError) as info:
            forged.result(timeout=TIMEOUT)
        assert info.value.code == 6, info.value         # SQ_E_UNKNOWN_ID
    finally:
        other.close()
    assert f.result(timeout=TIMEOUT) == 8


def adopt_by_hand(session, oid):
    """What a task could send itself: ADOPT of ids that are not its
    children's (a forged id, another session's)."""
    import ctypes
    from squall import _lib as L
    c = squall.get_client()
    s = c._futures_session()
    out = []
    for target, ids in (("own", [oid]), ("plain", [oid])):
        handle = s._h if target == "own" else c.session()._h
        to = ctypes.c_uint32()
        got = (ctypes.c_uint32 * 1)()
        out.append(L.sq_adopt(handle, L.ids(ids), 1, ctypes.byref(to), got))
    return out


def test_adopt_refuses_forged_ids(nested_cluster):
    # ADOPT takes only objects of the children's session the connection
    # holds (SQ_E_UNKNOWN_ID), and only from a children's session
    # (SQ_E_INVALID)
    client = nested_cluster.client()
    f = client.submit(add, 1, 1)
    assert client.submit(adopt_by_hand, f._session.id, 0xC0000001).result(timeout=TIMEOUT) \
        == [6, 4]


def return_child_and_big(n):
    c = squall.get_client()
    return c.submit(bytes, n)


def test_a_returned_future_across_a_broker_restart(tmp_path):
    # ADOPT is not journaled (docs/protocol.md): after the broker restarts
    # on its journal the caller's session is back, its own futures work,
    # and the adopted object is refused as unknown, never read as another
    c = squall.LocalCluster(governors=1, cpus=2, journal=str(tmp_path / "journal"),
                            broker_args=["--reattach-wait", "3000"], **cluster_options())
    with c:
        client = c.client()
        small = client.submit(add, 1, 2)
        child = client.submit(return_child_and_big, 2 << 20).result(timeout=TIMEOUT)
        assert len(child.result(timeout=TIMEOUT)) == 2 << 20
        assert small.result(timeout=TIMEOUT) == 3
        c.restart_broker(signal.SIGKILL)
        assert client.submit(add, small, 1).result(timeout=TIMEOUT * 2) == 4
        with pytest.raises(squall.SquallError, match="is not an object of session"):
            client.submit(len, child).result(timeout=TIMEOUT * 2)
