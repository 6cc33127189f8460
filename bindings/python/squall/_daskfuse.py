"""Which nodes of a Dask graph run as one squall task (client.get's plan,
dask.py): the keys needed in dependency order, and the fan-in groups
(linear chains ending in a node that reads several of them, and a
reduction's last step with its partial steps) whose intermediate values
stay Python objects in one executor. Pure functions of the graph's shape:
no session, no Dask import."""
from __future__ import annotations

from typing import Any, Dict, Hashable, List, Tuple

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


#   Fan-in fusion: at most this many branches absorbed by one node.
_FAN_IN_MAX = 16
#   A reduction's last step absorbs at most this many partial steps below
#   it (they only combine small values, one after the other, once every
#   branch is done).
_TAIL_STEPS_MAX = 32


def _groups(order: List[Hashable], deps: Dict[Hashable, List[Hashable]], is_data: Any,
            wanted: set, options: "_Options",
            fan_in: Any, taken: Any = ()) -> Tuple[Dict[Hashable, List[Hashable]], set]:
    """The tasks the computed nodes are fused into: ({key: its group, a
    list shared by its members in dependency order, the last one the
    group's output}, the ids of the groups that absorbed a fan-in).

    A node joins the group of its only dependency when that one is a
    computed node, read by nothing else and not wanted (a linear chain).
    With fan_in, a node with several dependencies also absorbs those of
    them that are such nodes ending a linear chain (at most _FAN_IN_MAX),
    so that a reduction's partial step runs with its branches in one task
    (matmul's products and their sum): its intermediate values are never
    pickled nor sent, and the graph has fewer tasks. A group that absorbed
    a fan-in is never absorbed again, and fan-in groups are kept only when
    at least fan_in of them are made (the caller's measure of enough
    parallelism: else a reduction's branches, which could run on
    different cpus at once, would run one after the other); when too few,
    a last node (read by no task) still absorbs those of its dependencies
    that are partial steps reading several tasks, and the partial steps
    below those that read only bundles' outputs (`taken`) or such steps
    (at most _TAIL_STEPS_MAX in all), one hop fewer at the reduction's
    end and a task fewer each (its branches' inputs stay tasks). fan_in may be
    a function giving that number, called only when a fan-in was found
    (it may ask the broker). Keys in `taken` (bundles' members) are in
    no group and absorbed by none."""
    dependents: Dict[Hashable, int] = {}
    for key in order:
        for d in deps[key]:
            dependents[d] = dependents.get(d, 0) + 1

    def make(fan: bool, tail: bool = False) -> Tuple[Dict[Hashable, List[Hashable]], set]:
        group_of: Dict[Hashable, List[Hashable]] = {}
        fanned: Dict[int, List[Hashable]] = {}

        def combine(d: Hashable) -> bool:
            #   A reduction's partial step: one node reading several tasks.
            return group_of[d] == [d] and \
                sum(1 for x in deps[d] if not is_data(x)) >= 2

        def alone(d: Hashable, key: Hashable) -> bool:
            return d in group_of and dependents.get(d) == 1 and d not in wanted \
                and group_of[d][-1] == d and options.same(d, key)

        #   Partial steps that read only bundles' outputs (the work) or
        #   other such steps: they only combine what the work made (set in
        #   dependency order, below, when the last step may take them).
        under: set = set()

        def below(d: Hashable, reader: Hashable) -> bool:
            return d in under and alone(d, reader) and id(group_of[d]) not in fanned \
                and combine(d)

        def steps(key: Hashable, one_level: List[Hashable]) -> List[Hashable]:
            #   The last step with its partial steps (one_level) and those
            #   below them (mean's 16 combines under the aggregate's 4):
            #   each is one more task, and one more hop after the last
            #   block. At most _TAIL_STEPS_MAX, else one level as before.
            out: List[Hashable] = []
            stack = [(key, False)]
            while stack:
                k, expanded = stack.pop()
                if expanded:
                    out.append(k)
                    if len(out) > _TAIL_STEPS_MAX:
                        return one_level
                    continue
                stack.append((k, True))
                inside = one_level if k == key else ()
                stack.extend((d, False) for d in reversed(deps[k])
                             if d in inside or (k != key and below(d, k)))
            return out

        for key in order:
            if is_data(key) or key in taken:
                continue
            ds = deps[key]
            if len(ds) == 1 and alone(ds[0], key):
                group = group_of[ds[0]]
                group.append(key)
            else:
                group = [key]
                if fan or (tail and key in sinks):
                    branches = [d for d in ds if alone(d, key)
                                and id(group_of[d]) not in fanned
                                and (fan or combine(d))]
                    if 0 < len(branches) <= _FAN_IN_MAX:
                        group = [m for d in branches for m in group_of[d]] + [key]
                        if not fan:
                            group = steps(key, group)
                        for m in group:
                            group_of[m] = group
                        #   Held here, so that no other list reuses its id.
                        fanned[id(group)] = group
            group_of[key] = group
            if tail and group == [key] and combine(key) and all(
                    x in taken or below(x, key) for x in ds if not is_data(x)):
                under.add(key)
        return group_of, set(fanned)

    if fan_in:
        group_of, fanned = make(True)
        if fanned and len(fanned) >= (fan_in() if callable(fan_in) else fan_in):
            return group_of, fanned
        #   Too few fan-ins to fuse them all: the reduction's last step
        #   still absorbs its partial steps (mean's aggregate, the 4
        #   combines before it and the 16 under them, after bundles), as
        #   they only combine small
        #   values and each would be one more hop (executor, governor,
        #   broker, governor, executor) on the critical path after the
        #   last block; its branches that read no task are left alone
        #   (they may be the work, which must run in parallel).
        read_by_task = {d for k in order if not is_data(k) for d in deps[k]}
        sinks = {k for k in order if k not in read_by_task and not is_data(k)}
        group_of, fanned = make(False, True)
        if fanned:
            return group_of, fanned
    return make(False)[0], set()


def _group_members(group: List[Hashable], deps: Dict[Hashable, List[Hashable]],
                   graph: Dict[Hashable, Any]) -> Tuple[list, List[Hashable]]:
    """A fan-in group's (members, outer keys) for _daskrun.run_group:
    members (key, node, keys of members whose last reader it is) in
    dependency order; outer, the keys it reads from outside, once each."""
    inside = set(group)
    outer: List[Hashable] = []
    seen = set()
    members = []
    for key in group:
        done_with = []
        for d in deps[key]:
            if d in inside:
                done_with.append(d)     # read by this member only
            elif d not in seen:
                seen.add(d)
                outer.append(d)
        members.append((key, graph[key], done_with))
    return members, outer
