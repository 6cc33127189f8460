"""Tasks that submit tasks: squall.get_client(), secede() and rejoin().

Inside a Python task (a governor's executor, governor/executor.py), the
executor registers itself as the module `_squall_executor`; that is how
this module knows it runs in a task and how it tells the governor that the
task waits (docs/protocol.md, "py", u8 6 and 7).

get_client() returns a client of the task's own cluster (the broker the
governor was given, $SQUALL_TASK_BROKER: an address, no secret), one per
executor process. Its submits are nested: each child runs with priority one
above its parent's (its depth), so the cluster finishes the deepest work
first, as a depth-first recursion would, instead of starting every
parent's siblings and holding them all waiting. A task that waits on a
future (result, gather, wait) secedes while it waits: its cpu goes to other
tasks, its children among them, so a recursion deeper than the cluster has
cpus finishes (governor/compute.c bounds how many wait at once).
"""
import ctypes
import os
import pickle
import threading
from typing import Any, Callable, Optional

from . import _lib as L
from ._client import Client
from . import _futures, _intask
from ._intask import _executor
from ._session import Session
from .errors import ConnectionError as SqConnectionError, SquallError

#   The depth of the task running in this executor (0: a client's task),
#   set by _Nested around the call.
_depth = 0
_client = None
_client_lock = threading.Lock()
_E_DENIED = 24                  # SQ_E_DENIED, common/squall_codes.h


class _Nested:
    """A function submitted from inside a task: runs it at its depth."""

    __slots__ = ("fn", "depth")

    def __init__(self, fn: Callable, depth: int):
        self.fn = fn
        self.depth = depth

    def __call__(self, *args, **kwargs):
        global _depth
        before, _depth = _depth, self.depth
        try:
            return self.fn(*args, **kwargs)
        finally:
            _depth = before

    def __reduce__(self):
        return (_Nested, (self.fn, self.depth))

    @property
    def __name__(self):
        return getattr(self.fn, "__name__", "nested")


def nested(fn: Callable, options: dict) -> Callable:
    """fn as a child of the running task: one deeper, and (unless the
    caller chose one) with its depth as priority."""
    options.setdefault("priority", _depth + 1)
    return _Nested(fn, _depth + 1)


def get_client(timeout: float = 10.0):
    """Inside a task: a client of the cluster that runs it, as the task's
    tenant (the same client for every call during one task; closed when the
    task returns, which cancels the children nobody waited for). Its
    futures can be waited on in the task (which then gives its cpu back); a
    child's exception is raised as itself. On a cluster with keys it
    connects with a key pair the governor made for this task attempt
    (docs/security.md, "Tasks that submit tasks"): the task never sees the
    submitting client's key nor the governor's. Outside a task: a new
    squall.Client() from the environment."""
    global _client
    ex = _executor()
    if ex is None or not ex.in_task():
        return Client(timeout=timeout)
    with _client_lock:
        if _client is not None and _client[0] == ex.task_number():
            return _client[1]
        address = os.environ.get("SQUALL_TASK_BROKER")
        if not address:
            raise SquallError("squall.get_client(): this executor's governor gave no broker "
                              "address ($SQUALL_TASK_BROKER)")
        try:
            keys = ex.credential()
        except RuntimeError as exc:
            raise SquallError(str(exc)) from None
        client = _connect(address, keys, timeout)
        client._parent = ex.task_key() if hasattr(ex, "task_key") else None
        _client = (ex.task_number(), client)
        ex.at_task_end(_close_task_client)
        if hasattr(ex, "before_pickling"):
            ex.before_pickling(adopt_returned)
        return client


def _close_task_client() -> None:
    global _client
    with _client_lock:
        client, _client = _client, None
    if client is not None:
        client[1].close()


def _cert_fd(public: str, secret: Optional[str]) -> int:
    """A certificate in memory only (memfd, 0600): the path /proc/self/fd/N
    reads it, and it goes with this process or when closed."""
    text = "metadata\ncurve\n    public-key = \"%s\"\n" % public
    if secret:
        text += "    secret-key = \"%s\"\n" % secret
    fd = os.memfd_create("squall-task-key", os.MFD_CLOEXEC)
    os.fchmod(fd, 0o600)
    os.write(fd, text.encode())
    return fd


def _connect(address: str, keys: Optional[tuple], timeout: float):
    """The task's client. A refused handshake is tried again for a while:
    the governor sent the key's public half to the broker just before
    handing it over here, and this connection may arrive first."""
    import time
    cls = _task_client_class()
    if keys is None:
        return cls(address, timeout=timeout)
    public, secret, broker = keys
    fds = [_cert_fd(public, secret), _cert_fd(broker, None)]
    try:
        paths = ["/proc/self/fd/%d" % fd for fd in fds]
        deadline = time.monotonic() + timeout
        pause = 0.005
        while True:
            try:
                return cls(address, timeout=timeout, secret_key=paths[0], broker_key=paths[1])
            except SqConnectionError as exc:
                if exc.code != _E_DENIED or time.monotonic() > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
    finally:
        for fd in fds:
            os.close(fd)


_TaskClientClass = None


def _task_client_class():
    global _TaskClientClass
    if _TaskClientClass is not None:
        return _TaskClientClass

    class TaskClient(Client):
        """A client inside a task: submits nested tasks (see the module).

        Its futures live in the children's session of the task, the job
        "nested/S/T" (S, T: the task's session and id, docs/protocol.md
        "Jobs"), which the broker keeps while the task has not ended. An
        attempt run again (its governor died) attaches to it and numbers its
        ids from 1 again (sq_session_replay): a submit made in the same order
        as before is not sent again, and its futures are the children the
        earlier attempt made, finished or running."""

        _parent = None          # (session, id) of the task, from its governor

        def _futures_session(self):
            self._drain_dead()
            if self._fs is None:
                self._fs = _children_session(self)
            return self._fs

        def _destroy(self):
            # the children's session is left to the broker: it closes it
            # (cancelling the children nobody waited for) once this task
            # has ended, so that a report of the task lost with its
            # governor leaves the children for the attempt run again
            fs, self._fs = self._fs, None
            if fs is not None and fs.detached and fs._h.value:
                L.sq_session_detach(ctypes.byref(fs._h))
            elif fs is not None:
                self._fs = fs
            super()._destroy()

        def submit(self, fn: Callable, *args, **kwargs) -> Any:
            return super().submit(nested(fn, kwargs), *args, **kwargs)

        def map(self, fn: Callable, *iterables, **options) -> Any:
            wrapped = nested(fn, options)
            return super().map(wrapped, *iterables, **options)

    _TaskClientClass = TaskClient
    return TaskClient


_E_DUPLICATE_ID = 5             # SQ_E_DUPLICATE_ID, common/squall_codes.h


def _children_session(client):
    """The session of the running task's children: opened as the job
    "nested/S/T", or, when an earlier attempt of the task opened it,
    attached and replayed. A plain session when the governor did not say
    which task runs (an older governor)."""
    if client._parent is None or L.sq_session_replay is None:
        return Session(client)
    name = "nested/%d/%d" % client._parent
    try:
        return Session(client, name=name, detached=True)
    except SquallError as exc:
        if exc.code != _E_DUPLICATE_ID:
            raise
    with client._lock:
        handle = L.sq_session_attach(client._h, 0, name.encode())
    if not handle:
        raise client._error(L.sq_client_errcode(client._h))
    session = Session(client, detached=True, _handle=handle)
    session.name = name
    session._check(L.sq_session_replay(session._h))
    return session




#   Futures a task returns: a future of the running task's children (its
#   children's session "nested/S/T", which closes when the task ends) is
#   pickled as an object of the task's own session S, the one its caller
#   reads. The broker makes it (ADOPT, docs/protocol.md "Jobs"): a noop
#   task of S, run where the child's output is, reads it over the data
#   plane; the pickle carries (S, id) only. The client that unpickles the
#   task's result (Future.result, in session S) gets a Future of its own
#   session for it, which it may wait on, fetch, pass to tasks and drop
#   like any other (dropping it frees the object).
#   A result holding many futures (a list of 10 000 children) is adopted in
#   batches before it is pickled (adopt_returned): one request per
#   _SQ_ADOPT_MAX futures, not one per future.
_SQ_ADOPT_MAX = 1024            # common/proto.h
#   While adopt_returned looks for futures: {id: future} found so far.
_finding = threading.local()


class _Nowhere:
    """A file that keeps nothing: adopt_returned's pickling only looks."""

    def write(self, data) -> int:
        return len(data)


def _task_client():
    with _client_lock:
        return _client[1] if _client is not None else None


def _adopt(client, session, futures) -> None:
    """One ADOPT for futures (at most _SQ_ADOPT_MAX) of session; each is then
    pickled as what it became in the caller's session."""
    with client._lock:
        session.submit()
        to = ctypes.c_uint32()
        got = (ctypes.c_uint32 * len(futures))()
        rc = L.sq_adopt(session._h, L.ids([f._oid for f in futures]), len(futures),
                        ctypes.byref(to), got)
        if rc:
            raise client._error(rc, session)
        for f, oid in zip(futures, got):
            f.__dict__["_adopted"] = (to.value, oid)


def adopt_returned(value) -> None:
    """Before the running task's result is pickled (the executor calls it):
    the children's futures in it are adopted, _SQ_ADOPT_MAX per request. They
    are found by pickling the value into nothing, once, and only when the
    task's client holds futures at all; pickling it for real then finds
    each one adopted. A value that does not pickle is left to the real
    pickling to say why."""
    client = _task_client()
    if client is None or client._parent is None or client._live_futures <= 0 \
            or L.sq_adopt is None:
        return
    found: dict = {}
    _finding.found = found
    try:
        try:
            pickle.Pickler(_Nowhere(), protocol=pickle.HIGHEST_PROTOCOL,
                           buffer_callback=_out_of_band).dump(value)
        except Exception:
            try:
                import cloudpickle
            except ImportError:
                return
            try:
                cloudpickle.CloudPickler(_Nowhere(), protocol=pickle.HIGHEST_PROTOCOL,
                                         buffer_callback=_out_of_band).dump(value)
            except Exception:
                return
    finally:
        _finding.found = None
    sessions: dict = {}
    for f in found.values():
        sessions.setdefault(id(f._session), (f._session, []))[1].append(f)
    for session, futures in sessions.values():
        for i in range(0, len(futures), _SQ_ADOPT_MAX):
            _adopt(client, session, futures[i:i + _SQ_ADOPT_MAX])


def _out_of_band(buffer) -> bool:
    return False                # left out: adopt_returned reads no bytes


def reduce_future(future):
    """Future.__reduce__."""
    client = _task_client()
    session = future._session
    found = getattr(_finding, "found", None)
    if found is not None:
        #   adopt_returned looking: the real pickling refuses what is
        #   not adoptable
        if client is not None and session.client is client \
                and "_adopted" not in future.__dict__:
            found[id(future)] = future
        return (int, ())
    if client is None or session.client is not client or client._parent is None \
            or L.sq_adopt is None:
        raise TypeError("a squall Future cannot be pickled here: it belongs to the client that "
                        "made it (a future made inside a task can be returned by that task, "
                        "or passed to its other children); pass the future itself to "
                        "client.submit, or its result")
    if "_adopted" not in future.__dict__:
        _adopt(client, session, [future])
    return (_futures._adopted_future, future.__dict__["_adopted"])


#   Future.__reduce__ (_futures) asks _intask, which this module fills in:
#   only a task's own client can adopt its children's futures.
_intask.reduce_hook = reduce_future
