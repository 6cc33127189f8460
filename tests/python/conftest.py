"""Fixtures of the Python binding tests: a real LocalCluster on loopback.

The package is used from the source tree (bindings/python) with the
binaries and libsquall of $SQUALL_BUILD_DIR (set by ctest), or as installed.
"""
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_PKG = os.path.normpath(os.path.join(_HERE, "..", "..", "bindings", "python"))
if os.path.isdir(os.path.join(_PKG, "squall")) and _PKG not in sys.path:
    sys.path.insert(0, _PKG)

import squall  # noqa: E402

TIMEOUT = 60.0


def cluster_options():
    """Options of the test clusters. Under the sanitizer build this Python
    process runs with libasan preloaded and leak checks off (the interpreter
    is not leak-clean, and an instrumented libsquall needs the preload). The
    broker and governors get the strict options back
    (SQUALL_TEST_CHILD_ASAN_OPTIONS) and no preload, so that programs run by
    execute tasks are not affected; Python executors (which may import
    squall, and so libsquall, with a test module) get the preload again
    through a wrapper interpreter."""
    strict = os.environ.get("SQUALL_TEST_CHILD_ASAN_OPTIONS")
    preload = os.environ.get("LD_PRELOAD")
    if not strict or not preload:
        return {}
    import tempfile
    wrapper = os.path.join(tempfile.mkdtemp(prefix="squall-test-"), "python")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nLD_PRELOAD='%s' ASAN_OPTIONS=detect_leaks=0 exec '%s' \"$@\"\n"
                % (preload, sys.executable))
    os.chmod(wrapper, 0o755)
    return {"env": {"ASAN_OPTIONS": strict, "LD_PRELOAD": None}, "python": wrapper}


def until(condition, what, timeout=TIMEOUT):
    """Polls a condition the test cannot be told of (a file a task writes,
    a load report), returning its first true value; fails at the deadline.
    A polling interval, not a synchronisation."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


def key_client(cluster, key, **options):
    """A client of the cluster with a key of its own, or None while the
    broker has not read the key yet (poll it with `until`)."""
    try:
        return squall.Client(cluster.address, timeout=2.0, secret_key=key,
                             broker_key=cluster.broker_key, **options)
    except squall.SquallError:
        return None


def tenant_client(cluster, name, tenant, **options):
    """A client (no admin) of `tenant`: a key named after `name` and this
    process added to the cluster's keyring, which the broker re-reads on
    SIGHUP; polled until the broker accepts it. `options` go to Client."""
    import signal
    authorized = os.path.join(cluster._keydir, "authorized")
    key = squall.keygen("%s-%d" % (name, os.getpid()), authorized, "client", tenant=tenant)
    cluster.broker.send_signal(signal.SIGHUP)
    return until(lambda: key_client(cluster, key, **options),
                 "the broker to accept %s's key" % name)


def clean_exit(c):
    """A clean stop of a LocalCluster (and, under ASan, no leak or error
    report): every process it started exited 0."""
    assert c.exit_codes and all(code == 0 for code in c.exit_codes.values()), c.exit_codes


def children_of(pid):
    """The pids whose parent is `pid` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out

def finalised_under_lock(box, lock, handle, what):
    """Drops the last reference (box's one item) and runs the collector in
    another thread while this one holds `lock`, as when the collector runs
    in a thread the lock's holder waits for (Thread.start waits for the new
    thread). The finaliser must neither wait for the lock (that thread ends
    at once) nor close `handle` while the lock is held; it closes it once
    the lock is let go."""
    import gc
    import threading
    with lock:
        finaliser = threading.Thread(target=lambda: (box.clear(), gc.collect()))
        finaliser.start()
        finaliser.join(timeout=TIMEOUT)
        assert not finaliser.is_alive(), "the %s's finaliser waited for the lock" % what
        assert handle.value                 # not closed while the lock is held elsewhere
    assert not handle.value                 # closed as the lock was let go


def run_example(name):
    """Runs examples/<name> as a user would (it starts its own cluster) and
    returns its standard output; skipped under the sanitizer build, whose
    wrapper the example's cluster would not have."""
    import subprocess
    if cluster_options():
        pytest.skip("the example starts its own cluster without the sanitizer wrapper")
    example = os.path.join(_HERE, "..", "..", "examples", name)
    out = subprocess.run([sys.executable, example], env=dict(os.environ), capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="session")
def cluster():
    c = squall.LocalCluster(governors=2, cpus=1, **cluster_options())
    with c:
        yield c
    # a clean stop (and, under ASan, no leak or error report) is part of the test
    assert c.exit_codes and all(code == 0 for code in c.exit_codes.values()), c.exit_codes


@pytest.fixture
def client(cluster):
    c = cluster.client()
    yield c
    c.close()
