"""--prefault: a governor touches heap at start so that its first copies land
in pages that exist (governor/heap.c). The pages must be there and stay
(the governor's resident memory holds them after the thread freed its
chunks into the heap), the amount is capped at a quarter of --memory, and
a governor stopped while it pre-faults stops cleanly."""
import os
import signal
import subprocess
import time

import pytest

import squall
from conftest import TIMEOUT, cluster_options


def _governor(*args):
    env = dict(os.environ)
    env.update((cluster_options().get("env") or {}))
    env = {k: v for k, v in env.items() if v is not None}
    return subprocess.Popen(
        [squall.cluster.find_binary("squall-governor"), "--broker", "tcp://127.0.0.1:1",
         "--log-level", "info", "--no-reconnect", "--broker-grace", "0"] + list(args),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def _line(proc, needle):
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if needle in line:
            return line
        if not line and proc.poll() is not None:
            break
    raise AssertionError("no %r from the governor" % needle)


def _rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) << 10
    return 0


def test_prefault_pages_stay_resident():
    proc = _governor("--prefault", "64MiB")
    try:
        assert "pre-faulted 64 MiB" in _line(proc, "pre-faulted")
        assert _rss(proc.pid) >= 64 << 20
    finally:
        proc.send_signal(signal.SIGINT)
        proc.stderr.close()
    assert proc.wait(TIMEOUT) in (0, 3)


def _prefaulted(*args):
    """The governor's "pre-faulted" log line, with these options."""
    proc = _governor(*args)
    try:
        return _line(proc, "pre-faulted")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.stderr.close()
        assert proc.wait(TIMEOUT) in (0, 3)


def test_prefault_is_capped_by_memory():
    assert "pre-faulted 16 MiB" in _prefaulted("--memory", "64MiB", "--prefault", "1GiB")


def test_prefault_auto_is_what_the_heap_keeps():
    """auto (as Compose, Helm and Slurm start governors): a quarter of
    --memory, the heap kept for copies."""
    assert "pre-faulted 24 MiB" in _prefaulted("--memory", "96MiB", "--prefault", "auto")


def test_prefault_refuses_a_bad_size():
    proc = _governor("--prefault", "lots")
    out = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(TIMEOUT) == 2
    assert "--prefault needs a size" in out


def test_store_budget_leaves_room_beside_the_store():
    """The store's limit is what --memory leaves after the copy heap (a
    quarter), 128 MiB per CPU slot (an executor and its task) and 64 MiB
    (the governor): 1 GiB with 2 CPU slots gives 448 MiB; a small box
    keeps a quarter of its memory for the store (governor/store.h)."""
    for args, store in ((("--memory", "1GiB", "--cpus", "2"), 448 << 20),
                        (("--memory", "96MiB", "--cpus", "4"), 24 << 20)):
        proc = _governor(*args)
        try:
            line = _line(proc, "store: ")
        finally:
            proc.send_signal(signal.SIGINT)
            proc.stderr.close()
            # (SIGINT may come before it set its handlers: it ends by it)
            assert proc.wait(TIMEOUT) in (0, 3, -signal.SIGINT)
        memory = {"1GiB": 1 << 30, "96MiB": 96 << 20}[args[1]]
        assert "store: %d of --memory %d" % (store, memory) in line, line
