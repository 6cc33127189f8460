"""Jobs: sessions that outlive their client (docs/protocol.md, "Jobs"),
through libsquall's C API (ctypes), as the command line and the Python
bindings use it: detached named sessions, SESSIONS, ATTACH, SESSION_WAIT,
TASKS with exit codes, FORGET, JOB_CANCEL, array tasks, retention,
tenants, and jobs across a broker SIGKILLed and restarted on its journal."""
import ctypes
import os
import signal
import subprocess
import sys
import time

import pytest

import squall
from squall._lib import lib as L
from conftest import cluster_options, until

SQ_JOB_RUNNING, SQ_JOB_FINISHED, SQ_JOB_FAILED, SQ_JOB_CANCELLED = 1, 2, 4, 8
WAITING, RUNNING, FINISHED, FAILED, CANCELLED = 1, 2, 4, 8, 16
SQ_E_DUPLICATE_ID, SQ_E_UNKNOWN_ID, SQ_E_SESSION, SQ_E_TIMEOUT = 5, 6, 11, 16


class Job(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("name", ctypes.c_char * 129),
                ("state", ctypes.c_uint32), ("detached", ctypes.c_bool),
                ("attached", ctypes.c_bool), ("tasks", ctypes.c_uint64 * 5),
                ("created_ms", ctypes.c_int64), ("ended_ms", ctypes.c_int64)]


class TaskRecord(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("index", ctypes.c_int64),
                ("state", ctypes.c_uint32), ("has_exit_code", ctypes.c_bool),
                ("exit_code", ctypes.c_int32), ("governor", ctypes.c_uint32),
                ("attempts", ctypes.c_uint32), ("started_ms", ctypes.c_int64),
                ("ended_ms", ctypes.c_int64), ("error", ctypes.c_char * 512),
                ("name", ctypes.c_char * 128)]


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
                 "ended": t.ended_ms, "error": t.error.decode(), "name": t.name.decode()}
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
