"""Futures (Dask/Ray-style): Future, wait, as_completed, gathering many
values at once, the watcher thread that completes futures in the
background and the thread that forwards tasks' logs."""
from __future__ import annotations

import collections
import contextlib
import concurrent.futures as _cf
import io
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence

from . import _lib as L
from . import _logs
from . import _intask
from ._pickling import PICKLE, loads_result, read_values
from ._progress import Progress
from .errors import ActorLost, SquallError, TaskCancelled, TaskFailed, TimeoutError
from ._common import _SLICE_MS, _ms

if TYPE_CHECKING:
    from ._session import Session
    from ._client import Client


#   Inputs per gather task: the values of many futures come back in one fetch
#   (a concat of their pickles, read back one pickle after the other).
_GATHER_CHUNK = 2000

#   A gather task is the client's own plumbing (a built-in concat: copies
#   bytes, runs no code) and takes no cpu: one that needed a cpu never ran
#   while actors held them all (an actor's host holds its cpus for as long
#   as it lives), so gathering an actor's results, or results already made,
#   hung on a cluster whose cpus actors held; and it waited behind long
#   tasks for a cpu to copy results that were long there. The highest
#   priority puts it at the head of its tenant's ready tasks: behind a task
#   over the tenant's cpu cap (--tenant-quota cpus=N, which an actor can fill
#   for good) it was never looked at. It jumps no cap (0 cpus never count
#   against one) and starves nobody: its tenant's fair share counts each
#   join as a cpu (the broker's share_t.cpuless), and there is one per
#   _GATHER_CHUNK futures gathered. A user task at this same priority that
#   the cap holds still comes first (ties go by submission order): the
#   gather then waits for it, as that task itself does.
_GATHER_OPTIONS = {"cpus": 0, "priority": 2 ** 31 - 1}


_UNSET = object()

class _Waiters(list):
    """Future._waiters: concurrent.futures.wait / as_completed append their
    waiter here (under the future's condition); that is the moment the
    future needs completing in the background."""

    __slots__ = ("_future",)

    def __init__(self, future: "Future"):
        super().__init__()
        #   Weak: a cycle would leave dead futures to the cyclic collector,
        #   and their objects kept on the cluster until it runs.
        self._future = weakref.ref(future)

    def append(self, waiter) -> None:
        super().append(waiter)
        future = self._future()
        if future is not None:
            future._watch()

_CONDITION_LOCK = threading.Lock()
_CANCELLED_STATES = (_cf._base.CANCELLED, _cf._base.CANCELLED_AND_NOTIFIED)
_SETTLED_STATES = _CANCELLED_STATES + (_cf._base.FINISHED,)
_PENDING, _FINISHED = _cf._base.PENDING, _cf._base.FINISHED

#   Whether any Future was ever made in this process: a Dask graph can hold
#   one (a persisted collection's part) only then, so client.get skips its
#   search of every node's arguments before this (mean's 150 nodes: 2-6 ms
#   before the first task is sent). Only ever set, so no count to race on.
made_any = False


class Future(_cf.Future):
    """The result of client.submit: a value being computed on the cluster.

    A concurrent.futures.Future: `result`, `exception`, `done`, `cancel`,
    `cancelled`, `add_done_callback`, and it works with
    concurrent.futures.wait / as_completed, asyncio.wrap_future and
    `await future`. Callbacks run in the client's watcher thread (or at
    once, in the caller's, if the future is already done)."""

    #   concurrent.futures.Future's own fields and ours, as class defaults
    #   until set: a million futures of a map should not cost a million of
    #   each. The condition, the waiters list and the callbacks list are
    #   made when first needed (_condition, _waiters, add_done_callback).
    _state = _cf._base.PENDING
    _result = None
    _exception = None
    _done_callbacks: Any = ()
    _value: Any = _UNSET
    _exc: Optional[BaseException] = None
    _watched = False

    def __reduce__(self):
        #   A future names an object of its client's session: only a task's
        #   own children's futures leave it, adopted into the task's caller's
        #   session (_worker); any other is refused plainly.
        return _intask.reduce_future(self)

    def __init__(self, session: Session, tid: int, oid: Optional[int] = None):
        self._session = session
        self._tid = tid
        self._oid = tid + 1 if oid is None else oid
        session.client._live_futures += 1
        global made_any
        made_any = True

    @property
    def _waiters(self) -> "_Waiters":
        #   concurrent.futures.wait / as_completed reach it holding the
        #   condition; so do set_result / set_exception below.
        w = self.__dict__.get("_w")
        if w is None:
            w = self.__dict__["_w"] = _Waiters(self)
        return w

    def set_result(self, result: Any) -> None:
        self._complete(result, None)

    def set_exception(self, exception: Optional[BaseException]) -> None:
        self._complete(None, exception)

    def _complete(self, result: Any, exception: Optional[BaseException]) -> None:
        """concurrent.futures.Future.set_result / set_exception, without
        making a waiters list, or a condition, when nobody waits: whoever
        makes the condition later (to wait) does so under _CONDITION_LOCK,
        and so sees the state set here."""
        if "_cond" not in self.__dict__:
            with _CONDITION_LOCK:
                if "_cond" not in self.__dict__:
                    self._finish(result, exception)
                    done = True
                else:
                    done = False
            if done:
                self._invoke_callbacks()
                return
        with self._condition:
            self._finish(result, exception)
            for waiter in self.__dict__.get("_w", ()):
                if exception is None:
                    waiter.add_result(self)
                else:
                    waiter.add_exception(self)
            self._condition.notify_all()
        self._invoke_callbacks()

    def _finish(self, result: Any, exception: Optional[BaseException]) -> None:
        if self._state in _SETTLED_STATES:
            raise _cf.InvalidStateError("%s: %r" % (self._state, self))
        if exception is None:
            self._result = result
        else:
            self._exception = exception
        self._state = _cf._base.FINISHED

    @property
    def _condition(self) -> threading.Condition:
        cond = self.__dict__.get("_cond")
        if cond is None:
            with _CONDITION_LOCK:
                cond = self.__dict__.get("_cond")
                if cond is None:
                    cond = self.__dict__["_cond"] = threading.Condition()
        return cond

    def __del__(self):
        try:
            # no lock here: see Client._dead
            self._session.client._dead.append((self._session, self._oid))
        except Exception:
            pass

    @property
    def key(self) -> str:
        return self._session._names.get(self._tid) or str(self._tid)

    @property
    def task_id(self) -> int:
        return self._tid

    def _resolved(self) -> bool:
        return self._value is not _UNSET or self._exc is not None or \
            self._state in _CANCELLED_STATES

    def _set_value(self, value: Any) -> None:
        """Completes the concurrent.futures side: waiters wake, callbacks
        run (in this thread, without the client's lock held)."""
        self._value = value
        try:
            self.set_result(value)
        except _cf.InvalidStateError:   # cancelled meanwhile, or set by another thread
            pass

    @staticmethod
    def _set_values(futures: List["Future"], values: List[Any]) -> None:
        """_set_value of each future with its value, for a gathered chunk:
        those nobody waits on nor watches (no condition made, so no waiter,
        no callback, not cancelled) are finished under one _CONDITION_LOCK,
        not one each; the others the usual way."""
        others = []
        with _CONDITION_LOCK:
            for f, value in zip(futures, values):
                f._value = value
                if f._state is _PENDING and "_cond" not in f.__dict__:
                    f._result = value
                    f._state = _FINISHED
                else:
                    others.append(f)
        for f in others:
            try:
                f.set_result(f._value)
            except _cf.InvalidStateError:
                pass

    def _set_exc(self, exc: BaseException) -> None:
        self._exc = exc
        try:
            self.set_exception(exc)
        except _cf.InvalidStateError:
            pass

    def _resolve(self, timeout: Optional[float]) -> None:
        if self._resolved():
            return
        if not self._session.closed:
            self._session.submit()
            if self._resolved():        # the broker refused its task
                return
        try:
            #   Inside a task: its cpu goes to others while it waits (_worker).
            with _intask.waiting():
                data, content_type = self._session._fetch(self._oid, timeout, raw=True)
        except TaskFailed as exc:
            self._set_exc(exc.raised())
            return
        except (TaskCancelled, ActorLost) as exc:
            self._set_exc(exc)
            return
        if content_type == PICKLE:
            with unpickling(self._session):
                data = loads_result(data)
        self._set_value(data)

    def result(self, timeout: Optional[float] = None) -> Any:
        """The value, waiting up to `timeout` seconds (None: for ever).
        Raises the task's own exception if it raised one (its __cause__ is
        a RemoteTraceback naming the task), else TaskFailed /
        UpstreamFailed; warnings the task raised are re-emitted here.
        concurrent.futures.CancelledError if it was cancelled."""
        #   The state read without the condition: one attribute read is
        #   atomic, and these checks run twice per result of a gather.
        if self._state in _CANCELLED_STATES or self._session._dropped:
            raise _cf.CancelledError()
        self._resolve(timeout)
        if self._state in _CANCELLED_STATES:
            raise _cf.CancelledError()
        if self._exc is not None:
            raise self._exc
        return self._value

    def logs(self, stream: str = "stdout", attempt: Optional[int] = None) -> str:
        """What the task printed so far on `stream` ("stdout" or "stderr")
        in its latest attempt (or `attempt`), as its governor keeps it
        (Client.logs): print, logging, warnings and C code writing to fd 1
        or 2 all count. While it runs, what it printed until now."""
        s = self._session
        if not s.closed:
            s.submit()                  # a buffered task is not known yet
        return s.client.logs(s.id, self._tid, stream, attempt)

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """The exception result() would raise, or None, waiting like result."""
        if self.cancelled():
            raise _cf.CancelledError()
        self._resolve(timeout)
        return self._exc

    def done(self) -> bool:
        """Whether the task has finished, failed or was cancelled (does not
        wait)."""
        if self._resolved():
            return True
        if self._session.closed:
            return True
        self._session.submit()          # a buffered submit is not known yet
        if self._resolved():            # the broker refused it
            return True
        done, _ = self._session._wait_some_ids([self._tid], 0)
        return bool(done)

    def running(self) -> bool:
        return not self.done()

    def cancel(self) -> bool:
        """Cancels the task and, through the broker, every task that needs
        it. False if it is already done."""
        if self.done():                 # finished (or failed) on the cluster already
            return self.cancelled()
        s = self._session
        with s._lock:
            if not s.closed:
                try:
                    s.submit()
                    s.cancel([self])
                except SquallError:
                    pass
        if not super().cancel():
            return self.cancelled()
        #   concurrent.futures.wait counts CANCELLED_AND_NOTIFIED as done:
        #   this moves the state there and wakes its waiters.
        self.set_running_or_notify_cancel()
        return True

    # -- moving results by hand
    def delete(self) -> None:
        """Deletes the result on the cluster now, whoever else keeps it
        (repartitioning): tasks not done that need it fail, naming it. A
        value this client already fetched stays readable here."""
        self._session.delete([self])

    def replicate(self, n: Optional[int] = None, governors: Sequence[Any] = (),
                  timeout: Optional[float] = None) -> List[int]:
        """Copies the result to `governors` (ids or names) and to more
        until at least `n` governors hold it (a broadcast join's small
        side); waits for the result and the copies, returns the governors
        holding it."""
        client = self._session.client
        return self._session.place(self, [client._governor_id(g) for g in governors],
                                   n or 0, False, timeout)

    def move(self, governor: Any, timeout: Optional[float] = None) -> List[int]:
        """Moves the result to one governor (an id or a name): copied
        there, then dropped everywhere else (except where a task already
        placed there still reads it)."""
        client = self._session.client
        return self._session.place(self, [client._governor_id(governor)], 0, True, timeout)

    def where(self, timeout: Optional[float] = None) -> List[int]:
        """The governors holding the result (waits for it)."""
        return self._session.place(self, timeout=timeout)

    def add_done_callback(self, fn: Callable[["Future"], Any]) -> None:
        """Calls fn(future) when it is done (at once if it already is)."""
        if not super().done():
            self._watch()
        with self._condition:
            if "_done_callbacks" not in self.__dict__:
                self._done_callbacks = []
        super().add_done_callback(fn)

    def _watch(self) -> None:
        if not self._watched and not self._resolved():
            self._watched = True
            self._session.client._watch(self)

    def __await__(self):
        import asyncio
        return asyncio.wrap_future(self).__await__()

    def _state_name(self) -> str:
        return "cancelled" if self.cancelled() else \
            "finished" if self._value is not _UNSET else \
            "error" if self._exc is not None else "pending"

    def __repr__(self) -> str:
        return "<squall.Future %s %s>" % (self.key, self._state_name())

    def _repr_html_(self) -> str:
        from ._html import future_html     # Jupyter's view only: loaded when first shown
        return future_html(self)

class _LogForwarder:
    """Client(forward_logs=True): prints the output of the client's tasks
    on its own stdout and stderr as it comes, each line prefixed with the
    task. One thread polls the followed tasks' logs (LOG + LOGREAD) every
    0.2 s, those not started yet every second; at most _MAX are followed
    at once, the rest wait in order (a map of a million tasks forwards
    them 256 at a time, never holding a million readers). A task is let go
    once its attempt ended and everything was printed (or its log is
    gone); a partial last line is printed when it ends."""

    _MAX = 256

    def __init__(self, client: "Client"):
        self._client = weakref.ref(client)
        self._pending: collections.deque = collections.deque()
        self._followed: list = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def add(self, future: "Future") -> None:
        s = future._session
        name = s._names.get(future._tid) or ""
        with self._lock:
            self._pending.append((s, future._tid, name))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name="squall-logs")
                self._thread.start()

    def stop(self, wait: bool = True) -> None:
        """Ends the thread; with wait, once it has (a finaliser does not
        wait: the thread may be waiting for the client's lock)."""
        self._stop.set()
        t = self._thread
        if wait and t is not None and t is not threading.current_thread():
            t.join(timeout=5)

    def _loop(self) -> None:
        import sys
        turn = 0
        while not self._stop.wait(0.2):
            client = self._client()
            if client is None or not getattr(client, "_h", None) or not client._h.value:
                return
            with self._lock:
                while self._pending and len(self._followed) < self._MAX:
                    s, tid, name = self._pending.popleft()
                    prefix = "(task %d%s) " % (tid, " " + name if name else "")
                    readers = [_logs.Reader(L, client._h, s.id, tid, stream, None, client._lock)
                               for stream in ("stdout", "stderr")]
                    self._followed.append([s, prefix, readers, [b"", b""]])
            turn += 1
            keep = []
            for entry in self._followed:
                s, prefix, readers, partial = entry
                if s._dirty or s._buffered:
                    keep.append(entry)      # the submit has not left yet
                    continue
                for i, (reader, out) in enumerate(zip(readers, (sys.stdout, sys.stderr))):
                    if reader.finished or (reader.state == _logs.WAITING and turn % 5):
                        continue
                    if not client._h.value:
                        return
                    data = partial[i] + reader.poll()
                    lines = data.split(b"\n")
                    partial[i] = lines.pop()
                    if reader.finished and partial[i]:
                        lines.append(partial[i])
                        partial[i] = b""
                    if lines:
                        text = "".join(prefix + line.decode("utf-8", "replace") + "\n"
                                       for line in lines)
                        try:
                            out.write(text)
                            out.flush()
                        except (OSError, ValueError):
                            pass
                if not all(r.finished for r in readers):
                    keep.append(entry)
            self._followed = keep

class _Watcher:
    """A thread that completes watched futures (callbacks, waiters) as
    their tasks finish: it waits for any of them in slices (so it holds the
    client's lock at most _SLICE_MS at a time), fetches the finished ones
    and completes them outside the lock. It ends when nothing is left to
    watch; the next watched future starts a new one."""

    def __init__(self, client: Client):
        self._client = client
        self._futures: List[Future] = []
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, daemon=True, name="squall-watch")
        #   Started by the first add (under the lock that made it), so that
        #   it never sees an empty list first and ends at once.
        self._started = False

    _idle = False

    def add(self, future: Future) -> bool:
        """False if this watcher has ended (the caller starts another)."""
        with self._cond:
            if self._idle or self._stopped:
                return False
            self._futures.append(future)
            if not self._started:
                self._started = True
                self._thread.start()
            return True

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._futures = [f for f in self._futures if not f._resolved()]
                if self._stopped or not self._futures:
                    self._idle = True
                    return
                futures = list(self._futures)
            s = futures[0]._session
            same = [f for f in futures if f._session is s]
            try:
                if s.closed:
                    for f in same:
                        f._set_exc(TaskCancelled("session %d is closed" % s.id))
                    continue
                s.submit()
                same = [f for f in same if not f._resolved()]   # refused
                if not same:
                    continue
                done, _ = s._wait_some_ids([f._tid for f in same], _SLICE_MS)
            except SquallError as exc:
                for f in same:
                    f._set_exc(exc)
                continue
            got = set(done)
            for f in same:
                if f._tid in got:
                    try:
                        f._resolve(0)
                    except SquallError as exc:
                        f._set_exc(exc)

def wait(futures: Iterable[Future], timeout: Optional[float] = None,
         return_when: str = _cf.ALL_COMPLETED):
    """concurrent.futures.wait for squall futures: (done, not_done) sets;
    return_when is FIRST_COMPLETED, FIRST_EXCEPTION or ALL_COMPLETED."""
    with _intask.waiting():
        return _cf.wait(list(futures), timeout, return_when)

def _collect(x: Any, out: List[Future]) -> None:
    if isinstance(x, Future):
        out.append(x)
    elif isinstance(x, (list, tuple, set, frozenset)):
        for y in x:
            _collect(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _collect(y, out)

def _rebuild(x: Any, skip: bool = False) -> Any:
    if type(x) is list:
        #   A gather's list: a finished future's value as result() gives
        #   it, without its calls (two per value otherwise).
        out = []
        for y in x:
            if type(y) is Future and y._state is _FINISHED and y._exc is None \
                    and y._value is not _UNSET and not y._session._dropped:
                out.append(y._value)
            elif not (skip and isinstance(y, Future) and _failed(y)):
                out.append(_rebuild(y, skip))
        return out
    if isinstance(x, Future):
        return x.result()
    if isinstance(x, (list, tuple, set, frozenset)):
        return type(x)(_rebuild(y, skip) for y in x
                       if not (skip and isinstance(y, Future) and _failed(y)))
    if isinstance(x, dict):
        return {k: _rebuild(v, skip) for k, v in x.items()
                if not (skip and isinstance(v, Future) and _failed(v))}
    return x

def _failed(f: Future) -> bool:
    return f._exc is not None or f._state in _CANCELLED_STATES

def _left(deadline: Optional[float]) -> Optional[float]:
    return None if deadline is None else max(0.0, deadline - time.monotonic())

def _raise_first(futures: List[Future]) -> None:
    for f in futures:
        if f._exc is not None or f._state in _CANCELLED_STATES:     # _failed, inline: per future
            f.result()

def _gather_values(futures: List[Future], timeout: Optional[float], errors: str = "raise") -> None:
    """Resolves many futures with few round trips: their objects are joined
    by concat tasks on the cluster and fetched in one piece per chunk.
    errors="raise": the first failure is raised as soon as it is known,
    whatever is still running; "skip": every future is resolved."""
    deadline = None if timeout is None else time.monotonic() + timeout
    by_session: Dict[int, List[Future]] = {}
    seen = set()
    for f in futures:
        if not f._resolved() and id(f) not in seen:
            seen.add(id(f))
            by_session.setdefault(id(f._session), []).append(f)
    if errors == "raise":
        _raise_first(futures)
    for group in by_session.values():
        s = group[0]._session
        if not s.closed:
            s.submit()
        group = [f for f in group if not f._resolved()]     # refused by that submit
        if errors == "raise":
            _raise_first(futures)
        if len(group) >= 100 and Progress(len(group)).enabled:
            try:
                s._wait_ids([f._tid for f in group], _left(deadline))
            except (TaskFailed, TaskCancelled):
                pass
        if len(group) < 4 or s.closed:
            _gather_few(s, group, deadline, errors)
        else:
            _gather_joined(s, group, deadline, errors)

def _gather_few(s: Session, group: List[Future], deadline: Optional[float], errors: str) -> None:
    """Resolves the futures as they finish, one fetch each."""
    pending = [f for f in group if not f._resolved()]
    while pending:
        if s.closed:
            for f in pending:
                f._resolve(0)
        else:
            done, _ = s._wait_some_ids([f._tid for f in pending], _ms(_left(deadline)))
            if not done:
                raise TimeoutError("gather: %d future(s) still pending after the timeout"
                                   % len(pending))
            got = set(done)
            for f in pending:
                if f._tid in got:
                    f._resolve(_left(deadline))
        if errors == "raise":
            _raise_first(pending)
        pending = [f for f in pending if not f._resolved()]

def _gather_joined(s: Session, group: List[Future], deadline: Optional[float],
                   errors: str) -> None:
    """Joins each chunk of futures in a concat task and fetches the chunks
    as they finish; a chunk whose concat failed is resolved future by future
    (its failures raised at once with errors="raise")."""
    joined: Dict[int, List[Future]] = {}     # concat task -> its chunk
    with s._lock:
        s._submit_calls()
        for start in range(0, len(group), _GATHER_CHUNK):
            chunk = [f for f in group[start:start + _GATHER_CHUNK] if not f._resolved()]
            if chunk:
                tid = s._add_task(b"concat", [f._oid for f in chunk], 1, None, _GATHER_OPTIONS,
                                  None, None)
                L.sq_keep(s._h, tid + 1)
                joined[tid] = chunk
        s.submit()
    try:
        while joined:
            done, _ = s._wait_some_ids(list(joined), _ms(_left(deadline)))
            if not done:
                raise TimeoutError("gather: %d future(s) still pending after the timeout"
                                   % sum(map(len, joined.values())))
            for tid in done:
                chunk = joined.pop(tid)
                try:
                    data, _ = s._fetch(tid + 1, _left(deadline), raw=True)
                except (TaskFailed, TaskCancelled):
                    data = None
                finally:
                    with s._lock:
                        if not s.closed:
                            L.sq_unkeep(s._h, tid + 1)
                if data is not None:
                    with unpickling(s):
                        values = read_values(data, len(chunk))
                    Future._set_values(chunk, values)
                elif errors == "raise":
                    #   The futures already done hold the failure.
                    _gather_few(s, chunk, deadline, errors)
                else:
                    for f in chunk:
                        f._resolve(_left(deadline))
    finally:
        with s._lock:
            if not s.closed and joined:
                for tid in joined:
                    L.sq_unkeep(s._h, tid + 1)

def as_completed(futures: Iterable[Future], timeout: Optional[float] = None) -> Iterator[Future]:
    """Yields the futures as they finish (or fail), in completion order."""
    import time
    pending = list(futures)
    deadline = None if timeout is None else time.monotonic() + timeout
    while pending:
        ready = [f for f in pending if f._resolved()]
        if not ready:
            s = pending[0]._session
            s.submit()
            same = [f for f in pending if f._session is s and not f._resolved()]
            if not same:                # the broker refused their tasks
                continue
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done_ids, _ = s._wait_some_ids([f._tid for f in same], _ms(left))
            if not done_ids:
                raise TimeoutError("as_completed: %d future(s) still pending after %s s"
                                   % (len(pending), timeout))
            got = set(done_ids)
            ready = [f for f in same if f._tid in got]
        for f in ready:
            pending.remove(f)
            yield f


#   Futures a task returned (adopted into the caller's session, _worker.reduce_future):
#   unpickled as futures of the session that reads them.
_unpickling = threading.local()


@contextlib.contextmanager
def unpickling(session):
    """Adopted futures unpickled in this block become futures of `session`."""
    before = getattr(_unpickling, "session", None)
    _unpickling.session = session
    try:
        yield
    finally:
        _unpickling.session = before


def _adopted_future(session_id: int, oid: int):
    """A future a task returned, unpickled: a Future of the session it was
    adopted into, when the client reading it holds that session."""
    session = getattr(_unpickling, "session", None)
    if session is None or session.id != session_id:
        raise SquallError("a future a task returned belongs to session %d, the session of the "
                          "client that submitted that task: only that client can use it (read "
                          "the task's result there; pass it on to other tasks as a future)"
                          % session_id)
    live = session.__dict__.get("_adopted")
    if live is None:
        live = session.__dict__["_adopted"] = weakref.WeakValueDictionary()
    future = live.get(oid)
    if future is None:
        #   The object's producer, the broker's noop task, is oid - 1.
        future = live[oid] = Future(session, oid - 1, oid=oid)
    return future
