#!/usr/bin/env python3
"""Data-heavy Python on squall beside Dask's threaded scheduler and Dask
distributed, in one run (issue 29), and a big array handed to a task.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build \\
        /work/main/.venv-distributed/bin/python3 bench/data_heavy.py
    options: --repeat R (3, best kept) --only squall,threaded,distributed,floor
             (squall-nocache too: squall without the executors' input
             cache, squall.dask.SHARE_INPUTS False; squall-nobundle:
             squall without bundles, squall.dask.BUNDLES False;
             squall-noconst: squall whose client writes every large
             constant anew, Client(constant_cache=0); floor: Dask's own
             work before any scheduler runs, see below)
             --skip-big --blas-threads N (1) --matmul-chunk C (125)

Workloads (each result checked equal to the threaded scheduler's):
  mean:    dask.array (x + x.T).mean(), x 4000 x 4000 in 500 x 500 chunks
  matmul:  dask.array (x @ x.T).sum(), x 2000 x 2000 in 125 x 125 chunks
           (10 325 graph nodes with Dask 2026.8, the issue's 10 000; the
           count is printed; --matmul-chunk 100 gives 20 539)
  groupby: dask.dataframe groupby-agg (sum, mean) of 2 000 000 rows in 8
           partitions
Systems: squall LocalCluster(governors=2, cpus=1) with client.get as the
scheduler; dask.threaded.get with num_workers=2; distributed.LocalCluster(
n_workers=2, threads_per_worker=1). Times are wall seconds from compute()
to result, warm (a first run of each workload is not counted). BLAS threads: every system's numpy gets --blas-threads (OPENBLAS_NUM_THREADS,
OMP_NUM_THREADS, MKL_NUM_THREADS set before numpy is imported, inherited
by squall's governors and executors and Dask's workers), so that the
threaded scheduler's 2 threads do not each run a 2-thread BLAS while
squall's executors and Dask's workers run theirs: 2 cores, 2 computing
threads on each side. Peak memory
is the highest resident set of the processes doing the work, summed:
squall's governors and executors, Dask's workers, the threaded scheduler's
own process (which also holds the client's state, so it is an upper bound).

floor: a scheduler that does nothing: its get returns the values the
threaded scheduler computed in the untimed first compute of the workload, so its time is all Dask's own work in compute() (the graph built
and lowered, dask-expr's divisions, tokens) that every scheduler waits
for. No scheduler can beat it: distributed / floor is the highest
squall / distributed any scheduler could show on that workload (printed
as "bound").

big: a 512 MiB numpy array made by a task, then a task on the same governor
that takes it: the time from submit to that task holding it (it reports
time.time() when called; the array's data pointer is in the governor's
memory file, not a copy), best of R.
"""
import argparse
import os
import resource
import sys
import time


def set_blas_threads(n):
    """Every system's numpy runs n BLAS threads (the module doc): to be
    called before numpy is imported. The data_heavy_* tools call it with 1."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(n)


def _hwm(pid):
    """Peak resident bytes of a process (VmHWM), 0 if gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) << 10
    except OSError:
        pass
    return 0


def _children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out


def workloads(matmul_chunk=125):
    import dask.array as da
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    def mean():
        x = da.random.RandomState(1).random_sample((4000, 4000), chunks=(500, 500))
        return (x + x.T).mean()

    def matmul():
        x = da.random.RandomState(2).random_sample((2000, 2000),
                                                    chunks=(matmul_chunk, matmul_chunk))
        return (x @ x.T).sum()

    rng = np.random.default_rng(3)
    n = 2_000_000
    frame = pd.DataFrame({"k": rng.integers(0, 1000, n), "v": rng.random(n),
                          "w": rng.random(n)})

    def groupby():
        df = dd.from_pandas(frame, npartitions=8)
        return df.groupby("k").agg({"v": "sum", "w": "mean"})

    return {"mean": mean, "matmul": matmul, "groupby": groupby}


def _equal(a, b):
    import numpy as np
    if hasattr(a, "sort_index"):
        a, b = a.sort_index(), b.sort_index()
        return list(a.columns) == list(b.columns) and np.allclose(a.values, b.values)
    return np.allclose(a, b)


def _time(compute, repeat):
    value = compute()                   # warm: imports, executors, pages
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = compute()
        best = min(best, time.perf_counter() - t0)
    return best, value


def run_threaded(work, repeat):
    import dask
    out = {}
    for name, make in work.items():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
        t, value = _time(lambda: dask.compute(make(), scheduler="threads", num_workers=2)[0],
                         repeat)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
        out[name] = (t, value, max(peak, before))
        print("threaded", name, t, out[name][2] >> 20, file=sys.stderr, flush=True)
    return out


def run_floor(work, repeat):
    import dask
    out = {}
    for name, make in work.items():
        known = []

        #   The same workload each time (its keys need not be: dask.array's
        #   random names are new each call): the first, untimed compute's.
        def get(dsk, keys, **kwargs):
            if not known:
                known.append(dask.threaded.get(dsk, keys, num_workers=2))
            return known[0]
        t, value = _time(lambda: dask.compute(make(), scheduler=get)[0], repeat)
        out[name] = (t, value, 0)
        print("floor", name, t, file=sys.stderr, flush=True)
    return out


def run_distributed(work, repeat):
    from distributed import Client, LocalCluster
    out = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for name, make in work.items():
            t, value = _time(lambda: client.compute(make()).result(), repeat)
            peak = sum(client.run(lambda: resource.getrusage(
                resource.RUSAGE_SELF).ru_maxrss << 10).values())
            out[name] = (t, value, peak)
            print("distributed", name, t, peak >> 20, file=sys.stderr, flush=True)
            try:
                client.restart()        # peaks per workload
            except Exception as exc:    # a loaded machine: workers slow to come back
                print("distributed restart failed: %s" % exc, file=sys.stderr, flush=True)
    return out


def run_squall(work, repeat, share=True, bundles=True, constant_cache=None):
    import dask
    import squall
    import squall.dask
    squall.dask.SHARE_INPUTS = share
    squall.dask.BUNDLES = bundles
    out = {}
    for name, make in work.items():
        with squall.LocalCluster(governors=2, cpus=1) as cluster:
            client = cluster.client(constant_cache=constant_cache)
            t, value = _time(lambda: dask.compute(make(), scheduler=client.get)[0], repeat)
            pids = [g.pid for g in cluster.governors]
            pids += [c for g in cluster.governors for c in _children(g.pid)]
            out[name] = (t, value, sum(_hwm(p) for p in pids))
            print("squall-noconst" if constant_cache == 0 else "squall" if share and bundles
                  else "squall-nobundle" if share else "squall-nocache", name, t,
                  out[name][2] >> 20, file=sys.stderr, flush=True)
    return out


def _holding(a):
    import time as _t
    return _t.time(), a.__array_interface__["data"][0] != 0, a.nbytes


def _make_big(n):
    import numpy
    return numpy.ones(n, dtype=numpy.uint8)


def run_big(repeat):
    import squall
    best = float("inf")
    with squall.LocalCluster(governors=1, cpus=1) as cluster:
        client = cluster.client()
        for _ in range(repeat + 1):
            big = client.submit(_make_big, 512 << 20)
            #   Made, stored, and the executor that takes it warm.
            client.submit(len, big).result(timeout=120)
            t0 = time.time()
            held, ok, size = client.submit(_holding, big).result(timeout=120)
            assert ok and size == 512 << 20
            best = min(best, held - t0)
            print("big", held - t0, file=sys.stderr, flush=True)
            big.delete()
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="squall,threaded,distributed,floor")
    ap.add_argument("--skip-big", action="store_true")
    ap.add_argument("--workloads", default="mean,matmul,groupby")
    ap.add_argument("--blas-threads", type=int, default=1)
    ap.add_argument("--matmul-chunk", type=int, default=125)
    args = ap.parse_args()
    if args.blas_threads > 0:
        set_blas_threads(args.blas_threads)
    if "numpy" in sys.modules:
        raise SystemExit("numpy was imported before the BLAS threads were set")
    only = args.only.split(",")
    work = {k: v for k, v in workloads(args.matmul_chunk).items() if k in args.workloads.split(",")}
    import dask
    nodes = {name: len(dict(make().__dask_graph__())) for name, make in work.items()}
    results = {}
    for system, run in (("threaded", run_threaded), ("squall", run_squall),
                        ("squall-nocache", lambda w, r: run_squall(w, r, share=False)),
                        ("squall-nobundle", lambda w, r: run_squall(w, r, bundles=False)),
                        ("squall-noconst", lambda w, r: run_squall(w, r, constant_cache=0)),
                        ("distributed", run_distributed), ("floor", run_floor)):
        if system in only and work:
            results[system] = run(work, args.repeat)
    ref = results.get("threaded")
    if results:
        print("| workload (nodes) | " + " | ".join("%s s (peak MiB)" % s for s in results)
              + " | squall / threaded | squall / distributed | bound |")
        print("|---" * (len(results) + 4) + "|")
    for name in work if results else ():
        cells = []
        for system, res in results.items():
            t, value, peak = res[name]
            same = ref is None or _equal(value, ref[name][1])
            cells.append(("%.3f (%d)" % (t, peak >> 20) if peak else "%.3f" % t)
                         + ("" if same else " DIFFERENT"))
        sq = results.get("squall", {}).get(name)
        ratios = []
        for other in ("threaded", "distributed"):
            o = results.get(other, {}).get(name)
            ratios.append("%.2fx" % (o[0] / sq[0]) if sq and o else "")
        o, f = results.get("distributed", {}).get(name), results.get("floor", {}).get(name)
        ratios.append("%.2fx" % (o[0] / f[0]) if o and f else "")
        print("| %s (%d) | %s | %s |" % (name, nodes[name], " | ".join(cells), " | ".join(ratios)))
    if not args.skip_big:
        print("\n512 MiB array, submit to the task holding it (same governor): %.2f ms"
              % (run_big(args.repeat) * 1000))
    dask.config.refresh()
    return 0


if __name__ == "__main__":
    sys.exit(main())
