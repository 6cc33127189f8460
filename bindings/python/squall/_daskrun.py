"""Runs one node of a Dask graph in a governor's Python executor.

This module is pickled by value (cloudpickle.register_pickle_by_value), so
executors need dask only for the graph's own functions, not squall. Keep it
free of imports from squall.
"""
import pickle


def run(node, keys, *values):
    """A dask._task_spec node, given its dependencies' values."""
    return node(dict(zip(keys, values)))


def run_legacy(expr, keys, *values):
    """A legacy task-spec expression (tuples with a callable first, lists,
    key references), given the referenced keys' values."""
    return _evaluate(expr, dict(zip(keys, values)))


def _evaluate(x, env):
    if type(x) is tuple and x and callable(x[0]):
        return x[0](*[_evaluate(a, env) for a in x[1:]])
    if type(x) is list:
        return [_evaluate(a, env) for a in x]
    try:
        if x in env:
            return env[x]
    except TypeError:
        pass
    return x


def run_chain(spec, members, first_keys, *values):
    """A linear chain of graph nodes fused into one task: members is a list
    of (key, node); the first node reads `first_keys` (given as values),
    each later one the value of the one before. Intermediate values stay
    Python objects in this process: they are never pickled. A node that
    raises gets a note naming its key (the task is named after the last)."""
    env = dict(zip(first_keys, values))
    value = None
    for key, node in members:
        value = _run_node(spec, key, node, env, members[-1][0])
        env = {key: value}
    return value


def run_group(spec, members, outer_keys, *values):
    """A fan-in group of graph nodes fused into one task (a reduction's
    partial step with its branches): members is a list of (key, node, keys
    of members it is the last to read) in dependency order, the last one
    the task's value; outer_keys name the values given. Intermediate
    values stay Python objects here and are let go once read. A node that
    raises gets a note naming its key, as in run_chain."""
    env = dict(zip(outer_keys, values))
    value = None
    for key, node, done_with in members:
        value = _run_node(spec, key, node, env, members[-1][0])
        for done in done_with:
            del env[done]
        env[key] = value
    return value


def run_bundle(spec, members, outer_keys, out_keys, *values):
    """Graph nodes that share inputs made for them alone, fused into one
    task with an output for each of out_keys (squall/_daskbundle.py):
    members as in run_group, but a value is let go after its last reader,
    and the outputs are kept to the end. One output is the value itself;
    several, a tuple."""
    env = dict(zip(outer_keys, values))
    for key, node, done_with in members:
        env[key] = _run_node(spec, key, node, env, out_keys[-1])
        for done in done_with:
            del env[done]
    if len(out_keys) == 1:
        return env[out_keys[0]]
    return tuple(env[k] for k in out_keys)


def run_data(node, keys, *values):
    """run() for a node that travelled as a data object (too large to sit in
    the task's config): the same call."""
    return run(node, keys, *values)


def run_legacy_data(expr, keys, *values):
    return run_legacy(expr, keys, *values)


def packed(head, *values):
    """One of the functions above, named in `head` (a pickle of (name,
    arguments before the values)): the client pickled a graph node once
    with the C pickler instead of through the task's argument template,
    which looks at every object inside for data objects (a graph without
    futures has none)."""
    name, args = pickle.loads(head)
    #   Named here, not looked up in globals(): pickled by value, this
    #   module's functions carry only the globals they name.
    fn = {"run": run, "run_legacy": run_legacy, "run_chain": run_chain,
          "run_group": run_group, "run_bundle": run_bundle}[name]
    return fn(*args, *values)


def _run_node(spec, key, node, env, last):
    """One fused node's value; an exception raised gets a note naming the
    node's key and the task's (last), which is all the user knows of."""
    try:
        return node(env) if spec else _evaluate(node, env)
    except Exception as exc:
        if hasattr(exc, "add_note"):
            exc.add_note("in Dask key %r (fused into the task of %r)" % (key, last))
        raise
