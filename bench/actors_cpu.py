#!/usr/bin/env python3
"""CPU time per actor call of each process of a LocalCluster (from /proc).

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/actors_cpu.py
    options: --calls N (20000) --repeat R (1)

One actor (LocalCluster(governors=2, cpus=1)), N calls `add(1)` made without
waiting, then gathered and checked to be in order; prints, for the client
and every process the cluster started (broker, governors, executors), its
user+system CPU time over the calls divided by their number, and the rate.
On a loaded machine the rate is noise; the CPU per call much less so.
"""
import argparse
import os
import time

from actor_cluster import squall_actor


def _children(pid):
    """pid and its descendants."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    parents.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]),
                                       []).append(int(entry))
            except OSError:
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += parents.get(p, [])
    return out


def _cpu(pids):
    """{pid: (what, seconds of CPU)}"""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%d/cmdline" % p) as f:
                argv = f.read().split("\0")
        except OSError:
            continue
        what = "client" if p == os.getpid() else os.path.basename(
            argv[1] if "python" in os.path.basename(argv[0]) and len(argv) > 1 else argv[0])
        out[p] = (what, (int(fields[11]) + int(fields[12])) / tick)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with squall_actor() as (client, actor):
        client.gather([actor.add(0) for _ in range(200)])
        pids = _children(os.getpid())
        before = _cpu(pids)
        t0 = time.perf_counter()
        n = 0
        for _ in range(args.repeat):
            got = client.gather([actor.add(1) for _ in range(args.calls)])
            assert got == list(range(n + 1, n + args.calls + 1)), "calls out of order"
            n += args.calls
        elapsed = time.perf_counter() - t0
        after = _cpu(pids)
    total = 0.0
    for p in pids:
        if p in before and p in after:
            us = (after[p][1] - before[p][1]) / n * 1e6
            total += us
            print("%-22s %7d %6.1f us/call" % (after[p][0], p, us))
    print("all %.1f us of CPU per call; %.0f calls/s" % (total, n / elapsed))


if __name__ == "__main__":
    main()
