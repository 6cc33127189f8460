"""Bundles: tasks of a Dask graph that share an input made for them alone,
run as one task with several outputs (squall.dask's third fusion, after
linear chains and fan-ins; see _groups there).

`(x + x.T).mean()` reads each random block twice: as itself in one sum
and transposed in another. Neither fusion absorbs it (it has two readers),
so every block was a task of its own whose 2 MB result was written into a
memory file, handed to the governor, and mapped by its two readers, often
on the other governor: about 1.5 ms of cpu per block on a 2-core machine,
more than the threaded scheduler spends on it. A bundle is the block's
task with the tasks of all its readers (and, transitively, of the blocks
they share): block (i, j), block (j, i) and the two sums and their
`mean_chunk`s are one task whose outputs are the two small `mean_chunk`
values; the blocks never leave the executor.

Bundles are made of linear chains, before fan-ins (which then leave
their members alone): a bundle of whole partial steps of `mean` held 8
blocks, and tasks that large split 2 cpus' work unevenly. Kept bounded
so that parallelism is not lost: a bundle holds at most
_GROUPS_MAX tasks of before and _OUTPUTS_MAX outputs (a shared input read
by more tasks, as `matmul`'s blocks are by 16 products, is left as it
was), and bundles are kept only when the caller's measure of enough tasks
(4 a cpu) is met. A bundle whose inputs from outside would depend on its
own members (a cycle once it is one task) is not made.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, List, Tuple

_GROUPS_MAX = 16
_OUTPUTS_MAX = 4
_MEMBERS_MAX = 64
#   How many nodes the cycle check may visit for one bundle: past it the
#   bundle is not made (never wrong, only a bundle lost), so the check of
#   every bundle of a large graph stays linear in the graph, not quadratic.
_CYCLE_WALK_MAX = 1024


class Bundle:
    """Members (keys, dependency order), outputs (the keys whose values
    leave it, in the task's output order)."""

    __slots__ = ("members", "outputs")

    def __init__(self, members: List[Hashable], outputs: List[Hashable]):
        self.members = members
        self.outputs = outputs


def any_candidate(order: List[Hashable], deps: Dict[Hashable, List[Hashable]],
                  is_data: Any, wanted: set) -> bool:
    """Whether some computed node, not wanted, has from 2 to _GROUPS_MAX - 1
    readers: else no bundle can be made, and the grouping it needs is not
    worth making (`matmul`'s blocks have 32 readers each)."""
    readers: Dict[Hashable, int] = {}
    for key in order:
        for d in deps[key]:
            readers[d] = readers.get(d, 0) + 1
    return any(2 <= n < _GROUPS_MAX and k not in wanted and not is_data(k)
               for k, n in readers.items())


def bundles(order: List[Hashable], deps: Dict[Hashable, List[Hashable]],
            group_of: Dict[Hashable, List[Hashable]], wanted: set, same: Any,
            enough: Any) -> Dict[Hashable, Bundle]:
    """{key: its bundle} for the members of every bundle made (empty when
    fewer than `enough` are made; a function giving it is called only
    when some are). group_of: _groups' tasks (a group is
    the list its members share, the last one its value); same(a, b):
    whether two keys have the same task options."""
    readers: Dict[Hashable, List[Hashable]] = {}
    for key in order:
        for d in deps[key]:
            readers.setdefault(d, []).append(key)
    index = {k: i for i, k in enumerate(order)}
    #   Union of groups (by id) into sets; each set's groups and size.
    root: Dict[int, int] = {}
    sets: Dict[int, List[List[Hashable]]] = {}

    def find(g: int) -> int:
        while root.get(g, g) != g:
            g = root[g]
        return g

    for key in order:
        group = group_of.get(key)
        if group is None or group[-1] != key or key in wanted:
            continue
        rs = readers.get(key, ())
        if len(rs) < 2 or any(r not in group_of or not same(key, r) for r in rs):
            continue
        ids = {find(id(group))}
        for r in rs:
            ids.add(find(id(group_of[r])))
        if len(ids) < 2:
            continue
        merged = []
        for g in ids:
            merged.extend(sets.get(g) or [_group_of_id(g, group, rs, group_of)])
        if len(merged) > _GROUPS_MAX or sum(len(g) for g in merged) > _MEMBERS_MAX:
            continue
        top = min(ids)
        for g in ids:
            root[g] = top
            sets.pop(g, None)
        root[top] = top
        sets[top] = merged

    out: Dict[Hashable, Bundle] = {}
    made = 0
    for groups in sets.values():
        members = sorted((m for g in groups for m in g), key=index.__getitem__)
        inside = set(members)
        outputs = [g[-1] for g in groups
                   if g[-1] in wanted or any(r not in inside for r in readers.get(g[-1], ()))]
        outputs.sort(key=index.__getitem__)
        if not outputs or len(outputs) > _OUTPUTS_MAX or _cyclic(members, inside, deps, index):
            continue
        bundle = Bundle(members, outputs)
        for m in members:
            out[m] = bundle
        made += 1
    if not made or made < (enough() if callable(enough) else enough):
        return {}
    return out


def _group_of_id(g: int, group: List[Hashable], rs: List[Hashable],
                group_of: Dict[Hashable, List[Hashable]]) -> List[Hashable]:
    """The group whose id is g, among the shared input's and its readers'."""
    if id(group) == g:
        return group
    for r in rs:
        if id(group_of[r]) == g:
            return group_of[r]
    raise KeyError(g)


def _cyclic(members: List[Hashable], inside: set, deps: Dict[Hashable, List[Hashable]],
            index: Dict[Hashable, int]) -> bool:
    """Whether an input the bundle reads from outside depends on one of
    its members (only nodes after the first member in `order` can); also
    true, to be safe, when finding out would visit over _CYCLE_WALK_MAX
    nodes."""
    first = index[members[0]]
    seen = set()
    stack = [d for m in members for d in deps[m] if d not in inside]
    while stack:
        k = stack.pop()
        if k in seen or index.get(k, -1) < first:
            continue
        if len(seen) >= _CYCLE_WALK_MAX:
            return True
        seen.add(k)
        for d in deps[k]:
            if d in inside:
                return True
            stack.append(d)
    return False


def bundle_members(bundle: Bundle, deps: Dict[Hashable, List[Hashable]],
                   graph: Dict[Hashable, Any]) -> Tuple[list, List[Hashable]]:
    """(members, outer keys) for _daskrun.run_bundle: members (key, node,
    keys whose last reader in the bundle it is, outputs excepted) in
    dependency order; outer, the keys it reads from outside, once each."""
    inside = set(bundle.members)
    keep = set(bundle.outputs)
    last: Dict[Hashable, Hashable] = {}
    outer: List[Hashable] = []
    seen = set()
    for key in bundle.members:
        for d in deps[key]:
            if d in inside:
                last[d] = key
            elif d not in seen:
                seen.add(d)
                outer.append(d)
    done: Dict[Hashable, List[Hashable]] = {}
    for d, key in last.items():
        if d not in keep:
            done.setdefault(key, []).append(d)
    members = [(key, graph[key], done.get(key, [])) for key in bundle.members]
    return members, outer


def unit_order(order: List[Hashable], deps: Dict[Hashable, List[Hashable]],
               unit_of: Any) -> List[Hashable]:
    """order again, each task's members together (a bundle's outputs may be
    read by nodes the depth-first order put before its last member):
    tasks in a topological order, earliest first member first."""
    import heapq
    index = {k: i for i, k in enumerate(order)}
    members: Dict[int, List[Hashable]] = {}
    for key in order:
        members.setdefault(unit_of(key), []).append(key)
    waits: Dict[int, int] = {}
    then: Dict[int, List[int]] = {}
    for u, keys in members.items():
        before = {unit_of(d) for k in keys for d in deps[k]} - {u}
        waits[u] = len(before)
        for b in before:
            then.setdefault(b, []).append(u)
    ready = [(index[keys[0]], u) for u, keys in members.items() if not waits[u]]
    heapq.heapify(ready)
    out: List[Hashable] = []
    while ready:
        _, u = heapq.heappop(ready)
        out.extend(members[u])
        for v in then.get(u, ()):
            waits[v] -= 1
            if not waits[v]:
                heapq.heappush(ready, (index[members[v][0]], v))
    if len(out) != len(order):
        raise ValueError("the graph's fused tasks depend on each other in a cycle")
    return out
