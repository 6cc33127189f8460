"""Every task's output, kept and readable (issue 27): stdout and stderr of
execute and Python tasks captured per attempt on the governor, the head and
the tail past --log-limit, read with LOG + LOGREAD (Future.logs, Task.logs,
`squall log`, forwarding), and the failure cases (a lost governor, another
tenant, malformed requests)."""
import os
import subprocess
import sys
import tempfile

import pytest

import squall
from squall.tasks import Execute
from conftest import TIMEOUT, cluster_options, until

CLI = [sys.executable, "-m", "squall"]


def _cli_env(cluster):
    env = dict(os.environ)
    env["SQUALL_BROKER"] = cluster.address
    env["SQUALL_SECRET_KEY"] = cluster.secret_key
    env["SQUALL_BROKER_KEY"] = cluster.broker_key
    return env


def test_execute_stdout_and_stderr_are_kept(client):
    with client.session() as s:
        t = Execute("echo out-line; echo err-line >&2; printf 'no newline'")
        s.submit()
        t.wait(TIMEOUT)
        assert t.logs() == "out-line\nno newline"
        assert t.logs("stderr") == "err-line\n"


def test_stdout_as_an_output_is_not_in_the_log(client):
    with client.session() as s:
        t = Execute("echo data; echo diag >&2", stdout=True)
        t.output.keep()
        s.submit()
        assert t.fetch(TIMEOUT) == b"data\n"
        assert t.logs() == ""
        assert t.logs("stderr") == "diag\n"


def test_python_print_logging_warnings_and_c_writes(client):
    def chatty():
        import ctypes
        import logging
        import sys
        import warnings
        print("printed")
        sys.stdout.flush()
        ctypes.CDLL(None).write(1, b"c-write\n", 8)
        logging.getLogger("chatty").warning("logged")
        warnings.warn("careful")
        sys.stderr.write("to-stderr\n")
        return 1

    f = client.submit(chatty)
    with pytest.warns(UserWarning):
        assert f.result(TIMEOUT) == 1
    out, err = f.logs(), f.logs("stderr")
    assert out == "printed\nc-write\n"
    assert "logged" in err and "UserWarning: careful" in err and "to-stderr" in err
    # the next task of the same executor starts with a log of its own
    g = client.submit(lambda: print("second") or 2)
    assert g.result(TIMEOUT) == 2
    assert g.logs() == "second\n"
    assert "printed" not in g.logs()


def test_head_and_tail_past_the_limit():
    """10 MiB printed with --log-limit 1MiB: the first and last 512 KiB are
    read back, and a marker line counts the 9 MiB dropped between."""
    with squall.LocalCluster(governors=1, cpus=1, governor_args=["--log-limit", "1MiB"],
                             **cluster_options()) as c, c.client() as client:
        with client.session() as s:
            # 10 MiB of numbered 16-byte lines: "%015d\n"
            t = Execute("seq -f '%015g' 0 655359")
            s.submit()
            t.wait(TIMEOUT)
            text = t.logs()
        head, marker, tail = text.partition("[squall: ")
        assert marker, text[:200]
        dropped, _, tail = tail.partition("]\n")
        assert dropped == "%d bytes dropped (log limit 1048576 bytes)" % (10 * 2**20 - 2**20)
        assert len(head) == 512 * 1024 and len(tail) == 512 * 1024
        assert head.startswith("%015d\n" % 0) and head.endswith("%015d\n" % 32767)
        assert tail.startswith("%015d\n" % (655360 - 32768)) and tail.endswith("%015d\n" % 655359)


def test_per_task_log_limit(client):
    with client.session() as s:
        t = Execute("seq -f '%015g' 0 1023", log_limit=1024)
        s.submit()
        t.wait(TIMEOUT)
        text = t.logs()
    assert text.startswith("%015d\n" % 0)
    assert "[squall: %d bytes dropped (log limit 1024 bytes)]\n" % (16 * 1024 - 1024) in text
    assert text.endswith("%015d\n" % 1023)


def test_follow_sees_lines_while_the_task_runs(cluster, client, tmp_path):
    """`squall log --follow` prints a line the task wrote while it still
    runs: the task then waits for a file the test writes once it saw it."""
    go = tmp_path / "go"
    with client.session() as s:
        t = Execute("echo first; while [ ! -e %s ]; do sleep 0.05; done; echo second" % go)
        s.submit()
        proc = subprocess.Popen(CLI + ["log", str(s.id), str(t.id), "--follow"],
                                env=_cli_env(cluster), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            first = proc.stdout.readline()
            assert first == b"first\n", proc.stderr.read() if not first else first
            assert proc.poll() is None          # still following: the task runs
            go.write_text("")
            assert proc.stdout.readline() == b"second\n"
            assert proc.wait(TIMEOUT) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def test_squall_log_reads_another_clients_task(cluster, client):
    with client.session() as s:
        t = Execute("echo hello from the task; echo oops >&2")
        s.submit()
        t.wait(TIMEOUT)
        out = subprocess.run(CLI + ["log", str(s.id), str(t.id)], env=_cli_env(cluster),
                             capture_output=True, timeout=TIMEOUT)
        assert out.returncode == 0, out.stderr
        assert out.stdout == b"hello from the task\n"
        err = subprocess.run(CLI + ["log", str(s.id), str(t.id), "--stderr"],
                             env=_cli_env(cluster), capture_output=True, timeout=TIMEOUT)
        assert err.stdout == b"oops\n"
        unknown = subprocess.run(CLI + ["log", str(s.id), "999"], env=_cli_env(cluster),
                                 capture_output=True, timeout=TIMEOUT)
        assert unknown.returncode == 1 and b"999 is not a task" in unknown.stderr


def test_a_task_not_started_has_no_output_yet(client, tmp_path):
    go = tmp_path / "go"
    with client.session() as s:
        first = Execute("while [ ! -e %s ]; do sleep 0.05; done; touch o" % go, outputs=["o"])
        blocked = Execute("echo later", inputs=[("x", first.outputs[0])])
        s.submit()
        assert blocked.logs() == ""
        go.write_text("")
        blocked.wait(TIMEOUT)
        assert blocked.logs() == "later\n"


def test_forwarding_prefixes_lines_with_the_task(cluster):
    script = (
        "import squall, sys\n"
        "with squall.Client(%r, secret_key=%r, broker_key=%r, forward_logs=True) as c:\n"
        "    def hello(i):\n"
        "        print('line one of', i)\n"
        "        print('line two of', i)\n"
        "        return i\n"
        "    fs = c.map(hello, [1, 2])\n"
        "    assert c.gather(fs) == [1, 2]\n"
        "    import time\n"
        "    deadline = time.monotonic() + 60\n"
        "    while c._forwarder._followed or c._forwarder._pending:\n"
        "        assert time.monotonic() < deadline\n"
        "        time.sleep(0.05)\n"
        "    print('ids', *[f._tid for f in fs])\n"
        % (cluster.address, cluster.secret_key, cluster.broker_key))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=TIMEOUT, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    ids = lines[-1].split()[1:]
    for i, tid in zip((1, 2), ids):
        assert "(task %s hello) line one of %d" % (tid, i) in lines
        assert "(task %s hello) line two of %d" % (tid, i) in lines


def test_log_of_a_killed_governor_is_lost():
    """The governor that ran the task is killed: its log is gone with it,
    and the reply says so at once (no hang, no other attempt's log)."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as c, \
            c.client() as client:
        with client.session() as s:
            t = Execute("echo on the lost governor")
            s.submit()
            t.wait(TIMEOUT)
            assert t.logs() == "on the lost governor\n"
            gid = client.info()["governors"][0]["id"]
            c.governors[0].kill()
            c.governors[0].wait()
            until(lambda: not client.info()["governors"], "the broker to see the governor gone")
            with pytest.raises(squall.ObjectLost, match="log lost with governor %d" % gid):
                t.logs()


def test_each_of_many_small_python_tasks_has_its_own_log(client):
    """Small tasks are piped to a busy executor (governor/pyexec.c): each
    one's log descriptors travel with its frame, so each log holds its own
    task's lines, also for tasks that ran one after the other in an
    executor."""
    def shout(i):
        print("task", i)
        return i

    fs = client.map(shout, range(40))
    assert client.gather(fs) == list(range(40))
    for i, f in enumerate(fs):
        assert f.logs() == "task %d\n" % i


def test_stdout_path_and_stderr_path_write_files(client, tmp_path):
    out, err, both = tmp_path / "out.txt", tmp_path / "err.txt", tmp_path / "both.txt"
    with client.session() as s:
        t = Execute("echo to-file; echo err-to-file >&2", stdout_path=str(out),
                    stderr_path=str(err))
        u = Execute("echo one; echo two >&2; echo three", stdout_path=str(both),
                    stderr_path=str(both))
        s.submit()
        t.wait(TIMEOUT)
        u.wait(TIMEOUT)
        assert out.read_text() == "to-file\n" and err.read_text() == "err-to-file\n"
        assert both.read_text() == "one\ntwo\nthree\n"
        assert t.logs() == "" and t.logs("stderr") == ""

    def py_writes():
        print("python to a file")
        return 3

    pyout = tmp_path / "py.txt"
    f = client.submit(py_writes, stdout_path=str(pyout))
    assert f.result(TIMEOUT) == 3
    assert pyout.read_text() == "python to a file\n"
    assert f.logs() == ""


def test_a_stdout_path_that_cannot_be_opened_fails_the_task(client, tmp_path):
    with client.session() as s:
        t = Execute("echo x", stdout_path=str(tmp_path / "no" / "such" / "dir" / "out"))
        s.submit()
        with pytest.raises(squall.TaskFailed, match="cannot open stdout_path"):
            t.wait(TIMEOUT)
    with pytest.raises(ValueError, match="absolute path"):
        with client.session() as s:
            Execute("echo x", stdout_path="relative/out")


def test_the_dashboard_shows_the_tail_of_a_tasks_output():
    """/api/log asks the task's governor for the last 4 KiB (LOGTAIL): the
    broker relays no more, whatever the task printed; errors come as JSON."""
    import json
    import urllib.request
    with squall.LocalCluster(governors=1, cpus=1, broker_args=["--http", "0"],
                             **cluster_options()) as c, c.client() as client:
        def get(query):
            request = urllib.request.Request(
                "http://127.0.0.1:%d/api/log?%s" % (c.http_port, query),
                headers={"Authorization": "Bearer " + c.http_token})
            with urllib.request.urlopen(request, timeout=TIMEOUT) as reply:
                return reply.status, json.loads(reply.read())

        with client.session() as s:
            t = Execute("seq -f '%015g' 0 9999; echo 'to \"stderr\"' >&2")
            s.submit()
            t.wait(TIMEOUT)
            status, body = get("session=%d&task=%d" % (s.id, t.id))
            assert status == 200 and body["task"] == t.id and body["attempt"] == 0
            assert len(body["text"]) == 4096 and body["text"].endswith("%015d\n" % 9999)
            status, body = get("session=%d&task=%d&stream=stderr" % (s.id, t.id))
            assert body["text"] == 'to "stderr"\n'
            status, body = get("session=%d&task=999" % s.id)
            assert "no task 999" in body["error"]
        try:
            get("session=1&task=x")
            raise AssertionError("a malformed query was answered 200")
        except urllib.error.HTTPError as exc:
            assert exc.code == 400


def test_a_retry_on_the_same_governor_has_a_log_of_its_own(tmp_path):
    """Attempt 0 fails, attempt 1 (on the one governor) succeeds: the latest
    log is attempt 1's, and attempt 0's is not shown in its place."""
    marker = str(tmp_path / "failed-once")

    def flaky(path):
        import os
        if not os.path.exists(path):
            open(path, "w").close()
            print("attempt that fails")
            raise RuntimeError("first time")
        print("attempt that works")
        return 5

    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as c, \
            c.client() as client:
        f = client.submit(flaky, marker, max_retries=2)
        assert f.result(TIMEOUT) == 5
        assert f.logs() == "attempt that works\n"
        assert f.logs(attempt=1) == "attempt that works\n"
        with pytest.raises(squall.SquallError, match="attempt 0"):
            f.logs(attempt=0)


def test_a_running_tasks_log_is_held_at_about_the_limit(tmp_path):
    """20 MiB printed by a task that then waits: while it still runs, its
    governor holds about the 1 MiB limit of it (the middle punched out of
    the memory file), not the 20 MiB."""
    go = tmp_path / "go"
    with squall.LocalCluster(governors=1, cpus=1, governor_args=["--log-limit", "1MiB"],
                             **cluster_options()) as c, c.client() as client:
        pid = c.governors[0].pid
        with client.session() as s:
            t = Execute("yes x | head -c 20971520; touch %s/wrote; "
                        "while [ ! -e %s ]; do sleep 0.05; done" % (tmp_path, go))
            s.submit()
            until(lambda: (tmp_path / "wrote").exists(), "the task to write 20 MiB")

            def held():
                sizes = []
                for fd in os.listdir("/proc/%d/fd" % pid):
                    path = "/proc/%d/fd/%s" % (pid, fd)
                    try:
                        if os.readlink(path).startswith("/memfd:squall-stdout"):
                            st = os.stat(path)
                            sizes.append((st.st_size, st.st_blocks * 512))
                    except OSError:
                        pass
                return sizes and sizes[0][0] == 20 * 2**20 and sizes[0][1] <= 2**20 + 2 * 4096

            until(held, "the governor to hold about 1 MiB of the 20 MiB")
            go.write_text("")
            t.wait(TIMEOUT)
            text = t.logs()
            assert text.startswith("x\n" * 500) and "bytes dropped" in text
