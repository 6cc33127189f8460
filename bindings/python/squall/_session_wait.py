"""Waiting on a session's tasks and fetching their results (Session's
part, see _session.py): waits in slices of the client's lock, the progress
line, the no-governor warning, cancel and fetch."""
from __future__ import annotations

import ctypes
import time
from typing import Any, Callable, Iterable, List, Optional, Sequence

from . import _lib as L
from ._progress import Progress
from .errors import TaskCancelled, TaskFailed
from ._common import _SLICE_MS, _locked, _ms
from ._futures import Future
from ._objects import DataObject, Task


#   A client waiting on the cluster while no governor at all is connected
#   says so this often (a governor that failed to start leaves the cluster
#   silently idle otherwise).
_NO_GOVERNOR_WARNING = 10.0


class Waiting:
    """Session's waits and fetches."""

    def _ids(self, items: Iterable[Any]) -> List[int]:
        out = []
        for x in items:
            if isinstance(x, Task):
                out.append(x.id)
            elif isinstance(x, DataObject):
                out.append(x.id)
            elif isinstance(x, Future):
                out.append(x._tid)
            elif isinstance(x, int):
                out.append(x)
            else:
                raise TypeError("not a task or data object: %r" % (x,))
        return out

    def wait(self, items: Iterable[Any], timeout: Optional[float] = None) -> None:
        """Waits until the given tasks / data objects are finished; raises
        the first failure (a Python task's own exception, else TaskFailed /
        UpstreamFailed)."""
        self.submit()
        ids = self._ids(items if isinstance(items, (list, tuple, set)) else [items])
        if ids:
            try:
                self._wait_ids(ids, timeout)
            except TaskFailed as exc:
                raise exc.raised()

    def wait_all(self, timeout: Optional[float] = None) -> None:
        """Waits for every task submitted in this session so far."""
        self.submit()
        try:
            if self._progress_wanted(len(self._task_ids)):
                self._wait_ids(list(self._task_ids), timeout)
                return
            self._check(self._sliced(lambda ms: L.sq_wait_all(self._h, ms), timeout))
        except TaskFailed as exc:
            raise exc.raised()

    def _sliced(self, call: Callable[[int], int], timeout: Optional[float]) -> int:
        """call(timeout_ms) -> rc, repeated in slices of at most _SLICE_MS
        with the lock held only during each (see Client's threads note),
        until it returns anything but a timeout or `timeout` is over."""
        deadline = None if timeout is None else time.monotonic() + timeout
        check_at = time.monotonic() + _NO_GOVERNOR_WARNING
        while True:
            if time.monotonic() >= check_at:
                check_at = time.monotonic() + _NO_GOVERNOR_WARNING
                self.client._warn_if_no_governor()
            if deadline is None:
                step = _SLICE_MS
            else:
                step = max(0, min(_SLICE_MS, int((deadline - time.monotonic()) * 1000)))
            with self._lock:
                if self.closed:
                    raise TaskCancelled("session %d is closed" % self.id)
                rc = call(step)
            if rc != L.SQ_E_TIMEOUT or (deadline is not None and time.monotonic() >= deadline):
                return rc

    def _progress_wanted(self, n: int) -> bool:
        return Progress(n).enabled

    def _wait_ids(self, ids: List[int], timeout: Optional[float]) -> None:
        arr = L.ids(ids)
        progress = Progress(len(ids))
        if not progress.enabled:
            rc = self._sliced(lambda ms: L.sq_wait(self._h, arr, len(ids), ms), timeout)
            self._check(rc)
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        with progress:
            while True:
                step = 250 if deadline is None else \
                    max(0, min(250, int((deadline - time.monotonic()) * 1000)))
                with self._lock:
                    rc = L.sq_wait(self._h, arr, len(ids), step)
                if rc != L.SQ_E_TIMEOUT or (deadline is not None and time.monotonic() >= deadline):
                    if rc == 0:
                        progress.update(len(ids))
                    self._check(rc)
                    return
                done, _ = self._wait_some_ids(ids, 0)
                progress.update(len(done))

    def _wait_some_ids(self, ids: List[int], timeout_ms: int):
        arr = L.ids(ids)
        done = (ctypes.c_uint32 * len(ids))()
        n_done = ctypes.c_size_t(0)
        rc = self._sliced(lambda ms: L.sq_wait_some(self._h, arr, len(ids), ms, done,
                                                    ctypes.byref(n_done)),
                          None if timeout_ms < 0 else timeout_ms / 1000.0)
        if rc == L.SQ_E_TIMEOUT:
            return [], ids
        self._check(rc)
        got = set(done[:n_done.value])
        return [i for i in ids if i in got], [i for i in ids if i not in got]

    def wait_some(self, items: Sequence[Any], timeout: Optional[float] = None):
        """Waits until at least one of items is done (finished or failed);
        returns (done, not_done) lists of the given items."""
        self.submit()
        items = list(items)
        ids = self._ids(items)
        if not ids:
            return [], []
        done_ids, _ = self._wait_some_ids(ids, _ms(timeout))
        got = set(done_ids)
        return ([x for x, i in zip(items, ids) if i in got],
                [x for x, i in zip(items, ids) if i not in got])

    @_locked
    def cancel(self, items: Sequence[Any] = ()) -> None:
        """Cancels tasks (all unfinished tasks of the session if none given)."""
        self._open()
        ids = self._ids(items)
        self._check(L.sq_cancel(self._h, L.ids(ids) if ids else None, len(ids)))

    def _fetch(self, oid: int, timeout: Optional[float], raw: bool = False):
        """(data, content type) of a kept object. A failure raises the Python
        task's own exception, or with raw=True always the TaskFailed."""
        self.submit()
        data = ctypes.c_void_p()
        size = ctypes.c_size_t()
        ctype = ctypes.c_void_p()
        rc = self._sliced(lambda ms: L.sq_fetch(self._h, oid, ms, ctypes.byref(data),
                                                ctypes.byref(size), ctypes.byref(ctype)),
                          timeout)
        with self._lock:
            return self._fetched(oid, rc, data, size, ctype, raw)

    def _fetched(self, oid, rc, data, size, ctype, raw):
        if rc:
            error = self.client._error(rc, self)
            if rc not in (L.SQ_E_TIMEOUT, L.SQ_E_CONNECTION, L.SQ_E_TASK_FAILED,
                          L.SQ_E_UPSTREAM_FAILED, L.SQ_E_CANCELLED, L.SQ_E_ACTOR_LOST):
                #   A failed producer can show as a lost object: WAIT names
                #   the failure and its root.
                rc = L.sq_wait(self._h, L.ids([oid]), 1, 0)
                if rc in (L.SQ_E_TASK_FAILED, L.SQ_E_UPSTREAM_FAILED, L.SQ_E_CANCELLED):
                    error = self.client._error(rc, self)
            if isinstance(error, TaskFailed) and not raw:
                raise error.raised()
            raise error
        content_type = ""
        if ctype.value:
            content_type = ctypes.string_at(ctype).decode("utf-8", "replace")
            L.sq_free(ctype)
        return L.take_buffer(data, size.value), content_type
