"""Running Dask graphs on squall: `client.get` is a Dask scheduler.

    dask.compute(x, scheduler=client.get)
    with dask.config.set(scheduler=client.get): x.compute()

Every graph node becomes a squall "py" task named after its Dask key (so
failures and the dashboard show the key); literal nodes become constants;
aliases point at their target's output. Linear chains (a node whose only
dependency is a node nothing else needs and nobody asked for) are fused into
one task, so their intermediate values stay Python objects in one executor
and are never pickled: only values that move between tasks or come back to
the client must pickle, and one that cannot fails with a TypeError saying
so. A node too large for a task's config (it embeds data) travels as a data
object instead. Dask is imported only here and only
when present (with it, graphs are normalised by dask._task_spec; without
it, legacy dict graphs of tuples are understood directly).
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, List, Tuple

from . import _daskrun
from ._core import Client, DataObject, Session, TaskConfigTooLarge
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
    order = _order(graph, deps, wanted)
    wanted_set = set(wanted)

    def is_data(key: Hashable) -> bool:
        node = graph[key]
        if spec:
            return isinstance(node, (Alias, DataNode))
        return not deps[key] and not (type(node) is tuple and node and callable(node[0])) \
            and type(node) is not list

    #   Fusion: a node joins the chain of its only dependency when that
    #   one is a computed node, read by nothing else and not wanted.
    dependents: Dict[Hashable, int] = {}
    for key in order:
        for d in deps[key]:
            dependents[d] = dependents.get(d, 0) + 1
    chain_of: Dict[Hashable, List[Hashable]] = {}     # key -> its chain (shared list)
    chains: List[List[Hashable]] = []
    for key in order:
        if is_data(key):
            continue
        ds = deps[key]
        if len(ds) == 1 and ds[0] in chain_of and dependents.get(ds[0]) == 1 \
                and ds[0] not in wanted_set and chain_of[ds[0]][-1] == ds[0]:
            chain = chain_of[ds[0]]
            chain.append(key)
        else:
            chain = [key]
            chains.append(chain)
        chain_of[key] = chain

    objects: Dict[Hashable, DataObject] = {}
    for key in order:
        node = graph[key]
        if spec and isinstance(node, Alias):
            objects[key] = objects[node.target]
            continue
        if is_data(key):
            objects[key] = session.pickled(node.value if spec else node)
            continue
        chain = chain_of[key]
        if chain[-1] != key:
            continue                    # built with its chain's last node
        first = chain[0]
        inputs = tuple(objects[d] for d in deps[first])
        if len(chain) == 1:
            fn = _daskrun.run if spec else _daskrun.run_legacy
            args = (node, list(deps[key])) + inputs
        else:
            fn = _daskrun.run_chain
            args = (spec, [(k, graph[k]) for k in chain], list(deps[first])) + inputs
        try:
            tid = session._py_task(fn, args, None, 1, options, str(key))
        except TaskConfigTooLarge:
            #   The node embeds data: it travels as a data object (uploaded
            #   to a governor when large), an input of its task.
            if len(chain) == 1:
                fn = _daskrun.run_data if spec else _daskrun.run_legacy_data
                args = (session.pickled(node), list(deps[key])) + inputs
            else:
                args = (spec, session.pickled([(k, graph[k]) for k in chain]),
                        list(deps[first])) + inputs
            tid = session._py_task(fn, args, None, 1, options, str(key))
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
