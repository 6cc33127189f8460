#!/usr/bin/env python3
"""client.get of a data_heavy.py workload (groupby by default) on squall
(2 governors x 1 cpu), its data found in the client's constant cache
(every compute after the first): the early submits at the 2nd and 4th
tasks counting that data (as before 2026-11-27: _CACHED_MIN out of reach)
against counting only data the client writes (squall/dask.py). The two
alternate compute by compute in one cluster, so that both see the same
load; medians and the ratio are printed.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build \\
        /tmp/bv/bin/python bench/data_heavy_early.py [--workload groupby] [--repeat 30]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_heavy  # noqa: E402  (stdlib only at import: numpy comes later)
data_heavy.set_blas_threads(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="groupby")
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    import dask
    import squall
    import squall.dask as sd
    make = data_heavy.workloads()[args.workload]
    variants = {"cached data counted (before)": 1 << 62, "made data only (now)": sd._CACHED_MIN}
    times = {name: [] for name in variants}
    sent = {name: [] for name in variants}
    real_submit = sd.Session.submit
    counts = []

    def submit(self):
        counts.append(self._n_tasks)
        return real_submit(self)

    sd.Session.submit = submit
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        for _ in range(2):          # the first writes the data; a warm-up
            dask.compute(make(), scheduler=lambda *a, **k: sd.get(client, *a, **k))
        for _ in range(args.repeat):
            for name, cached_min in variants.items():
                sd._CACHED_MIN = cached_min
                took = []

                def get(*a, **k):
                    t0 = time.monotonic()
                    try:
                        return sd.get(client, *a, **k)
                    finally:
                        took.append(time.monotonic() - t0)
                counts.clear()
                dask.compute(make(), scheduler=get)
                times[name].append(took[0] * 1e3)
                sent[name] = list(counts)
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print("%s: client.get, median of %d alternated computes (load %s)"
          % (args.workload, args.repeat, load))
    for name, values in times.items():
        print("  %-30s %6.1f ms  (min %.1f)  tasks made at each submit %s"
              % (name, statistics.median(values), min(values), sent[name]))
    before, now = (statistics.median(v) for v in times.values())
    print("  now / before                   %6.3f" % (now / before))
    return 0


if __name__ == "__main__":
    sys.exit(main())
