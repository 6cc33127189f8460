"""Building a session's graph (Session's part, see _session.py): constants,
tasks, Python tasks with their argument templates and large arguments sent
as data, actors and their calls, client.map in bulk, and moving results by
hand (DELETE, PLACE)."""
from __future__ import annotations

import ctypes
import itertools
import pickle
import time
from typing import Any, Callable, Iterable, List, Optional, Sequence

from . import _lib as L, _uploads
from ._pickling import (_PROTOCOL as _PICKLE_PROTOCOL, PICKLE, PY_FUNCTION, dumps, dumps_value,
                        dumps_value_parts, function_bytes, _bin, py_config_actor, py_config_call,
                        py_config_fn_in)
from .errors import SquallError
from ._common import TaskConfigTooLarge, _LOG_OPTIONS, _check_options, _locked, _with_log_options
from ._futures import Future
from ._msgmap import with_key
from ._objects import DataObject, Task


#   One task's config at most (common/proto.h SQ_MAX_CONFIG): a bigger one
#   is refused with a clear message before anything is sent.
_CONFIG_MAX = 16 << 20
#   Argument types pickled as they are, never references: client.map adds
#   calls taking only these in bulk (Session._map_futures).
_PLAIN_TYPES = frozenset((int, float, str, bytes, bool, type(None)))
_NUMBER_TYPES = frozenset((int, float, bool, type(None)))    # _large_as_data leaves them
#   msgpack's bin 8 heads (_bin of fewer than 256 bytes): a call's arguments
_BIN8 = [b"\xc4" + bytes((n,)) for n in range(256)]


class Building:
    """Session's graph building: it adds to the pending batch (lock held),
    which Submitting sends."""

    #   Calls _call_like added that the library has not yet (lock held):
    #   (model, first id, [config of each], their name), or None
    _likes = None
    #   Whether _next_id is the library's next id (false after a failed
    #   _flush_likes, until the library gives one again)
    _likes_sure = True

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
        return self._constant(L.sq_blob(self._h, data, len(data), content_type.encode()),
                              content_type, governor)

    def _constant(self, oid: int, content_type: str, governor: Optional[int]) -> "DataObject":
        """The constant sq_blob or sq_blob_gather added (0: refused)."""
        if not oid:
            self._check(L.sq_client_errcode(self.client._h) or 4)
        self._next_id = oid + 1
        if governor is not None:
            self._check(L.sq_object_set_governor(self._h, oid, int(governor)))
        self._dirty = True
        return DataObject(self, oid, content_type)

    def pickled(self, obj: Any, governor: Optional[int] = None) -> "DataObject":
        return self._blob_parts(dumps_value_parts(obj), PICKLE, governor)

    def _blob_parts(self, parts: List[Any], content_type: str,
                    governor: Optional[int] = None) -> "DataObject":
        """blob() of the parts joined, copied once (sq_blob_gather): a big
        value pickled out of band is not joined in Python first."""
        if len(parts) == 1:
            return self.blob(parts[0], content_type, governor)
        return self._blob_gather(parts, content_type, governor)

    @_locked
    def _blob_gather(self, parts: List[Any], content_type: str,
                     governor: Optional[int]) -> "DataObject":
        self._open()
        return self._constant(L.blob_gather(self._h, parts, content_type.encode()),
                              content_type, governor)

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
        self._likes_sure = True
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
                 options: dict, name: Optional[str], stream: bool = False,
                 share_inputs: bool = False) -> int:
        """Adds a "py" task calling fn(*args, **kwargs); returns its id.
        stream: its one output is a stream (bytes chunks the function
        yields). share_inputs: fn changes none of its inputs (a Dask
        node), so its executor may hand it values it keeps from earlier
        tasks rather than a copy of each (docs/protocol.md, the "py"
        kind's `share_inputs`)."""
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
        if share_inputs:
            config = with_key(config, b"share_inputs", b"\xc3")
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

    def _call_like(self, model: int, head: bytes, args: tuple) -> Optional[int]:
        """Adds a call like model, with args (plain values, not large): model
        is a call of the same method of the same actor in this unsubmitted
        batch, which _call_task made from plain values (so no inputs), and
        head its config up to the arguments (py_config_call_head). The
        library copies its name, settings and kept output (sq_tasks_like),
        but not now: the call's id is the library's next (the library gives
        ids in order, a task and its one output), and its config waits in
        _likes until the library handle is next used (_flush_likes), so that
        a loop of calls costs one C call per batch, not one per call. None
        (nothing added) when the config would be too large: _call_task says
        why."""
        data = pickle.dumps((args, {}), _PICKLE_PROTOCOL)
        n = len(data)
        config = head + (_BIN8[n] + data if n < 256 else _bin(data))
        if len(config) > _CONFIG_MAX:
            return None
        likes = self._likes
        if not self._likes_sure:
            return None
        if likes is None or likes[0] != model:
            if likes is not None:
                self._flush_likes()
            likes = self._likes = (model, self._next_id, [], self._names.get(model))
        likes[2].append(config)
        tid = self._next_id
        self._next_id = tid + 2
        if likes[3]:
            self._names[tid] = likes[3]
        self._outputs[tid + 1] = tid
        self._task_ids.append(tid)
        self._n_tasks += 1
        self._dirty = True
        return tid

    def _flush_likes(self) -> None:
        """Adds the calls _call_like deferred, in one sq_tasks_like (lock
        held): before anything else reaches the library (Session._h), so
        they keep their place and the ids they were given. The library
        refuses them only when out of memory or ids, having added some of
        them or none (it does not say; so did one call at a time): then the
        calls fail, each alone, their futures naming no id, and whatever
        used the library goes on. Deferring waits until the library gives
        an id again (_add_task): _next_id may not be its next one."""
        likes, self._likes = self._likes, None
        if likes is None:
            return
        model, expected, configs, _ = likes
        n = len(configs)
        ends = (ctypes.c_size_t * n)(*itertools.accumulate(map(len, configs)))
        first = ctypes.c_uint32(0)
        rc = L.sq_tasks_like(self._hv, model, n, b"".join(configs), ends, ctypes.byref(first))
        if not rc and first.value == expected:
            return
        exc = self.client._error(rc, self) if rc else SquallError(
            "internal: the library gave deferred calls ids from %d, not %d"
            % (first.value, expected))
        self._likes_sure = False
        end = expected + 2 * n
        self._task_ids[:] = [t for t in self._task_ids if not expected <= t < end]
        self._n_tasks = len(self._task_ids)
        for tid in range(expected, end, 2):
            self._names.pop(tid, None)
            self._outputs.pop(tid + 1, None)
        kept = []
        for call in self._calls:
            if expected <= call[0] < end and call[2] is not None:
                future = call[2]
                future._tid = future._oid = 0
                future._set_exc(exc)
            else:
                kept.append(call)
        self._calls[:] = kept

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
                    parts = dumps_value_parts(v)
                except Exception:       # holds a future or the like: stays in the config
                    return v
                size = sum(memoryview(p).nbytes for p in parts)
                if size < _LARGE_ARG:
                    return v
                moved.append(size)
                return self._blob_parts(parts, PICKLE)
            if _cheap_size(v) < _LARGE_ARG:
                return v
            parts = dumps_value_parts(v)
            moved.append(sum(memoryview(p).nbytes for p in parts))
            return self._blob_parts(parts, PICKLE)
        new_args = tuple(one(a) for a in args)
        new_kwargs = {k: one(v) for k, v in kwargs.items()} if kwargs else kwargs
        return new_args, new_kwargs, moved


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
