"""Submitting a session's batch (Session's part, see _session.py): the
buffered calls (client.submit, actor calls) remembered until their batch is
accepted, and a batch the broker refused rolled back, the calls not at
fault added again."""
from __future__ import annotations

from typing import Callable

from . import _lib as L
from .errors import SquallError
from ._futures import Future


class Submitting:
    """Session's submits: sends the batch Building made."""

    # -- refused submits
    def _recorded_call(self, add: Callable[[], int]) -> "Future":
        """A buffered call (lock held): add() adds its task (its output
        kept) and returns its id. The call is remembered until its batch is
        accepted: if the broker refuses the batch for another call, it is
        added again (Session._refused)."""
        first = self._next_id
        try:
            tid = add()
        except BaseException:
            if self._next_id > first:   # something was added before the error: it is sent
                self._calls.append((first, self._next_id, None, None))
            raise
        future = Future(self, tid)
        self._calls.append((first, self._next_id, future, add))
        return future

    def _submit_calls(self) -> None:
        """Sends the buffered calls before the caller adds what it submits
        at once (lock held): a refusal of the caller's own part is then
        raised to it alone, and theirs goes to their futures."""
        if self._calls:
            self.submit()

    def _is_void(self, oid: int) -> bool:
        """Whether the id was in a batch the broker refused."""
        for first, end in self._void:
            if first <= oid < end:
                return True
        return False

    def _rollback(self) -> None:
        """Forgets the batch the broker refused (lock held): the library
        already dropped it; nothing here may refer to its ids any more."""
        first, end = self._batch_first, self._next_id
        if end > first:
            self._void.append((first, end))
        removed = self._task_ids[self._batch_tasks:]
        del self._task_ids[self._batch_tasks:]
        self._n_tasks -= len(removed)
        names, outputs = self._names, self._outputs
        for tid in removed:
            names.pop(tid, None)
            oid = tid + 1
            while outputs.get(oid) == tid:
                del outputs[oid]
                oid += 1
        self._fn_objects = {k: v for k, v in self._fn_objects.items() if v < first}
        self._dirty = False
        self._buffered = 0
        self._batch_done()

    def _batch_done(self) -> None:
        self._batch_first = self._next_id
        self._batch_tasks = len(self._task_ids)

    def _refused(self, rc: int) -> None:
        """The broker refused the batch, or it could not be sent (lock
        held). The refusal names the task or object at fault: when that is
        a buffered call's, that call's future fails with the refusal and
        the other calls are added again; otherwise every buffered call
        fails with it and it is raised."""
        errid = L.sq_client_errid(self.client._h)
        exc = self.client._error(rc, self)
        calls, self._calls = self._calls, []
        first, end = self._batch_first, self._next_id
        covered = sum(e - f for f, e, _, _ in calls) == end - first
        blamed = None
        if covered and errid:
            blamed = next((c for c in calls if c[0] <= errid < c[1] and c[2] is not None), None)
        what = blamed[2].key if blamed else None
        self._rollback()
        if blamed is None:
            for _, _, future, _ in calls:
                if future is not None:
                    future._set_exc(exc)
            raise exc
        blamed[2]._set_exc(SquallError("the broker refused the task of %s: %s" % (what, exc),
                                       exc.code))
        for call in calls:
            _, _, future, add = call
            if call is blamed or future is None:
                continue
            start = self._next_id
            try:
                tid = add()
            except SquallError as again:
                if self._next_id > start:
                    self._calls.append((start, self._next_id, None, None))
                future._set_exc(again)
                continue
            future._tid, future._oid = tid, tid + 1
            self._calls.append((start, self._next_id, future, add))
            self._buffered += 1

    # -- submit
    def submit(self) -> None:
        """Sends what was built since the last submit; tasks start as soon as
        their inputs exist. May be called any number of times."""
        with self._lock:
            self._open()
            if self._submit_error is not None:
                exc, self._submit_error = self._submit_error, None
                raise exc
            while self._dirty:
                self._dirty = False
                self._buffered = 0
                rc = L.sq_submit(self._h)
                if rc:
                    self._refused(rc)       # raises, or adds back the calls not at fault
                    continue
                self._calls.clear()
                self._batch_done()
                if self.client._fs is self:
                    self.client._unkeep_released()
