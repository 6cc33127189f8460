"""Clients, sessions, data objects, tasks, Python tasks and futures."""
from __future__ import annotations

import collections
import concurrent.futures as _cf
import ctypes
import functools
import itertools
import io
import logging
import os
import pickle
import re
import threading
import time
import weakref
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence

from . import _lib as L
from . import _logs
from . import _worker
from ._pickling import (_PROTOCOL as _PICKLE_PROTOCOL, PICKLE, PY_FUNCTION, TemplatePickler,
                        dumps, function_bytes, loads_result, py_config, py_config_actor,
                        py_config_call, py_config_fn_in, read_value)
from ._progress import Progress
from .errors import (ActorLost, ConnectionError, ObjectDeleted, ObjectLost, SquallError, TaskCancelled,
                     TaskFailed, TimeoutError, UpstreamFailed)

DEFAULT_ADDRESS = "tcp://127.0.0.1:7760"
#   client.submit buffers tasks for at most this long (or this many).
_SUBMIT_DELAY = 0.002
_SUBMIT_BUFFER = 1000
#   Inputs per gather task: the values of many futures come back in one fetch
#   (a concat of their pickles, read back one pickle after the other).
_GATHER_CHUNK = 2000
#   Task options accepted by submit(), map() and @remote besides the call's
#   own arguments.
TASK_OPTIONS = ("cpus", "resources", "max_retries", "timeout", "priority", "key", "log_limit",
                "stdout_path", "stderr_path", "workers", "allow_other_workers")
#   Options that are keys of an execute or py task's config (docs/protocol.md
#   section 7): its output, kept up to log_limit bytes or written to files.
_LOG_OPTIONS = ("log_limit", "stdout_path", "stderr_path")
#   Governors one task may name (workers=), as SQ_MAX_TASK_GOVERNORS.
_MAX_TASK_GOVERNORS = 64

#   Blocking calls into the library last at most this long with the client's
#   lock held; a longer wait is made of such slices, so that other threads
#   (and the future watcher) get their turn in between.
_SLICE_MS = 100
#   A client waiting on the cluster while no governor at all is connected
#   says so this often (a governor that failed to start leaves the cluster
#   silently idle otherwise).
_NO_GOVERNOR_WARNING = 10.0
#   One task's config at most (common/proto.h SQ_MAX_CONFIG): a bigger one
#   is refused with a clear message before anything is sent.
_CONFIG_MAX = 16 << 20
#   Argument types pickled as they are, never references: client.map adds
#   calls taking only these in bulk (Session._map_futures).
_PLAIN_TYPES = frozenset((int, float, str, bytes, bool, type(None)))
_log = logging.getLogger("squall")

_local = threading.local()
#   What the library and the broker put before a task's own message.
_PREFIX = re.compile(r"^(?:(?:upstream )?task \d+ (?:was cancelled|failed)|object \d+): ?")


class _FairLock:
    """A reentrant lock granted in the order threads asked for it. Python's
    RLock lets a thread that releases and at once re-acquires (a loop of
    slices, the flusher) starve the others; here each acquire takes a
    ticket and waits for its turn."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._owner: Optional[int] = None
        self._count = 0
        self._next = 0              # the next ticket to hand out
        self._serving = 0           # the ticket whose turn it is
        self._abandoned: set = set()  # tickets of waits interrupted (KeyboardInterrupt)

    def _advance(self) -> None:
        self._serving += 1
        while self._serving in self._abandoned:
            self._abandoned.discard(self._serving)
            self._serving += 1
        self._cond.notify_all()

    def acquire(self) -> bool:
        me = threading.get_ident()
        if self._owner == me:           # only this thread can change that
            self._count += 1
            return True
        with self._cond:
            if self._owner == me:
                self._count += 1
                return True
            ticket = self._next
            self._next += 1
            try:
                while self._owner is not None or self._serving != ticket:
                    self._cond.wait()
            except BaseException:
                if self._serving == ticket:
                    self._advance()
                else:
                    self._abandoned.add(ticket)
                raise
            self._owner = me
            self._count = 1
            return True

    def release(self) -> None:
        if self._count > 1 and self._owner == threading.get_ident():
            self._count -= 1
            return
        with self._cond:
            if self._owner != threading.get_ident():
                raise RuntimeError("squall: releasing a client lock this thread does not hold")
            self._count -= 1
            if self._count == 0:
                self._owner = None
                self._advance()

    def held(self) -> bool:
        return self._owner == threading.get_ident()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


class TaskConfigTooLarge(SquallError, ValueError):
    """A Python task's pickled function and arguments are over the size a
    task's config may have (16 MiB): large values must travel as data."""


def _locked(method):
    """Runs the method holding its client's library lock (see Client._lock)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return wrapper


def _count(what: str, value: Any, least: int = 0) -> int:
    """A task option that is a whole number of at least `least`, checked
    here: the library takes unsigned numbers (-1 would be 2**64 - 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) \
            or value < least or value >= 2 ** 63:
        raise ValueError("%s must be a whole number >= %d, not %r" % (what, least, value))
    return int(value)


def _gpus(value: Any) -> float:
    """gpus: a whole number of devices, or a fraction of one below 1 in
    thousandths (0.5, 0.25, 0.125), as sq_task_set_gpus (sq_gpus_milli)
    takes them: refused here, before anything is added."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) \
        and (value == 0 or 0.001 <= value <= 1e6)
    if ok and value:
        milli = round(value * 1000)
        ok = abs(value * 1000 - milli) <= 1e-6 * max(value * 1000, 1) \
            and (milli <= 1000 or milli % 1000 == 0)
    if not ok:
        raise ValueError("resource gpus must be a whole number, or a fraction below 1 "
                         "in thousandths, not %r" % (value,))
    return float(value)


def _with_log_options(config: bytes, options: dict) -> bytes:
    """An execute or py config (a msgpack map) with the log options given
    added: `log_limit`, the bytes of each of stdout and stderr its governor
    keeps; `stdout_path` / `stderr_path`, absolute paths on the governor
    they are written to instead (docs/protocol.md, section 7)."""
    for name in _LOG_OPTIONS:
        value = options.get(name)
        if value is None:
            continue
        if name == "log_limit":
            packed = b"\xcf" + int(value).to_bytes(8, "big")
        else:
            raw = os.fsencode(value)
            if not raw.startswith(b"/") or b"\0" in raw or len(raw) > 4096:
                raise ValueError("%s must be an absolute path, not %r" % (name, value))
            packed = b"\xda" + len(raw).to_bytes(2, "big") + raw
        config = _with_key(config, name.encode(), packed)
    return config


def _with_key(config: bytes, key: bytes, packed: bytes) -> bytes:
    head = config[0]
    if 0x80 <= head < 0x8f:
        out = bytes([head + 1]) + config[1:]
    elif head == 0x8f:
        out = b"\xde\x00\x10" + config[1:]
    elif head == 0xde:
        out = b"\xde" + (int.from_bytes(config[1:3], "big") + 1).to_bytes(2, "big") + config[3:]
    else:
        raise SquallError("log options need a task configured by a map")
    return out + bytes([0xa0 + len(key)]) + key + packed


def _check_options(options: dict) -> None:
    """Refuses task options the library would misread, before anything is
    added."""
    if options.get("cpus") is not None:
        _count("cpus", options["cpus"])
    resources = options.get("resources") or {}
    if not isinstance(resources, dict):
        raise TypeError("resources must be a dict {name: amount}, not %r" % (resources,))
    for name, amount in resources.items():
        if not isinstance(name, str) or not name:
            raise ValueError("a resource name must be a non-empty string, not %r" % (name,))
        if name == "gpus":      # may be a fraction of a device
            _gpus(amount)
        else:
            _count("resource %s" % name, amount)
    if options.get("log_limit") is not None:
        _count("log_limit", options["log_limit"])
    if options.get("max_retries"):
        _count("max_retries", options["max_retries"])
    timeout = options.get("timeout")
    if timeout and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                    or not 0 < timeout < 2 ** 31 / 1000):
        raise ValueError("timeout must be a positive number of seconds, not %r" % (timeout,))
    priority = options.get("priority")
    if priority and (isinstance(priority, bool) or not isinstance(priority, int)
                     or not -2 ** 31 <= priority < 2 ** 31):
        raise ValueError("priority must be a 32-bit whole number, not %r" % (priority,))
    if options.get("workers") is not None:
        _workers(options["workers"])


def _workers(workers: Any) -> list:
    """workers= as a list of governors (ids or names), checked."""
    one = isinstance(workers, (str, int)) and not isinstance(workers, bool)
    listed = [workers] if one else list(workers) if isinstance(workers, (list, tuple, set,
                                                                         frozenset)) else None
    if not listed or len(listed) > _MAX_TASK_GOVERNORS or any(
            isinstance(w, bool) or not isinstance(w, (str, int))
            or (isinstance(w, int) and not 0 < w < 2 ** 32) for w in listed):
        raise ValueError("workers must be a governor (its name, or its id from "
                         "client.governors()) or a list of 1 to %d of them, not %r"
                         % (_MAX_TASK_GOVERNORS, workers))
    return listed


def _ms(timeout: Optional[float]) -> int:
    return -1 if timeout is None else max(0, int(timeout * 1000))


_JOB_STATES = ("running", "finished", "failed", "cancelled")            # bits 1 .. 8
_TASK_STATES = ("waiting", "running", "finished", "failed", "cancelled")  # bits 1 .. 16


def _jobs_call(fn: Any) -> None:
    if fn is None:
        raise SquallError("this libsquall has no jobs (client/squall.h, \"Jobs\"): "
                          "rebuild squall", L.SQ_E_INVALID)


def _state(bit: int, names: Sequence[str]) -> str:
    return names[bit.bit_length() - 1] if bit and not bit & (bit - 1) and \
        bit.bit_length() <= len(names) else "unknown"


def _job_dict(job: Any) -> dict:
    """A job as `squall job list --json` prints it (docs/jobs.md)."""
    return {"id": job.id, "name": job.name.decode(errors="replace") or None,
            "state": _state(job.state, _JOB_STATES), "detached": bool(job.detached),
            "attached": bool(job.attached),
            "tasks": dict(zip(_TASK_STATES, (int(n) for n in job.tasks))),
            "created": job.created_ms / 1000.0 if job.created_ms else None,
            "ended": job.ended_ms / 1000.0 if job.ended_ms else None}


def _session_stack() -> list:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def current_session() -> "Session":
    """The innermost `with client.session():` of this thread."""
    stack = _session_stack()
    if not stack:
        raise SquallError("no active session: build graphs inside "
                          "`with client.session() as s:` (or use client.submit)")
    return stack[-1]


# ----------------------------------------------------------------------------
# Client


class Client:
    """A connection to a squall broker.

    `address` defaults to $SQUALL_BROKER, then tcp://127.0.0.1:7760. With a
    cluster that uses keys (docs/security.md), `secret_key` is this client's
    key file (NAME.key from `squall keygen`) and `broker_key` the broker's
    public key (its .pub file); they default to $SQUALL_SECRET_KEY and
    $SQUALL_BROKER_KEY. When the connection to the broker is lost (a broken
    link, a broker restarted on its journal) the client reconnects and
    resumes its sessions for up to `resume` seconds: calls in progress just
    take longer.
    With `forward_logs=True`, what the tasks submitted through this client
    (submit, map) print comes to this process's stdout and stderr as it
    comes, each line prefixed with its task (`(task 7 fn) ...`): a thread
    follows the logs of at most 256 of them at a time, the others waiting
    their turn (see _LogForwarder).
    Graphs are built in sessions (`with client.session() as s:`);
    `submit` / `map` / `gather` give Dask-style futures; `get` runs Dask
    graphs.

    Threads: a client may be used from several threads. Every call into
    the library holds the client's lock, granted in arrival order; blocking
    waits hold it for at most 100 ms at a time, so other threads' calls go
    through while one waits. Futures are completed (callbacks,
    concurrent.futures.wait, asyncio) by a watcher thread that exists only
    while some future has a callback or a waiter.
    """

    def __init__(self, address: Optional[str] = None, timeout: float = 10.0,
                 secret_key: Optional[str] = None, broker_key: Optional[str] = None,
                 resume: float = 60.0, forward_logs: bool = False,
                 asynchronous: bool = False):
        #   asynchronous=True: `await Client(...)` (or `async with`) connects,
        #   and gather / close / compute(sync=True) return awaitables (see
        #   _aio); a Future is awaitable either way.
        self.asynchronous = bool(asynchronous)
        self.dashboard_link: Optional[str] = None
        self.address = address or os.environ.get("SQUALL_BROKER") or DEFAULT_ADDRESS
        secret_key = secret_key or os.environ.get("SQUALL_SECRET_KEY") or None
        broker_key = broker_key or os.environ.get("SQUALL_BROKER_KEY") or None
        if bool(secret_key) != bool(broker_key):
            raise SquallError("a client with keys needs both secret_key and broker_key "
                              "(or $SQUALL_SECRET_KEY and $SQUALL_BROKER_KEY)")
        handle = L.sq_client_new()
        if not handle:
            raise MemoryError("sq_client_new")
        self._h = ctypes.c_void_p(handle)
        L.sq_client_set_resume(self._h, _ms(resume) if resume else 0)
        if secret_key and L.sq_client_set_keys(self._h, os.fsencode(secret_key),
                                               os.fsencode(broker_key)):
            message = self._errmsg()
            L.sq_client_destroy(ctypes.byref(self._h))
            raise SquallError(message)
        self._connect_timeout = timeout
        self._connected = False
        if not self.asynchronous:
            self._connect()
        self._fs: Optional[Session] = None      # the futures' session
        self._live_futures = 0
        self._released: List[int] = []           # kept objects of dead futures
        #   Future.__del__ runs in whatever thread the garbage collector
        #   does, maybe while another holds the lock: it only appends
        #   (session, object id) here, and the next locked call drains it.
        self._dead: collections.deque = collections.deque()
        #   Every call into the library holds this lock: the flusher thread
        #   sends buffered submits while the caller's thread goes on.
        self._lock = _FairLock()
        self._watcher: Optional[_Watcher] = None
        #   client.upload_file: [(name, digest, bytes)], and a count of
        #   changes (sessions keep the files' data object per change).
        self._uploads: List[tuple] = []
        self._uploads_version = 0
        self._flush_wanted = threading.Event()
        self._flusher: Optional[threading.Thread] = None
        self._forwarder: Optional[_LogForwarder] = _LogForwarder(self) if forward_logs else None

    def _connect(self) -> "Client":
        if self._connected:
            return self
        rc = L.sq_client_connect(self._h, self.address.encode(), _ms(self._connect_timeout))
        if rc:
            message = self._errmsg()
            L.sq_client_destroy(ctypes.byref(self._h))
            raise ConnectionError(self.address, message, rc)
        self._connected = True
        return self

    # -- asyncio (asynchronous=True)
    def _aio(self, fn: Callable, *args, **kwargs) -> Any:
        """fn(*args, **kwargs), or with asynchronous=True an awaitable of it
        run in the event loop's executor: the blocking call never stalls
        the loop."""
        if not self.asynchronous:
            return fn(*args, **kwargs)
        import asyncio

        async def run() -> Any:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))
        return run()

    def __await__(self):
        """`client = await Client(..., asynchronous=True)`: connects without
        blocking the event loop."""
        import asyncio

        async def start() -> "Client":
            if not self._connected:
                await asyncio.get_running_loop().run_in_executor(None, self._connect)
            return self
        return start().__await__()

    async def __aenter__(self) -> "Client":
        return await self

    async def __aexit__(self, *exc) -> None:
        await self._aio(self._close)

    # -- errors
    def _errmsg(self) -> str:
        msg = L.sq_client_errmsg(self._h)
        return msg.decode("utf-8", "replace") if msg else ""

    def _error(self, rc: int, session: Optional["Session"] = None) -> SquallError:
        """The exception for the last error of this client."""
        message = self._errmsg()
        if rc == L.SQ_E_CONNECTION:
            return ConnectionError(self.address, message, rc)
        if rc == L.SQ_E_TIMEOUT:
            return TimeoutError(message, rc)
        errid = L.sq_client_errid(self._h)
        root = L.sq_client_errroot(self._h)
        names = session._names if session else {}
        task_id = session._task_of(errid) if session else errid
        raw = message
        while True:
            stripped = _PREFIX.sub("", raw, count=1)
            if stripped == raw:
                break
            raw = stripped
        if rc == L.SQ_E_UPSTREAM_FAILED and root and root != task_id:
            return UpstreamFailed(task_id, root, raw, names.get(task_id), names.get(root))
        if rc in (L.SQ_E_TASK_FAILED, L.SQ_E_UPSTREAM_FAILED):
            tid = root or task_id
            return TaskFailed(tid, raw, names.get(tid))
        if rc == L.SQ_E_CANCELLED:
            return TaskCancelled(message, rc)
        if rc == L.SQ_E_LOST:
            return ObjectLost(message, rc)
        if rc == L.SQ_E_DELETED:
            return ObjectDeleted(message, rc)
        if rc == L.SQ_E_ACTOR_LOST:
            return ActorLost(message, rc)
        return SquallError(message, rc)

    def _check(self, rc: int, session: Optional["Session"] = None) -> None:
        if rc:
            raise self._error(rc, session)

    # -- sessions
    def session(self, name: Optional[str] = None, detached: bool = False) -> "Session":
        """A new session; use it as a context manager (closed at the end).

        detached=True makes it a **job** (docs/jobs.md): it and its kept
        objects outlive this client; leaving the `with` block (or the
        client closing) lets it go on, `client.attach(name or id)` takes it
        back, `Session.close()` or `forget()` ends it. `name` is unique
        among the tenant's kept sessions."""
        return Session(self, name=name, detached=detached)

    def attach(self, job: Any) -> "Session":
        """Takes a job (docs/jobs.md) onto this client by name or id: a
        Session whose `tasks` are its tasks as futures and `objects` its
        tasks' outputs (fetchable when kept, usable as inputs); new tasks
        may be submitted to it. Raises SquallError (SQ_E_SESSION) if there
        is none (or it is another tenant's)."""
        _jobs_call(L.sq_session_attach)
        if isinstance(job, int) and not isinstance(job, bool):
            session, name = job, None
        elif isinstance(job, str) and job:
            session, name = 0, job.encode()
        else:
            raise TypeError("attach takes a job's name or id, not %r" % (job,))
        with self._lock:
            handle = L.sq_session_attach(self._h, session, name)
            if not handle:
                raise self._error(L.sq_client_errcode(self._h))
        return Session(self, detached=True, _handle=handle)

    def jobs(self, state: Optional[str] = None, sessions: bool = False) -> List[dict]:
        """The jobs this client's tenant may see (an admin key: all), oldest
        first, as `squall job list --json` prints them; `state` one of
        running, finished, failed, cancelled; sessions=True adds the plain
        sessions of connected clients."""
        _jobs_call(L.sq_client_jobs)
        states = 0
        if state is not None:
            if state not in _JOB_STATES:
                raise ValueError("state must be one of %s, not %r" % (", ".join(_JOB_STATES),
                                                                      state))
            states = 1 << _JOB_STATES.index(state)
        out = ctypes.POINTER(L.Job)()
        n = ctypes.c_size_t()
        with self._lock:
            self._check(L.sq_client_jobs(self._h, states, 0, None, ctypes.byref(out),
                                         ctypes.byref(n)))
        try:
            jobs = [_job_dict(out[i]) for i in range(n.value)]
        finally:
            if out:
                L.sq_free(ctypes.cast(out, ctypes.c_void_p))
        return [j for j in jobs if sessions or j["detached"]]

    @_locked
    def info(self) -> dict:
        """The broker's view of the cluster (governors, load, task counts)."""
        import json
        out = ctypes.c_void_p()
        self._check(L.sq_client_info(self._h, ctypes.byref(out)))
        text = ctypes.string_at(out).decode()
        L.sq_free(out)
        return json.loads(text)

    def retire(self, governor: int) -> None:
        """Drains a governor (its id, from info()): it takes no new task, its
        queued tasks go to other governors, running ones finish, objects
        only it holds are copied away, then it leaves. Returns once the
        drain started. With keys, needs an admin key. `governor` may also be
        its name."""
        gid = self._governor_id(governor)
        with self._lock:
            self._check(L.sq_client_retire(self._h, gid))

    def close(self) -> Any:
        """Closes the connection (and every session of this client); with
        asynchronous=True, an awaitable."""
        if getattr(self, "asynchronous", False):
            import asyncio
            try:
                asyncio.get_running_loop()
            except RuntimeError:        # no loop: closed now
                return self._close()
            return self._aio(self._close)
        return self._close()

    def _close(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        if getattr(self, "_forwarder", None) is not None:
            self._forwarder.stop()
        with lock:
            if self._watcher is not None:
                self._watcher.stop()
            if getattr(self, "_h", None) and self._h.value:
                if self._fs is not None:
                    self._fs.close()
                    self._fs = None
                L.sq_client_destroy(ctypes.byref(self._h))
        self._flush_wanted.set()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return "<squall.Client %s>" % self.address

    def _repr_html_(self) -> str:
        """Jupyter's view: the broker, its governors, the tasks and the
        dashboard's link."""
        from ._html import client_html
        return client_html(self)

    def __copy__(self) -> "Client":
        return self

    def __deepcopy__(self, memo: dict) -> "Client":
        """The client itself: it is a connection, which copies share (Dask
        deep-copies its config, where `scheduler=client.get` holds it)."""
        return self

    # -- futures
    def _drain_dead(self) -> None:
        """Accounts for futures collected since the last call (lock held)."""
        dead = self._dead
        while dead:
            session, oid = dead.popleft()
            self._live_futures -= 1
            if oid < 0:
                #   An actor's handle (-its task id): the actor stops.
                if session is self._fs and not session.closed:
                    session._stop_actor(-oid)
            elif session is self._fs and not session._is_void(oid):
                self._released.append(oid)

    def _futures_session(self) -> "Session":
        """The session futures live in. When no future is alive any more it is
        replaced, which frees all its objects in one request."""
        self._drain_dead()
        if self._fs is not None and self._live_futures == 0 and self._fs._n_tasks:
            self._fs.close()
            self._fs = None
            self._released.clear()
        if self._fs is None:
            self._fs = Session(self)
        return self._fs

    def _unkeep_released(self) -> None:
        """Unkeeps the objects of dead futures. Called right after a submit:
        a buffered task may still read such an object, and once submitted it
        holds it by itself."""
        self._drain_dead()
        if len(self._released) >= 256:
            released, self._released = self._released, []
            if self._fs._void:          # ids of refused batches were never the broker's
                released = [oid for oid in released if not self._fs._is_void(oid)]
            #   One request for all (a round trip each made a chain of
            #   submits wait on the broker once per future).
            L.sq_unkeep_many(self._fs._h, L.ids(released), len(released))

    def submit(self, fn: Callable, *args, **kwargs) -> "Future":
        """Runs fn(*args, **kwargs) on the cluster; returns a Future.

        Arguments may be futures (the dependency stays in the graph, the
        value never comes back to the client). Task options are keywords:
        cpus=, resources={name: amount}, max_retries=, timeout= (seconds),
        priority=, key= (the task's name), workers= (a governor's name or
        id, or a list of them: the task runs only there, or prefers them
        with allow_other_workers=True)."""
        options = {k: kwargs.pop(k) for k in TASK_OPTIONS if k in kwargs}
        with self._lock:
            s = self._futures_session()
            future = s._recorded_call(lambda: s._future_task(fn, args, kwargs, options))
            self._buffered_one(s)
        if self._forwarder is not None:
            self._forwarder.add(future)
        return future

    def _buffered_one(self, s: "Session") -> None:
        """A task was added to s (lock held): it leaves with the next
        submit, at once when the buffer is full."""
        s._buffered += 1
        if s._buffered >= _SUBMIT_BUFFER:
            s.submit()
        elif s._buffered == 1:
            self._wake_flusher()

    def _wake_flusher(self) -> None:
        """Buffered submits leave within _SUBMIT_DELAY seconds even if the
        caller makes no other call (a tight loop of submits sends one
        message; a chain of submits runs without a round trip per task)."""
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._flush_loop, daemon=True,
                                             name="squall-submit")
            self._flusher.start()
        self._flush_wanted.set()

    def _flush_loop(self) -> None:
        while True:
            self._flush_wanted.wait()
            time.sleep(_SUBMIT_DELAY)
            self._flush_wanted.clear()
            with self._lock:
                if not getattr(self, "_h", None) or not self._h.value:
                    return
                if self._fs is not None and not self._fs.closed:
                    try:
                        self._fs.submit()
                    except SquallError as exc:
                        self._fs._submit_error = exc

    def map(self, fn: Callable, *iterables: Iterable, **options) -> List["Future"]:
        """[submit(fn, *xs) for xs in zip(*iterables)], sent in one request."""
        bad = set(options) - set(TASK_OPTIONS)
        if bad:
            raise TypeError("unknown task option(s) %s" % ", ".join(sorted(bad)))
        with self._lock:
            s = self._futures_session()
            s._submit_calls()
            futures = s._map_futures(fn, zip(*iterables), options)
            s.submit()
        if self._forwarder is not None:
            for f in futures:
                self._forwarder.add(f)
        return futures

    # -- output of tasks
    def logs(self, session: int, task: int, stream: str = "stdout",
             attempt: Optional[int] = None) -> str:
        """What task `task` of session `session` (ids; any session of this
        client's tenant) printed so far on `stream` ("stdout" or
        "stderr"), as its governor keeps it: past the governor's
        --log-limit the head and the tail, with a line saying how many bytes
        were dropped between. attempt: None for the latest. A task not
        started yet has printed nothing (""). Raises ObjectLost ("log lost
        with governor N") when the governor that ran it is gone."""
        reader = _logs.Reader(L, self._h, session, task, stream, attempt, self._lock)
        text = reader.poll()
        if reader.error:
            rc, message = reader.error
            raise self._log_error(rc, message)
        return text.decode("utf-8", "replace")

    def _log_error(self, rc: int, message: str) -> SquallError:
        if rc == L.SQ_E_LOST:
            return ObjectLost(message, rc)
        if rc == L.SQ_E_CONNECTION:
            return ConnectionError(self.address, message, rc)
        return SquallError(message, rc)

    def gather(self, futures: Any, timeout: Optional[float] = None,
               errors: str = "raise") -> Any:
        """The results of futures, in the same structure (a future, or lists,
        tuples and dicts of them). errors="raise": raises the first failure
        as soon as one is known, not waiting for the other futures;
        errors="skip": failed and cancelled futures are left out of their
        lists, tuples and dicts (as Dask's gather)."""
        if errors not in ("raise", "skip"):
            raise ValueError("errors must be 'raise' or 'skip', not %r" % (errors,))
        return self._aio(self._gather, futures, timeout, errors)

    def _gather(self, futures: Any, timeout: Optional[float], errors: str) -> Any:
        flat: List[Future] = []
        _collect(futures, flat)
        with _worker.waiting():
            _gather_values(flat, timeout, errors)
        return _rebuild(futures, errors == "skip")

    def scatter(self, data: Any, governor: Any = None, broadcast: bool = False) -> Any:
        """Puts values on the cluster once, to be used by many tasks (Dask's
        scatter, Ray's put): a value gives a Future (already done), a list
        or tuple a list of them, a dict a dict of them. The value is
        pickled once and travels as a constant of the futures' session
        (inline, or uploaded straight to a governor when large); every task
        given the future reads that one copy.

        governor (an id or a name, see governors()): the value is put
        straight on that governor whatever its size. Such a constant has no
        lineage: if every copy of it is lost (its governor died), tasks
        needing it fail with an error naming it (seed 003's warning).
        broadcast=True: then copied to every governor."""
        gid = None if governor is None else self._governor_id(governor)
        if broadcast and gid is None:
            #   A broadcast starts from a governor copy, never from the
            #   broker's inline bytes: put it on the least loaded one.
            govs = sorted(self.governors(), key=lambda g: g.get("memory", 0))
            if not govs:
                raise SquallError("no governor is connected to scatter to", L.SQ_E_INVALID)
            gid = int(govs[0]["id"])
        one = lambda v: self._scatter_one(v, gid, broadcast)  # noqa: E731
        if isinstance(data, dict):
            return {k: one(v) for k, v in data.items()}
        if isinstance(data, (list, tuple)):
            return [one(v) for v in data]
        return one(data)

    def _scatter_one(self, value: Any, governor: Optional[int] = None,
                     broadcast: bool = False) -> "Future":
        with self._lock:
            s = self._futures_session()
            s._submit_calls()
            obj = s.pickled(value, governor)
            L.sq_keep(s._h, obj.id)
            future = Future(s, obj.id, oid=obj.id)
            s.submit()
        if broadcast:
            s.place(obj, copies=L.SQ_PLACE_MAX)
        future._set_value(value)
        return future

    def governors(self) -> List[dict]:
        """The connected governors (INFO's entries: id, name, cpus, ...)."""
        return list(self.info().get("governors") or [])

    def _governor_id(self, governor: Any) -> int:
        """A governor id from an id or a name."""
        if isinstance(governor, int) and not isinstance(governor, bool):
            return governor
        if isinstance(governor, str):
            for g in self.governors():
                if g.get("name") == governor:
                    return int(g["id"])
            raise ValueError("no governor named %r is connected" % governor)
        raise TypeError("a governor is an id (int) or a name (str), not %r" % (governor,))

    def _governor_ids(self, workers: Any) -> List[int]:
        """Governor ids of workers= (names or ids, one or a list): names
        are looked up in INFO once, and again only for a name not seen
        yet (a governor that joined since)."""
        ids = []
        for w in _workers(workers):
            if isinstance(w, int):
                ids.append(w)
                continue
            known = getattr(self, "_governor_names", None)
            if known is None or w not in known:
                known = self._governor_names = {g.get("name"): int(g["id"])
                                                for g in self.governors()}
            if w not in known:
                raise ValueError("workers=%r: no governor of that name is connected (names: %s)"
                                 % (w, ", ".join(sorted(str(n) for n in known)) or "none"))
            ids.append(known[w])
        return ids

    def delete(self, futures: Any) -> None:
        """Deletes results on the cluster now (Future.delete), a future or
        a list of them."""
        futures = futures if isinstance(futures, (list, tuple, set)) else [futures]
        by_session: Dict[Session, list] = {}
        for f in futures:
            by_session.setdefault(f._session, []).append(f)
        for session, fs in by_session.items():
            session.delete(fs)

    def replicate(self, futures: Any, n: Optional[int] = None,
                  governors: Sequence[Any] = ()) -> None:
        """Future.replicate for a future or a list of them (Dask's
        replicate); n=None with no governors: on every governor."""
        futures = futures if isinstance(futures, (list, tuple, set)) else [futures]
        if n is None and not governors:
            n = L.SQ_PLACE_MAX
        for f in futures:
            f.replicate(n, governors)

    def move(self, futures: Any, governor: Any) -> None:
        """Future.move for a future or a list of them."""
        futures = futures if isinstance(futures, (list, tuple, set)) else [futures]
        for f in futures:
            f.move(governor)

    def who_has(self, futures: Any) -> Dict[str, List[int]]:
        """{future key: governor ids holding it} (Dask's who_has)."""
        futures = futures if isinstance(futures, (list, tuple, set)) else [futures]
        return {f.key: f.where() for f in futures}

    def actor(self, cls: type, *args, **kwargs) -> "ActorHandle":
        """Starts cls(*args, **kwargs) in one executor on one governor; its
        methods' calls, through the returned handle, run there one at a time
        in the order they were made, and return futures. Options (keywords):
        cpus= (1), resources=, max_restarts= (0), key= (the actor's name).
        The actor holds its cpus and resources while it lives; it stops
        with handle.stop(), when the handle is garbage, or with the client."""
        from .actors import ActorHandle
        return ActorHandle(self, cls, args, kwargs)

    def wait_for_governors(self, n: int = 1, timeout: Optional[float] = None) -> int:
        """Waits until at least n governors are connected (as Dask's
        wait_for_workers); returns how many are. TimeoutError after
        `timeout` seconds (None: for ever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.01
        while True:
            count = len(self.info().get("governors") or [])
            if count >= n:
                return count
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("%d governor(s) connected after %s s, %d wanted"
                                   % (count, timeout, n))
            #   INFO is the only way to learn of governors: ask again, less
            #   and less often (at most every half second).
            time.sleep(delay if deadline is None else
                       max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(0.5, delay * 2)

    def _warn_if_no_governor(self) -> None:
        try:
            governors = self.info().get("governors")
        except SquallError:
            return
        if not governors:
            _log.warning("squall: waiting on the cluster at %s, but no governor is connected: "
                         "tasks run once one joins (see `squall status`)", self.address)

    def _watch(self, future: "Future") -> None:
        """Completes the future in the background (a callback or a waiter
        was added to it)."""
        with self._lock:
            if self._watcher is None or not self._watcher.add(future):
                self._watcher = _Watcher(self)
                self._watcher.add(future)

    def get(self, dsk: Any, keys: Any, **kwargs) -> Any:
        """Dask's scheduler interface: runs a Dask task graph, returns the
        values of `keys` (nested like them). See squall.dask."""
        from .dask import get
        return get(self, dsk, keys, **kwargs)

    def upload_file(self, path: str, load: bool = True) -> None:
        """Makes a module (.py) or an archive of modules (.zip, .egg)
        importable by every Python task of this client from now on,
        wherever it runs (governors that join later too), as Dask's
        upload_file. The files travel as one data object, an input of each
        task; an executor installs them, before the task runs, in a
        directory of its user's only (0700: the tenant's uid where tenants
        run under uids of their own), for that task only: another client of
        the tenant never imports them (bindings README). load=True: a .py
        is imported by a task now, so that an error in it is raised here."""
        import hashlib
        import zipfile
        name = os.path.basename(path)
        if not name.endswith((".py", ".zip", ".egg")) or name.startswith("."):
            raise ValueError("upload_file takes a .py module, or a .zip or .egg of modules, "
                             "not %r" % name)
        with open(path, "rb") as f:
            data = f.read()
        if name.endswith(".py"):
            compile(data, path, "exec")         # a SyntaxError is the caller's, here
        elif not zipfile.is_zipfile(path):
            raise ValueError("%s is not a zip archive" % path)
        digest = hashlib.sha256(name.encode() + b"\0" + data).hexdigest()[:32]
        with self._lock:
            self._uploads = [u for u in self._uploads if u[0] != name] + [(name, digest, data)]
            self._uploads_version += 1
        if load and name.endswith(".py"):
            from . import _uploads
            self.submit(_uploads.load, name[:-3], key="upload_file").result()

    def restart(self, keep_results: bool = False, timeout: float = 30.0) -> Any:
        """Fresh Python executors for this client's tenant on every
        governor (Dask's restart; other tenants' executors are not
        touched): modules imported, globals set and memory held by earlier
        tasks or client.run are gone for the tasks submitted from now on.
        keep_results=False (Dask's behaviour): every future of this client
        is cancelled and its results freed first, running tasks stopped;
        keep_results=True: futures and their results stay, and tasks
        already running finish in their executors, which then stop.
        Sessions opened with client.session() are left as they are.
        Returns once every governor confirmed that the executors that ran
        this tenant's tasks before have stopped (with keep_results=True,
        running tasks first finish); after `timeout` seconds, SquallError
        (SQ_E_TIMEOUT) naming the governors that did not confirm (the
        restart goes on there). With asynchronous=True, an awaitable."""
        return self._aio(self._restart, bool(keep_results), timeout)

    def _restart(self, keep_results: bool, timeout: float = 30.0) -> None:
        with self._lock:
            if not keep_results and self._fs is not None:
                #   Closing the session cancels its tasks and frees its
                #   results; its futures are cancelled (a value fetched
                #   before too, as Dask's).
                self._fs._dropped = True
                self._fs.close()
                self._fs = None
                self._released.clear()
            if L.sq_client_restart_wait is None:
                self._check(L.sq_client_restart(self._h))
            else:
                self._check(L.sq_client_restart_wait(self._h, max(0, int(timeout * 1000))))

    def run(self, function: Callable, *args, workers: Any = None, on_error: str = "raise",
            **kwargs) -> Dict[Any, Any]:
        """function(*args, **kwargs) on every connected governor (or on
        workers=, governor names or ids), in one of the Python executors
        there that run this client's tenant's tasks (as Dask's run, which
        runs it in every worker): {governor name: its result}, keyed by
        the governor's id instead where two governors share a name. It is
        a task pinned to each governor (workers=) asking no cpu: unlike
        Dask's run it waits for a slot there as other tasks do, and
        runs in one of the executors there (the one tasks use, on a
        governor with one cpu). on_error="raise": the first exception
        raised there is raised here as itself; "return": exceptions are the
        values of their governors; "ignore": their governors are left out.
        With asynchronous=True, an awaitable."""
        if on_error not in ("raise", "return", "ignore"):
            raise ValueError("on_error must be 'raise', 'return' or 'ignore', not %r"
                             % (on_error,))
        return self._aio(self._run, function, args, kwargs, workers, on_error)

    def _run(self, function: Callable, args: tuple, kwargs: dict, workers: Any,
             on_error: str) -> Dict[Any, Any]:
        governors = self.governors()
        if workers is not None:
            wanted = set(self._governor_ids(workers))
            governors = [g for g in governors if int(g["id"]) in wanted]
        names = [g.get("name") for g in governors]
        keys = [n if n and names.count(n) == 1 else int(g["id"])
                for n, g in zip(names, governors)]
        name = "run-%s" % getattr(function, "__name__", "function")
        #   The function's keywords bound here: submit would take one named
        #   as a task option (key=, timeout=, ...) for itself.
        call = functools.partial(function, **kwargs) if kwargs else function
        futures = [self.submit(call, *args, workers=int(g["id"]), cpus=0, key=name)
                   for g in governors]
        out: Dict[Any, Any] = {}
        for key, future in zip(keys, futures):
            try:
                out[key] = future.result()
            except Exception as exc:        # the function's own, as itself
                if on_error == "raise":
                    for rest in futures:
                        rest.cancel()
                    raise
                if on_error == "return":
                    out[key] = exc
        return out

    def compute(self, collections: Any, sync: bool = False, **kwargs) -> Any:
        """Dask distributed's compute: a Future of each Dask collection's
        result (one, or a list as given). sync=True: the results (with
        asynchronous=True, an awaitable of them). Options: retries=,
        priority=, resources= (and squall's cpus=, timeout=), under the
        collections' own dask.annotate annotations. See squall.dask."""
        from .dask import compute
        if sync:
            return self._aio(compute, self, collections, True, **kwargs)
        return compute(self, collections, False, **kwargs)

    def persist(self, collections: Any, **kwargs) -> Any:
        """Dask distributed's persist: the collections backed by their
        parts computed on the cluster and kept there while the returned
        collections live; later computations read them where they are."""
        from .dask import persist
        return persist(self, collections, **kwargs)


# ----------------------------------------------------------------------------
# Sessions, data objects and tasks


class Session:
    """A namespace of tasks and data objects with one lifetime: closing it
    cancels its unfinished tasks and frees all its objects."""

    #   client.restart() dropped it: its futures are cancelled.
    _dropped = False

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
        self._h = ctypes.c_void_p(handle)
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
            if self._h.value:
                L.sq_session_destroy(ctypes.byref(self._h))

    def detach(self) -> None:
        """Lets go of the session without closing it: a job (detached=True)
        goes on, for `client.attach` to take back; a plain session is
        closed by the broker after its --session-grace."""
        _jobs_call(L.sq_session_detach)
        if self._h.value and self._dirty:
            self.submit()           # what was built goes with the job
        with self._lock:
            if self._h.value:
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
        try:
            if self.detached:
                self.detach()
            else:
                self.close()
        except Exception:
            pass

    @property
    def closed(self) -> bool:
        return not self._h.value

    def __repr__(self) -> str:
        return "<squall.Session %d%s>" % (self.id, " closed" if self.closed else "")

    def _repr_html_(self) -> str:
        from ._html import session_html
        return session_html(self)

    def _check(self, rc: int) -> None:
        if rc:
            raise self.client._error(rc, self)

    def _open(self) -> None:
        """Raises if the session is closed (the library, given no session,
        would have no error to tell)."""
        if not self._h.value:
            raise TaskCancelled("session %d is closed" % self.id)

    def _task_of(self, oid: int) -> int:
        return self._outputs.get(oid, oid)

    # -- graph building
    @_locked
    def blob(self, data: bytes, content_type: str = "",
             governor: Optional[int] = None) -> "DataObject":
        """A constant. With `governor` (an id, see Client.governors) it is
        put straight on that governor at submit, whatever its size: it has
        no lineage there, so if every copy of it is lost the tasks needing
        it fail, naming it."""
        self._open()
        data = bytes(data)
        oid = L.sq_blob(self._h, data, len(data), content_type.encode())
        if not oid:
            self._check(L.sq_client_errcode(self.client._h) or 4)
        self._next_id = oid + 1
        if governor is not None:
            self._check(L.sq_object_set_governor(self._h, oid, int(governor)))
        self._dirty = True
        return DataObject(self, oid, content_type)

    def pickled(self, obj: Any, governor: Optional[int] = None) -> "DataObject":
        return self.blob(dumps(obj), PICKLE, governor)

    # -- moving results by hand (docs/protocol.md, DELETE and PLACE)
    def delete(self, items: Sequence[Any]) -> None:
        """Deletes finished data objects now, whoever keeps them: their
        copies are dropped on every governor, tasks not done that need them
        fail (naming the object), and so does a later fetch."""
        self.submit()
        ids = [_object_id(x) for x in items]
        if ids:
            with self._lock:
                self._check(L.sq_delete(self._h, L.ids(ids), len(ids)))

    def place(self, item: Any, governors: Sequence[int] = (), copies: int = 0,
              move: bool = False, timeout: Optional[float] = None) -> List[int]:
        """Copies a data object to `governors` and to more until at least
        `copies` governors hold it; with move=True every other copy is then
        dropped. Waits for the object first, then for the copies; returns
        the ids of the governors holding it ([] for a small object the
        broker holds itself and sends with every task)."""
        self.submit()
        oid = _object_id(item)
        if len(governors) > L.SQ_PLACE_MAX:
            raise ValueError("at most %d governors" % L.SQ_PLACE_MAX)
        deadline = None if timeout is None else time.monotonic() + timeout
        self._wait_ids([oid], timeout)
        govs = L.ids([int(g) for g in governors]) if governors else None
        holders = (ctypes.c_uint32 * L.SQ_PLACE_MAX)()
        n = ctypes.c_size_t(0)
        flags = L.SQ_PLACE_MOVE if move else 0
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        rc = self._sliced(lambda ms: L.sq_place(self._h, oid, govs, len(governors), int(copies),
                                                flags, ms, holders, L.SQ_PLACE_MAX,
                                                ctypes.byref(n)), left)
        self._check(rc)
        return list(holders[:min(n.value, L.SQ_PLACE_MAX)])

    @_locked
    def _add_task(self, kind: bytes, inputs: Sequence[int], n_outputs: int,
                  config: Optional[bytes], options: dict, name: Optional[str],
                  content_types: Optional[Sequence[str]]) -> int:
        self._open()
        if options:
            _check_options(options)
            if config and any(options.get(k) is not None for k in _LOG_OPTIONS):
                config = _with_log_options(config, options)
        h = self._h
        n = len(inputs)
        arr = (ctypes.c_uint32 * n)(*inputs) if n else None
        tid = L.sq_task(h, kind, arr, n, n_outputs, config, len(config) if config else 0)
        if not tid:
            self._check(L.sq_client_errcode(self.client._h) or 4)
        self._next_id = tid + 1 + n_outputs
        if name:
            L.sq_task_set_name(h, tid, name.encode())
            self._names[tid] = name
        if options:
            cpus = options.get("cpus")
            if cpus is not None and cpus != 1:
                self._check(L.sq_task_set_resource(h, tid, b"cpus", int(cpus)))
            for rname, amount in (options.get("resources") or {}).items():
                if rname == "gpus":     # may be a fraction of a device
                    self._check(L.sq_task_set_gpus(h, tid, float(amount)))
                else:
                    self._check(L.sq_task_set_resource(h, tid, rname.encode(), int(amount)))
            if options.get("max_retries"):
                self._check(L.sq_task_set_max_retries(h, tid, int(options["max_retries"])))
            if options.get("timeout"):
                self._check(L.sq_task_set_timeout(h, tid, float(options["timeout"])))
            if options.get("priority"):
                self._check(L.sq_task_set_priority(h, tid, int(options["priority"])))
            if options.get("workers") is not None:
                ids = self.client._governor_ids(options["workers"])
                self._check(L.sq_task_set_governors(h, tid, L.ids(ids), len(ids),
                                                    bool(options.get("allow_other_workers"))))
        if content_types:
            for j, ct in enumerate(content_types):
                if ct:
                    L.sq_object_set_content_type(h, tid + 1 + j, ct.encode())
        outputs = self._outputs
        for j in range(n_outputs):
            outputs[tid + 1 + j] = tid
        self._task_ids.append(tid)
        self._n_tasks += 1
        self._dirty = True
        return tid

    def _input_id(self, x: Any) -> int:
        if isinstance(x, DataObject):
            if x.session is not self:
                raise SquallError("%r belongs to another session" % x)
            return x.id
        if isinstance(x, Task):
            return self._input_id(x.output)
        if isinstance(x, Future):
            if x._session is not self:
                raise SquallError("a Future can only be used in client.submit / map")
            if self._is_void(x._oid):
                raise SquallError("%r cannot be an argument: the broker refused its task (%s)"
                                  % (x, x._exc), getattr(x._exc, "code", 0))
            return x._oid
        if isinstance(x, (bytes, bytearray, memoryview)):
            return self.blob(bytes(x)).id
        raise TypeError("not a data object: %r" % (x,))

    def _is_ref(self, x: Any) -> bool:
        return isinstance(x, (DataObject, Task, Future))

    def _py_task(self, fn: Callable, args: tuple, kwargs: Optional[dict], n_outputs: int,
                 options: dict, name: Optional[str], stream: bool = False) -> int:
        """Adds a "py" task calling fn(*args, **kwargs); returns its id.
        stream: its one output is a stream (bytes chunks the function
        yields)."""
        if options:
            _check_options(options)     # before anything is added
        if self.client._uploads:
            fn, args = self._installing_files(fn, args)
        fn_bytes = function_bytes(fn)
        if not kwargs and all(isinstance(a, (DataObject, Task, Future)) for a in args):
            template, inputs = b"", [self._input_id(a) for a in args]
        else:
            template, refs = self._template.dumps(args, kwargs or {})
            inputs = [self._check_ref(r) for r in refs]
        #   The function goes once per session as a data object, input 0 of
        #   every task calling it: each governor receives it once, instead
        #   of every task's config carrying it.
        fn_oid = self._fn_objects.get(fn_bytes)
        if fn_oid is None:
            fn_oid = self.blob(fn_bytes, PY_FUNCTION).id
            self._fn_objects[fn_bytes] = fn_oid
        inputs.insert(0, fn_oid)
        config = py_config_fn_in(template)
        if len(config) > _CONFIG_MAX:
            raise TaskConfigTooLarge(
                "task %s: its pickled function and arguments take %.1f MiB, over the %d MiB a "
                "task's config may have; pass large values as data instead (client.scatter, "
                "squall.pickled, or a future), so that they travel as task inputs"
                % (name or "?", len(config) / 2.0 ** 20, _CONFIG_MAX >> 20))
        if stream and n_outputs != 1:
            raise SquallError("a stream task has one output, the stream")
        tid = self._add_task(b"py", inputs, n_outputs, config, options, name,
                             ("",) if stream else (PICKLE,) * n_outputs)
        if stream:
            self._check(L.sq_object_set_stream(self._h, tid + 1))
        return tid

    def _installing_files(self, fn: Callable, args: tuple):
        """fn wrapped to install the client's uploaded files first, and its
        arguments after the files' data object (Client.upload_file)."""
        from . import _uploads
        try:
            import cloudpickle
            cloudpickle.register_pickle_by_value(_uploads)
        except (ImportError, ValueError):  # pragma: no cover
            pass
        client = self.client
        files = self._files
        if files is None or files[0] != client._uploads_version or self._is_void(files[1].id):
            files = self._files = (client._uploads_version, self.pickled(_uploads.Files(list(client._uploads))))
        wrapped = self._with_files.get(id(fn))
        if wrapped is None or wrapped[0] is not fn:
            wrapped = self._with_files[id(fn)] = (fn, _uploads.WithFiles(fn))
        return wrapped[1], (files[1],) + tuple(args)

    def _fn_object(self, fn: Callable) -> int:
        """The data object holding fn pickled, one per function and session."""
        fn_bytes = function_bytes(fn)
        fn_oid = self._fn_objects.get(fn_bytes)
        if fn_oid is None:
            fn_oid = self.blob(fn_bytes, PY_FUNCTION).id
            self._fn_objects[fn_bytes] = fn_oid
        return fn_oid

    def _template_inputs(self, args: tuple, kwargs: Optional[dict]):
        template, refs = self._template.dumps(tuple(args), kwargs or {})
        return template, [self._check_ref(r) for r in refs]

    def _actor_task(self, cls: type, args: tuple, kwargs: Optional[dict], options: dict,
                    name: str) -> int:
        """Adds the task that makes an actor, cls(*args, **kwargs), and
        keeps it (docs/protocol.md, "Actors"); returns its id."""
        template, inputs = self._template_inputs(args, kwargs)
        inputs.insert(0, self._fn_object(cls))
        return self._add_task(b"py", inputs, 0, py_config_actor(template), options, name, ())

    def _call_task(self, host: int, method: str, args: tuple, kwargs: Optional[dict],
                   name: str) -> int:
        """Adds a call of the actor's method; its one output is the result."""
        template, inputs = self._template_inputs(args, kwargs)
        config = py_config_call(host, method, template)
        if len(config) > _CONFIG_MAX:
            raise TaskConfigTooLarge("call %s: its pickled arguments take %.1f MiB; pass large "
                                     "values as data (client.scatter, or a future)"
                                     % (name, len(config) / 2.0 ** 20))
        return self._add_task(b"py", inputs, 1, config, {}, name, (PICKLE,))

    def _stop_actor(self, tid: int) -> None:
        """Cancels the actor's task: its instance goes, calls not done
        fail with ActorLost (lock held)."""
        self.submit()
        rc = L.sq_cancel(self._h, L.ids([tid]), 1)
        if rc not in (0, L.SQ_E_UNKNOWN_ID):
            self._check(rc)

    def _map_futures(self, fn: Callable, items: Iterable[tuple], options: dict) -> List["Future"]:
        """Futures of fn(*xs) for each xs, in order. Calls whose arguments
        are all plain values (numbers, strings, bytes, None) are added as
        copies of the first such one (sq_tasks_like: one C call for all of
        them, the arguments pickled by the C pickler); the others one by
        one as client.submit adds them."""
        futures: List[Future] = []
        model = 0
        configs: List[bytes] = []
        pending: List[int] = []       # indexes in futures of the clones to come

        def flush() -> None:
            if not configs:
                return
            n = len(configs)
            ends = (ctypes.c_size_t * n)(*itertools.accumulate(map(len, configs)))
            first = ctypes.c_uint32(0)
            self._check(L.sq_tasks_like(self._h, model, n, b"".join(configs), ends,
                                        ctypes.byref(first)))
            stride = 2                  # a task and its one output
            ids = range(first.value, first.value + n * stride, stride)
            self._next_id = first.value + n * stride
            name = self._names.get(model)
            if name:
                self._names.update(dict.fromkeys(ids, name))
            self._outputs.update(zip(range(first.value + 1, first.value + 1 + n * stride, stride),
                                     ids))
            self._task_ids.extend(ids)
            self._n_tasks += n
            self._dirty = True
            for i, tid in zip(pending, ids):
                futures[i] = Future(self, tid)
            configs.clear()
            pending.clear()

        dumps = pickle.dumps
        bulk = not self.client._uploads     # clones would not carry the files
        for xs in items:
            if bulk and all(type(x) in _PLAIN_TYPES for x in xs):
                if model:
                    config = py_config_fn_in(dumps((xs, {}), _PICKLE_PROTOCOL))
                    if any(options.get(k) is not None for k in _LOG_OPTIONS):
                        config = _with_log_options(config, options)
                    if len(config) <= _CONFIG_MAX:
                        configs.append(config)
                        pending.append(len(futures))
                        futures.append(None)
                        continue
                else:
                    future = self._future(fn, xs, None, options)
                    model = future._tid
                    futures.append(future)
                    continue
            flush()
            futures.append(self._future(fn, xs, None, options))
        flush()
        return futures

    def _check_ref(self, ref: Any) -> int:
        return self._input_id(ref)

    def _future(self, fn: Callable, args: tuple, kwargs: Optional[dict],
                options: dict) -> "Future":
        return Future(self, self._future_task(fn, args, kwargs, options))

    def _future_task(self, fn: Callable, args: tuple, kwargs: Optional[dict],
                     options: dict) -> int:
        """Adds the task of a future, its output kept; returns its id."""
        name = options.get("key") or getattr(fn, "__name__", None)
        args, kwargs, moved = self._large_as_data(tuple(args), kwargs, False)
        try:
            tid = self._py_task(fn, args, kwargs, 1, options, name)
        except TaskConfigTooLarge:
            #   Large values of types not sized above (a big list, a dict):
            #   each argument pickled alone, the large ones sent as data.
            args, kwargs, more = self._large_as_data(args, kwargs, True)
            if not more:
                raise
            moved += more
            tid = self._py_task(fn, args, kwargs, 1, options, name)
        if moved:
            _warn_large(name, moved)
        L.sq_keep(self._h, tid + 1)
        return tid

    def _large_as_data(self, args: tuple, kwargs: Optional[dict], pickle_all: bool):
        """(args, kwargs, sizes moved): arguments of _LARGE_ARG bytes or
        more replaced by data objects of their pickles, which a task reads
        as the values themselves (uploaded to a governor at submit, as
        client.get does with large graph values) instead of riding in the
        task's config. Without pickle_all, only values whose size is known
        without pickling them (buffers, arrays, strings)."""
        moved: List[int] = []

        def one(v: Any) -> Any:
            if self._is_ref(v):
                return v
            if pickle_all:
                try:
                    data = dumps(v)
                except Exception:       # holds a future or the like: stays in the config
                    return v
                if len(data) < _LARGE_ARG:
                    return v
                moved.append(len(data))
                return self.blob(data, PICKLE)
            if _cheap_size(v) < _LARGE_ARG:
                return v
            data = dumps(v)
            moved.append(len(data))
            return self.blob(data, PICKLE)
        new_args = tuple(one(a) for a in args)
        new_kwargs = {k: one(v) for k, v in kwargs.items()} if kwargs else kwargs
        return new_args, new_kwargs, moved

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

    # -- submit and wait
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


#   An argument of client.submit this large (or more) travels as a data
#   object, not in the task's config; one of _LARGE_WARN or more is warned
#   about (as Dask warns of large objects in a graph).
_LARGE_ARG = 1 << 20
_LARGE_WARN = 10 << 20


def _cheap_size(v: Any) -> int:
    """Bytes of a value whose size is known without pickling it, else 0."""
    if isinstance(v, (bytes, bytearray, str)):
        return len(v)
    if isinstance(v, memoryview):
        return v.nbytes
    nbytes = getattr(type(v), "nbytes", None)
    if nbytes is not None and not callable(nbytes):
        try:
            n = v.nbytes
            return int(n) if isinstance(n, int) else 0
        except Exception:
            return 0
    return 0


def _warn_large(name: Optional[str], sizes: List[int]) -> None:
    big = max(sizes)
    if big < _LARGE_WARN:
        return
    import warnings
    warnings.warn(
        "Large object of size %.2f MiB passed to task %s: sent as data (uploaded to a governor) "
        "for this task alone. Consider scattering large objects ahead of time with "
        "client.scatter, so that many tasks read one copy:\n"
        "    future = client.submit(func, big_data)    # bad\n"
        "    big_future = client.scatter(big_data)     # good\n"
        "    future = client.submit(func, big_future)  # good"
        % (big / 2.0 ** 20, name or "?"), UserWarning, stacklevel=6)


def _ref_id(x: Any) -> Any:
    return x                        # the session maps it (Session._input_id)


def _object_id(x: Any) -> int:
    """The data object id of a Future, DataObject or id."""
    if isinstance(x, Future):
        return x._oid
    if isinstance(x, DataObject):
        return x.id
    if isinstance(x, int):
        return x
    raise TypeError("not a data object or future: %r" % (x,))


class DataObject:
    """A piece of data in a session: a constant or a task's output."""

    __slots__ = ("session", "id", "content_type", "__weakref__")

    def __init__(self, session: Session, oid: int, content_type: str = ""):
        self.session = session
        self.id = oid
        self.content_type = content_type

    def keep(self) -> "DataObject":
        """Keeps the object so it can be fetched (and outlives its consumers)."""
        with self.session._lock:
            self.session._open()
            self.session._check(L.sq_keep(self.session._h, self.id))
        return self

    def unkeep(self) -> None:
        with self.session._lock:
            self.session._open()
            self.session._check(L.sq_unkeep(self.session._h, self.id))

    def fetch(self, timeout: Optional[float] = None) -> Any:
        """The object's content (waits for it): bytes, or the unpickled value
        when its content type is "py/pickle". The object must be kept."""
        data, content_type = self.session._fetch(self.id, timeout)
        if content_type == PICKLE:
            with _worker.unpickling(self.session):
                return loads_result(data)
        return data

    def wait(self, timeout: Optional[float] = None) -> None:
        self.session.wait([self], timeout)

    def delete(self) -> None:
        """Deletes it now (Session.delete)."""
        self.session.delete([self])

    def replicate(self, n: Optional[int] = None, governors: Sequence[int] = (),
                  timeout: Optional[float] = None) -> List[int]:
        """Copies it to `governors` and to at least `n` governors in all;
        returns where it is (Session.place)."""
        return self.session.place(self, governors, n or 0, False, timeout)

    def move(self, governor: int, timeout: Optional[float] = None) -> List[int]:
        """Moves it to one governor: copied there, then dropped elsewhere."""
        return self.session.place(self, [governor], 0, True, timeout)

    def where(self) -> List[int]:
        """The governors holding a copy (waits for it to be finished)."""
        return self.session.place(self)

    def __repr__(self) -> str:
        return "<squall.DataObject %d%s>" % (
            self.id, " %s" % self.content_type if self.content_type else "")


class Task:
    """A task of a session. `outputs` are its data objects; `output` is the
    only one (an error if it has several)."""

    kind = "task"

    def __init__(self, kind: str, inputs: Sequence[Any] = (), outputs: int = 1,
                 config: Optional[bytes] = None, *, name: Optional[str] = None,
                 content_types: Optional[Sequence[str]] = None,
                 session: Optional[Session] = None, **options):
        bad = set(options) - set(TASK_OPTIONS)
        if bad:
            raise TypeError("unknown task option(s) %s" % ", ".join(sorted(bad)))
        s = session or current_session()
        ids = [s._input_id(x) for x in inputs]
        self._init(s, s._add_task(kind.encode(), ids, outputs, config, options,
                                  name or options.get("key"), content_types),
                   outputs, content_types)
        self.kind = kind

    def _init(self, session: Session, tid: int, n_outputs: int,
              content_types: Optional[Sequence[str]]) -> None:
        self.session = session
        self.id = tid
        types = list(content_types or ())
        types += [""] * (n_outputs - len(types))
        self.outputs = [DataObject(session, tid + 1 + j, types[j]) for j in range(n_outputs)]

    @property
    def output(self) -> DataObject:
        if len(self.outputs) != 1:
            raise SquallError("task %d has %d outputs; use .outputs"
                              % (self.id, len(self.outputs)))
        return self.outputs[0]

    def keep_outputs(self) -> "Task":
        for o in self.outputs:
            o.keep()
        return self

    def wait(self, timeout: Optional[float] = None) -> None:
        self.session.wait([self], timeout)

    def fetch(self, timeout: Optional[float] = None) -> Any:
        """The value of the only output (which must be kept)."""
        return self.output.fetch(timeout)

    def logs(self, stream: str = "stdout", attempt: Optional[int] = None) -> str:
        """What the task printed so far (Client.logs); submits the session
        first if it has unsubmitted tasks."""
        s = self.session
        with s._lock:
            if s._dirty:
                s.submit()
        return s.client.logs(s.id, self.id, stream, attempt)

    def __repr__(self) -> str:
        return "<squall.%s %d>" % (type(self).__name__, self.id)


class PyTask(Task):
    """A call of a Python function (made by calling a @remote function)."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, outputs: int = 1,
                 name: Optional[str] = None, session: Optional[Session] = None,
                 stream: bool = False, **options):
        s = session or current_session()
        tid = s._py_task(fn, args, kwargs, outputs, options,
                         name or options.get("key") or getattr(fn, "__name__", None), stream)
        self._init(s, tid, outputs, ("",) if stream else (PICKLE,) * outputs)
        self.kind = "py"
        self.function = fn


def blob(data: bytes, content_type: str = "") -> DataObject:
    """A constant data object in the current session."""
    return current_session().blob(data, content_type)


def pickled(obj: Any) -> DataObject:
    """A constant holding a pickled Python value (content type "py/pickle")."""
    return current_session().pickled(obj)


# ----------------------------------------------------------------------------
# @remote


class RemoteFunction:
    """A function that runs on governors; calling it inside a session adds a
    task and returns it (PyTask). Arguments may be data objects, tasks
    (their output) or plain values, nested in any picklable structure."""

    def __init__(self, fn: Callable, outputs: int = 1, stream: bool = False, **options):
        bad = set(options) - set(TASK_OPTIONS)
        if bad:
            raise TypeError("unknown task option(s) %s" % ", ".join(sorted(bad)))
        self.fn = fn
        self.n_outputs = outputs
        self.stream = stream
        self.task_options = options
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs) -> PyTask:
        return PyTask(self.fn, args, kwargs, self.n_outputs, stream=self.stream,
                      **self.task_options)

    def options(self, **options) -> "RemoteFunction":
        """A copy with other task options (outputs=, cpus=, max_retries=, ...)."""
        merged = dict(self.task_options)
        outputs = options.pop("outputs", self.n_outputs)
        stream = options.pop("stream", self.stream)
        merged.update(options)
        return RemoteFunction(self.fn, outputs, stream, **merged)

    def local(self, *args, **kwargs) -> Any:
        """Calls the function here, in this process."""
        return self.fn(*args, **kwargs)


def remote(fn: Optional[Callable] = None, *, outputs: int = 1, cpus: int = 1,
           max_retries: int = 0, stream: bool = False, **options):
    """Decorator: `@squall.remote` or `@squall.remote(outputs=2, cpus=1,
    max_retries=0, resources={...}, timeout=seconds)`.

    stream=True: the task's one output is a stream (docs/protocol.md,
    "Streams"): the function returns an iterable of bytes (or str) chunks,
    a generator typically, sent to the tasks reading it as it yields them.
    A task given a stream as an argument gets an iterator of bytes chunks
    (iterate it, or read() it whole; close() it to stop early). Readers are
    submitted with their writer; a stream cannot be kept or fetched."""
    def wrap(f: Callable) -> RemoteFunction:
        return RemoteFunction(f, outputs, stream, cpus=cpus, max_retries=max_retries,
                              **options)
    return wrap(fn) if fn is not None else wrap


# ----------------------------------------------------------------------------
# Futures

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
        return _worker.reduce_future(self)

    def __init__(self, session: Session, tid: int, oid: Optional[int] = None):
        self._session = session
        self._tid = tid
        self._oid = tid + 1 if oid is None else oid
        session.client._live_futures += 1

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
        if self._state in (_cf._base.CANCELLED, _cf._base.CANCELLED_AND_NOTIFIED,
                           _cf._base.FINISHED):
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
            self._state in (_cf._base.CANCELLED, _cf._base.CANCELLED_AND_NOTIFIED)

    def _set_value(self, value: Any) -> None:
        """Completes the concurrent.futures side: waiters wake, callbacks
        run (in this thread, without the client's lock held)."""
        self._value = value
        try:
            self.set_result(value)
        except _cf.InvalidStateError:   # cancelled meanwhile, or set by another thread
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
            with _worker.waiting():
                data, content_type = self._session._fetch(self._oid, timeout, raw=True)
        except TaskFailed as exc:
            self._set_exc(exc.raised())
            return
        except (TaskCancelled, ActorLost) as exc:
            self._set_exc(exc)
            return
        if content_type == PICKLE:
            with _worker.unpickling(self._session):
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
        from ._html import future_html
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

    def stop(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
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
    with _worker.waiting():
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
        if _failed(f):
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
                tid = s._add_task(b"concat", [f._oid for f in chunk], 1, None, {}, None, None)
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
                    stream = io.BytesIO(data)
                    with _worker.unpickling(s):
                        values = [read_value(stream) for _ in chunk]
                    for f, value in zip(chunk, values):
                        f._set_value(value)
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
