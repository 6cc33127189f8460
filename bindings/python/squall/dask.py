"""Running Dask graphs on squall: `client.get` is a Dask scheduler.

    dask.compute(x, scheduler=client.get)
    with dask.config.set(scheduler=client.get): x.compute()

Every graph node becomes a squall "py" task named after its Dask key (so
failures and the dashboard show the key); literal nodes become constants;
aliases point at their target's output. Linear chains (a node whose only
dependency is a node nothing else needs and nobody asked for) are fused into
one task, so their intermediate values stay Python objects in one executor
and are never pickled (so are a node read by several tasks and by nothing
else and all its readers: a bundle, _daskbundle): only values that move between tasks or come back to
the client must pickle, and one that cannot fails with a TypeError saying
so. A node too large for a task's config (it embeds data) travels as a data
object instead. Dask is imported only here and only
when present (with it, graphs are normalised by dask._task_spec; without
it, legacy dict graphs of tuples are understood directly).

`client.compute(collections)` and `client.persist(collections)` are Dask
distributed's: futures of the collections' results, or collections whose
graphs hold futures of their parts (a later computation reads those parts
where they are, on the cluster). `dask.annotate(resources=, retries=,
priority=, workers=, allow_other_workers=)` maps to squall's task options
(`workers=`: governor names or ids the task may run on, or prefers with
`allow_other_workers=True`); an annotation squall cannot honour
(`fifo_timeout=`, `actors=`) is warned about once per computation, never
dropped silently.
"""
from __future__ import annotations

import sys
import time
import warnings
from typing import TYPE_CHECKING, Any, Dict, Hashable, List, Optional, Tuple

from . import _daskbundle, _daskrun, _daskrun_legacy
from ._daskfuse import _FAN_IN_MAX, _group_members, _groups, _order  # noqa: F401 - tests reach them here
from . import _lib as L
from ._common import TaskConfigTooLarge
from . import _futures
from ._futures import Future
from ._objects import DataObject
from ._session import Session
from ._pickling import PICKLE, dumps, dumps_value_parts
from ._progress import Progress
from .errors import SquallError, TimeoutError as SqTimeoutError

if TYPE_CHECKING:
    from ._client import Client

try:
    import cloudpickle as _cloudpickle
    _cloudpickle.register_pickle_by_value(_daskrun)
    _cloudpickle.register_pickle_by_value(_daskrun_legacy)
except (ImportError, ValueError):  # pragma: no cover
    pass


def _flatten(keys: Any, out: List[Hashable]) -> None:
    if isinstance(keys, list):
        for k in keys:
            _flatten(k, out)
    else:
        out.append(keys)


def _rebuild(keys: Any, values: Dict[Hashable, Any]) -> Any:
    if isinstance(keys, list):
        return tuple(_rebuild(k, values) for k in keys)
    return values[keys]


def _nodes(dsk: Any) -> Tuple[Dict[Hashable, Any], bool]:
    """The graph as {key: node} and whether nodes are dask._task_spec ones."""
    from collections.abc import Mapping
    try:
        from dask._task_spec import convert_legacy_graph
    except ImportError:
        convert_legacy_graph = None
    if not isinstance(dsk, Mapping):
        if hasattr(dsk, "__dask_graph__"):
            dsk = dsk.__dask_graph__()
        else:
            raise TypeError("client.get needs a Dask graph (a dict of key -> task)")
    if convert_legacy_graph is not None:
        return dict(convert_legacy_graph(dsk)), True
    return dict(dsk), False


#   dask.annotate's names squall maps to a task option, and how.
_ANNOTATION_OPTIONS = {"resources": "resources", "retries": "max_retries",
                       "priority": "priority", "workers": "workers",
                       "allow_other_workers": "allow_other_workers"}
#   Names Dask distributed reads that squall has no equivalent for (warned
#   about); any other name is an annotation of the user's own, which Dask
#   distributed ignores too, and so does squall.
_UNSUPPORTED = {
    "fifo_timeout": "squall orders tasks by priority, then submission",
    "actors": "use client.actor for actors",
}


def _annotations(dsk: Any) -> Dict[str, Dict[Hashable, Any]]:
    """{name: {key: value}} from the graph (an expression's or a high-level
    graph's layers, made inside `with dask.annotate(...)`) and from the
    annotations in force at this call, which apply to every key."""
    out: Dict[str, Dict[Hashable, Any]] = {}
    getter = getattr(dsk, "__dask_annotations__", None)
    if callable(getter):
        for name, per_key in (getter() or {}).items():
            out[name] = dict(per_key)
    layers = getattr(dsk, "layers", None)
    if not out and isinstance(layers, dict):
        for layer in layers.values():
            ann = getattr(layer, "annotations", None) or {}
            for name, value in ann.items():
                per_key = out.setdefault(name, {})
                for key in layer.keys():
                    per_key[key] = value
    try:
        import dask
        current = dask.get_annotations()
    except (ImportError, AttributeError):
        current = {}
    for name, value in (current or {}).items():
        out.setdefault(name, {})["__all__"] = value
    return out


class _Options:
    """Each key's task options: the call's, with the key's annotations."""

    def __init__(self, base: dict, annotations: Dict[str, Dict[Hashable, Any]]):
        self.base = base
        self.mapped = {n: v for n, v in annotations.items() if n in _ANNOTATION_OPTIONS}
        ignored = sorted(n for n in annotations if n in _UNSUPPORTED)
        for name in ignored:
            #   Once per computation, however many keys carry it.
            warnings.warn("dask.annotate(%s=...) is not honoured by squall: %s"
                          % (name, _UNSUPPORTED[name]), UserWarning, stacklevel=4)
        self._cache: Dict[Hashable, dict] = {}

    def of(self, key: Hashable) -> dict:
        if not self.mapped:
            return self.base
        options = dict(self.base)
        for name, per_key in self.mapped.items():
            value = per_key.get(key, per_key.get("__all__"))
            if value is None:
                continue
            if callable(value):
                value = value(key)
            option = _ANNOTATION_OPTIONS[name]
            if option == "resources":
                merged = dict(options.get("resources") or {})
                merged.update(value)
                value = merged
            elif option == "priority":
                value = int(value)
            options[option] = value
        return options

    def same(self, a: Hashable, b: Hashable) -> bool:
        return not self.mapped or self.of(a) == self.of(b)


def _future_value(node: Any, spec: bool) -> Optional[Future]:
    """The squall Future a graph node stands for (a persisted collection's
    part), else None."""
    value = getattr(node, "value", None) if spec else node
    return value if isinstance(value, Future) else None


def _legacy_deps(x: Any, graph: Dict[Hashable, Any], out: List[Hashable]) -> None:
    if type(x) is tuple and x and callable(x[0]):
        for a in x[1:]:
            _legacy_deps(a, graph, out)
    elif type(x) is list:
        for a in x:
            _legacy_deps(a, graph, out)
    else:
        try:
            if x in graph and x not in out:
                out.append(x)
        except TypeError:
            pass


#   Dask's tasks do not change their inputs (its threaded scheduler hands
#   every reader the same object), so their executors may keep an input
#   unpickled and hand it to the next task reading it, not a copy
#   (docs/architecture.md, "Input cache"). False: a copy each, for a graph
#   whose functions change their arguments in place.
SHARE_INPUTS = True
#   Bundles (_daskbundle): tasks sharing an input made for them alone run
#   as one task. False: each stays a task, the shared input one of its own.
BUNDLES = True


def _build(session: Session, graph: Dict[Hashable, Any], spec: bool,
           wanted: List[Hashable], options: Any,
           packed: bool = False, fan_in: Any = 0, early: int = 0,
           held: Optional[List[int]] = None) -> Dict[Hashable, DataObject]:
    """Adds the graph's tasks for `wanted` to the session; {key: its data
    object}. options: a dict for every task, or an _Options. packed: the
    graph holds no futures, so each task's head is pickled as it is (one C
    pickle, see _daskrun) rather than searched for them. fan_in: fuse
    reductions' branches when that makes at least this many tasks of
    them (0: never; or a function giving it: see _groups). early, held:
    once `early` tasks are added, they are submitted, so that the cluster
    starts on them while the rest are made; every object made so far is
    kept first (an object nobody keeps is released once the readers
    submitted with it are done, and later tasks read it too), and its id
    put in `held` for the caller to let go once all is submitted."""
    if isinstance(options, dict):
        options = _Options(options, {})
    built = uploaded = 0        # tasks added; bytes of the graph's data made

    def added() -> None:
        nonlocal built
        built += 1
        if held is not None and (built == early or built < early and built in _EARLY_STEPS
                                 and uploaded >= _EARLY_BYTES):
            ids = sorted({o.id for o in objects.values()} - set(held))
            with session._lock:
                for oid in ids:
                    session._check(_keep(session, oid))
            held.extend(ids)
            session.submit()
    share = SHARE_INPUTS
    if spec:
        from dask._task_spec import Alias, DataNode
        deps = {k: sorted(n.dependencies, key=repr) for k, n in graph.items()}
    else:
        deps = {}
        for k, expr in graph.items():
            found: List[Hashable] = []
            _legacy_deps(expr, graph, found)
            if found == [k] and expr == k:
                found = []
            deps[k] = found
    order = _order(graph, deps, wanted)
    wanted_set = set(wanted)

    def is_data(key: Hashable) -> bool:
        node = graph[key]
        if spec:
            return isinstance(node, (Alias, DataNode))
        return not deps[key] and not (type(node) is tuple and node and callable(node[0])) \
            and type(node) is not list

    if callable(fan_in):
        fan_in = _once(fan_in)
    bundle_of = {}
    if fan_in and BUNDLES and _daskbundle.any_candidate(order, deps, is_data, wanted_set):
        #   Bundles of linear chains first, then fan-ins of the rest: a
        #   bundle of a few blocks and their small outputs, not of whole
        #   reductions' partial steps (tasks of a few ms keep 2 cpus evenly
        #   busy; (x + x.T).mean()'s would be 8 blocks each).
        chains = _groups(order, deps, is_data, wanted_set, options, 0)[0]
        bundle_of = _daskbundle.bundles(order, deps, chains, wanted_set, options.same, fan_in)
    chain_of, fanned = _groups(order, deps, is_data, wanted_set, options, fan_in, bundle_of)
    if bundle_of:
        def unit_of(key: Hashable) -> Any:
            if key in bundle_of:
                return ("task", id(bundle_of[key]))
            if key in chain_of:
                return ("task", id(chain_of[key]))
            return ("data", key)
        order = _daskbundle.unit_order(order, deps, unit_of)

    runners: Any = _daskrun if spec else _daskrun_legacy
    objects: Dict[Hashable, DataObject] = {}
    for key in order:
        node = graph[key]
        if spec and isinstance(node, Alias):
            objects[key] = objects[node.target]
            continue
        if is_data(key):
            future = _future_value(node, spec)
            if future is not None:
                #   A part of a persisted collection: read where it is.
                if future._session is not session:
                    raise SquallError("%r is a future of another client or session" % (future,))
                objects[key] = DataObject(session, future._oid, "py/pickle")
            else:
                parts = dumps_value_parts(node.value if spec else node)
                size = sum(memoryview(p).nbytes for p in parts)
                #   Only what the client writes counts: a constant found in
                #   its cache costs a compare, nothing to overlap with the
                #   round trips of an early submit (the groupby's second
                #   compute: 3 ms more in get with them).
                hits = _cache_hits(session) if held is not None and _EARLY_STEPS \
                    and size >= _CACHED_MIN and uploaded < _EARLY_BYTES else None
                objects[key] = session._blob_parts(parts, PICKLE)
                if hits is None or _cache_hits(session) == hits:
                    uploaded += size
            continue
        if key in bundle_of:
            if bundle_of[key].members[-1] == key:
                _add_bundle(session, bundle_of[key], deps, graph, spec, objects,
                            options.of(key), packed, share)
                added()
            continue
        chain = chain_of[key]
        if chain[-1] != key:
            continue                    # built with its chain's last node
        first = chain[0]
        if id(chain) in fanned:
            members, outer = _group_members(chain, deps, graph)
            fn, head, reads = runners.run_group, (members, outer), outer
        elif len(chain) == 1:
            fn, head, reads = runners.run, (node, list(deps[key])), deps[key]
        else:
            members = [(k, graph[k]) for k in chain]
            fn, head, reads = runners.run_chain, (members, list(deps[first])), deps[first]
        inputs = tuple(objects[d] for d in reads)
        packed_head = None
        if packed:
            try:
                packed_head = dumps(head)
            except Exception:           # left to the template's pickling
                pass
        try:
            tid = session._py_task(fn, (head if packed_head is None else packed_head,) + inputs,
                                   None, 1, options.of(key), str(key), share_inputs=share)
        except TaskConfigTooLarge:
            #   The node embeds data: it travels as a data object (uploaded
            #   to a governor when large), an input of its task.
            head = (session.pickled(head[0]),) + head[1:]
            tid = session._py_task(fn, (head,) + inputs, None, 1, options.of(key), str(key),
                                   share_inputs=share)
        objects[key] = DataObject(session, tid + 1, "py/pickle")
        added()
    return objects


def _once(fn: Any) -> Any:
    """fn, called at most once (the cluster's cpus are asked once)."""
    got: List[Any] = []

    def once() -> Any:
        if not got:
            got.append(fn())
        return got[0]
    return once


def _add_bundle(session: Session, bundle: "_daskbundle.Bundle",
                deps: Dict[Hashable, List[Hashable]], graph: Dict[Hashable, Any], spec: bool,
                objects: Dict[Hashable, DataObject], options: dict, packed: bool,
                share: bool) -> None:
    """A bundle's task (_daskrun.run_bundle), one output for each of its
    outputs, named after the last."""
    members, outer = _daskbundle.bundle_members(bundle, deps, graph)
    fn = _daskrun.run_bundle if spec else _daskrun_legacy.run_bundle
    head: Any = (members, outer, bundle.outputs)
    inputs = tuple(objects[d] for d in outer)
    packed_head = None
    if packed:
        try:
            packed_head = dumps(head)
        except Exception:               # left to the template's pickling
            pass
    n = len(bundle.outputs)
    name = str(bundle.outputs[-1])
    try:
        tid = session._py_task(fn, (head if packed_head is None else packed_head,) + inputs,
                               None, n, options, name, share_inputs=share)
    except TaskConfigTooLarge:
        head = (session.pickled(members), outer, bundle.outputs)
        tid = session._py_task(fn, (head,) + inputs, None, n, options, name, share_inputs=share)
    for j, key in enumerate(bundle.outputs):
        objects[key] = DataObject(session, tid + 1 + j, "py/pickle")


_OPTION_NAMES = ("cpus", "max_retries", "resources", "priority", "timeout", "workers",
                 "allow_other_workers")


def _call_options(kwargs: dict) -> dict:
    options = {k: kwargs[k] for k in _OPTION_NAMES if kwargs.get(k) is not None}
    if kwargs.get("retries") is not None:           # Dask distributed's name
        options["max_retries"] = kwargs["retries"]
    return options


def _has_futures(graph: Dict[Hashable, Any], spec: bool) -> bool:
    """Whether a squall Future is anywhere in the graph: a persisted
    collection's part, as a node of its own or (once Dask's optimiser
    inlined it) an argument of a task."""
    try:
        from dask._task_spec import DataNode, Task
    except ImportError:
        DataNode = Task = ()

    stack = list(graph.values())
    while stack:
        x = stack.pop()
        if isinstance(x, Future):
            return True
        if isinstance(x, (str, bytes, int, float)) or x is None:
            continue
        if Task and isinstance(x, Task):
            stack.extend(x.args)
            stack.extend(x.kwargs.values())
        elif DataNode and isinstance(x, DataNode):
            stack.append(x.value)
        elif isinstance(x, (list, tuple, set, frozenset)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
    return False


def _wait_showing(session: Session, ids: List[int], timeout: Optional[float]) -> None:
    """Waits for the tasks with the client's progress bar (on a terminal,
    for a graph of 100 tasks or more), as for a session's wait_all."""
    if ids and session._progress_wanted(len(ids)):
        session.wait(ids, timeout)


#   How long a client's count of cpus serves later graphs (seconds): asking
#   the broker is a round trip before the graph's first task is sent (5 ms
#   of `mean`'s 135 on 2 loaded cores), and 4 a cpu is a rule of thumb.
_CPUS_KEPT_S = 2.0


def _enough_tasks(client: Client) -> int:
    """How many fused reduction steps keep the cluster's cpus busy: 4 a
    cpu (a fan-in fusion that makes fewer is not done)."""
    asked = getattr(client, "_dask_cpus", None)
    now = time.monotonic()
    if asked is not None and now - asked[0] < _CPUS_KEPT_S:
        return asked[1]
    try:
        cpus = sum(int(g.get("cpus") or 0) for g in client.governors())
    except (SquallError, TypeError, ValueError, AttributeError):
        cpus = 0
    enough = 4 * max(cpus, 1)
    if cpus:
        client._dask_cpus = (now, enough)
    return enough


#   client.get submits a graph's first tasks while it makes the others
#   (`mean`'s client spends ~10 ms making its 57 tasks, the cluster idle
#   till then): enough to keep a few cpus busy meanwhile.
_EARLY_TASKS = 8
#   ... and the 2nd and 4th once 8 MiB of data is made (a frame's partitions).
_EARLY_BYTES, _EARLY_STEPS = 8 << 20, (2, 4)
#   The smallest constant the client may find in its constant cache
#   (client/session.c, S_SEGMENT_MIN): smaller ones are always made.
_CACHED_MIN = 1 << 20


def _cache_hits(session: Session) -> int:
    """Constants the session's client found in its constant cache so far."""
    return session.client.constant_cache_stats()["hits"]


def get(client: Client, dsk: Any, keys: Any, timeout: float = None, **kwargs) -> Any:
    """Runs the graph and returns the values of `keys` (a key, or nested
    lists of keys, as in dask.get). Other keyword arguments from Dask are
    accepted and ignored; task options (cpus=, max_retries= or retries=,
    resources=, priority=) apply to every task, under the graph's own
    dask.annotate annotations. A graph that reads futures (a persisted
    collection's) runs in the client's futures' session, where they are."""
    options = _Options(_call_options(kwargs), _annotations(dsk))
    graph, spec = _nodes(dsk)
    wanted: List[Hashable] = []
    _flatten(keys, wanted)
    if _futures.made_any and _has_futures(graph, spec):
        futures = _to_futures(client, graph, spec, wanted, options)
        if futures:
            first = next(iter(futures.values()))
            _wait_showing(first._session, first._graph_tasks, timeout)
        values = {k: f.result(timeout) for k, f in futures.items()}
        return _rebuild(keys, values)
    with client.session() as session:
        held: List[int] = []
        objects = _build(session, graph, spec, wanted, options, packed=True,
                         fan_in=lambda: _enough_tasks(client), early=_EARLY_TASKS,
                         held=held)
        kept = set(held)
        for k in wanted:
            oid = objects[k].id
            if oid not in kept:
                objects[k].keep()
                kept.add(oid)
        session.submit()
        wanted_ids = {objects[k].id for k in wanted}
        release = [oid for oid in held if oid not in wanted_ids]
        if release:
            with session._lock:
                session._check(L.sq_unkeep_many(session._h, L.ids(release), len(release)))
        _wait_showing(session, list(session._task_ids), timeout)
        values = {}
        for k in wanted:
            if k not in values:
                values[k] = objects[k].fetch(timeout)
        return _rebuild(keys, values)


def _to_futures(client: Client, graph: Dict[Hashable, Any], spec: bool,
                wanted: List[Hashable], options: "_Options") -> Dict[Hashable, Future]:
    """Adds the graph to the client's futures' session; {wanted key: a
    Future of its value} (keys with one object share one Future)."""
    with client._lock:
        s = client._futures_session()
        s._submit_calls()
        first = len(s._task_ids)
        objects = _build(s, graph, spec, wanted, options)
        by_object: Dict[int, Future] = {}
        futures: Dict[Hashable, Future] = {}
        for k in wanted:
            oid = objects[k].id
            future = by_object.get(oid)
            if future is None:
                tid = s._outputs.get(oid)
                s._check(_keep(s, oid))
                future = Future(s, oid if tid is None else tid, oid=oid)
                by_object[oid] = future
            futures[k] = future
        s.submit()
        task_ids = list(s._task_ids[first:])
    #   progress() follows every task of the graph, not only the last.
    for f in by_object.values():
        f._graph_tasks = task_ids
    return futures


def _keep(s: Session, oid: int) -> int:
    return L.sq_keep(s._h, oid)


def _collections_expr(collections: List[Any], optimize_graph: bool, finalize: bool):
    from dask.base import collections_to_expr
    expr = collections_to_expr(collections, optimize_graph)
    if finalize:
        from dask._expr import FinalizeCompute
        expr = FinalizeCompute(expr)
    return expr.optimize()


def _task_options(kwargs: dict) -> dict:
    """Task options of compute / persist: squall's and Dask distributed's
    keywords (retries=, priority=, resources=, workers=,
    allow_other_workers=; actors= warned about)."""
    options = _call_options(kwargs)
    for name in ("actors",):
        if kwargs.get(name):
            warnings.warn("%s=... is not honoured by squall: %s" % (name, _UNSUPPORTED[name]),
                          UserWarning, stacklevel=4)
    return options


def compute(client: Client, collections: Any, sync: bool = False, optimize_graph: bool = True,
            traverse: bool = True, **kwargs) -> Any:
    """Dask distributed's Client.compute: a Future of each collection's
    result (the same structure as given: one, or a list); other values are
    returned as they are. sync=True: the results instead."""
    import dask
    from dask.base import is_dask_collection
    singleton = not isinstance(collections, (list, tuple, set, frozenset))
    items = [collections] if singleton else list(collections)
    if traverse:
        items = [dask.delayed(a) if isinstance(a, (list, set, tuple, dict)) else a
                 for a in items]
    variables = [a for a in items if is_dask_collection(a)]
    futures: List[Any] = []
    if variables:
        expr = _collections_expr(variables, optimize_graph, True)
        names = [k for k in _flat(expr.__dask_keys__())]
        options = _Options(_task_options(kwargs), _annotations(expr))
        graph, spec = _nodes(expr)
        by_key = _to_futures(client, graph, spec, names, options)
        it = iter(names)
        futures = [by_key[next(it)] if is_dask_collection(a) else a for a in items]
    else:
        futures = items
    if sync:
        futures = [f.result() if isinstance(f, Future) else f for f in futures]
    return futures[0] if singleton else futures


def persist(client: Client, collections: Any, optimize_graph: bool = True, **kwargs) -> Any:
    """Dask distributed's Client.persist: the collections again, their
    graphs now futures of their parts, computed (or being computed) on the
    cluster and kept there while the returned collections live. A later
    computation on them reads those parts where they are."""
    from dask.base import is_dask_collection
    singleton = not isinstance(collections, (list, tuple, set, frozenset))
    items = [collections] if singleton else list(collections)
    for a in items:
        if not is_dask_collection(a):
            raise TypeError("client.persist takes Dask collections, not %r" % (a,))
    expr = _collections_expr(items, optimize_graph, False)
    keys = expr.__dask_keys__()
    names = list(_flat(keys))
    options = _Options(_task_options(kwargs), _annotations(expr))
    graph, spec = _nodes(expr)
    futures = _to_futures(client, graph, spec, names, options)
    out = []
    for a, ks in zip(items, keys):
        rebuild, args = a.__dask_postpersist__()
        out.append(rebuild({k: futures[k] for k in _flat(ks)}, *args))
    return out[0] if singleton else out


def _flat(keys: Any):
    if isinstance(keys, list):
        for k in keys:
            yield from _flat(k)
    else:
        yield keys


def futures_of(x: Any) -> List[Future]:
    """The squall futures a collection (a persisted one's parts), a future
    or a list of them stand for (Dask distributed's futures_of)."""
    out: List[Future] = []
    seen = set()

    def add(f: Future) -> None:
        if id(f) not in seen:
            seen.add(id(f))
            out.append(f)

    def walk(v: Any) -> None:
        if isinstance(v, Future):
            add(v)
        elif isinstance(v, (list, tuple, set)):
            for e in v:
                walk(e)
        elif isinstance(v, dict):
            for e in v.values():
                walk(e)
        elif hasattr(v, "__dask_graph__"):
            graph, spec = _nodes(v)
            for node in graph.values():
                f = _future_value(node, spec)
                if f is not None:
                    add(f)
    walk(x)
    return out


def progress(*futures: Any, stream: Any = None, timeout: Optional[float] = None) -> None:
    """Shows a progress bar until the futures (or the parts of persisted
    collections, or futures from client.compute: every task of their graph)
    are done, as Dask distributed's progress. Prints to `stream` (stderr by
    default), a terminal or not: asked for, it shows in a notebook too."""
    fs = futures_of(list(futures))
    if not fs:
        return
    by_session: Dict[Session, List[int]] = {}
    for f in fs:
        ids = getattr(f, "_graph_tasks", None) or [f._tid]
        by_session.setdefault(f._session, []).extend(ids)
    total = sum(len(set(v)) for v in by_session.values())
    bar = Progress(total, "tasks", stream=stream, minimum=0)
    bar.enabled = True
    deadline = None if timeout is None else time.monotonic() + timeout
    with bar:
        while True:
            done = 0
            for s, ids in by_session.items():
                ids = sorted(set(ids))
                if s.closed:
                    done += len(ids)
                    continue
                s.submit()
                got, _ = s._wait_some_ids(ids, 0)
                done += len(got)
            bar.update(done)
            if done >= total:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise SqTimeoutError("%d of %d tasks done after %s s" % (done, total, timeout))
            #   Wait for any task of the first session not done yet: the
            #   bar moves when something finishes, not on a clock.
            for s, ids in by_session.items():
                if s.closed:
                    continue
                _, left = s._wait_some_ids(sorted(set(ids)), 0)
                if left:
                    s._wait_some_ids(left, 250)
                    break
