"""Shared by the deployment tests: a local cluster started through the real
`squall start`, waits on conditions with deadlines (never sleep-and-hope),
and teardown that leaves no process behind even when a test fails.

Environment (set by tests/CMakeLists.txt): SQUALL_BUILD_DIR, SQUALL_SOURCE_DIR.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
SOURCE = os.environ.get("SQUALL_SOURCE_DIR") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SQUALL_BUILD_DIR", "")
SQUALL = [sys.executable, os.path.join(SOURCE, "bin", "squall")]
PIPELINE = os.path.join(SOURCE, "tests", "deploy", "pipeline.py")
#   How long Cluster.stop lets `squall start` stop its cluster before SIGKILL.
STOP_WAIT = 20


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    raise SystemExit(1)


def check(condition, message):
    if not condition:
        fail(message)
    print("ok: " + message)


def wait_until(what, fn, timeout=20.0, interval=0.05):
    """fn's first truthy result, or fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            result = fn()
            if result:
                return result
        except Exception as exc:     # the thing waited for may not be up yet
            last = exc
        time.sleep(interval)
    fail("timed out waiting for %s%s" % (what, " (last error: %s)" % last if last else ""))


def http_get(url, timeout=5.0, token=None):
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(request, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


def run(argv, env=None, timeout=120, **kwargs):
    return subprocess.run(argv, env=env, timeout=timeout, capture_output=True, text=True, **kwargs)


def _children(pid):
    """Pids whose parent is pid (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return out


class Cluster:
    """`squall start` in the background; use as a context manager."""

    def __init__(self, governors=2, cpus=2, event_log=None, extra=()):
        self.tmp = tempfile.mkdtemp(prefix="squall-deploy-test-")
        self.event_log = event_log
        argv = SQUALL + ["start", "--governors", str(governors), "--cpus", str(cpus),
                         "--port", "0", "--http", "0", "--log-dir", os.path.join(self.tmp, "logs")]
        if event_log:
            argv += ["--event-log", event_log]
        argv += list(extra)
        self.out = open(os.path.join(self.tmp, "start.out"), "w+")
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, SQUALL_BUILD_DIR=BUILD))
        self.pids = []
        self.broker = self.dashboard = None
        self.killed = False
        self.stop_seconds = 0.0

    def _lines(self):
        with open(self.out.name) as f:
            return f.read().splitlines()

    def __enter__(self):
        def ready():
            if self.proc.poll() is not None:
                fail("squall start exited with %s:\n%s" % (self.proc.returncode,
                                                           "\n".join(self._lines())))
            values = dict(l.split("=", 1) for l in self._lines() if l.startswith("SQUALL_"))
            return values if "SQUALL_BROKER" in values else None
        values = wait_until("squall start to report the cluster", ready, 30)
        self.broker = values["SQUALL_BROKER"]
        self.keys = {k: values[k] for k in ("SQUALL_SECRET_KEY", "SQUALL_BROKER_KEY") if k in values}
        self.dashboard = values.get("SQUALL_DASHBOARD")
        # the dashboard URL carries its token: http://host:port/?token=T
        self.http = self.token = None
        if self.dashboard:
            self.http, _, query = self.dashboard.partition("/?")
            self.token = query.partition("token=")[2] or None
        self.pids = _children(self.proc.pid)
        return self

    def env(self):
        return dict(os.environ, SQUALL_BROKER=self.broker, SQUALL_BUILD_DIR=BUILD, **self.keys)

    def info(self):
        r = run(SQUALL + ["status", "--json"], env=self.env())
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        return json.loads(r.stdout)

    def stop(self):
        """SIGINT, as Ctrl-C would; returns squall start's exit code."""
        if self.proc.poll() is None:
            started = time.monotonic()
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(STOP_WAIT)
            except subprocess.TimeoutExpired:
                self.killed = True
                self.proc.kill()
                self.proc.wait()
            self.stop_seconds = time.monotonic() - started
        return self.proc.returncode

    def check_stopped(self):
        """Stops the cluster and fails unless squall start said 0 and no
        broker or governor is left; the failure says which and shows the
        ends of the cluster's logs, so that one seen only in CI explains
        itself."""
        code = self.stop()
        alive = self.leftovers()
        if code == 0 and not alive:
            print("ok: cluster stopped cleanly (%.1f s)" % self.stop_seconds)
            return
        why = ["squall start %s with %s after %.1f s (SIGINT, then SIGKILL at %d s)"
               % ("was killed" if self.killed else "exited", code, self.stop_seconds, STOP_WAIT)]
        for pid in alive:
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    argv = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                argv = "?"
            why.append("left running: pid %d: %s" % (pid, argv[:200]))
        print("\n".join(why + [self.log_tails()]), file=sys.stderr)
        fail("cluster stopped cleanly")

    def log_tails(self, lines=25):
        """The last lines of squall start's output and of each process's log."""
        out = []
        logs = os.path.join(self.tmp, "logs")
        paths = [self.out.name] + [os.path.join(logs, n) for n in sorted(os.listdir(logs))
                                   if n.endswith(".log")] if os.path.isdir(logs) else [self.out.name]
        for path in paths:
            try:
                with open(path, errors="replace") as f:
                    tail = f.read().splitlines()[-lines:]
            except OSError as exc:
                tail = ["(unreadable: %s)" % exc]
            out.append("--- %s (last %d lines)\n%s" % (os.path.basename(path), len(tail),
                                                       "\n".join(tail)))
        return "\n".join(out)

    def __exit__(self, exc_type, *exc):
        self.stop()
        for pid in self.pids:           # insist, should a test have failed midway
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.out.close()
        logs = os.path.join(self.tmp, "logs")
        for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
            if not os.path.isfile(os.path.join(logs, name)) or name == "journal":
                continue                # the keys' directory, the broker's journal
            with open(os.path.join(logs, name), errors="replace") as f:
                text = f.read()
            if "Sanitizer" in text or "runtime error:" in text:
                print(text[-4000:], file=sys.stderr)
                fail("sanitizer report in %s" % os.path.join(logs, name))
        if exc_type is None:
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print("cluster logs kept in %s" % logs, file=sys.stderr)
        return False

    def leftovers(self):
        alive = []
        for pid in self.pids:
            try:
                with open("/proc/%d/stat" % pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        alive.append(pid)
            except OSError:
                pass
        return alive
