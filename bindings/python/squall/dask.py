"""Running Dask graphs on squall: `client.get` is a Dask scheduler.

    dask.compute(x, scheduler=client.get)
    with dask.config.set(scheduler=client.get): x.compute()

Every graph node becomes a squall "py" task named after its Dask key (so
failures and the dashboard show the key); literal nodes become constants;
aliases point at their target's output. Dask is imported only here and only
when present (with it, graphs are normalised by dask._task_spec; without
it, legacy dict graphs of tuples are understood directly).
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, List, Tuple

from . import _daskrun
from ._core import Client, DataObject, Session
from .errors import SquallError

try:
    import cloudpickle as _cloudpickle
    _cloudpickle.register_pickle_by_value(_daskrun)
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


def _order(graph: Dict[Hashable, Any], deps: Dict[Hashable, List[Hashable]],
           wanted: List[Hashable]) -> List[Hashable]:
    """Keys needed for `wanted`, dependencies first (iterative DFS)."""
    order: List[Hashable] = []
    state: Dict[Hashable, int] = {}        # 1 visiting, 2 done
    for root in wanted:
        if root not in graph:
            raise KeyError("key %r is not in the graph" % (root,))
        stack = [(root, False)]
        while stack:
            key, expanded = stack.pop()
            if expanded:
                state[key] = 2
                order.append(key)
                continue
            if state.get(key):
                if state[key] == 1:
                    continue
                continue
            state[key] = 1
            stack.append((key, True))
            for d in deps[key]:
                if d not in graph:
                    raise KeyError("key %r depends on %r, which is not in the graph" % (key, d))
                if not state.get(d):
                    stack.append((d, False))
    return order


def _build(session: Session, graph: Dict[Hashable, Any], spec: bool,
           wanted: List[Hashable], options: dict) -> Dict[Hashable, DataObject]:
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
    objects: Dict[Hashable, DataObject] = {}
    for key in _order(graph, deps, wanted):
        node = graph[key]
        name = str(key)
        if spec and isinstance(node, Alias):
            objects[key] = objects[node.target]
            continue
        if spec and isinstance(node, DataNode):
            objects[key] = session.pickled(node.value)
            continue
        if not spec and not deps[key] and not (type(node) is tuple and node
                                               and callable(node[0])) \
                and type(node) is not list:
            objects[key] = session.pickled(node)
            continue
        inputs = [objects[d] for d in deps[key]]
        fn = _daskrun.run if spec else _daskrun.run_legacy
        tid = session._py_task(fn, (node, list(deps[key])) + tuple(inputs), None, 1,
                               options, name)
        objects[key] = DataObject(session, tid + 1, "py/pickle")
    return objects


def get(client: Client, dsk: Any, keys: Any, timeout: float = None, **kwargs) -> Any:
    """Runs the graph and returns the values of `keys` (a key, or nested
    lists of keys, as in dask.get). Other keyword arguments from Dask are
    accepted and ignored; task options (cpus=, max_retries=, resources=)
    apply to every task."""
    options = {k: kwargs[k] for k in ("cpus", "max_retries", "resources", "priority")
               if k in kwargs}
    graph, spec = _nodes(dsk)
    wanted: List[Hashable] = []
    _flatten(keys, wanted)
    with client.session() as session:
        objects = _build(session, graph, spec, wanted, options)
        kept = set()
        for k in wanted:
            oid = objects[k].id
            if oid not in kept:
                objects[k].keep()
                kept.add(oid)
        session.submit()
        values = {}
        for k in wanted:
            if k not in values:
                values[k] = objects[k].fetch(timeout)
        return _rebuild(keys, values)
