"""First compute (issue 15): a LocalCluster's executors start with its
governors (one per cpu) and import `preload` before any task, so the first
compute does not wait for interpreters; without prestart there are none
until the first Python task."""
import os
import sys
import time

import squall

from conftest import TIMEOUT, cluster_options


def executors_of(pid):
    """Pids of the Python executors the governor `pid` started."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"squall-executor.py" in cmdline:
            out.append(int(entry))
    return sorted(out)


def test_executors_exist_before_any_task(tmp_path, monkeypatch):
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    # a module that records each import (its process's pid)
    (tmp_path / "squall_preload_probe.py").write_text(
        "import os\n"
        "open(os.path.join(%r, str(os.getpid())), 'w').close()\n" % str(probe_dir))
    monkeypatch.syspath_prepend(str(tmp_path))
    with squall.LocalCluster(governors=1, cpus=2, preload=["squall_preload_probe"],
                             **cluster_options()) as cluster:
        governor = cluster.governors[0].pid
        # the governor's compute thread starts them as it starts: poll
        deadline = time.monotonic() + TIMEOUT
        while (len(executors_of(governor)) < 2 or len(os.listdir(probe_dir)) < 2) \
                and time.monotonic() < deadline:
            time.sleep(0.01)                        # polling, not a synchronisation
        execs = executors_of(governor)
        assert len(execs) == 2, execs               # one per cpu, no task yet
        assert sorted(int(p) for p in os.listdir(probe_dir)) == execs
        client = cluster.client()
        pids = set(client.gather(client.map(lambda _: os.getpid(), range(20)), timeout=TIMEOUT))
        assert pids <= set(execs)                   # the tasks ran in them


def test_without_prestart_executors_start_on_demand():
    with squall.LocalCluster(governors=1, cpus=1, prestart=False,
                             **cluster_options()) as cluster:
        governor = cluster.governors[0].pid
        assert executors_of(governor) == []
        client = cluster.client()
        assert client.submit(os.getpid).result(TIMEOUT) in executors_of(governor)
