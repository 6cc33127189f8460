#!/usr/bin/env python3
"""Where the executors' wall time goes per compute of a data_heavy.py
workload on squall (2 governors x 1 cpu): on a cpu, waiting for one, and
asleep (the rest: waiting for work), from /proc/PID/schedstat.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build \\
        /tmp/s4-venv/bin/python bench/data_heavy_sched.py [--workload mean] [--repeat 20]

Sleep is what a shorter critical path (fewer hops, less client work before
the first task) cuts; waiting for a core is the machine's load.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_heavy  # noqa: E402  (stdlib only at import: numpy comes later)
data_heavy.set_blas_threads(1)


def _schedstat(pid):
    """(ms on a cpu, ms waiting for one) of a process so far."""
    with open("/proc/%d/schedstat" % pid) as f:
        run, wait = f.read().split()[:2]
    return int(run) / 1e6, int(wait) / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="mean")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    import dask
    import squall
    make = data_heavy.workloads()[args.workload]
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        for _ in range(3):                      # executors started, warm
            dask.compute(make(), scheduler=client.get)
        executors = []
        for g in cluster.governors:
            for pid in data_heavy._children(g.pid):
                with open("/proc/%d/cmdline" % pid) as f:
                    if "executor" in f.read():
                        executors.append(pid)
        before = {p: _schedstat(p) for p in executors}
        t0 = time.monotonic()
        for _ in range(args.repeat):
            dask.compute(make(), scheduler=client.get)
        wall = (time.monotonic() - t0) * 1e3 / args.repeat
        after = {p: _schedstat(p) for p in executors}
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print("%s: wall %.1f ms a compute (load %s)" % (args.workload, wall, load))
    for p in executors:
        run = (after[p][0] - before[p][0]) / args.repeat
        wait = (after[p][1] - before[p][1]) / args.repeat
        print("  executor %d: on a cpu %.1f, waiting for one %.1f, asleep %.1f ms"
              % (p, run, wait, wall - run - wait))
    return 0


if __name__ == "__main__":
    sys.exit(main())
