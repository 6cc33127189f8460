#!/usr/bin/env python3
"""CPU seconds and page faults per compute of bench/data_heavy.py's
workloads, for every process that does the work: load-insensitive where
data_heavy.py's wall times are not (on a shared machine the other work
moves them, not what each compute costs).

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build \\
        /tmp/s4-venv/bin/python bench/data_heavy_cpu.py [--workload groupby] [--repeat 10]

threaded: the one process running dask.compute with the threaded
scheduler (2 threads), whole compute, and its dask.threaded.get alone.
squall: the client (whole compute, and client.get alone), each governor,
executor and the broker, summed over the computes (/proc/PID/stat utime +
stime and minor faults). Dask's expression optimisation is in both
clients' whole-compute figures; the get figures leave it out.
"""
import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_heavy  # noqa: E402  (stdlib only at import: numpy comes later)
data_heavy.set_blas_threads(1)

HZ = os.sysconf("SC_CLK_TCK")


def _stat(pid):
    """(minor faults, CPU seconds) of a process, (0, 0) if gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0, 0.0
    return int(fields[7]), (int(fields[11]) + int(fields[12])) / HZ


def _sched(pid):
    """(seconds on a cpu, seconds waiting for one) of a process's main
    thread (/proc/PID/schedstat), (0, 0) if gone."""
    try:
        with open("/proc/%d/schedstat" % pid) as f:
            run, wait = f.read().split()[:2]
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(run) / 1e9, int(wait) / 1e9


def _self():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_minflt, r.ru_utime + r.ru_stime


def _name(pid):
    try:
        with open("/proc/%d/cmdline" % pid) as f:
            argv = f.read().split("\0")
    except OSError:
        return "?"
    return "executor" if any(a.endswith("squall-executor.py") for a in argv) \
        else os.path.basename(argv[0])


def _measure(compute, get_calls, repeat, pids=()):
    compute()
    compute()
    get_calls.clear()
    me0, them0 = _self(), {p: _stat(p) for p in pids}
    for _ in range(repeat):
        compute()
    me1, them1 = _self(), {p: _stat(p) for p in pids}
    rows = [("client, whole compute", (me1[1] - me0[1]) / repeat, (me1[0] - me0[0]) // repeat)]
    rows.append(("client, get only", sum(c for _, c in get_calls) / repeat,
                 sum(f for f, _ in get_calls) // repeat))
    for p in pids:
        rows.append(("%s %d" % (_name(p), p), (them1[p][1] - them0[p][1]) / repeat,
                     (them1[p][0] - them0[p][0]) // repeat))
    return rows


def _timed(fn, calls, asleep=None, idle=()):
    """fn, adding (faults, CPU s) of each call to calls; with `idle`
    pids, also (wall s, s those processes slept: neither on a cpu nor
    waiting for one, so idle for want of work, whatever the load) to
    asleep."""
    def wrapper(*args, **kwargs):
        f0, c0 = _self()
        s0, t0 = [_sched(p) for p in idle], time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            f1, c1 = _self()
            s1, t1 = [_sched(p) for p in idle], time.monotonic()
            calls.append((f1 - f0, c1 - c0))
            if asleep is not None:
                asleep.append((t1 - t0, sum((t1 - t0) - (b[0] - a[0]) - (b[1] - a[1])
                                            for a, b in zip(s0, s1))))
    return wrapper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="groupby")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    import dask
    import dask.threaded
    make = data_heavy.workloads()[args.workload]
    calls = []
    get = _timed(dask.threaded.get, calls)
    rows = _measure(lambda: dask.compute(make(), scheduler=get, num_workers=2), calls,
                    args.repeat)
    print("threaded (2 threads), per compute: CPU s, minor faults")
    for label, cpu, faults in rows:
        print("  %-28s %.4f %7d" % (label, cpu, faults))
    import squall
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        dask.compute(make(), scheduler=client.get)     # executors started
        pids = [g.pid for g in cluster.governors]
        pids += [c for g in cluster.governors for c in data_heavy._children(g.pid)]
        pids += [p for p in data_heavy._children(os.getpid()) if p not in pids]
        executors = [p for p in pids if _name(p) == "executor"]
        asleep = []
        get = _timed(client.get, calls, asleep, executors)
        rows = _measure(lambda: dask.compute(make(), scheduler=get), calls, args.repeat, pids)
        asleep = asleep[-args.repeat:]
    print("squall (2 governors x 1 cpu), per compute: CPU s, minor faults")
    for label, cpu, faults in rows:
        print("  %-28s %.4f %7d" % (label, cpu, faults))
    print("  %-28s %.4f" % ("client.get + every process", sum(r[1] for r in rows[1:])))
    print("  %-28s %.4f" % ("client.get wall (loaded)", sum(w for w, _ in asleep) / len(asleep)))
    print("  %-28s %.4f" % ("executors asleep in get", sum(s for _, s in asleep) / len(asleep)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
