"""Tenants that share a governor cannot reach its key nor each other
(docs/security.md, "Tasks on a governor"): a governor running as root runs
each tenant's programs and Python executors under a user id of its own.

Runs as root only (it switches users for real); skipped otherwise, and when
no Python interpreter here may be run by another user."""
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

import squall
from squall import tasks
from conftest import TIMEOUT, cluster_options, key_client, until

FIRST_UID = 2000000000
TASK_UIDS = "%d-%d" % (FIRST_UID, FIRST_UID + 65535)


def _python_for_others():
    """An interpreter a task's user id can run (the test's own may live in
    root's home)."""
    for candidate in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if not candidate:
            continue
        try:
            #   It must also reach cloudpickle and squall as that user (a
            #   checkout or a venv in a 0700 directory would not be).
            ran = subprocess.run([candidate, "-c", "import cloudpickle, squall"], user=FIRST_UID,
                                 group=FIRST_UID, extra_groups=[], capture_output=True,
                                 timeout=TIMEOUT, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                     os.path.abspath(p) for p in sys.path if p and os.path.isdir(p))))
        except (OSError, subprocess.SubprocessError):
            continue
        if ran.returncode == 0:
            return candidate
    return None


@pytest.fixture(scope="module")
def shared():
    """One governor (2 cpus) shared by tenants team-a (alice) and team-b
    (bob), started with a client key in its environment."""
    if os.geteuid() != 0:
        pytest.skip("running tasks as other users needs root")
    python = _python_for_others()
    if not python:
        pytest.skip("no Python interpreter here may be run by another user")
    options = cluster_options()
    options["python"] = python
    #   a starter's environment may carry a client key: no task sees it
    env_key = "/nonexistent/starter-client-%s.key" % os.urandom(4).hex()
    options["env"] = dict(options.get("env") or {}, SQUALL_SECRET_KEY=env_key)
    with squall.LocalCluster(governors=1, cpus=2, task_uids=TASK_UIDS, **options) as cluster:
        authorized = cluster._keys["authorized"]
        alice = squall.keygen("alice", authorized, "client", "team-a")
        bob = squall.keygen("bob", authorized, "client", "team-b")
        cluster.broker.send_signal(signal.SIGHUP)
        a = until(lambda: key_client(cluster, alice), "the broker to take alice's key")
        b = until(lambda: key_client(cluster, bob), "the broker to take bob's key")
        yield cluster, a, b, env_key
        a.close()
        b.close()
    # a clean stop (under ASan: no leak or error report) is part of the test
    assert cluster.exit_codes and all(code == 0 for code in cluster.exit_codes.values()), \
        cluster.exit_codes


def _governor_secret(cluster):
    """The governor's secret key as its file writes it (Z85)."""
    with open(cluster._keys["governor_keys"][0]) as f:
        for line in f:
            if "secret-key" in line:
                return line.split("=", 1)[1].strip().strip('"')
    raise AssertionError("no secret key in the governor's key file")


#   Every way a task of the attack (and a few more) looks for the
#   governor's key: its --secret-key path in the governor's command line,
#   then the file; the governor's environment, descriptors, memory map and
#   memory; the key directory; the working directory; its own environment.
#   Each line says what it got; "DENIED" when the read failed.
ATTACK = r"""
gov=$PPID
try() { label=$1; shift; if out=$("$@" 2>/dev/null) && [ -n "$out" ]; then
          printf '%s: %s\n' "$label" "$out"; else printf '%s: DENIED\n' "$label"; fi; }
key=$(tr '\0' '\n' </proc/$gov/cmdline | grep -A1 -e --secret-key | tail -n 1)
echo "path: $key"
try keyfile cat "$key"
try keydir ls "$(dirname "$key")"
try environ sh -c "tr '\0' '\n' </proc/$gov/environ"
try fds ls /proc/$gov/fd
for fd in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    try "fd$fd" timeout 1 head -c 4096 /proc/$gov/fd/$fd
done
try maps cat /proc/$gov/maps
try mem timeout 1 head -c 4096 /proc/$gov/mem
try root ls /proc/$gov/root/
try cwd ls /proc/$gov/cwd/
try workdir ls ..
try script-write sh -c 'echo "# planted" >> ../squall-executor.py && echo written'
echo "env: $(env | grep -e SECRET -e SQUALL_PARENT -e '_KEY=' || true)"
echo "uid: $(id -u) gov-uid: $(stat -c %u /proc/$gov)"
"""


def _lines(text):
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


def test_a_task_cannot_reach_the_governors_key(shared):
    cluster, alice, _, env_key = shared
    secret = _governor_secret(cluster)
    with alice.session() as s:
        attack = tasks.Execute(ATTACK, stdout=True)
        attack.output.keep()
        s.submit()
        out = attack.output.fetch(TIMEOUT).decode()
    assert secret not in out, out
    got = _lines(out)
    assert got["path"].strip("*") == "", out      # not even where the key is
    for what in ["keyfile", "keydir", "environ", "fds", "maps", "mem", "root", "cwd",
                 "workdir", "script-write"] + ["fd%d" % fd for fd in range(21)]:
        assert got[what] == "DENIED", (what, out)
    assert got["env"].strip() == "", out
    uid, gov_uid = got["uid"].split(" gov-uid: ")
    assert int(uid) != int(gov_uid) and FIRST_UID <= int(uid) <= FIRST_UID + 65535, out
    assert env_key not in out


def test_a_python_task_cannot_reach_the_governors_key(shared):
    cluster, alice, _, _ = shared
    secret = _governor_secret(cluster)

    def attack(secret_path):
        import os
        gov = os.getppid()
        got = {}
        for what, path in (("cmdline", "/proc/%d/cmdline" % gov), ("environ", "/proc/%d/environ" % gov),
                           ("maps", "/proc/%d/maps" % gov), ("keyfile", secret_path)):
            try:
                with open(path, "rb") as f:
                    got[what] = f.read(1 << 16)
            except OSError as e:
                got[what] = e.errno
        try:
            fd = os.open("/proc/%d/mem" % gov, os.O_RDONLY)
            got["mem"] = "opened"
            os.close(fd)
        except OSError as e:
            got["mem"] = e.errno
        try:
            got["fds"] = os.listdir("/proc/%d/fd" % gov)
        except OSError as e:
            got["fds"] = e.errno
        got["env"] = {k: v for k, v in os.environ.items() if "KEY" in k or "SECRET" in k}
        got["uid"] = os.getuid()
        return got

    got = alice.submit(attack, cluster._keys["governor_keys"][0]).result(TIMEOUT)
    assert secret.encode() not in repr(got).encode(), got
    assert b"--secret-key" in got["cmdline"]       # world-readable, but masked:
    assert cluster._keys["governor_keys"][0].encode() not in got["cmdline"]
    for what in ("environ", "maps", "keyfile", "mem", "fds"):
        assert isinstance(got[what], int), (what, got)     # an errno
    assert got["env"] == {}, got
    assert got["uid"] >= FIRST_UID, got


def test_tenants_cannot_read_each_others_running_tasks(shared):
    cluster, alice, bob, _ = shared
    mark = "mine-%s" % os.urandom(6).hex()
    # alice's task holds a secret input and a file it wrote until the test
    # makes a directory beside it (the test, not a clock, says when)
    with alice.session() as s:
        secret = squall.blob(b"alice's input 7d1c")
        held = tasks.Execute("echo alice-wrote-9f3e > %s; "
                             "until [ -e ../alice-may-go ]; do sleep 0.05; done; cat in.txt" % mark,
                             inputs=[("in.txt", secret)], stdout=True)
        held.output.keep()
        s.submit()

        def running():
            for d in os.listdir("/tmp"):
                path = os.path.join("/tmp", d)
                if d.startswith("squall-governor-"):
                    try:
                        entries = os.listdir(path)
                    except (FileNotFoundError, NotADirectoryError):
                        continue    # another test's governor, gone since /tmp was listed
                    for t in entries:
                        if os.path.isfile(os.path.join(path, t, mark)):
                            return os.path.join(path, t)
            return None
        task_dir = until(running, "alice's task to run")
        workdir = os.path.dirname(task_dir)
        st = os.stat(task_dir)
        assert st.st_mode & 0o777 == 0o700 and st.st_uid >= FIRST_UID, oct(st.st_mode)
        with bob.session() as t:
            probe = tasks.Execute(
                "for f in '%s/%s' '%s/in.txt'; do cat \"$f\" 2>/dev/null || echo DENIED; done; "
                "ls '%s' 2>/dev/null || echo DENIED; "
                "ls '%s' 2>/dev/null || echo DENIED; "
                "(echo x > '%s/planted') 2>/dev/null || echo DENIED; "
                "kill -0 $(pgrep -u %d | head -n 1) 2>/dev/null && echo SIGNALLED || echo DENIED"
                % (task_dir, mark, task_dir, task_dir, workdir, task_dir, st.st_uid), stdout=True)
            probe.output.keep()
            t.submit()
            seen = probe.output.fetch(TIMEOUT).decode()
        os.mkdir(os.path.join(workdir, "alice-may-go"))
        assert held.output.fetch(TIMEOUT) == b"alice's input 7d1c"
    assert "alice-wrote" not in seen and "7d1c" not in seen, seen
    assert seen.split() == ["DENIED"] * 6, seen


def test_executors_are_never_shared_between_tenants(shared):
    _, alice, bob, _ = shared

    def plant():
        import builtins
        import os
        builtins.squall_planted = "alice was here"
        return os.getuid(), os.getpid()

    def look(_):
        import builtins
        import os
        return getattr(builtins, "squall_planted", None), os.getuid(), os.getpid()

    a_uid, a_pid = alice.submit(plant).result(TIMEOUT)
    # one at a time: an executor that is free is the one reused, if any is
    seen = [bob.submit(look, i).result(TIMEOUT) for i in range(6)]
    assert all(planted is None for planted, _, _ in seen), seen
    assert all(uid != a_uid and pid != a_pid for _, uid, pid in seen), (a_uid, a_pid, seen)
    # and alice's own executor keeps her global: the pool is per tenant, not per task
    again = alice.submit(look, 0).result(TIMEOUT)
    assert again[1] == a_uid


NOT_ROOT = r"""
import os, sys, squall
from squall import tasks
with squall.LocalCluster(governors=1, cpus=1, python=sys.executable, task_uids=None) as c:
    cl = c.client()
    with cl.session() as s:
        t = tasks.Execute("id -u; cat in.txt > out.txt", inputs=[("in.txt", squall.blob(b"hi"))],
                          outputs=["out.txt"], stdout=True)
        for o in t.outputs:
            o.keep()
        s.submit()
        uid, out = (o.fetch(60) for o in t.outputs)
    py = cl.submit(lambda: os.getuid()).result(60)
    cl.close()
print("RESULT", int(uid), out.decode(), py, os.getuid())
print("EXITS", sorted(c.exit_codes.values()))
"""


def test_a_governor_not_running_as_root_keeps_working():
    """A governor started by another user (no --task-uids: it cannot switch)
    runs execute and py tasks as itself, and stops cleanly."""
    if os.geteuid() != 0:
        pytest.skip("starts the cluster as another user: needs root")
    python = _python_for_others()
    if not python:
        pytest.skip("no Python interpreter here may be run by another user")
    uid = FIRST_UID - 1
    env = dict(os.environ, HOME="/tmp",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)))
    ran = subprocess.run([python, "-c", NOT_ROOT], user=uid, group=uid, extra_groups=[],
                         cwd="/", env=env, capture_output=True, text=True, timeout=TIMEOUT * 2)
    assert ran.returncode == 0, ran.stderr
    result = [line.split()[1:] for line in ran.stdout.splitlines() if line.startswith("RESULT")]
    assert result == [[str(uid), "hi", str(uid), str(uid)]], ran.stdout
    assert "EXITS [0, 0]" in ran.stdout, ran.stdout


def test_executors_are_keyed_by_tenant_and_devices():
    """With --gpus, an executor serves one tenant's tasks holding one set of
    devices: its environment has both its own HOME (the tenant's user id's)
    and the devices, once each, and it is reused only for the same tenant
    and the same devices."""
    if os.geteuid() != 0:
        pytest.skip("running tasks as other users needs root")
    python = _python_for_others()
    if not python:
        pytest.skip("no Python interpreter here may be run by another user")
    # defined here: pickled by value, the executor does not import this
    # module (nor squall, whose library the sanitizer build cannot load there)
    def _probe(plant):
        """What a Python task sees of its executor: a global an earlier task of
        the same executor planted, its ids, its devices and how many entries of
        each name its process started with (sh takes the last, getenv the
        first: one of each), whose HOME it has."""
        import builtins
        import os
        seen = getattr(builtins, "squall_planted", None)
        if plant:
            builtins.squall_planted = plant
        with open("/proc/self/environ", "rb") as f:
            names = [e.split(b"=", 1)[0] for e in f.read().split(b"\0") if e]
        home = os.environ.get("HOME")
        counts = [names.count(n) for n in (b"CUDA_VISIBLE_DEVICES", b"SQUALL_GPUS", b"HOME")]
        return {"seen": seen, "uid": os.getuid(), "devs": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "squall": os.environ.get("SQUALL_GPUS"), "home_uid": os.stat(home).st_uid,
                "n": counts}

    options = cluster_options()
    options["python"] = python
    # one device: every gpus=1 task of this serial test gets device 0
    with squall.LocalCluster(governors=1, cpus=2, task_uids=TASK_UIDS,
                             governor_args=["--gpus", "0"], **options) as cluster:
        authorized = cluster._keys["authorized"]
        alice = squall.keygen("alice-gpu", authorized, "client", "team-a")
        bob = squall.keygen("bob-gpu", authorized, "client", "team-b")
        cluster.broker.send_signal(signal.SIGHUP)
        a = until(lambda: key_client(cluster, alice), "the broker to take alice's key")
        b = until(lambda: key_client(cluster, bob), "the broker to take bob's key")
        gpu = {"gpus": 1}
        first = a.submit(_probe, "a-gpu", resources=gpu).result(TIMEOUT)
        assert first["uid"] >= FIRST_UID and first["home_uid"] == first["uid"], first
        assert first["devs"] == first["squall"] == "0" and first["n"] == [1, 1, 1], first
        # same tenant, same devices: the same executor
        again = a.submit(_probe, None, resources=gpu).result(TIMEOUT)
        assert again["seen"] == "a-gpu" and again["uid"] == first["uid"], again
        # same tenant, no devices: another executor, which sees none
        plain = a.submit(_probe, None).result(TIMEOUT)
        assert plain["seen"] is None and plain["uid"] == first["uid"], plain
        assert plain["devs"] == "" and plain["n"] == [1, 1, 1], plain
        # same devices, another tenant: another executor, under bob's id
        a.submit(_probe, "a-gpu", resources=gpu).result(TIMEOUT)
        other = b.submit(_probe, None, resources=gpu).result(TIMEOUT)
        assert other["seen"] is None and other["uid"] not in (first["uid"], 0), other
        assert other["devs"] == "0" and other["home_uid"] == other["uid"], other
        # an execute task: the devices over its own env, HOME its directory's
        with a.session() as s:
            shown = tasks.Execute(
                "echo \"$CUDA_VISIBLE_DEVICES $SQUALL_GPUS $(env | grep -c "
                "-e ^CUDA_VISIBLE_DEVICES= -e ^SQUALL_GPUS= -e ^HOME=) "
                "$(stat -c %u \"$HOME\") $(id -u)\"",
                env={"CUDA_VISIBLE_DEVICES": "7", "SQUALL_GPUS": "7"}, stdout=True,
                resources=gpu)
            shown.output.keep()
            s.submit()
            out = shown.output.fetch(TIMEOUT).decode()
        fields = out.split()
        assert len(fields) == 5 and fields[:3] == ["0", "0", "3"], out
        assert fields[3] == fields[4] and int(fields[4]) >= FIRST_UID, out
        a.close()
        b.close()
    assert cluster.exit_codes and all(code == 0 for code in cluster.exit_codes.values()), \
        cluster.exit_codes


def test_run_and_restart_touch_only_the_tenants_executors():
    """client.run runs in the caller's tenant's executors only, and
    client.restart stops the caller's tenant's executors, never another
    tenant's (executors are keyed by tenant)."""
    if os.geteuid() != 0:
        pytest.skip("running tasks as other users needs root")
    python = _python_for_others()
    if not python:
        pytest.skip("no Python interpreter here may be run by another user")

    # defined here: pickled by value (the executor does not import this module)
    def _who(plant):
        import builtins
        import os
        seen = getattr(builtins, "squall_restart_planted", None)
        if plant:
            builtins.squall_restart_planted = plant
        return os.getpid(), os.getuid(), seen

    def _alive(pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    options = cluster_options()
    options["python"] = python
    with squall.LocalCluster(governors=1, cpus=2, task_uids=TASK_UIDS, **options) as cluster:
        authorized = cluster._keys["authorized"]
        alice = squall.keygen("alice-restart", authorized, "client", "team-a")
        bob = squall.keygen("bob-restart", authorized, "client", "team-b")
        cluster.broker.send_signal(signal.SIGHUP)
        a = until(lambda: key_client(cluster, alice), "the broker to take alice's key")
        b = until(lambda: key_client(cluster, bob), "the broker to take bob's key")
        def ran(client, plant):
            """The one executor client.run reached: (pid, uid, seen)."""
            (by_pid,) = client.run(_who, plant).values()
            assert len(by_pid) == 1, by_pid
            return next(iter(by_pid.values()))

        pid_b, uid_b, _ = b.submit(_who, "bob").result(TIMEOUT)
        assert uid_b >= FIRST_UID
        # bob's executor is the only live one: alice's run reaches none
        assert list(a.run(_who, "alice").values()) == [{}]
        assert ran(b, None) == (pid_b, uid_b, "bob")
        # alice's restart leaves bob's executor alone: bob's next task runs
        # in it and sees what bob left there (REFRESH went before it)
        a.restart(keep_results=True)
        assert ran(b, None) == (pid_b, uid_b, "bob")
        # alice's task ran as alice, in an executor of hers, which her run
        # reaches (and not bob's, if the pool kept it); her restart stops it and her next task
        # gets a fresh one
        pid_a, uid_a, _ = a.submit(_who, "alice").result(TIMEOUT)
        assert uid_a >= FIRST_UID and uid_a != uid_b and pid_a != pid_b
        assert ran(a, None) == (pid_a, uid_a, "alice")
        a.restart(keep_results=True)
        until(lambda: not _alive(pid_a), "alice's executor to stop")
        again_a, again_uid, seen = a.submit(_who, None).result(TIMEOUT)
        assert again_a != pid_a and again_uid == uid_a and seen is None
        a.close()
        b.close()
    assert cluster.exit_codes and all(code == 0 for code in cluster.exit_codes.values()), \
        cluster.exit_codes


UMASK_077 = r"""
import os, sys, squall
with squall.LocalCluster(governors=1, cpus=1, python=sys.argv[1], task_uids=sys.argv[2]) as c:
    cl = c.client()
    print("RESULT", cl.submit(lambda: os.getuid()).result(60), flush=True)
    cl.close()
print("EXITS", sorted(c.exit_codes.values()))
"""


def test_python_tasks_run_under_a_governors_umask_of_077():
    """A governor started with umask 077 (a hardened service's; Compose's
    governor-start.sh) still gives executors under task ids an executor
    script they can read: its Python tasks run, as the tenant's id."""
    if os.geteuid() != 0:
        pytest.skip("running tasks as other users needs root")
    python = _python_for_others()
    if not python:
        pytest.skip("no Python interpreter here may be run by another user")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)))
    ran = subprocess.run([sys.executable, "-c", UMASK_077, python, TASK_UIDS], umask=0o077,
                         env=env, capture_output=True, text=True, timeout=TIMEOUT * 2)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    got = _lines(ran.stdout.replace("RESULT ", "RESULT: ").replace("EXITS ", "EXITS: "))
    assert FIRST_UID <= int(got["RESULT"]) < FIRST_UID + 65536, ran.stdout
    assert got["EXITS"] == "[0, 0]", ran.stdout


def _landlock_abi():
    """The kernel's Landlock ABI version, 0 without it."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # create_ruleset
    return max(abi, 0)


def _outside_reach():
    """A fresh directory no task under Landlock may read: not under /tmp
    (shared) nor under any path of this interpreter's (the governors get
    them all in PYTHONPATH), made in the home directory."""
    home = os.path.realpath(os.path.expanduser("~"))
    reachable = ["/tmp", "/var/tmp", "/usr", "/etc", "/opt"] + \
        [os.path.realpath(p) for p in sys.path if p and os.path.isabs(p)]
    for top in reachable:
        if home == top or home.startswith(top.rstrip("/") + "/"):
            pytest.skip("the home directory %s is a path tasks may read (%s)" % (home, top))
    return tempfile.mkdtemp(prefix="squall-landlock-", dir=home)


def test_unswitched_tasks_cannot_reach_the_key_nor_each_other(monkeypatch):
    """Tasks run as the governor's own user (--task-uids none): Landlock
    keeps them from the governor's key and from another task's directory,
    while programs and Python tasks still run (docs/security.md)."""
    if not _landlock_abi():
        pytest.skip("this kernel has no Landlock")
    base = _outside_reach()
    try:
        # the cluster's keys (tempfile.mkdtemp) and the governor's workdir there
        monkeypatch.setattr(tempfile, "tempdir", base)
        options = cluster_options()
        workdir = os.path.join(base, "work")
        options["governor_args"] = ["--workdir", workdir, "--task-landlock", "on"]
        with squall.LocalCluster(governors=1, cpus=2, task_uids="none", **options) as cluster:
            key = cluster._keys["governor_keys"][0]
            assert os.path.realpath(key).startswith(base + "/")
            secret = _governor_secret(cluster)
            client = cluster.client()
            mark = "mine-%s" % os.urandom(6).hex()
            with client.session() as s:
                held = tasks.Execute(
                    "echo wrote-9f3e > %s; until [ -e ../may-go ]; do sleep 0.05; done; "
                    "cat in.txt" % mark,
                    inputs=[("in.txt", squall.blob(b"held input 7d1c"))], stdout=True)
                held.output.keep()
                s.submit()

                def running():
                    for root, _, files in os.walk(workdir):
                        if mark in files:
                            return root
                    return None
                task_dir = until(running, "the held task to run")
                gov_dir = os.path.dirname(task_dir)
                with client.session() as t:
                    probe = tasks.Execute(
                        "for f in '%s' '%s/%s' '%s/in.txt'; do "
                        "cat \"$f\" 2>/dev/null || echo DENIED; done; "
                        "ls '%s' 2>/dev/null || echo DENIED; "
                        "ls '%s' 2>/dev/null || echo DENIED; "
                        "(echo x > '%s/planted') 2>/dev/null || echo DENIED; "
                        "echo mine > own.txt && cat own.txt; head -c 4 /etc/passwd; echo; "
                        "echo shared > \"$(mktemp)\" && echo TMP"
                        % (key, task_dir, mark, task_dir, task_dir, gov_dir, task_dir),
                        stdout=True)
                    probe.output.keep()
                    t.submit()
                    seen = probe.output.fetch(TIMEOUT).decode()
                os.mkdir(os.path.join(gov_dir, "may-go"))
                assert held.output.fetch(TIMEOUT) == b"held input 7d1c"
            assert secret not in seen and "wrote-9f3e" not in seen and "7d1c" not in seen, seen
            assert seen.split() == ["DENIED"] * 6 + ["mine", "root", "TMP"], seen

            def py_probe(paths):
                import os
                got = []
                for path in paths:
                    try:
                        with open(path, "rb") as f:
                            got.append(f.read(64))
                    except OSError as e:
                        got.append(e.errno)
                return os.getuid(), got

            uid, got = client.submit(py_probe, [key, os.path.join(gov_dir, "squall-executor.py"),
                                                "/etc/passwd"]).result(TIMEOUT)
            assert uid == os.getuid()               # not switched: Landlock alone
            assert got[0] == errno.EACCES, got
            assert isinstance(got[1], bytes) and isinstance(got[2], bytes), got
            client.close()
        assert cluster.exit_codes and all(c == 0 for c in cluster.exit_codes.values()), \
            cluster.exit_codes
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_landlock_warns_of_a_key_and_workdir_tasks_may_read(tmp_path):
    """A governor whose key and working directory lie where tasks under
    Landlock may read (/tmp) says so at start; one refused its mode stops."""
    if not _landlock_abi():
        pytest.skip("this kernel has no Landlock")
    from squall.cluster import find_binary
    key = squall.keygen("gov", str(tmp_path), "governor")
    broker_pub = squall.keygen("broker", str(tmp_path), "broker")[:-4] + ".pub"
    assert os.path.realpath(key).startswith("/tmp/")
    bad = subprocess.run([find_binary("squall-governor"), "--broker", "tcp://127.0.0.1:9",
                          "--task-uids", "none", "--task-landlock", "sometimes"],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert bad.returncode == 2 and "--task-landlock must be auto, on or off" in bad.stderr
    gov = subprocess.Popen([find_binary("squall-governor"), "--broker", "tcp://127.0.0.1:9",
                            "--secret-key", key, "--broker-key", broker_pub,
                            "--listen-host", "127.0.0.1", "--task-uids", "none",
                            "--task-landlock", "on", "--workdir", str(tmp_path / "work")],
                           stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        said = []
        for line in gov.stderr:             # the start is logged before the first HELLO
            said.append(line)
            if "HELLO sent" in line:
                break
        text = "".join(said)
        assert "Landlock ABI" in text, text
        assert "--secret-key %s lies under /tmp, which tasks may read" % os.path.realpath(key) \
            in text, text
        assert "the working directory %s" % os.path.realpath(tmp_path / "work") in text, text
    finally:
        gov.terminate()
        gov.wait(TIMEOUT)


def test_stdout_path_is_opened_as_the_task(shared):
    """A task's stdout_path is opened with its tenant's identity, never the
    governor's: a directory only root may write refuses it, and a file it
    may write is the task's user's."""
    import pathlib
    cluster, a, _, _ = shared
    top = pathlib.Path(tempfile.mkdtemp(prefix="squall-stdout-path-"))
    os.chmod(top, 0o755)            # pytest's own directories are root's only
    closed = top / "root-only"
    closed.mkdir(mode=0o700)
    open_dir = top / "anyone"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with a.session() as s:
        denied = tasks.Execute("echo secret", stdout_path=str(closed / "out"))
        allowed = tasks.Execute("echo fine", stdout_path=str(open_dir / "out"))
        s.submit()
        with pytest.raises(squall.TaskFailed, match="cannot open stdout_path .*Permission denied"):
            denied.wait(TIMEOUT)
        allowed.wait(TIMEOUT)
    assert not (closed / "out").exists()
    st = os.stat(open_dir / "out")
    assert FIRST_UID <= st.st_uid < FIRST_UID + 65536
    assert (open_dir / "out").read_text() == "fine\n"
    shutil.rmtree(top)


def test_tenants_cannot_read_each_others_logs(shared):
    """Bob's LOG of alice's task is answered as for a session that does not
    exist; alice reads it."""
    cluster, a, b, _ = shared
    with a.session() as s:
        t = tasks.Execute("echo alice-output")
        s.submit()
        t.wait(TIMEOUT)
        assert a.logs(s.id, t.id) == "alice-output\n"
        with pytest.raises(squall.SquallError) as theirs:
            b.logs(s.id, t.id)
        with pytest.raises(squall.SquallError) as unknown:
            b.logs(4000000000, t.id)
        assert str(theirs.value) == str(unknown.value).replace("4000000000", str(s.id))
