"""_daskrun's functions for legacy Dask graphs (without dask._task_spec:
tuples with a callable first, lists, key references), as a module of its
own so that what a task of a dask._task_spec graph carries holds none of
this.

Pickled by value like _daskrun (no imports from squall but _daskrun's
functions, which are pickled by value too). The same heads as _daskrun's;
each expression becomes a callable of the values by key, so that the fused
runners are _daskrun's.
"""
import pickle
from functools import partial

from ._daskrun import run_bundle as _run_bundle, run_chain as _run_chain, \
    run_group as _run_group


#   One listcomp for both a call's arguments and a list's items: each is a
#   code object of its own in the pickle.
def _evaluate(x, env):
    call = type(x) is tuple and x and callable(x[0])
    if call or type(x) is list:
        items = [_evaluate(a, env) for a in (x[1:] if call else x)]
        return x[0](*items) if call else items
    try:
        if x in env:
            return env[x]
    except TypeError:           # unhashable: a literal
        pass
    return x


def run(head, *values):
    expr, keys = pickle.loads(head) if type(head) is bytes else head
    return _evaluate(expr, dict(zip(keys, values)))


def run_chain(head, *values):
    members, first_keys = pickle.loads(head) if type(head) is bytes else head
    return _run_chain(([(k, partial(_evaluate, x)) for k, x in members], first_keys), *values)


def run_group(head, *values):
    members, outer_keys = pickle.loads(head) if type(head) is bytes else head
    return _run_group(([(k, partial(_evaluate, x), d) for k, x, d in members], outer_keys),
                      *values)


def run_bundle(head, *values):
    members, outer_keys, out_keys = pickle.loads(head) if type(head) is bytes else head
    return _run_bundle(([(k, partial(_evaluate, x), d) for k, x, d in members], outer_keys,
                        out_keys), *values)
