"""Pipelining (issue 18): a governor writes small ready Python tasks to a
busy executor, behind the one it runs, so that the executor goes on to the
next without waiting for the governor. Shown on one governor of one cpu
whose executor is held by a gated task: the piped tasks count as queued
and piped, not running (only what started runs: never more than its one
cpu), and a big one is not piped; what a user can do to
them still holds: a cancelled piped task never runs, and the others run
exactly once when the executor dies under the gated task or the gated task
is cancelled. Many tasks, some failing, each get their own result.

Chains: the next task of a chain is written behind the one it needs, and
takes that one's result from the executor's memory (a copy, as if it had
come from the governor); it still runs, once, the usual way when the
result was not kept (too big, or its task failed), and warnings come
along."""
import os
import signal
import tempfile
import time
import warnings

import pytest

import squall
from conftest import TIMEOUT, cluster_options, until

PIPED = ["b", "c", "d"]

#   The broker queues on a governor --queue-ms of its tasks' mean duration
#   (2 ms by default: only a few no-ops on a loaded machine), one task per
#   cpu while it knows none. A minute of known durations lets it queue all
#   the tasks these tests give the governor beyond its cpu.
QUEUE_ALL = ["--queue-ms", "60000"]


def gated(started, gate, how="return"):
    """Says it started, then waits for a byte in the FIFO `gate` (opened
    read-write first, so that the test's write never waits for us)."""
    fd = os.open(gate, os.O_RDWR)
    open(started, "w").close()
    os.read(fd, 1)
    os.close(fd)
    if how == "exit":
        os._exit(3)
    return "gated"


def record(log, name, payload=b""):
    with open(log, "a") as f:
        f.write(name + "\n")
    return name


SHARED = ["the", "object"]


class ChainWarning(UserWarning):
    pass


def gated_value(started, gate, value, warn=False):
    gated(started, gate)
    if warn:
        warnings.warn("from the producer", ChainWarning)
    return SHARED if value == "shared" else value


def same_object(x):
    """A copy, as any input: never the producer's object itself."""
    return x == SHARED and x is not SHARED


def length(x):
    return len(x)


def fail_on(x):
    raise KeyError(x)


def double_or_fail(x):
    if x % 7 == 0:
        raise ValueError("no %d" % x)
    return 2 * x


@pytest.fixture
def one():
    """A cluster of one governor with one cpu, its own files."""
    c = squall.LocalCluster(governors=1, cpus=1, broker_args=QUEUE_ALL, **cluster_options())
    with c:
        client = c.client()
        client.gather(client.map(double_or_fail, list(range(1, 7)) * 10))
        yield c, client, tempfile.mkdtemp(prefix="squall-pipe-")
    assert c.exit_codes and all(code == 0 for code in c.exit_codes.values()), c.exit_codes


def governor_load(client):
    """(running, queued, piped) of the only governor, from its last LOAD."""
    (g,) = client.governors()
    return g["running"], g["queued"], g["piped"]


def gate_files(tmp):
    """(started, gate): a gated task's start file and its gate, a FIFO."""
    started, gate = os.path.join(tmp, "started"), os.path.join(tmp, "gate")
    os.mkfifo(gate)
    return started, gate


def open_gate(gate):
    with open(gate, "wb") as f:
        f.write(b"x")


def start_gated(client, tmp, how="return"):
    started, gate = gate_files(tmp)
    future = client.submit(gated, started, gate, how)
    until(lambda: os.path.exists(started), "the gated task to start")
    return future, gate


def ran(log):
    with open(log) as f:
        return f.read().split()


def test_small_tasks_wait_in_the_busy_executor_and_a_big_one_does_not(one):
    _, client, tmp = one
    log = os.path.join(tmp, "log")
    head, gate = start_gated(client, tmp)
    piped = [client.submit(record, log, name) for name in PIPED]
    big = client.submit(record, log, "big", b"x" * 100_000)
    #   The gated task and the three small ones run (one cpu), the big one
    #   waits for the cpu: had it been piped too, 5 would run.
    until(lambda: governor_load(client) == (1, 4, 3), "3 tasks piped and 1 queued")
    assert client.info()["tasks"]["running"] == 1
    open_gate(gate)
    assert head.result(timeout=TIMEOUT) == "gated"
    assert [f.result(timeout=TIMEOUT) for f in piped] == PIPED
    assert big.result(timeout=TIMEOUT) == "big"
    assert ran(log) == PIPED + ["big"]


def test_a_cancelled_piped_task_never_runs(one):
    _, client, tmp = one
    log = os.path.join(tmp, "log")
    head, gate = start_gated(client, tmp)
    b, c, d = [client.submit(record, log, name) for name in PIPED]
    until(lambda: governor_load(client)[2] == 3, "3 tasks piped")
    assert c.cancel()
    #   The governor has dropped it (and told the executor) before the
    #   executor may go on.
    until(lambda: governor_load(client)[1:] == (2, 2), "the governor to drop the cancelled task")
    open_gate(gate)
    assert (b.result(timeout=TIMEOUT), d.result(timeout=TIMEOUT)) == ("b", "d")
    assert c.cancelled()
    assert ran(log) == ["b", "d"]
    assert head.result(timeout=TIMEOUT) == "gated"


def test_piped_tasks_run_once_when_the_executor_dies_before_them(one):
    _, client, tmp = one
    log = os.path.join(tmp, "log")
    head, gate = start_gated(client, tmp, how="exit")
    piped = [client.submit(record, log, name) for name in PIPED]
    until(lambda: governor_load(client)[2] == 3, "3 tasks piped")
    open_gate(gate)
    with pytest.raises(squall.TaskFailed, match="executor .* died"):
        head.result(timeout=TIMEOUT)
    assert [f.result(timeout=TIMEOUT) for f in piped] == PIPED
    assert ran(log) == PIPED


def test_piped_tasks_run_once_when_the_task_before_them_is_cancelled(one):
    _, client, tmp = one
    log = os.path.join(tmp, "log")
    head, gate = start_gated(client, tmp)
    piped = [client.submit(record, log, name) for name in PIPED]
    until(lambda: governor_load(client)[2] == 3, "3 tasks piped")
    assert head.cancel()                # its executor is killed under it
    assert [f.result(timeout=TIMEOUT) for f in piped] == PIPED
    assert ran(log) == PIPED
    assert head.cancelled()


def secede_with_the_governor_stopped(started, gate, done):
    """Gated; then stops its governor, secedes and rejoins (so the
    governor reads of both only after this returned), writes its
    executor's pid to `done` and returns."""
    gated(started, gate)
    governor = os.getppid()
    os.kill(governor, signal.SIGSTOP)
    deadline = time.monotonic() + TIMEOUT
    while _proc_state(governor) != "T" and time.monotonic() < deadline:
        time.sleep(0.001)
    squall.secede()
    squall.rejoin()
    with open(done + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(done + ".tmp", done)
    return "seceded"


def _proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _blocked_reading(pid):
    """Whether process pid sleeps reading a Unix socket (its main thread)."""
    with open("/proc/%d/wchan" % pid) as f:
        return f.read() == "unix_stream_read_generic"


def test_a_task_piped_behind_one_that_secedes_runs_once(one):
    # The task before it secedes (which hands the piped task back, to run
    # elsewhere or later: it may be what that one waits on) and returns
    # before its governor has read that it seceded: its executor must not
    # start the piped task meanwhile (it would then run twice). Its governor
    # is stopped from when it secedes until its executor either started
    # the piped task (wrong) or waits on the governor.
    c, client, tmp = one
    log, done = os.path.join(tmp, "log"), os.path.join(tmp, "done")
    started, gate = gate_files(tmp)
    #   (a load report of the warm-up's could say 1 piped)
    until(lambda: governor_load(client) == (0, 0, 0), "the governor's load after the warm-up")
    head = client.submit(secede_with_the_governor_stopped, started, gate, done)
    until(lambda: os.path.exists(started), "the gated task to start")
    b = client.submit(record, log, "b")
    until(lambda: governor_load(client) == (1, 1, 1), "a task piped")
    governor = c._governors[0]
    try:
        open_gate(gate)
        until(lambda: os.path.exists(done), "the gated task to return", timeout=TIMEOUT)
        with open(done) as f:
            executor = int(f.read())
        until(lambda: os.path.exists(log) or _blocked_reading(executor),
              "the executor to start the piped task or wait on its governor")
    finally:
        governor.send_signal(signal.SIGCONT)
    assert head.result(timeout=TIMEOUT) == "seceded"
    assert b.result(timeout=TIMEOUT) == "b"
    assert ran(log) == ["b"]


def test_many_tasks_some_failing_each_get_their_own_result(one):
    _, client, _ = one
    futures = client.map(double_or_fail, range(3000))
    for x, f in enumerate(futures):
        if x % 7 == 0:
            with pytest.raises(ValueError) as raised:
                f.result(timeout=TIMEOUT)
            assert raised.value.args == ("no %d" % x,)
        else:
            assert f.result(timeout=TIMEOUT) == 2 * x


def chained_behind(client, tmp, value, consumer, warn=False):
    """A gated producer and its consumer, written behind it (2 running).
    Submitted together: the broker gives the governor a task waiting for
    an input made there when it gives it the task making it (overbooking)."""
    started, gate = gate_files(tmp)
    producer = client.submit(gated_value, started, gate, value, warn)
    result = client.submit(consumer, producer)
    until(lambda: os.path.exists(started), "the producer to start")
    until(lambda: governor_load(client)[2] == 1, "the consumer to be written behind it")
    open_gate(gate)
    return producer, result


def test_the_next_task_of_a_chain_takes_a_copy_of_the_result_in_the_executor(one):
    _, client, tmp = one
    producer, result = chained_behind(client, tmp, "shared", same_object)
    assert result.result(timeout=TIMEOUT) is True
    assert producer.result(timeout=TIMEOUT) == SHARED


def test_a_result_too_big_to_keep_reaches_the_next_task_the_usual_way(one):
    _, client, tmp = one
    _, result = chained_behind(client, tmp, b"x" * (2 << 20), length)
    assert result.result(timeout=TIMEOUT) == 2 << 20


def test_the_next_task_of_a_failed_one_fails_upstream_and_does_not_run(one):
    _, client, tmp = one
    log = os.path.join(tmp, "log")
    started, gate = gate_files(tmp)
    head = client.submit(gated, started, gate)
    bad = client.submit(fail_on, head)
    after = client.submit(record, log, bad)
    until(lambda: os.path.exists(started), "the first task to start")
    until(lambda: governor_load(client)[2] == 2, "two tasks written behind it")
    open_gate(gate)
    with pytest.raises(KeyError):
        bad.result(timeout=TIMEOUT)
    with pytest.raises(KeyError, match="raised by task %d" % bad.task_id):
        after.result(timeout=TIMEOUT)     # the root's own exception
    assert not os.path.exists(log)


def test_warnings_of_a_chain_come_with_the_last_result(one):
    _, client, tmp = one
    _, result = chained_behind(client, tmp, "shared", same_object, warn=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert result.result(timeout=TIMEOUT) is True
    assert [str(w.message) for w in caught if w.category is ChainWarning] == \
        ["from the producer"]


def test_a_long_chain_is_exact(one):
    _, client, _ = one
    f = client.submit(double_or_fail, 1)
    for _ in range(500):
        f = client.submit(length, [f, f])
        f = client.submit(double_or_fail, f)
    assert f.result(timeout=TIMEOUT) == 4


def test_a_broker_restart_drops_piped_tasks_that_did_not_start(capfd):
    """At a reattach the governor lists what runs; tasks piped behind the
    running one have not started: it drops them like queued ones (and
    cancels them in the executor), the broker places them again, and each
    runs exactly once."""
    tmp = tempfile.mkdtemp(prefix="squall-pipe-")
    log = os.path.join(tmp, "log")
    c = squall.LocalCluster(governors=1, cpus=1, log_level="info", broker_args=QUEUE_ALL,
                            journal=os.path.join(tmp, "journal"), **cluster_options())
    with c:
        client = c.client()
        client.gather(client.map(double_or_fail, list(range(1, 7)) * 10))
        head, gate = start_gated(client, tmp)
        piped = [client.submit(record, log, name) for name in PIPED]
        until(lambda: governor_load(client) == (1, 3, 3), "3 tasks piped")
        capfd.readouterr()
        c.restart_broker()
        seen = []
        try:
            until(lambda: seen.append(capfd.readouterr().err) or "reattach:" in "".join(seen),
                  "the governor to reattach")
        except AssertionError as exc:
            #   what the broker and the governor said meanwhile (the why)
            raise AssertionError("%s; the cluster's log since the restart:\n%s"
                                 % (exc, "".join(seen)[-6000:])) from None
        assert "reattach: 1 running tasks" in "".join(seen), "".join(seen)[-2000:]
        open_gate(gate)
        assert head.result(timeout=TIMEOUT) == "gated"
        assert [f.result(timeout=TIMEOUT) for f in piped] == PIPED
        assert sorted(ran(log)) == sorted(PIPED)
        client.close()
    assert c.exit_codes and all(code == 0 for code in c.exit_codes.values()), c.exit_codes
