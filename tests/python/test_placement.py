"""Placement weighs locality against waiting (issue 26): a task whose input
sits on a governor busy with a long task runs on an idle governor (its
input copied there) instead of waiting beside it for that governor's cpu.
The actor case (a cpu held for good) is in test_actors.py."""
import os
import tempfile
import time

import squall
from conftest import TIMEOUT, cluster_options, until


def make(size):
    return b"x" * size


def size_and_governor(data):
    return len(data), os.getppid()      # the executor's parent is its governor


def hold_until(started, gate):
    open(started, "w").close()
    while not os.path.exists(gate):
        time.sleep(0.01)
    return os.getppid()


def test_a_task_leaves_its_input_for_an_idle_governor_when_its_own_is_busy_long():
    with squall.LocalCluster(governors=0, cpus=1, **cluster_options()) as cluster:
        cluster.add_governor(args=["--resource", "here=1"])
        cluster.add_governor()
        client = cluster.client()
        # 2.7 MB made on the governor offering `here`, which then runs a
        # task that holds its only cpu until the test opens the gate.
        data = client.submit(make, 2_700_000, resources={"here": 1})
        assert len(data.result(TIMEOUT)) == 2_700_000
        where = tempfile.mkdtemp(prefix="squall-placement-")
        started, gate = os.path.join(where, "started"), os.path.join(where, "gate")
        busy = client.submit(hold_until, started, gate, resources={"here": 1})
        until(lambda: os.path.exists(started), "the long task to start")
        # Its reader runs meanwhile, on the other governor.
        size, pid = client.submit(size_and_governor, data).result(TIMEOUT)
        assert size == 2_700_000
        assert not busy.done()
        open(gate, "w").close()
        assert busy.result(TIMEOUT) != pid
        client.close()


def test_the_copy_rate_is_learned_from_governors_copies(tmp_path):
    with squall.LocalCluster(governors=0, cpus=1, **cluster_options()) as cluster:
        # A stream directory each, as governors of two hosts: a copy between
        # governors sharing one goes as a memory file (LCOPY), untimed.
        for name in ("here", "there"):
            (tmp_path / name).mkdir(mode=0o700)
            cluster.add_governor(args=["--resource", name + "=1",
                                       "--stream-dir", str(tmp_path / name)])
        client = cluster.client()
        assert client.info()["copy_rate"] == 1 << 30       # the default, until told
        # 12 MB made on one governor and read on the other: a copy of
        # several chunks, which its receiver times (LOCATED with a duration).
        data = client.submit(make, 12_000_000, resources={"here": 1})
        size, _ = client.submit(size_and_governor, data, resources={"there": 1}).result(TIMEOUT)
        assert size == 12_000_000
        rate = until(lambda: client.info()["copy_rate"] != 1 << 30 and client.info()["copy_rate"],
                     "a learned copy rate")
        assert 10 ** 6 <= rate <= 10 ** 11         # the bounds a report is believed within
        client.close()
