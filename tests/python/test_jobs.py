"""Jobs: sessions that outlive their client (docs/protocol.md, "Jobs"),
through libsquall's C API (ctypes), as the command line and the Python
bindings use it: detached named sessions, SESSIONS, ATTACH, SESSION_WAIT,
TASKS with exit codes, FORGET, JOB_CANCEL, array tasks, retention,
tenants, and jobs across a broker SIGKILLed and restarted on its journal."""
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import squall
from squall._lib import Job, TaskRecord, lib as L
from conftest import TIMEOUT, cluster_options, until

SOURCE = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))

SQ_JOB_RUNNING, SQ_JOB_FINISHED, SQ_JOB_FAILED, SQ_JOB_CANCELLED = 1, 2, 4, 8
WAITING, RUNNING, FINISHED, FAILED, CANCELLED = 1, 2, 4, 8, 16
SQ_E_DUPLICATE_ID, SQ_E_UNKNOWN_ID, SQ_E_SESSION, SQ_E_TIMEOUT = 5, 6, 11, 16


P = ctypes.c_void_p
L.sq_client_new.restype = P
L.sq_client_connect.argtypes = [P, ctypes.c_char_p, ctypes.c_int]
L.sq_client_set_keys.argtypes = [P, ctypes.c_char_p, ctypes.c_char_p]
L.sq_client_set_resume.argtypes = [P, ctypes.c_int]
L.sq_client_destroy.argtypes = [ctypes.POINTER(P)]
L.sq_client_errmsg.argtypes = [P]
L.sq_client_errcode.argtypes = [P]
L.sq_client_errmsg.restype = ctypes.c_char_p
L.sq_session_new_job.argtypes = [P, ctypes.c_char_p, ctypes.c_bool]
L.sq_session_new_job.restype = P
L.sq_session_attach.argtypes = [P, ctypes.c_uint32, ctypes.c_char_p]
L.sq_session_attach.restype = P
L.sq_session_detach.argtypes = [ctypes.POINTER(P)]
L.sq_session_destroy.argtypes = [ctypes.POINTER(P)]
L.sq_session_id.argtypes = [P]
L.sq_session_id.restype = ctypes.c_uint32
L.sq_config_execute.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
                                P, ctypes.c_size_t, ctypes.c_int, P, ctypes.c_size_t,
                                ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                ctypes.POINTER(ctypes.c_size_t)]
L.sq_config_execute.restype = P
L.sq_free.argtypes = [P]
L.sq_task.argtypes = [P, ctypes.c_char_p, P, ctypes.c_size_t, ctypes.c_uint32, P,
                      ctypes.c_size_t]
L.sq_task.restype = ctypes.c_uint32
L.sq_task_set_name.argtypes = [P, ctypes.c_uint32, ctypes.c_char_p]
L.sq_task_set_array.argtypes = [P, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                ctypes.c_uint32]
L.sq_task_set_array_items.argtypes = [P, ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p),
                                      ctypes.c_size_t]
L.sq_task_set_max_retries.argtypes = [P, ctypes.c_uint32, ctypes.c_uint32]
L.sq_submit.argtypes = [P]
L.sq_cancel.argtypes = [P, P, ctypes.c_size_t]
L.sq_wait_all.argtypes = [P, ctypes.c_int]
L.sq_wait.argtypes = [P, P, ctypes.c_size_t, ctypes.c_int]
L.sq_client_jobs.argtypes = [P, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_char_p,
                             ctypes.POINTER(ctypes.POINTER(Job)), ctypes.POINTER(ctypes.c_size_t)]
L.sq_client_job_wait.argtypes = [P, ctypes.c_uint32, ctypes.c_int, ctypes.POINTER(Job)]
L.sq_client_tasks.argtypes = [P, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint64,
                              ctypes.c_uint32, ctypes.POINTER(ctypes.POINTER(TaskRecord)),
                              ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_uint64)]
L.sq_client_resubmit.argtypes = [P, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32),
                                 ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint64)]
L.sq_client_job_cancel.argtypes = [P, ctypes.c_uint32]
L.sq_client_forget.argtypes = [P, ctypes.c_uint32]


class Error(Exception):
    def __init__(self, code, message):
        super().__init__("%d: %s" % (code, message))
        self.code = code


class Client:
    """libsquall's client, by hand."""

    def __init__(self, cluster, key=None):
        self.c = P(L.sq_client_new())
        L.sq_client_set_keys(self.c, os.fsencode(key or cluster.secret_key),
                             os.fsencode(cluster.broker_key))
        self.check(L.sq_client_connect(self.c, cluster.address.encode(), 20000))

    def check(self, rc):
        if rc:
            raise Error(rc, L.sq_client_errmsg(self.c).decode())
        return rc

    def close(self):
        L.sq_client_destroy(ctypes.byref(self.c))

    def job(self, name=None, detached=True):
        s = L.sq_session_new_job(self.c, name.encode() if name else None, detached)
        if not s:
            raise Error(L.sq_client_errcode(self.c), L.sq_client_errmsg(self.c).decode())
        return P(s)

    def attach(self, session=0, name=None):
        s = L.sq_session_attach(self.c, session, name.encode() if name else None)
        if not s:
            raise Error(L.sq_client_errcode(self.c), L.sq_client_errmsg(self.c).decode())
        return P(s)

    def execute(self, session, argv, name=None):
        args = (ctypes.c_char_p * len(argv))(*[a.encode() for a in argv])
        size = ctypes.c_size_t()
        config = L.sq_config_execute(args, len(argv), None, 0, -1, None, 0, -1, None,
                                     ctypes.byref(size))
        task = L.sq_task(session, b"execute", None, 0, 0, config, size.value)
        L.sq_free(config)
        assert task, L.sq_client_errmsg(self.c)
        if name:
            L.sq_task_set_name(session, task, name.encode())
        return task

    def jobs(self, states=0, session=0, name=None):
        out = ctypes.POINTER(Job)()
        n = ctypes.c_size_t()
        self.check(L.sq_client_jobs(self.c, states, session, name.encode() if name else None,
                                    ctypes.byref(out), ctypes.byref(n)))
        jobs = [self._job(out[i]) for i in range(n.value)]
        L.sq_free(out)
        return jobs

    @staticmethod
    def _job(j):
        return {"id": j.id, "name": j.name.decode(), "state": j.state,
                "detached": j.detached, "attached": j.attached, "tasks": list(j.tasks),
                "created": j.created_ms, "ended": j.ended_ms}

    def wait(self, session, timeout_ms=60000):
        j = Job()
        self.check(L.sq_client_job_wait(self.c, session, timeout_ms, ctypes.byref(j)))
        return self._job(j)

    def tasks(self, session, states=0, offset=0, limit=0):
        out = ctypes.POINTER(TaskRecord)()
        n = ctypes.c_size_t()
        total = ctypes.c_uint64()
        self.check(L.sq_client_tasks(self.c, session, states, offset, limit, ctypes.byref(out),
                                     ctypes.byref(n), ctypes.byref(total)))
        recs = [{"id": t.id, "index": t.index, "state": t.state,
                 "exit_code": t.exit_code if t.has_exit_code else None,
                 "governor": t.governor, "attempts": t.attempts, "started": t.started_ms,
                 "ended": t.ended_ms, "error": t.error.decode(), "name": t.name.decode(),
                 "task": t.task}
                for t in out[:n.value]]
        L.sq_free(out)
        return total.value, recs

    def all_tasks(self, session, states=0):
        recs, offset = [], 0
        while True:
            total, page = self.tasks(session, states, offset, 10000)
            recs += page
            offset += len(page)
            if offset >= total or not page:
                return recs

    def resubmit(self, session, ids=()):
        arr = (ctypes.c_uint32 * max(1, len(ids)))(*ids)
        n = ctypes.c_uint64()
        self.check(L.sq_client_resubmit(self.c, session, arr, len(ids), ctypes.byref(n)))
        return n.value


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    journal = str(tmp_path_factory.mktemp("jobs") / "journal")
    c = squall.LocalCluster(governors=2, cpus=2, journal=journal, **cluster_options())
    with c:
        yield c
    _clean_stop(c)


def _clean_stop(c):
    # a clean stop (and, under ASan, no leak or error report) is part of the test
    assert c.exit_codes and all(code == 0 for code in c.exit_codes.values()), c.exit_codes


def test_a_job_outlives_its_client(cluster, tmp_path):
    a = Client(cluster)
    s = a.job("outlives")
    sid = L.sq_session_id(s)
    marker = tmp_path / "go"
    ok = a.execute(s, ["sh", "-c", "while [ ! -e %s ]; do sleep 0.05; done" % marker], "ok")
    bad = a.execute(s, ["sh", "-c", "exit 3"], "bad")
    a.check(L.sq_submit(s))
    # a second job of that name is refused while this one is kept
    with pytest.raises(Error) as dup:
        a.job("outlives")
    assert dup.value.code == SQ_E_DUPLICATE_ID
    a.close()                       # says BYE: a plain session would close now
    b = Client(cluster)
    try:
        [job] = b.jobs(name="outlives")
        assert job["id"] == sid and job["detached"] and not job["attached"]
        assert job["state"] == SQ_JOB_RUNNING
        with pytest.raises(Error) as timeout:
            b.wait(sid, 0)
        assert timeout.value.code == SQ_E_TIMEOUT
        assert any(j["id"] == sid for j in b.jobs(states=SQ_JOB_RUNNING))
        assert not any(j["id"] == sid for j in b.jobs(states=SQ_JOB_FINISHED | SQ_JOB_FAILED))
        marker.write_text("")
        job = b.wait(sid)
        assert job["state"] == SQ_JOB_FAILED and job["ended"] >= job["created"] > 0
        assert job["tasks"] == [0, 0, 1, 1, 0]
        total, recs = b.tasks(sid)
        assert total == 2
        by_id = {r["id"]: r for r in recs}
        assert by_id[ok]["state"] == FINISHED and by_id[ok]["exit_code"] == 0
        assert by_id[ok]["name"] == "ok" and by_id[ok]["governor"] > 0
        assert by_id[ok]["attempts"] == 1 and by_id[ok]["ended"] >= by_id[ok]["started"] > 0
        assert by_id[bad]["state"] == FAILED and by_id[bad]["exit_code"] == 3
        assert "exited with status 3" in by_id[bad]["error"]
        assert by_id[ok]["index"] == -1
        assert b.tasks(sid, states=FAILED)[0] == 1
        assert b.tasks(sid, states=FAILED)[1][0]["id"] == bad
        assert b.tasks(sid, offset=1)[1] == [recs[1]]
        # attach by name: the session is this client's, ids continue above
        s = b.attach(name="outlives")
        assert L.sq_session_id(s) == sid
        assert b.jobs(session=sid)[0]["attached"]
        more = b.execute(s, ["true"])
        assert more > bad
        b.check(L.sq_submit(s))
        b.check(L.sq_wait(s, ctypes.byref(ctypes.c_uint32(more)), 1, 60000))
        L.sq_session_detach(ctypes.byref(s))
        assert b.wait(sid)["tasks"][2] == 2
        b.check(L.sq_client_forget(b.c, sid))
        assert b.jobs(session=sid) == []
        with pytest.raises(Error) as gone:
            b.wait(sid)
        assert gone.value.code == SQ_E_SESSION
        # its name is free again
        s = b.job("outlives")
        L.sq_session_destroy(ctypes.byref(s))
    finally:
        b.close()


def test_job_cancel_keeps_the_record(cluster):
    a = Client(cluster)
    try:
        s = a.job("to-cancel")
        sid = L.sq_session_id(s)
        a.execute(s, ["sleep", "600"])
        a.check(L.sq_submit(s))
        L.sq_session_detach(ctypes.byref(s))
        a.check(L.sq_client_job_cancel(a.c, sid))
        job = a.wait(sid)
        assert job["state"] == SQ_JOB_CANCELLED and job["tasks"][4] == 1
        a.check(L.sq_client_forget(a.c, sid))
    finally:
        a.close()


def test_malformed_job_requests_are_refused(cluster):
    a = Client(cluster)
    try:
        assert not L.sq_session_new_job(a.c, b"", True)
        assert not L.sq_session_new_job(a.c, b"x" * 129, True)
        with pytest.raises(Error) as unknown:
            a.wait(999999, 0)
        assert unknown.value.code == SQ_E_SESSION
        with pytest.raises(Error) as unknown:
            a.tasks(999999)
        assert unknown.value.code == SQ_E_SESSION
        with pytest.raises(Error):
            a.attach(name="no such job")
        assert a.jobs(name="no such job") == []
    finally:
        a.close()


def _array_job(client, name, argv, first=0, last=None, step=1, items=None, retries=0):
    s = client.job(name)
    sid = L.sq_session_id(s)
    task = client.execute(s, argv, name)
    if items is not None:
        arr = (ctypes.c_char_p * len(items))(*[i.encode() for i in items])
        client.check(L.sq_task_set_array_items(s, task, arr, len(items)))
    else:
        client.check(L.sq_task_set_array(s, task, first, last, step))
    if retries:
        L.sq_task_set_max_retries(s, task, retries)
    client.check(L.sq_submit(s))
    return s, sid, task


def test_an_array_of_1000_elements_runs_each_once(cluster, tmp_path):
    out = tmp_path / "ran"
    a = Client(cluster)
    s, sid, task = _array_job(
        a, "thousand",
        ["sh", "-c", 'echo "%{TASK_ID} $SQUALL_TASK_ID $SQUALL_ARRAY_SIZE $SQUALL_JOB_ID" >> ' + str(out)],
        0, 999)
    a.close()                       # the submitting process leaves at once
    b = Client(cluster)
    try:
        [job] = b.jobs(name="thousand")
        assert job["id"] == sid and sum(job["tasks"]) == 1000
        job = b.wait(sid, 120000)
        assert job["state"] == SQ_JOB_FINISHED, job
        assert job["tasks"] == [0, 0, 1000, 0, 0]
        lines = out.read_text().split("\n")[:-1]
        assert sorted(int(l.split()[0]) for l in lines) == list(range(1000))
        assert all(l.split()[0] == l.split()[1] and l.split()[2] == "1000"
                   and l.split()[3] == str(sid) for l in lines)
        recs = b.all_tasks(sid)
        assert len(recs) == 1000
        assert [r["index"] for r in recs] == list(range(1000))
        assert all(r["id"] == task and r["state"] == FINISHED and r["exit_code"] == 0
                   and r["governor"] > 0 and r["attempts"] == 1 and r["ended"] >= r["started"] > 0
                   for r in recs)
        assert b.tasks(sid, offset=517, limit=1)[1][0]["index"] == 517
        # each element's own task id, by which LOG reads its output
        assert len({r["task"] for r in recs}) == 1000
        assert all(r["task"] >= 0xC0000000 for r in recs)
        b.check(L.sq_client_forget(b.c, sid))
    finally:
        b.close()


def test_array_ranges_with_a_step_and_items(cluster, tmp_path):
    out = tmp_path / "ran"
    a = Client(cluster)
    try:
        s, sid, task = _array_job(a, "stepped", ["sh", "-c", "echo %%{TASK_ID} >> %s" % out],
                                  5, 25, 10)
        assert a.wait(sid)["tasks"][2] == 3
        assert sorted(out.read_text().split()) == ["15", "25", "5"]
        L.sq_session_destroy(ctypes.byref(s))
        out.unlink()
        s, sid, task = _array_job(a, "items", ["sh", "-c", 'echo "%{ITEM}=$SQUALL_ARRAY_ITEM %%" >> '
                                               + str(out)], items=["a b", "c", "%{TASK_ID}"])
        assert a.wait(sid)["tasks"][2] == 3
        # one pass: an item's own %{...} is not expanded again
        assert sorted(out.read_text().split("\n")[:-1]) == ["%{TASK_ID}=%{TASK_ID} %", "a b=a b %",
                                                            "c=c %"]
        L.sq_session_destroy(ctypes.byref(s))
    finally:
        a.close()


def test_resubmit_of_failed_elements(cluster, tmp_path):
    out, fixed = tmp_path / "ran", tmp_path / "fixed"
    a = Client(cluster)
    try:
        s, sid, task = _array_job(
            a, "resubmit",
            ["sh", "-c", "echo %%{TASK_ID} >> %s; test -e %s || [ %%{TASK_ID} -lt 7 ] || exit 4"
             % (out, fixed)], 0, 9)
        L.sq_session_detach(ctypes.byref(s))
        job = a.wait(sid)
        assert job["state"] == SQ_JOB_FAILED and job["tasks"] == [0, 0, 7, 3, 0]
        failed = a.all_tasks(sid, FAILED)
        assert [r["index"] for r in failed] == [7, 8, 9]
        assert all(r["exit_code"] == 4 and "status 4" in r["error"] for r in failed)
        with pytest.raises(Error) as unknown:
            a.resubmit(sid, [task + 100])
        assert unknown.value.code == SQ_E_UNKNOWN_ID
        fixed.write_text("")             # the program fixed on disk
        assert a.resubmit(sid, [task]) == 3
        job = a.wait(sid)
        assert job["state"] == SQ_JOB_FINISHED and job["tasks"] == [0, 0, 10, 0, 0], job
        counts = {}
        for line in out.read_text().split():
            counts[int(line)] = counts.get(int(line), 0) + 1
        assert counts == {**{i: 1 for i in range(7)}, 7: 2, 8: 2, 9: 2}
        assert a.resubmit(sid) == 0
        a.check(L.sq_client_forget(a.c, sid))
    finally:
        a.close()


def test_cancel_an_array_and_run_it_again(cluster, tmp_path):
    a = Client(cluster)
    try:
        s, sid, task = _array_job(a, "cancelled-array", ["sleep", "600"], 0, 99999)
        L.sq_session_detach(ctypes.byref(s))
        until(lambda: a.jobs(session=sid)[0]["tasks"][1] > 0, "an element to run")
        a.check(L.sq_client_job_cancel(a.c, sid))
        job = a.wait(sid)
        assert job["state"] == SQ_JOB_CANCELLED and job["tasks"][4] == 100000, job
        assert a.tasks(sid, CANCELLED)[0] == 100000
        a.check(L.sq_client_forget(a.c, sid))
    finally:
        a.close()


def test_arrays_that_are_not_allowed(cluster):
    a = Client(cluster)
    try:
        s = a.job(None, False)
        t = a.execute(s, ["true"])
        assert L.sq_task_set_array(s, t, 5, 4, 1) != 0
        assert L.sq_task_set_array(s, t, 0, 1 << 30, 1) != 0
        a.check(L.sq_task_set_array(s, t, 0, 3, 1))
        sleep = L.sq_task(s, b"noop", None, 0, 0, None, 0)
        a.check(L.sq_task_set_array(s, sleep, 0, 3, 1))
        with pytest.raises(Error) as refused:
            a.check(L.sq_submit(s))
        assert refused.value.code == 4 and "only an execute task" in str(refused.value)
        L.sq_session_destroy(ctypes.byref(s))
    finally:
        a.close()


def test_an_array_across_a_broker_restart(tmp_path):
    """The broker SIGKILLed in the middle of an array and restarted on its
    journal: the job finishes, no element that had finished runs again,
    its records are right."""
    out = tmp_path / "ran"
    c = squall.LocalCluster(governors=2, cpus=2, journal=str(tmp_path / "journal"),
                            broker_args=["--reattach-wait", "3000"], **cluster_options())
    with c:
        a = Client(c)
        s, sid, task = _array_job(
            a, "restart", ["sh", "-c", "echo %%{TASK_ID} >> %s; sleep 0.02" % out], 0, 399)
        a.close()
        b = Client(c)
        until(lambda: out.exists() and len(out.read_text().split()) >= 60, "elements to run")
        finished_before = {r["index"] for r in b.all_tasks(sid, FINISHED)}
        assert finished_before
        b.close()
        c.restart_broker(signal.SIGKILL)
        d = Client(c)
        try:
            [job] = d.jobs(name="restart")
            assert job["id"] == sid and job["detached"]
            job = d.wait(sid, 180000)
            assert job["state"] == SQ_JOB_FINISHED and job["tasks"] == [0, 0, 400, 0, 0], job
            counts = {}
            for line in out.read_text().split():
                counts[int(line)] = counts.get(int(line), 0) + 1
            assert sorted(counts) == list(range(400))
            assert all(counts [i] == 1 for i in finished_before), \
                [i for i in finished_before if counts[i] != 1]
            recs = d.all_tasks(sid)
            assert len(recs) == 400 and all(r["state"] == FINISHED and r["exit_code"] == 0
                                            for r in recs)
            # an element that ended before the restart has no task (its
            # log is not known); one that ran after has
            assert all(recs[i]["task"] == 0 for i in finished_before)
            assert any(r["task"] for r in recs)
            before = min(finished_before)
            log = subprocess.run(
                [sys.executable, os.path.join(SOURCE, "bin", "squall"), "log", str(sid),
                 str(before)], capture_output=True, text=True, timeout=TIMEOUT * 4,
                env=dict(os.environ, SQUALL_BROKER=c.address, SQUALL_SECRET_KEY=c.secret_key,
                         SQUALL_BROKER_KEY=c.broker_key))
            assert log.returncode == 1 and "ran before the broker restarted" in log.stderr, \
                log.stderr
        finally:
            d.close()
    _clean_stop(c)


def test_another_tenant_sees_no_job(cluster, tmp_path):
    a = Client(cluster)
    s = a.job("tenant-a")
    sid = L.sq_session_id(s)
    a.execute(s, ["sleep", "600"])
    a.check(L.sq_submit(s))
    L.sq_session_detach(ctypes.byref(s))
    other = squall.keygen("jobs-other", cluster._keys["authorized"], "client", "elsewhere")
    cluster.broker.send_signal(signal.SIGHUP)

    def connected():
        try:
            return Client(cluster, other)
        except Error:
            return None
    b = until(connected, "the broker to take the new key")
    try:
        assert all(j["id"] != sid for j in b.jobs())
        assert b.jobs(session=sid) == [] and b.jobs(name="tenant-a") == []
        for call in (lambda: b.wait(sid, 0), lambda: b.tasks(sid),
                     lambda: b.check(L.sq_client_job_cancel(b.c, sid)),
                     lambda: b.check(L.sq_client_forget(b.c, sid)),
                     lambda: b.resubmit(sid), lambda: b.attach(sid),
                     lambda: b.attach(name="tenant-a")):
            with pytest.raises(Error) as denied:
                call()
            assert denied.value.code == SQ_E_SESSION
            assert "elsewhere" not in str(denied.value)
        # the name is per tenant: B may have its own "tenant-a"
        s = b.job("tenant-a")
        L.sq_session_destroy(ctypes.byref(s))
        # and A's job is untouched
        assert a.jobs(session=sid)[0]["state"] == SQ_JOB_RUNNING
        a.check(L.sq_client_forget(a.c, sid))
    finally:
        b.close()
        a.close()


def _finished_jobs(c, n):
    a = Client(c)
    ids = []
    for i in range(n):
        s = a.job("kept-%d" % i)
        ids.append(L.sq_session_id(s))
        a.execute(s, ["true"])
        a.check(L.sq_submit(s))
        L.sq_session_detach(ctypes.byref(s))
        a.wait(ids[-1])
    held = a.job("held")                # an empty job this client holds
    return a, ids, L.sq_session_id(held)


@pytest.mark.parametrize("limit", [True, False])
def test_retention_and_the_job_limit(limit):
    args = ["--job-retention", "0", "--job-limit", "2"] if limit else ["--job-retention", "1s"]
    c = squall.LocalCluster(governors=1, cpus=1, broker_args=args, **cluster_options())
    with c:
        a, ids, held = _finished_jobs(c, 3)
        b = Client(c)
        try:
            # jobs a client holds are never dropped: all are there
            assert {j["id"] for j in b.jobs()} >= set(ids) | {held}
            a.close()                   # now they are nobody's
            kept = (lambda: {j["id"] for j in b.jobs()})
            if limit:
                # beyond --job-limit 2 the ones that ended first go; with
                # no retention the rest stay
                until(lambda: kept() == set(ids[2:]) | {held}, "the oldest jobs to be dropped")
            else:
                until(lambda: not kept() & (set(ids) | {held}), "retention to drop them")
            with pytest.raises(Error) as gone:
                b.wait(ids[0])
            assert gone.value.code == SQ_E_SESSION
        finally:
            b.close()
    _clean_stop(c)


def test_after_across_a_broker_restart(tmp_path):
    """Jobs held by --after keep waiting across a broker SIGKILLed and
    restarted on its journal, then run (or are cancelled) as the jobs they
    wait for end."""
    order, gate, gate2 = tmp_path / "order", tmp_path / "gate", tmp_path / "gate2"
    c = squall.LocalCluster(governors=2, cpus=2, journal=str(tmp_path / "journal"),
                            broker_args=["--reattach-wait", "3000"], **cluster_options())

    def sq(*argv, check=True):
        out = subprocess.run(
            [sys.executable, os.path.join(SOURCE, "bin", "squall")] + [str(a) for a in argv],
            capture_output=True, text=True, timeout=TIMEOUT * 4,
            env=dict(os.environ, SQUALL_BROKER=c.address, SQUALL_SECRET_KEY=c.secret_key,
                     SQUALL_BROKER_KEY=c.broker_key))
        assert not check or out.returncode == 0, (argv, out.stderr)
        return out

    with c:
        sq("submit", "--name", "first", "--", "sh", "-c",
           "while [ ! -e %s ]; do sleep 0.05; done; echo first >> %s" % (gate, order))
        sq("submit", "--name", "later", "--after", "first", "--", "sh", "-c",
           "echo later >> %s" % order)
        broken = int(sq("submit", "--name", "broken", "--", "sh", "-c",
                        "while [ ! -e %s ]; do sleep 0.05; done; exit 3" % gate2).stdout)
        sq("submit", "--name", "never", "--after", "broken", "--", "sh", "-c",
           "echo never >> %s" % order)
        c.restart_broker(signal.SIGKILL)
        info = json.loads(sq("job", "info", "later", "--json").stdout)
        assert info["state"] == "running" and info["tasks"]["waiting"] == 1, info
        assert not order.exists()
        gate.write_text("")
        sq("job", "wait", "later")
        assert order.read_text() == "first\nlater\n"
        gate2.write_text("")
        out = sq("job", "wait", "never", "--json", check=False)
        assert out.returncode == 1 and json.loads(out.stdout)[0]["state"] == "cancelled"
        tasks = json.loads(sq("task", "list", "never", "--json").stdout)
        assert "job %d it waits for (--after) failed" % broken in tasks[0]["error"], tasks
        assert order.read_text() == "first\nlater\n"
    _clean_stop(c)


def test_a_job_ending_as_the_broker_restarts_runs_once(tmp_path):
    """A job's task (no outputs) that ends right after the broker was
    SIGKILLed and restarted on its journal, before its governor learns of
    the restart, sends its report to a broker that does not know that
    governor yet; the governor reports the end again when it reattaches,
    so the task is not run a second time."""
    order, gate = tmp_path / "order", tmp_path / "gate"
    c = squall.LocalCluster(governors=2, cpus=2, journal=str(tmp_path / "journal"),
                            broker_args=["--reattach-wait", "3000"], **cluster_options())

    def sq(*argv):
        out = subprocess.run(
            [sys.executable, os.path.join(SOURCE, "bin", "squall")] + [str(a) for a in argv],
            capture_output=True, text=True, timeout=TIMEOUT * 4,
            env=dict(os.environ, SQUALL_BROKER=c.address, SQUALL_SECRET_KEY=c.secret_key,
                     SQUALL_BROKER_KEY=c.broker_key))
        assert out.returncode == 0, (argv, out.stderr)
        return out

    with c:
        sq("submit", "--name", "once", "--", "sh", "-c",
           "while [ ! -e %s ]; do sleep 0.05; done; echo once >> %s" % (gate, order))
        until(lambda: json.loads(sq("job", "info", "once", "--json").stdout)["tasks"]
              .get("running") == 1, "the task to run")
        c.restart_broker(signal.SIGKILL)
        gate.write_text("")
        sq("job", "wait", "once")
        assert order.read_text() == "once\n"
    _clean_stop(c)


def test_log_of_a_job_task_across_a_broker_restart(tmp_path):
    """The broker keeps in its journal which governor ran a job's task: after
    a restart `squall log` reads the output there; once that governor is
    gone, its log is said to be lost with it."""
    c = squall.LocalCluster(governors=1, cpus=1, journal=str(tmp_path / "journal"),
                            broker_args=["--reattach-wait", "3000"], **cluster_options())

    def sq(*argv):
        return subprocess.run(
            [sys.executable, os.path.join(SOURCE, "bin", "squall")] + [str(a) for a in argv],
            capture_output=True, text=True, timeout=TIMEOUT * 4,
            env=dict(os.environ, SQUALL_BROKER=c.address, SQUALL_SECRET_KEY=c.secret_key,
                     SQUALL_BROKER_KEY=c.broker_key))

    jobfile = tmp_path / "talk.toml"
    jobfile.write_text('[[task]]\nid = "say"\ncommand = "echo said; echo moaned >&2"\n'
                       '[[task]]\nid = "quiet"\ncommand = "true"\n')
    with c:
        out = sq("submit", "--file", jobfile, "--name", "talk", "--wait")
        assert out.returncode == 0, out.stderr
        assert sq("log", "talk", "say").stdout == "said\n"
        gid = json.loads(sq("task", "list", "talk", "--json").stdout)[0]["governor"]
        c.restart_broker(signal.SIGKILL)
        # the governor reattaches on its own time: a deadline
        until(lambda: sq("log", "talk", "say").returncode == 0, "the log after the restart")
        assert sq("log", "talk", "say").stdout == "said\n"
        assert sq("log", "talk", "say", "--stderr").stdout == "moaned\n"
        c.governors[0].kill()
        c.governors[0].wait()
        until(lambda: "log lost with governor %d" % gid in sq("log", "talk", "say").stderr,
              "the broker to see the governor gone")
        out = sq("log", "talk", "say")
        assert out.returncode != 0 and "said" not in out.stdout


def test_resubmit_of_a_job_files_tasks_across_a_broker_restart(tmp_path):
    """A job file's failed task run again by RESUBMIT, then the broker
    SIGKILLed and restarted on its journal: the replayed job is finished,
    each task with the attempts it had, and nothing runs again."""
    ran, needed = tmp_path / "ran", tmp_path / "needed"
    c = squall.LocalCluster(governors=1, cpus=2, journal=str(tmp_path / "journal"),
                            broker_args=["--reattach-wait", "3000"], **cluster_options())

    def sq(*argv):
        return subprocess.run(
            [sys.executable, os.path.join(SOURCE, "bin", "squall")] + [str(a) for a in argv],
            capture_output=True, text=True, timeout=TIMEOUT * 4,
            env=dict(os.environ, SQUALL_BROKER=c.address, SQUALL_SECRET_KEY=c.secret_key,
                     SQUALL_BROKER_KEY=c.broker_key))

    jobfile = tmp_path / "two.toml"
    jobfile.write_text(
        '[[task]]\nid = "a"\ncommand = "echo a >> %s; cat %s"\nstdout = true\n'
        '[[task]]\nid = "b"\ncommand = "echo b >> %s; cat in"\n'
        'inputs = [ { path = "in", task = "a", output = "stdout" } ]\n'
        % (ran, needed, ran))
    with c:
        assert sq("submit", "--file", jobfile, "--name", "two", "--wait").returncode == 1
        needed.write_text("x\n")
        assert "2 task(s)" in sq("job", "resubmit", "two", "--failed").stdout
        assert sq("job", "wait", "two").returncode == 0
        assert sorted(ran.read_text().split()) == ["a", "a", "b"]
        c.restart_broker(signal.SIGKILL)
        info = json.loads(sq("job", "info", "two", "--json").stdout)
        assert info["state"] == "finished" and info["tasks"]["finished"] == 2, info
        tasks = {t["id"]: t for t in json.loads(sq("task", "list", "two", "--json").stdout)}
        assert tasks["a"]["state"] == tasks["b"]["state"] == "finished", tasks
        assert "0 task(s)" in sq("job", "resubmit", "two", "--failed").stdout
        assert sorted(ran.read_text().split()) == ["a", "a", "b"]
    _clean_stop(c)
