"""Processes end with their starter (issue 15): the broker and governors of a
LocalCluster or of `squall start` stop when the process that started them
dies in any way, and a governor's executors die with the governor, even in
the middle of a task. Waits poll process existence against a deadline."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import squall

from conftest import TIMEOUT, children_of, cluster_options

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))

#   A starter: makes a LocalCluster of one governor, runs a task that
#   writes its executor's pid and sleeps, prints the pids, then ends the
#   way argv[1] says (wait to be killed, os._exit, a segfault).
STARTER = r"""
import ctypes, json, os, sys, time
sys.path.insert(0, %(here)r)
from conftest import cluster_options
import squall

def busy(path):
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    time.sleep(3600)

mode, pidfile = sys.argv[1], sys.argv[2]
cluster = squall.LocalCluster(governors=1, cpus=1, log_level="info", **cluster_options())
client = cluster.client()
future = client.submit(busy, pidfile)
deadline = time.monotonic() + 60
while not os.path.exists(pidfile) and time.monotonic() < deadline:
    future.done()                   # a round trip to the broker, no fixed sleep
with open(pidfile) as f:
    executor = int(f.read())
print("PIDS " + json.dumps({"broker": cluster.broker.pid,
                            "governors": [g.pid for g in cluster.governors],
                            "executor": executor}), flush=True)
if mode == "exit":
    os._exit(0)
if mode == "segv":
    ctypes.string_at(0)
sys.stdin.read()                    # "kill": until killed
"""


def alive(pid):
    """Whether pid is a live process (a zombie nobody reaped is not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pids, seconds):
    """Polls until none of pids is alive; the ones still alive at the deadline."""
    deadline = time.monotonic() + seconds
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        os.sched_yield()
        time.sleep(0.02)            # a polling interval, not a synchronisation
        left = [p for p in left if alive(p)]
    return left


def read_line(stream, prefix, seconds):
    """The first line of a child's stdout starting with prefix."""
    import selectors
    deadline = time.monotonic() + seconds
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.startswith(prefix.encode()):
                    return line.decode()
            if sel.select(max(0, deadline - time.monotonic())):
                chunk = os.read(stream.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
    raise AssertionError("no line %r within %s s" % (prefix, seconds))


@pytest.mark.parametrize("how", ["kill", "exit", "segv"])
def test_cluster_ends_with_its_starter(tmp_path, how):
    pidfile = str(tmp_path / "executor.pid")
    log = open(tmp_path / "starter.err", "w+")
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER % {"here": HERE}, how, pidfile],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
    try:
        pids = json.loads(read_line(starter.stdout, "PIDS ", TIMEOUT)[5:])
        everyone = [pids["broker"], pids["executor"]] + pids["governors"]
        assert all(alive(p) for p in everyone)
        if how == "kill":
            starter.send_signal(signal.SIGKILL)
        assert starter.wait(TIMEOUT) != 0 or how == "exit"
        left = wait_gone(everyone, 30)
        log.seek(0)
        text = log.read()
        assert not left, "still running after the starter died: %s\n%s" % (left, text)
        # they stopped as on a SIGTERM, not by the watcher's last resort
        assert "went away" in text and "leaving now" not in text, text
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        starter.stdout.close()
        starter.stdin.close()
        log.close()


def test_squall_start_children_end_with_it(tmp_path):
    # this environment as is: under the sanitizer build the squall command
    # (Python, loading libsquall) needs the preload the tests run with
    env = dict(os.environ)
    start = subprocess.Popen(
        [sys.executable, os.path.join(SOURCE, "bin", "squall"), "start", "--governors", "2",
         "--cpus", "1", "--port", "0", "--log-dir", str(tmp_path / "logs")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        read_line(start.stdout, "SQUALL_BROKER=", TIMEOUT)
        kids = children_of(start.pid)
        assert len(kids) == 3, kids             # broker and two governors
        start.send_signal(signal.SIGKILL)
        start.wait(TIMEOUT)
        left = wait_gone(kids, 30)
        assert not left, "still running after squall start was killed: %s" % left
    finally:
        if start.poll() is None:
            start.kill()
            start.wait()
        start.stdout.close()
    logs = "".join(open(os.path.join(tmp_path, "logs", name)).read()
                   for name in ("broker.log", "governor-1.log"))
    assert "went away" in logs


def test_executor_dies_with_its_governor(tmp_path):
    pidfile = str(tmp_path / "executor.pid")

    def busy(path):
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(path + ".tmp", path)
        time.sleep(3600)

    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        future = client.submit(busy, pidfile)
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(pidfile) and time.monotonic() < deadline:
            future.done()
        with open(pidfile) as f:
            executor = int(f.read())
        assert alive(executor)
        governor = cluster.governors[0]
        governor.send_signal(signal.SIGKILL)
        governor.wait(TIMEOUT)
        assert wait_gone([executor], 20) == [], "the executor outlived its governor"


@pytest.mark.parametrize("value, message", [
    ("abc", "must be a file descriptor number"),
    ("987", "is not an open file descriptor"),
    ("file", "is not a pipe or socket"),
])
@pytest.mark.parametrize("program", ["squall-broker", "squall-governor"])
def test_bad_parent_fd_is_refused(tmp_path, program, value, message):
    argv = [squall.cluster.find_binary(program)]
    if program == "squall-governor":
        argv += ["--broker", "tcp://127.0.0.1:1"]
    else:
        argv += ["--listen", "tcp://127.0.0.1:*"]
    pass_fds = ()
    with tempfile.TemporaryFile() as regular:
        if value == "file":
            value = str(regular.fileno())
            pass_fds = (regular.fileno(),)
        env = dict(os.environ, SQUALL_PARENT_FD=value)
        env.update(cluster_options().get("env") or {})
        env = {k: v for k, v in env.items() if v is not None}
        run = subprocess.run(argv, env=env, pass_fds=pass_fds, stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=TIMEOUT)
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert message.encode() in run.stderr, run.stderr


@pytest.mark.parametrize("broker", ["there", "killed", "stopped"])
def test_a_governor_leaving_waits_for_the_brokers_bye_only_while_it_can_come(capfd, broker):
    """A stopping governor reads its broker connection up to the broker's BYE
    in answer to its own (so nothing the broker sent is half-received when
    it closes). A killed broker ends that wait as its connection drops; a
    stopped one holds it for two heartbeats at most (1 s)."""
    c = squall.LocalCluster(governors=1, cpus=1, log_level="info",
                            broker_args=["--heartbeat-ms", "5000"], **cluster_options())
    with c:
        c.client().wait_for_governors(1, timeout=TIMEOUT)
        governor = c.governors[0]
        capfd.readouterr()
        if broker == "killed":
            c.broker.kill()
            c.broker.wait()
        elif broker == "stopped":
            c.broker.send_signal(signal.SIGSTOP)
        try:
            governor.send_signal(signal.SIGINT)
            assert governor.wait(TIMEOUT) == 0
        finally:
            if broker == "stopped":
                c.broker.send_signal(signal.SIGCONT)
        err = capfd.readouterr().err
    expected = {"there": None, "killed": "did not answer BYE (its connection is gone)",
                "stopped": "did not answer BYE (in two heartbeats)"}[broker]
    if expected:
        assert expected in err, err[-2000:]
    else:
        assert "did not answer BYE" not in err and "said goodbye" in err, err[-2000:]
