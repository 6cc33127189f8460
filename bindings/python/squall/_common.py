"""What the client, its sessions, objects and futures share: task options and
their checks, the client's fair lock, jobs' states, the session stack."""
from __future__ import annotations

import collections
import functools
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from . import _lib as L
from ._msgmap import with_key
from .errors import SquallError

if TYPE_CHECKING:
    from ._session import Session


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


_local = threading.local()


class _FairLock:
    """A reentrant lock granted in the order threads asked for it. Python's
    RLock lets a thread that releases and at once re-acquires (a loop of
    slices, the flusher) starve the others; here each acquire takes a
    ticket and waits for its turn."""

    def __init__(self) -> None:
        #   Taken directly (a C-level with) where nothing waits or is
        #   notified: an actor call takes this lock and lets it go, and
        #   Condition's Python-level enter and exit were most of that.
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._owner: Optional[int] = None
        self._count = 0
        self._next = 0              # the next ticket to hand out
        self._serving = 0           # the ticket whose turn it is
        self._waiting = 0           # threads in acquire's wait: only they need a notify
        self._abandoned: set = set()  # tickets of waits interrupted (KeyboardInterrupt)
        #   Work of finalisers that could not take the lock (defer)
        self._deferred: collections.deque = collections.deque()

    def _advance(self) -> None:
        self._serving += 1
        while self._serving in self._abandoned:
            self._abandoned.discard(self._serving)
            self._serving += 1
        if self._waiting:
            self._cond.notify_all()

    def acquire(self) -> bool:
        me = threading.get_ident()
        if self._owner == me:           # only this thread can change that
            self._count += 1
            return True
        with self._mutex:
            if self._owner == me:
                self._count += 1
                return True
            if self._owner is None and self._serving == self._next:
                #   Free, nobody waiting (try_acquire): no ticket to wait for
                #   (an actor call's every acquire).
                self._next += 1
                self._owner = me
                self._count = 1
                return True
            ticket = self._next
            self._next += 1
            self._waiting += 1
            try:
                while self._owner is not None or self._serving != ticket:
                    self._cond.wait()
            except BaseException:
                if self._serving == ticket:
                    self._advance()
                else:
                    self._abandoned.add(ticket)
                raise
            finally:
                self._waiting -= 1
            self._owner = me
            self._count = 1
            return True

    def try_acquire(self) -> bool:
        """acquire() if that would not wait: the lock is this thread's, or
        free with nobody waiting for it."""
        me = threading.get_ident()
        if self._owner == me:
            self._count += 1
            return True
        with self._mutex:
            if self._owner is not None or self._serving != self._next:
                return False
            self._next += 1
            self._owner = me
            self._count = 1
            return True

    def defer(self, fn: Callable[[], Any]) -> None:
        """fn runs holding the lock, in whichever thread next lets it go: a
        finaliser's work. The garbage collector runs finalisers in any
        thread, maybe one the lock's holder waits for (Thread.start waits
        for the new thread, which may collect garbage first): a finaliser
        that waited for the lock would never return."""
        self._deferred.append(fn)

    def run(self, fn: Callable[[], Any], wait: bool = True) -> None:
        """fn holding the lock; without wait (a finaliser), now if that
        would not wait, else as the lock is let go (defer)."""
        if wait:
            self.acquire()
        elif not self.try_acquire():
            self.defer(fn)
            return
        try:
            fn()
        finally:
            self.release()

    def release(self, *_exc) -> None:
        me = threading.get_ident()
        if self._count > 1 and self._owner == me:
            self._count -= 1
            return
        while self._deferred and self._owner == me:
            try:
                self._deferred.popleft()()
            except Exception:
                pass
        with self._mutex:
            if self._owner != me:
                raise RuntimeError("squall: releasing a client lock this thread does not hold")
            self._count -= 1
            if self._count == 0:
                self._owner = None
                if self._waiting or self._abandoned:
                    self._advance()
                else:
                    self._serving += 1  # _advance with nobody to wake or skip

    def held(self) -> bool:
        return self._owner == threading.get_ident()

    #   acquire itself: one Python call less per `with` (an actor call's).
    __enter__ = acquire

    #   release itself (it takes and ignores exc): as __enter__.
    __exit__ = release

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
        try:
            config = with_key(config, name.encode(), packed)
        except ValueError:
            raise SquallError("log options need a task configured by a map") from None
    return config

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
