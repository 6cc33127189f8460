"""Sessions: a graph built, submitted and waited on (Session).

Session is one class in four files, by what each part does with the
session's handle, its pending batch and its client's lock: here its life
(open, close, detach, finalise) and its jobs' records; building the graph
in _session_build.py, submitting the batch (refused batches rolled back) in
_session_submit.py, waiting and fetching in _session_wait.py."""
from __future__ import annotations

import ctypes
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from . import _lib as L
from ._pickling import TemplatePickler
from .errors import SquallError, TaskCancelled
from ._common import _TASK_STATES, _job_dict, _jobs_call, _session_stack, _state
from ._futures import Future
from ._objects import DataObject
from ._session_build import Building, _ref_id
from ._session_submit import Submitting
from ._session_wait import Waiting

if TYPE_CHECKING:
    from ._client import Client


class Session(Building, Submitting, Waiting):
    """A namespace of tasks and data objects with one lifetime: closing it
    cancels its unfinished tasks and frees all its objects."""

    #   client.restart() dropped it: its futures are cancelled.
    _dropped = False

    @property
    def _h(self) -> ctypes.c_void_p:
        """The library's session handle (_hv), the calls _call_like
        deferred added first: whatever uses it sees them, in their order."""
        if self._likes is not None:
            self._flush_likes()
        return self._hv

    def __init__(self, client: Client, name: Optional[str] = None, detached: bool = False,
                 _handle: Optional[int] = None):
        self.client = client
        self._lock = client._lock
        self.detached = bool(detached)
        if _handle is not None:
            handle = _handle
        elif name is not None or detached:
            _jobs_call(L.sq_session_new_job)
            if name is not None and (not isinstance(name, str) or not name):
                raise ValueError("a session's name is a non-empty string, not %r" % (name,))
            with client._lock:
                handle = L.sq_session_new_job(client._h, name.encode() if name else None,
                                              self.detached)
        else:
            with client._lock:
                handle = L.sq_session_new(client._h)
        if not handle:
            raise client._error(L.sq_client_errcode(client._h))
        self._hv = ctypes.c_void_p(handle)
        self.id = L.sq_session_id(self._h)
        self.name = name
        self._names: Dict[int, str] = {}       # task id -> name
        self._outputs: Dict[int, int] = {}     # object id -> producer task id
        self._task_ids: List[int] = []
        self._n_tasks = 0
        self._dirty = False                    # something recorded, not submitted
        self._buffered = 0                     # client.submit calls not sent yet
        self._submit_error: Optional[SquallError] = None
        self._template = TemplatePickler(self._is_ref, _ref_id)
        self._fn_objects: Dict[bytes, int] = {}   # pickled function -> its data object
        #   What a refused submit undoes (Session._refused): the ids given
        #   out so far, where the unsubmitted batch starts, the buffered
        #   calls (client.submit, actor calls) that can be added again
        #   without the refused one, and the id ranges the broker never took.
        self._next_id = 1
        self._batch_first = 1
        self._batch_tasks = 0
        self._calls: List[tuple] = []          # (first id, end id, future, redo)
        self._void: List[tuple] = []           # (first id, end id)
        #   client.upload_file: the files' data object (for the client's
        #   uploads version) and each function wrapped to install them.
        self._files: Optional[tuple] = None
        self._with_files: Dict[int, tuple] = {}

    # -- context
    def __enter__(self) -> "Session":
        _session_stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        stack = _session_stack()
        if stack and stack[-1] is self:
            stack.pop()
        if self.detached:
            self.detach()
        else:
            self.close()

    def close(self) -> None:
        """Closes the session on the broker: unfinished tasks are cancelled
        and every object is freed (a job is forgotten too)."""
        with self._lock:
            if self._hv.value:
                L.sq_session_destroy(ctypes.byref(self._h))

    def detach(self) -> None:
        """Lets go of the session without closing it: a job (detached=True)
        goes on, for `client.attach` to take back; a plain session is
        closed by the broker after its --session-grace."""
        _jobs_call(L.sq_session_detach)
        if self._hv.value and self._dirty:
            self.submit()           # what was built goes with the job
        with self._lock:
            if self._hv.value:
                L.sq_session_detach(ctypes.byref(self._h))

    forget = close

    def wait_job(self, timeout: Optional[float] = None) -> dict:
        """Waits until every task of the session (array elements included)
        has ended, failed ones too, whichever client submitted them; the
        job as `client.jobs()` gives it (SquallError SQ_E_TIMEOUT at the
        timeout)."""
        _jobs_call(L.sq_client_job_wait)
        self._open()
        job = L.Job()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            # in slices, so that other threads' calls go through
            left = None if deadline is None else deadline - time.monotonic()
            step = 100 if left is None else max(0, min(100, int(left * 1000)))
            with self._lock:
                rc = L.sq_client_job_wait(self.client._h, self.id, step, ctypes.byref(job))
            if rc == L.SQ_E_TIMEOUT and (left is None or left > 0.1):
                continue
            self._check(rc)
            return _job_dict(job)

    def _records(self) -> List[Any]:
        _jobs_call(L.sq_client_tasks)
        records: List[Any] = []
        while True:
            out = ctypes.POINTER(L.TaskRecord)()
            n = ctypes.c_size_t()
            total = ctypes.c_uint64()
            with self._lock:
                self._check(L.sq_client_tasks(self.client._h, self.id, 0, len(records), 10000,
                                              ctypes.byref(out), ctypes.byref(n),
                                              ctypes.byref(total)))
            try:
                # copies: the library's buffer is freed below
                records += [L.TaskRecord.from_buffer_copy(out[i]) for i in range(n.value)]
            finally:
                if out:
                    L.sq_free(ctypes.cast(out, ctypes.c_void_p))
            if n.value == 0 or len(records) >= total.value:
                return records

    @property
    def tasks(self) -> List["Future"]:
        """The session's plain tasks (not array elements) as futures of
        their first output, in id order: a job's after `client.attach`."""
        return [Future(self, r.id) for r in self._records() if r.index < 0]

    @property
    def objects(self) -> List["DataObject"]:
        """The first output of each plain task, fetchable when kept (a job
        file's results are) and usable as an input of new tasks."""
        return [DataObject(self, r.id + 1) for r in self._records() if r.index < 0]

    def task_records(self) -> List[dict]:
        """Every task and array element as `squall task list --json`
        prints them (docs/jobs.md)."""
        out = []
        for r in self._records():
            name = r.name.decode(errors="replace")
            out.append({"id": r.index if r.index >= 0 else (name or r.id), "task": r.id,
                        "state": _state(r.state, _TASK_STATES),
                        "exit_code": r.exit_code if r.has_exit_code else None,
                        "governor": r.governor or None, "attempts": r.attempts,
                        "started": r.started_ms / 1000.0 if r.started_ms else None,
                        "ended": r.ended_ms / 1000.0 if r.ended_ms else None,
                        "error": r.error.decode(errors="replace") or None})
        return out

    def __del__(self) -> None:
        #   Never waits for the client's lock: see _FairLock.defer.
        lock = self.__dict__.get("_lock")
        if lock is not None:
            lock.run(self._end, wait=False)

    def _end(self) -> None:
        try:
            if self.detached:
                self.detach()
            else:
                self.close()
        except Exception:
            pass

    @property
    def closed(self) -> bool:
        return not self._hv.value

    def __repr__(self) -> str:
        return "<squall.Session %d%s>" % (self.id, " closed" if self.closed else "")

    def _repr_html_(self) -> str:
        from ._html import session_html     # Jupyter's view only: loaded when first shown
        return session_html(self)

    def _check(self, rc: int) -> None:
        if rc:
            raise self.client._error(rc, self)

    def _open(self) -> None:
        """Raises if the session is closed (the library, given no session,
        would have no error to tell)."""
        if not self._hv.value:
            raise TaskCancelled("session %d is closed" % self.id)

    def _task_of(self, oid: int) -> int:
        return self._outputs.get(oid, oid)
