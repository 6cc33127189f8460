"""What users tripped on (issue 26): a client left unusable by a refused
submit, a closed session, gather, exceptions, arguments and options."""
import pytest

import squall
from squall.errors import SquallError

from conftest import TIMEOUT, until


def inc(x):
    return x + 1


def _deleted(client):
    """A future whose result was deleted: a task given it is refused."""
    f = client.submit(inc, 1)
    assert f.result(TIMEOUT) == 2
    f.delete()
    return f


def test_refused_submit_leaves_the_client_as_it_was(client):
    gone = _deleted(client)

    def first_use(x):               # its first submit carries the function's data object
        return x * 2

    #   The client's lock held: both calls leave in one batch, which the
    #   broker refuses whole for the first.
    with client._lock:
        refused = client.submit(first_use, gone)
        innocent = client.submit(first_use, 3)
        dependent = client.submit(first_use, refused)
    with pytest.raises(SquallError, match="refused the task of first_use.*input %d" % gone._oid):
        refused.result(TIMEOUT)
    assert refused.done()
    assert innocent.result(TIMEOUT) == 6
    with pytest.raises(SquallError, match="broker refused its task"):
        dependent.result(TIMEOUT)
    #   The refused future still held, later submits and maps of the same
    #   function work.
    assert client.submit(first_use, 5).result(TIMEOUT) == 10
    assert client.gather(client.map(first_use, range(5)), timeout=TIMEOUT) == [0, 2, 4, 6, 8]
    #   A refused future as an argument says so at once.
    with pytest.raises(SquallError, match="broker refused its task"):
        client.submit(first_use, refused)
    del refused


def test_refused_map_raises_and_changes_nothing(client):
    gone = _deleted(client)

    def mapped(x):
        return -x

    with pytest.raises(SquallError, match="input %d is not an object" % gone._oid):
        client.map(mapped, [1, gone, 3])
    assert client.gather(client.map(mapped, [1, 2, 3]), timeout=TIMEOUT) == [-1, -2, -3]
    assert client.submit(mapped, 4).result(TIMEOUT) == -4


def test_refused_session_submit_changes_nothing(client):
    @squall.remote
    def once(x):
        return x

    @squall.remote
    def twice(x):
        return 2 * x

    with client.session() as s:
        t = once(1)
        t.output.keep()
        s.submit()
        assert t.fetch(TIMEOUT) == 1
        s.delete([t.output])
        twice(t)                    # refused: its input was deleted
        with pytest.raises(SquallError, match="is not an object"):
            s.submit()
        again = twice(21)
        again.output.keep()
        s.submit()
        assert again.fetch(TIMEOUT) == 42
        s.wait_all(TIMEOUT)


def test_a_closed_session_says_so(client):
    s = client.session()
    with s:
        kept = s.blob(b"x")
        task = squall.Task("noop", [kept], session=s)
        s.submit()
        s.wait([task], TIMEOUT)
    closed = "session %d is closed" % s.id
    calls = {
        "submit": s.submit,
        "blob": lambda: s.blob(b"y"),
        "pickled": lambda: s.pickled(1),
        "task": lambda: squall.Task("noop", [], session=s),
        "keep": kept.keep,
        "unkeep": kept.unkeep,
        "cancel": lambda: s.cancel([task]),
        "cancel all": s.cancel,
        "fetch": lambda: kept.fetch(TIMEOUT),
        "wait": lambda: s.wait([task], TIMEOUT),
        "delete": lambda: s.delete([kept]),
    }
    for what, call in calls.items():
        with pytest.raises(squall.TaskCancelled, match=closed):
            call()
            pytest.fail("%s on a closed session did not raise" % what)


def _held(i, gate):
    """Returns i once the test opens the gate (a file)."""
    import os
    import time
    deadline = time.monotonic() + 120
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
    return i


def _fails(marker):
    open(marker, "w").close()
    raise ValueError("early")


@pytest.mark.parametrize("n_held", [1, 5])
def test_gather_raises_the_first_failure_while_others_run(client, tmp_path, n_held):
    import os
    gate, marker = str(tmp_path / "gate"), str(tmp_path / "ran")
    #   It fails before the others start (they would hold both cpus), and
    #   the client has not fetched its failure.
    failed = client.submit(_fails, marker)
    until(lambda: os.path.exists(marker), "the failing task to run")
    held = [client.submit(_held, i, gate) for i in range(n_held)]
    try:
        with pytest.raises(ValueError, match="early"):
            client.gather(held + [failed], timeout=TIMEOUT)
        #   raised while the others were still running
        assert not any(h.done() for h in held)
    finally:
        open(gate, "w").close()
    assert client.gather(held + [failed], errors="skip", timeout=TIMEOUT) == list(range(n_held))
    assert client.gather({"a": held[0], "b": failed}, errors="skip", timeout=TIMEOUT) == {"a": 0}
    with pytest.raises(ValueError, match="errors"):
        client.gather(held, errors="ignore")


class Tagged(Exception):
    pass


class _Unpicklable(Exception):
    def __init__(self):
        super().__init__("holds a lock")
        import threading
        self.lock = threading.Lock()


def _with_reducers(how):
    """Raises after registering reducers in the executor, as a library it
    imports may (tblib's pickling support, installed by Dask's
    distributed on import)."""
    import copyreg
    if how == "tagged":
        copyreg.pickle(Tagged, lambda e: (Tagged, ("mangled",)))
        raise Tagged("whole")
    from tblib import pickling_support
    pickling_support.install()
    if how == "exit":
        raise SystemExit(3)
    try:
        raise _Unpicklable()
    except _Unpicklable as cause:
        raise ValueError("caused") from cause


@pytest.fixture(scope="module")
def own_cluster():
    """A cluster of its own: the reducers a test registers stay in its
    executors."""
    from conftest import cluster_options
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as c:
        yield c


def test_exceptions_arrive_whole_whatever_reducers_were_registered(own_cluster):
    client = own_cluster.client()
    with pytest.raises(Tagged, match="whole"):
        client.submit(_with_reducers, "tagged").result(TIMEOUT)
    pytest.importorskip("tblib")
    with pytest.raises(squall.TaskFailed) as info:
        client.submit(_with_reducers, "exit").result(TIMEOUT)
    assert isinstance(info.value.exception, SystemExit) and info.value.exception.code == 3
    with pytest.raises(ValueError, match="caused"):
        client.submit(_with_reducers, "cause").result(TIMEOUT)
    client.close()


def test_copies_of_a_client_share_it(client):
    import copy
    assert copy.copy(client) is client
    #   Dask deep-copies its config, which may hold scheduler=client.get.
    config = copy.deepcopy({"scheduler": client.get})
    assert config["scheduler"].__self__ is client


def test_client_takes_host_and_port(cluster):
    host_port = cluster.address[len("tcp://"):]
    c = squall.Client(host_port, secret_key=cluster.secret_key, broker_key=cluster.broker_key)
    assert c.submit(inc, 1).result(TIMEOUT) == 2
    c.close()
    with pytest.raises(squall.ConnectionError, match="port must be 0 to 65535"):
        squall.Client("127.0.0.1:99999", secret_key=cluster.secret_key,
                      broker_key=cluster.broker_key)


def test_task_options_are_checked_before_anything_is_added(client):
    def opts(x):
        return x

    for options, says in (({"cpus": -1}, "cpus must be a whole number >= 0"),
                          ({"cpus": 1.5}, "cpus"),
                          ({"resources": {"gpu": -2}}, "resource gpu"),
                          ({"max_retries": -1}, "max_retries"),
                          ({"timeout": -3}, "timeout"),
                          ({"priority": 2 ** 40}, "priority")):
        with pytest.raises(ValueError, match=says):
            client.submit(opts, 1, **options)
        with pytest.raises(ValueError, match=says):
            client.map(opts, [1, 2], **options)
    assert client.submit(opts, 3).result(TIMEOUT) == 3
    assert client.gather(client.map(opts, [4, 5]), timeout=TIMEOUT) == [4, 5]


def test_retire_takes_a_name(client):
    with pytest.raises(ValueError, match="no governor named 'nope'"):
        client.retire("nope")


def test_keys_the_broker_wants_are_said_at_once(cluster, tmp_path, monkeypatch):
    from squall.keys import local_keys
    monkeypatch.delenv("SQUALL_SECRET_KEY", raising=False)
    monkeypatch.delenv("SQUALL_BROKER_KEY", raising=False)
    #   The timeout is long: the handshake's failure answers, not the wait.
    with pytest.raises(squall.ConnectionError, match="requires keys"):
        squall.Client(cluster.address, timeout=TIMEOUT)
    stranger = local_keys(str(tmp_path))
    with pytest.raises(squall.ConnectionError, match="refused this client's key"):
        squall.Client(cluster.address, timeout=TIMEOUT, secret_key=stranger["client_key"],
                      broker_key=cluster.broker_key)
