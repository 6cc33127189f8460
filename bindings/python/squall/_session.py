"""Sessions: a graph built, submitted and waited on (Session).

Over 800 lines for one class: building, submitting (with refused batches
rolled back) and waiting share the session's handle, its pending batch and
its client's lock; split apart, each part would reach into the others'."""
from __future__ import annotations

import ctypes
import itertools
import pickle
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence

from . import _lib as L
from ._pickling import (_PROTOCOL as _PICKLE_PROTOCOL, PICKLE, PY_FUNCTION, TemplatePickler, dumps,
                        dumps_value, function_bytes, py_config_actor, py_config_call, py_config_fn_in)
from ._progress import Progress
from .errors import SquallError, TaskCancelled, TaskFailed
from ._common import (TaskConfigTooLarge, _LOG_OPTIONS, _SLICE_MS, _TASK_STATES, _check_options,
                      _job_dict, _jobs_call, _locked, _ms, _session_stack, _state,
                      _with_log_options)
from ._futures import Future
from ._objects import DataObject, Task

if TYPE_CHECKING:
    from ._client import Client


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
_NUMBER_TYPES = frozenset((int, float, bool, type(None)))    # _large_as_data leaves them


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
        #   Never waits for the client's lock: see _FairLock.defer.
        lock = self.__dict__.get("_lock")
        if lock is None:
            return
        if lock.try_acquire():
            try:
                self._end()
            finally:
                lock.release()
        else:
            lock.defer(self._end)

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
        return self.blob(dumps_value(obj), PICKLE, governor)

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
            files = self._files = (client._uploads_version, self.pickled(
                _uploads.Files(list(client._uploads))))
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
                   name: str, where: Optional[Callable[[], int]] = None) -> int:
        """Adds a call of the actor's method; its one output is the result.
        With where, arguments of 1 MiB or more go as data objects (pickled
        with their buffers out of band), put by the client straight on the
        governor where() names (the actor's, 0: not known) instead of
        riding in the call's config through the broker: that governor
        hands them to the actor's executor as shared segments. Without
        (an actor that restarts), they ride in the config: a constant put
        on a governor has no other copy, and a call waiting for the
        restarted instance elsewhere would lose it with that governor."""
        first = self._next_id
        moved = None
        numbers = not kwargs and all(type(a) in _NUMBER_TYPES for a in args)
        if where is not None and not numbers:
            args, kwargs, moved = self._large_as_data(tuple(args), kwargs, False)
        if moved:
            governor = where()
            if governor:
                for oid in range(first, self._next_id):
                    self._check(L.sq_object_prefer_governor(self._h, oid, governor))
        if not kwargs and all(type(a) in _PLAIN_TYPES for a in args):
            #   Numbers, strings, small bytes: nothing to look for in them
            #   (the template's pickler, made per call, costs more than the
            #   pickle), and the same pickle as the template's.
            template, inputs = pickle.dumps((args, {}), _PICKLE_PROTOCOL), []
        else:
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
                    data = dumps_value(v)
                except Exception:       # holds a future or the like: stays in the config
                    return v
                if len(data) < _LARGE_ARG:
                    return v
                moved.append(len(data))
                return self.blob(data, PICKLE)
            if _cheap_size(v) < _LARGE_ARG:
                return v
            data = dumps_value(v)
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
