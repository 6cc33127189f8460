"""Actors: an instance of a Python class living in one executor on one
governor, whose methods are called from the client and return futures.

    @squall.actor
    class Counter:
        def __init__(self, start=0):
            self.n = start
        def add(self, k=1):
            self.n += k
            return self.n

    counter = Counter.start(client, 10)     # or client.actor(Counter, 10)
    counter.add(5).result()                 # 15

The actor is a "py" task with `actor` true that stays running, holding its
cpus and resources; each call is a task with `call` naming it, which the
broker sends to the actor's governor (several at once), where they run one
at a time in the order the calls were made (docs/protocol.md, "Actors"). Calls take and return data objects
like any task: futures of other tasks are fine as arguments, and a call's
future can be the argument of any task.
"""
from __future__ import annotations

import ctypes
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Optional

from . import _lib as L
from ._futures import Future
from ._pickling import py_config_call_head
from .errors import SquallError

if TYPE_CHECKING:
    from ._client import Client

ACTOR_OPTIONS = ("cpus", "resources", "max_restarts", "priority", "key")
_RUNNING = 2                        # sq_client_tasks' state bit of a running task
_NUMBERS = frozenset((int, float, bool, type(None)))
_SMALL = 1 << 16                    # str and bytes shorter: plain (_plain)


def _plain(args: tuple) -> bool:
    """Whether a call's arguments are numbers and short strings only: its
    config is the pickle of them, nothing to look for in it or to move."""
    for a in args:
        t = type(a)
        if t not in _NUMBERS and ((t is not str and t is not bytes) or len(a) >= _SMALL):
            return False
    return True


class ActorHandle:
    """A running actor. `handle.method(*args, **kwargs)` returns a Future of
    the call's result; `handle.stop()` ends the actor (calls not done fail
    with ActorLost). Usable from several threads: calls run in the order
    their futures were made."""

    _stopped = True                 # until started
    _name = "?"
    _tid = 0
    _restarts = 0
    _where = 0                      # its governor (_governor), asked at _where_at
    _where_at = float("-inf")

    def __init__(self, client: Client, cls: type, args: tuple, kwargs: dict):
        if isinstance(cls, ActorClass):
            kwargs = dict(cls._options, **kwargs)
            cls = cls.cls
        if not isinstance(cls, type):
            raise TypeError("an actor is made from a class, not %r" % (cls,))
        options = {k: kwargs.pop(k) for k in ACTOR_OPTIONS if k in kwargs}
        restarts = int(options.pop("max_restarts", 0) or 0)
        if restarts < 0:
            raise ValueError("max_restarts must be >= 0")
        if restarts:
            options["max_retries"] = restarts
        self._client = client
        self._restarts = restarts
        self._cls = cls
        self._name = options.pop("key", None) or cls.__name__
        self._stopped = False
        #   Per method: the last call of it made from plain values, and
        #   its config's head (_call_plain)
        self._models = {}
        with client._lock:
            session = client._futures_session()
            session._submit_calls()
            self._tid = session._actor_task(cls, args, kwargs, options, self._name)
            self._session = session
            #   Counted as a live future: the futures' session (whose close
            #   would stop the actor) stays while the handle does.
            client._live_futures += 1
            session.submit()

    @property
    def id(self) -> int:
        """The id of the actor's task in its session."""
        return self._tid

    def __getattr__(self, name: str) -> "_Method":
        if name.startswith("_"):
            raise AttributeError(name)
        attribute = getattr(self._cls, name, None)
        if attribute is None or not callable(attribute):
            raise AttributeError("actor %s has no method %r" % (self._cls.__name__, name))
        return _Method(self, name)

    def _call(self, method: str, args: tuple, kwargs: dict) -> Future:
        client = self._client
        with client._lock:
            if self._stopped:
                raise SquallError("actor %s (%d) was stopped" % (self._name, self._tid))
            session = self._session
            if session.closed:
                raise SquallError("actor %s (%d): its client was closed" % (self._name, self._tid))
            #   partial, not a lambda: one Python frame less per call.
            if not kwargs and _plain(args):
                add = partial(self._call_plain, session, method, args)
                model = self._models.get(method)
                tid = None
                if model is not None and model[0] >= session._batch_first:
                    #   A call in a loop: _call_plain's copy, without its
                    #   frame nor _recorded_call's (which _call_like needs
                    #   not: it adds nothing when it raises).
                    tid = session._call_like(model[0], model[1], args)
                if tid is not None:
                    future = Future(session, tid)
                    session._calls.append((tid, tid + 2, future, add))
                else:
                    future = session._recorded_call(add)
            else:
                future = session._recorded_call(partial(self._call_tid, session, method, args,
                                                        kwargs))
            client._buffered_one(session)
        return future

    def _call_plain(self, session, method: str, args: tuple) -> int:
        """A call taking plain values only: made like the last one of the
        method if that is in the unsubmitted batch (Session._call_like),
        which a call in a loop is but for the first of each batch."""
        model = self._models.get(method)
        if model is not None and model[0] >= session._batch_first:
            tid = session._call_like(model[0], model[1], args)
            if tid is not None:
                return tid
        tid = self._call_tid(session, method, args, None)
        if model is None:
            model = self._models[method] = [tid, py_config_call_head(self._tid, method)]
        model[0] = tid
        return tid

    def _call_tid(self, session, method: str, args: tuple, kwargs: dict) -> int:
        tid = session._call_task(self._tid, method, args, kwargs, "%s.%s" % (self._name, method),
                                 None if self._restarts else self._governor)
        L.sq_keep(session._h, tid + 1)
        return tid

    def _governor(self) -> int:
        """The governor running the actor as the broker said at most a
        second ago (0: not known, not running yet): large arguments are put
        there. Only a preference: a call reads them wherever they are."""
        now = time.monotonic()
        if now - self._where_at < 1.0:
            return self._where
        self._where_at = now
        self._where = 0
        out = ctypes.POINTER(L.TaskRecord)()
        n = ctypes.c_size_t()
        total = ctypes.c_uint64()
        #   Its running tasks: the actor and at most a few of its calls.
        if L.sq_client_tasks is None or L.sq_client_tasks(
                self._client._h, self._session.id, _RUNNING, 0, 0, ctypes.byref(out),
                ctypes.byref(n), ctypes.byref(total)):
            return 0
        try:
            for i in range(n.value):
                if out[i].id == self._tid:
                    self._where = int(out[i].governor)
        finally:
            if out:
                L.sq_free(ctypes.cast(out, ctypes.c_void_p))
        return self._where

    def stop(self) -> None:
        """Ends the actor now: its instance goes, its resources are free,
        calls not done fail with ActorLost."""
        with self._client._lock:
            if self._stopped:
                return
            self._stopped = True
            self._client._live_futures -= 1
            if not self._session.closed:
                self._session._stop_actor(self._tid)

    def __del__(self) -> None:
        try:
            if not self._stopped:
                self._stopped = True
                #   No lock here (any thread): the client's next call stops it.
                self._client._dead.append((self._session, -self._tid))
        except Exception:
            pass

    def __repr__(self) -> str:
        return "<squall.Actor %s %d%s>" % (self._name, self._tid,
                                           " stopped" if self._stopped else "")


class _Method:
    __slots__ = ("_handle", "_name")

    def __init__(self, handle: ActorHandle, name: str):
        self._handle = handle
        self._name = name

    def __call__(self, *args, **kwargs) -> Future:
        return self._handle._call(self._name, args, kwargs)

    def __repr__(self) -> str:
        return "<squall actor method %s.%s>" % (self._handle._name, self._name)


class ActorClass:
    """What @squall.actor makes of a class: `Cls.start(client, *args,
    **kwargs)` starts an actor (options as for Client.actor), `Cls.options(
    cpus=2, max_restarts=1).start(...)` with other options; the class itself
    is `Cls.cls`."""

    def __init__(self, cls: type, **options):
        self.cls = cls
        self._options = options
        self.__doc__ = cls.__doc__
        self.__name__ = cls.__name__

    def start(self, client: Client, *args, **kwargs) -> ActorHandle:
        merged = dict(self._options)
        merged.update(kwargs)
        return ActorHandle(client, self.cls, args, merged)

    def options(self, **options) -> "ActorClass":
        merged = dict(self._options)
        merged.update(options)
        return ActorClass(self.cls, **merged)

    def __call__(self, *args, **kwargs) -> Any:
        """A local instance (for tests), as the class would make."""
        return self.cls(*args, **kwargs)


def actor(cls: Optional[type] = None, **options):
    """Class decorator: @squall.actor or @squall.actor(cpus=2, max_restarts=1)."""
    if cls is None:
        return lambda c: ActorClass(c, **options)
    return ActorClass(cls, **options)

