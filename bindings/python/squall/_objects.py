"""A graph's data objects and tasks (DataObject, Task, PyTask), constants
(blob, pickled) and @remote functions."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence

from . import _lib as L
from ._futures import unpickling
from ._pickling import PICKLE, loads_result
from .errors import SquallError
from ._common import TASK_OPTIONS, current_session

if TYPE_CHECKING:
    from ._session import Session


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
            with unpickling(self.session):
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
