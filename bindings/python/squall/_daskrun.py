"""Runs one node of a Dask graph in a governor's Python executor.

This module is pickled by value (cloudpickle.register_pickle_by_value), so
executors need dask only for the graph's own functions, not squall. Keep it
free of imports from squall.
"""


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
