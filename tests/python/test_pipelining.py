"""Pipelining (issue 18): a governor writes small ready Python tasks to a
busy executor, behind the one it runs, so that the executor goes on to the
next without waiting for the governor. Shown on one governor of one cpu
whose executor is held by a gated task: the piped tasks count as running
(more than its one cpu) and a big one is not piped; what a user can do to
them still holds: a cancelled piped task never runs, and the others run
exactly once when the executor dies under the gated task or the gated task
is cancelled. Many tasks, some failing, each get their own result."""
import os
import tempfile
import time

import pytest

import squall
from conftest import TIMEOUT, cluster_options, until

PIPED = ["b", "c", "d"]


def gated(started, gate, how="return"):
    open(started, "w").close()
    while not os.path.exists(gate):
        time.sleep(0.01)
    if how == "exit":
        os._exit(3)
    return "gated"


def record(log, name, payload=b""):
    with open(log, "a") as f:
        f.write(name + "\n")
    return name


def double_or_fail(x):
    if x % 7 == 0:
        raise ValueError("no %d" % x)
    return 2 * x


@pytest.fixture
def one():
    """A cluster of one governor with one cpu, its own files."""
    c = squall.LocalCluster(governors=1, cpus=1, **cluster_options())
    with c:
        client = c.client()
        #   The broker queues work on a governor for ~2 ms of its tasks'
        #   mean duration, one task per cpu while it knows none.
        client.gather(client.map(double_or_fail, list(range(1, 7)) * 10))
        yield c, client, tempfile.mkdtemp(prefix="squall-pipe-")
    assert c.exit_codes and all(code == 0 for code in c.exit_codes.values()), c.exit_codes


def governor_load(client):
    """(running, queued) of the only governor, from its last LOAD."""
    (g,) = client.governors()
    return g["running"], g["queued"]


def start_gated(client, tmp, how="return"):
    started, gate = os.path.join(tmp, "started"), os.path.join(tmp, "gate")
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
    until(lambda: governor_load(client) == (4, 1), "3 tasks piped and 1 queued")
    assert client.info()["tasks"]["running"] == 4
    open(gate, "w").close()
    assert head.result(timeout=TIMEOUT) == "gated"
    assert [f.result(timeout=TIMEOUT) for f in piped] == PIPED
    assert big.result(timeout=TIMEOUT) == "big"
    assert ran(log) == PIPED + ["big"]


def test_a_cancelled_piped_task_never_runs(one):
    _, client, tmp = one
    log = os.path.join(tmp, "log")
    head, gate = start_gated(client, tmp)
    b, c, d = [client.submit(record, log, name) for name in PIPED]
    until(lambda: governor_load(client)[0] == 4, "3 tasks piped")
    assert c.cancel()
    #   The governor has dropped it (and told the executor) before the
    #   executor may go on.
    until(lambda: governor_load(client)[0] == 3, "the governor to drop the cancelled task")
    open(gate, "w").close()
    assert (b.result(timeout=TIMEOUT), d.result(timeout=TIMEOUT)) == ("b", "d")
    assert c.cancelled()
    assert ran(log) == ["b", "d"]
    assert head.result(timeout=TIMEOUT) == "gated"


def test_piped_tasks_run_once_when_the_executor_dies_before_them(one):
    _, client, tmp = one
    log = os.path.join(tmp, "log")
    head, gate = start_gated(client, tmp, how="exit")
    piped = [client.submit(record, log, name) for name in PIPED]
    until(lambda: governor_load(client)[0] == 4, "3 tasks piped")
    open(gate, "w").close()
    with pytest.raises(squall.TaskFailed, match="executor .* died"):
        head.result(timeout=TIMEOUT)
    assert [f.result(timeout=TIMEOUT) for f in piped] == PIPED
    assert ran(log) == PIPED


def test_piped_tasks_run_once_when_the_task_before_them_is_cancelled(one):
    _, client, tmp = one
    log = os.path.join(tmp, "log")
    head, gate = start_gated(client, tmp)
    piped = [client.submit(record, log, name) for name in PIPED]
    until(lambda: governor_load(client)[0] == 4, "3 tasks piped")
    assert head.cancel()                # its executor is killed under it
    assert [f.result(timeout=TIMEOUT) for f in piped] == PIPED
    assert ran(log) == PIPED
    assert head.cancelled()


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
