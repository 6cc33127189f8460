"""The client: a connection to a broker (Client)."""
from __future__ import annotations

import collections
import ctypes
import functools
import logging
import os
import pickle
import re
import threading
import time
import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from . import _lib as L
from . import _logs
from . import _intask
from . import _clusterwide
from . import _pickling
from .errors import (ActorLost, ConnectionError, ObjectDeleted, ObjectLost, SquallError,
                     TaskCancelled, TaskFailed, TimeoutError, UpstreamFailed)
from ._common import (TASK_OPTIONS, _FairLock, _JOB_STATES, _count, _job_dict, _jobs_call,
                      _locked, _ms, _workers)
from ._futures import Future, _LogForwarder, _Watcher, _collect, _gather_values, _rebuild
from ._session import Session
from . import dask as _dask
from .actors import ActorHandle


DEFAULT_ADDRESS = "tcp://127.0.0.1:7760"
#   client.submit buffers tasks for at most this long (or this many).
_SUBMIT_DELAY = 0.002
_SUBMIT_BUFFER = 1000


_log = logging.getLogger("squall")


#   What the library and the broker put before a task's own message.
_PREFIX = re.compile(r"^(?:(?:upstream )?task \d+ (?:was cancelled|failed)|object \d+): ?")


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
    `local_dir` (default $SQUALL_LOCAL_DIR; LocalCluster's clients get
    theirs) is the governors' --stream-dir when this process runs on their
    host: large constants then go to a governor there as memory files, not
    over the network (docs/security.md, "Uploads on one host"); the files
    of its recent ones are kept, up to `constant_cache` bytes (default
    $SQUALL_CONSTANT_CACHE, else 256 MiB; 0: off), and a constant of exactly
    the same bytes (compared byte for byte) is handed over as the same file
    again instead of being written anew: computing the same Dask collection
    twice writes its partitions once (constant_cache_stats()).
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
                 asynchronous: bool = False, local_dir: Optional[str] = None,
                 constant_cache: Optional[int] = None):
        #   asynchronous=True: `await Client(...)` (or `async with`) connects,
        #   and gather / close / compute(sync=True) return awaitables (see
        #   _aio); a Future is awaitable either way.
        self.asynchronous = bool(asynchronous)
        self.dashboard_link: Optional[str] = None
        self.address = address or os.environ.get("SQUALL_BROKER") or DEFAULT_ADDRESS
        secret_key = secret_key or os.environ.get("SQUALL_SECRET_KEY") or None
        broker_key = broker_key or os.environ.get("SQUALL_BROKER_KEY") or None
        if constant_cache is not None:
            constant_cache = _count("constant_cache", constant_cache)
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
        if local_dir and L.sq_client_set_local_dir(self._h, os.fsencode(local_dir)):
            message = self._errmsg()
            L.sq_client_destroy(ctypes.byref(self._h))
            raise SquallError(message)
        if constant_cache is not None:
            L.sq_client_set_constant_cache(self._h, constant_cache)
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
    def constant_cache_stats(self) -> dict:
        """What the constant cache (Client's `constant_cache`) did since the
        client was made: hits (constants handed over as a file kept from an
        earlier one of the same bytes), misses (written into a new file),
        collisions (kept files of the same size and sampled bytes whose
        other bytes differed), bytes_reused, bytes_written; and what it
        holds: entries, bytes, limit."""
        stats = L.ConstantCacheStats()
        self._check(L.sq_client_constant_cache_stats(self._h, ctypes.byref(stats)))
        return {name: getattr(stats, name) for name, _ in stats._fields_}

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
        asynchronous=True, an awaitable.

        A client dropped without close() (nothing refers to it, nor to its
        futures and sessions) is closed by its finaliser when the garbage
        collector takes it, exactly as close(): its sessions are closed, so
        their unfinished tasks are cancelled and their objects freed (a
        detached job goes on). The submit flusher thread holds the client
        only weakly, so it does not keep a dropped client, or its
        connection, alive."""
        if getattr(self, "asynchronous", False):
            import asyncio
            try:
                asyncio.get_running_loop()
            except RuntimeError:        # no loop: closed now
                return self._close()
            return self._aio(self._close)
        return self._close()

    def _close(self, wait: bool = True) -> None:
        """close(); wait=False, a finaliser's, never waits: for the lock
        (see _FairLock.defer) nor for the log forwarder, which takes it."""
        lock = self.__dict__.get("_lock")
        if lock is None:
            return
        if self.__dict__.get("_forwarder") is not None:
            self._forwarder.stop(wait)
        lock.run(self._destroy, wait)

    def _destroy(self) -> None:
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
            self._close(wait=False)
        except Exception:
            pass

    def __repr__(self) -> str:
        return "<squall.Client %s>" % self.address

    def _repr_html_(self) -> str:
        """Jupyter's view: the broker, its governors, the tasks and the
        dashboard's link."""
        from ._html import client_html     # Jupyter's view only: loaded when first shown
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
            elif oid and session is self._fs and not session._is_void(oid):
                #   (0: a call whose id the library never gave, _flush_likes)
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
            #   The thread holds the client weakly: a client the user drops
            #   without close() is collected, and its finaliser closes it.
            self._flusher = threading.Thread(target=Client._flush_loop,
                                             args=(weakref.ref(self), self._flush_wanted),
                                             daemon=True, name="squall-submit")
            self._flusher.start()
        self._flush_wanted.set()

    @staticmethod
    def _flush_loop(ref: "weakref.ref[Client]", wanted: threading.Event) -> None:
        """The flusher: holds its client (ref()) only while it sends; ends
        when the client is closed or collected (_destroy wakes it)."""
        while True:
            wanted.wait()
            time.sleep(_SUBMIT_DELAY)
            wanted.clear()
            client = ref()
            if client is None:
                return
            with client._lock:
                if not getattr(client, "_h", None) or not client._h.value:
                    return
                if client._fs is not None and not client._fs.closed:
                    try:
                        client._fs.submit()
                    except SquallError as exc:
                        client._fs._submit_error = exc
            #   The last reference may go here: the finaliser then runs in
            #   this thread, with the lock free.
            del client

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
        with _intask.waiting():
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
        return _dask.get(self, dsk, keys, **kwargs)

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
        _clusterwide.upload_file(self, path, load)

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
        return self._aio(_clusterwide.restart, self, bool(keep_results), timeout)

    def run(self, function: Callable, *args, workers: Any = None, on_error: str = "raise",
            **kwargs) -> Dict[Any, Dict[int, Any]]:
        """function(*args, **kwargs) in every live Python executor of this
        client's tenant on every governor (as Dask's run runs it in every
        worker; other tenants' executors are not reached): {governor name:
        {executor pid: its result}}, keyed by the governor's id instead where
        two governors share a name; workers= (governor names or ids) keeps
        those. A live executor is one that ran this tenant's tasks (not one
        started in advance, nor one a restart retired): a governor where
        none did maps to {}. An idle executor runs it at once, a busy one
        between its tasks (after the task it runs), so a long task delays
        the answer; after 30 s, SquallError (SQ_E_TIMEOUT) naming the
        governors that did not answer. The function and its
        arguments are pickled together (at most 1 MiB; over 16 KiB, busy
        executors answer an error). on_error="raise": the first exception
        raised there is raised here as itself; "return": exceptions are the
        values of their executors; "ignore": their executors are left out.
        Results stay on the governors, and this client reads them from
        there (the broker only says where): a governor keeps at most 64 MiB
        of answers; an executor whose result does not fit answers a
        SquallError saying it was too large (a large result is a task's).
        A governor that dies before its answers are read gives one
        SquallError (under executor pid 0) saying they were lost.
        With asynchronous=True, an awaitable."""
        if on_error not in ("raise", "return", "ignore"):
            raise ValueError("on_error must be 'raise', 'return' or 'ignore', not %r"
                             % (on_error,))
        return self._aio(_clusterwide.run, self, function, args, kwargs, workers, on_error)

    def compute(self, collections: Any, sync: bool = False, **kwargs) -> Any:
        """Dask distributed's compute: a Future of each Dask collection's
        result (one, or a list as given). sync=True: the results (with
        asynchronous=True, an awaitable of them). Options: retries=,
        priority=, resources= (and squall's cpus=, timeout=), under the
        collections' own dask.annotate annotations. See squall.dask."""
        if sync:
            return self._aio(_dask.compute, self, collections, True, **kwargs)
        return _dask.compute(self, collections, False, **kwargs)

    def persist(self, collections: Any, **kwargs) -> Any:
        """Dask distributed's persist: the collections backed by their
        parts computed on the cluster and kept there while the returned
        collections live; later computations read them where they are."""
        return _dask.persist(self, collections, **kwargs)
