#!/usr/bin/env python3
"""A timeline of one compute of a data_heavy.py workload on squall
(2 governors x 1 cpu), from client.get's call to its result: the client's
submits (tasks made by then), each task's run on its executor (from inside
the task, CLOCK_MONOTONIC, shared by the processes of one host), and the
final fetch; then the medians over --repeat computes (after two warm-up
ones) of: the submits, the first task's start and the second executor's,
the last task's end, the fetch, and the executors' time in tasks and
between them (the gaps: the per-task path, and waiting for work).

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build \\
        /tmp/bv/bin/python bench/data_heavy_timeline.py [--workload mean] [--repeat 10] \\
        [--show 1] [--keys]

The tasks are timed by wrapping squall.dask's runners (_daskrun: each task
appends a line to a file in a temporary directory: a few us a task).
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_heavy  # noqa: E402  (stdlib only at import: numpy comes later)
data_heavy.set_blas_threads(1)

_LOG_DIR = None


def _timed(real, keys):
    log_dir = _LOG_DIR
    name = real.__name__

    def timed(head, *values):
        import os as _os
        import time as _time
        t0 = _time.monotonic()
        try:
            return real(head, *values)
        finally:
            t1 = _time.monotonic()
            label = ""
            if keys:            # the fused node's last key (a second unpickle)
                import pickle as _pickle
                args = _pickle.loads(head) if type(head) is bytes else head
                label = " %s:%s" % (name, _short(args))
            with open("%s/%d" % (log_dir, _os.getpid()), "a") as f:
                f.write("%.6f %.6f%s\n" % (t0, t1, label))
    return timed


def _short(args):
    """A short name of a task from its head's arguments."""
    try:
        node = args[0]
        key = node[-1][0] if isinstance(node, list) else getattr(node, "key", "?")
    except (IndexError, TypeError, KeyError):
        return "?"
    if isinstance(key, tuple):
        return "%s%s" % (str(key[0]).split("-")[0], key[1:])
    return str(key).split("-")[0]


def main():
    global _LOG_DIR
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="mean")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--show", type=int, default=1, help="timelines printed in full")
    ap.add_argument("--keys", action="store_true",
                    help="name each task in the timelines printed (costs the executors a little)")
    args = ap.parse_args()
    import dask
    import squall
    import squall.dask as sd
    from squall import _objects
    make = data_heavy.workloads()[args.workload]
    _LOG_DIR = tempfile.mkdtemp(prefix="sq-timeline-")
    for runner in ("run", "run_chain", "run_group", "run_bundle"):
        setattr(sd._daskrun, runner, _timed(getattr(sd._daskrun, runner), args.keys))
    marks = []
    real_submit, real_get, real_fetch = sd.Session.submit, sd.get, _objects.DataObject.fetch

    def submit(self):
        marks.append(("submit %d" % self._n_tasks, time.monotonic()))
        return real_submit(self)

    def fetch(self, *a, **k):
        marks.append(("fetch", time.monotonic()))
        try:
            return real_fetch(self, *a, **k)
        finally:
            marks.append(("fetched", time.monotonic()))

    def get(client, *a, **k):
        marks.append(("get", time.monotonic()))
        try:
            return real_get(client, *a, **k)
        finally:
            marks.append(("end", time.monotonic()))

    sd.Session.submit = submit
    _objects.DataObject.fetch = fetch
    rows = []
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        for i in range(args.repeat + 2):      # two warm-ups
            for name in os.listdir(_LOG_DIR):
                os.unlink(os.path.join(_LOG_DIR, name))
            marks.clear()
            t0 = time.monotonic()
            dask.compute(make(), scheduler=lambda *a, **k: get(client, *a, **k))
            t1 = time.monotonic()
            if i < 2:
                continue
            tasks = {}
            for name in os.listdir(_LOG_DIR):
                with open(os.path.join(_LOG_DIR, name)) as f:
                    tasks[int(name)] = sorted((float(a), float(b), rest[0] if rest else "")
                                              for a, b, *rest in (l.split() for l in f))
            rows.append(_summary(marks, tasks, t0, t1, i - 2 < args.show))
    shutil.rmtree(_LOG_DIR, ignore_errors=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print("%s: median of %d computes (ms from get; load %s)" % (args.workload, len(rows), load))
    for key in rows[0]:
        values = [r[key] for r in rows]
        print("  %-34s %7.1f  (min %.1f, max %.1f)" % (key, statistics.median(values),
                                                        min(values), max(values)))
    return 0


def _summary(marks, tasks, t0, t1, show):
    g = marks[0][1]
    ms = lambda t: (t - g) * 1e3  # noqa: E731
    submits = [t for n, t in marks if n.startswith("submit")]
    end = [t for n, t in marks if n == "end"][0]
    fetch = [t for n, t in marks if n == "fetch"]
    fetched = [t for n, t in marks if n == "fetched"]
    out = {"before get (graph, optimise)": (g - t0) * 1e3,
           "first submit": ms(submits[0]), "last submit": ms(submits[-1])}
    starts = sorted(ts[0][0] for ts in tasks.values())
    out["first task start"] = ms(starts[0])
    out["second executor's first start"] = ms(starts[1]) if len(starts) > 1 else float("nan")
    last = max(ts[-1][1] for ts in tasks.values())
    out["last task end"] = ms(last)
    out["fetch call"] = ms(fetch[-1]) if fetch else float("nan")
    out["fetched"] = ms(fetched[-1]) if fetched else float("nan")
    out["get returns"] = ms(end)
    out["after get (finalize)"] = (t1 - end) * 1e3
    busy_all = idle_mid = 0.0
    n = 0
    for pid, ts in tasks.items():
        busy = sum(t[1] - t[0] for t in ts)
        gaps = sum(ts[j + 1][0] - ts[j][1] for j in range(len(ts) - 1))
        busy_all += busy
        idle_mid += gaps
        n += len(ts)
    out["tasks timed"] = n
    out["busy in tasks, all executors"] = busy_all * 1e3
    out["gaps between tasks, all executors"] = idle_mid * 1e3
    out["mean gap between tasks"] = idle_mid * 1e3 / max(1, n - len(tasks))
    out["largest gap between tasks"] = max(
        (ts[j + 1][0] - ts[j][1] for ts in tasks.values() for j in range(len(ts) - 1)),
        default=0.0) * 1e3
    if show:
        print("timeline (ms from get):")
        print("  " + ", ".join("%s %.1f" % (nm, ms(t)) for nm, t in marks))
        for pid, ts in sorted(tasks.items()):
            runs = ("%.1f-%.1f%s" % (ms(a), ms(b), " " + k if k else "") for a, b, k in ts)
            print("  executor %d: %s" % (pid, " ".join(runs)))
    return out


if __name__ == "__main__":
    sys.exit(main())
