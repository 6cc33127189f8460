"""The functions squall.dask's tasks call in a governor's Python executor,
for graphs of dask._task_spec nodes (legacy tuple graphs: _daskrun_legacy).

Pickled by value (cloudpickle.register_pickle_by_value), so that executors
need dask only for the graph's own functions, not squall: keep this module
free of imports from squall. Each task's function goes to each governor
once per session and to its executor with every task, so each is kept
small: cloudpickle carries a function with only the globals it names, its
docstring included, hence the comments instead (test_dask holds each
under the inline limit with room to spare).

Every function takes `head` (the arguments before the inputs' values) and
the values: `head` is bytes when the client pickled it once with the C
pickler (a graph without futures has no data objects to look for), else
the tuple itself, which the argument template pickled (data objects in it
arrive as their values).
"""
import pickle


#   A single node: head (node, keys of the values).
def run(head, *values):
    node, keys = pickle.loads(head) if type(head) is bytes else head
    return node(dict(zip(keys, values)))


#   A fused task is named after its last key only: an exception gets a note
#   naming the node's own key, all the user knows of it (in each runner,
#   not a function of its own, which would be pickled with each of them).
_NOTE = "in Dask key %r (fused into the task of %r)"


#   A linear chain fused into one task: head (members, first_keys), members
#   a list of (key, node); the first node reads first_keys, each later one
#   the value of the one before. Intermediate values stay Python objects
#   here: they are never pickled.
def run_chain(head, *values):
    members, first_keys = pickle.loads(head) if type(head) is bytes else head
    env = dict(zip(first_keys, values))
    key = value = None
    try:
        for key, node in members:
            value = node(env)
            env = {key: value}
    except Exception as exc:
        if hasattr(exc, "add_note"):
            exc.add_note(_NOTE % (key, members[-1][0]))
        raise
    return value


#   A fan-in group (a reduction's partial step with its branches): head
#   (members, outer_keys), members (key, node, keys of members it is the
#   last to read) in dependency order, the last one the task's value.
#   Values are let go once read.
def run_group(head, *values):
    members, outer_keys = pickle.loads(head) if type(head) is bytes else head
    env = dict(zip(outer_keys, values))
    key = value = None
    try:
        for key, node, done_with in members:
            value = node(env)
            for done in done_with:
                del env[done]
            env[key] = value
    except Exception as exc:
        if hasattr(exc, "add_note"):
            exc.add_note(_NOTE % (key, members[-1][0]))
        raise
    return value


#   Nodes sharing inputs made for them alone (squall/_daskbundle.py): head
#   (members, outer_keys, out_keys), members as run_group's; the outputs are
#   kept to the end: one is the value itself, several a tuple.
def run_bundle(head, *values):
    members, outer_keys, out_keys = pickle.loads(head) if type(head) is bytes else head
    env = dict(zip(outer_keys, values))
    key = None
    try:
        for key, node, done_with in members:
            env[key] = node(env)
            for done in done_with:
                del env[done]
    except Exception as exc:
        if hasattr(exc, "add_note"):
            exc.add_note(_NOTE % (key, out_keys[-1]))
        raise
    if len(out_keys) == 1:
        return env[out_keys[0]]
    return tuple(map(env.__getitem__, out_keys))
