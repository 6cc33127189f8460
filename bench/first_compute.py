"""First compute on a fresh LocalCluster, with and without executors
started with the governors (issue 15).

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/first_compute.py [ROUNDS]

For each setting, ROUNDS fresh clusters (governors=2, cpus=1): the time to
start the cluster, then, after `gap` seconds of the client's own work
(0 and 0.5), the first compute (a small dask.array reduction through
client.get, so both governors' executors run tasks and import dask, numpy)
and the second one (the same again, executors warm). Medians are printed.
"""
import statistics
import sys
import time

import squall


def one(prestart, preload, gap):
    import dask.array as da
    x = (da.arange(4000, chunks=500) ** 2).sum()
    t0 = time.perf_counter()
    with squall.LocalCluster(governors=2, cpus=1, prestart=prestart, preload=preload,
                             log_level="error") as cluster:
        client = cluster.client()
        #   The client's own work between starting the cluster and its first
        #   compute (loading data, building graphs), during which the
        #   executors start; 0 for a compute right after the start.
        time.sleep(gap)
        t1 = time.perf_counter()
        assert int(x.compute(scheduler=client.get)) == sum(i * i for i in range(4000))
        t2 = time.perf_counter()
        x.compute(scheduler=client.get)
        t3 = time.perf_counter()
    return t1 - t0 - gap, t2 - t1, t3 - t2


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print("%-28s %8s %10s %15s %15s" % ("executors (median of %d)" % rounds, "gap (s)",
                                         "start (s)", "1st compute (s)", "2nd compute (s)"))
    for gap in (0.0, 0.5):
        for label, prestart, preload in (
                ("on demand (before)", False, ()),
                ("prestarted (default now)", True, ()),
                ("prestarted, preload dask", True, ("dask.array",))):
            runs = [one(prestart, preload, gap) for _ in range(rounds)]
            start, first, second = (statistics.median(r[i] for r in runs) for i in range(3))
            print("%-28s %8.1f %10.3f %15.3f %15.3f" % (label, gap, start, first, second))


if __name__ == "__main__":
    main()
