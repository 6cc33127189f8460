#!/usr/bin/env python3
"""When client.get submits during one compute of bench/data_heavy.py's
groupby: for each submit, the tasks made by then and the client's CPU ms
and wall ms since get began; the early submits of data-heavy graphs
(squall.dask._EARLY_BYTES) off and on, alternated. The client's CPU before
its first submit is the load-insensitive part: the cluster can start no
task before it. With --vary constant-cache, the client's constant cache
off (a client with constant_cache=0) and on (the default) alternated
instead, early submits on.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build \\
        /tmp/s4-venv/bin/python bench/data_heavy_submits.py [--rounds 6]
        [--vary early|constant-cache]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_heavy  # noqa: E402  (stdlib only at import: numpy comes later)
data_heavy.set_blas_threads(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="groupby")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--vary", choices=("early", "constant-cache"), default="early")
    args = ap.parse_args()
    import dask
    import squall
    import squall.dask as sd
    make = data_heavy.workloads()[args.workload]
    marks, runs = [], []
    real_submit, real_get, on_bytes = sd.Session.submit, sd.get, sd._EARLY_BYTES

    def submit(self):
        marks.append((self._n_tasks, time.process_time(), time.monotonic()))
        return real_submit(self)

    def get(client, *a, **k):
        marks.clear()
        marks.append(("start", time.process_time(), time.monotonic()))
        try:
            return real_get(client, *a, **k)
        finally:
            marks.append(("end", time.process_time(), time.monotonic()))
            runs.append(list(marks))

    sd.Session.submit = submit
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        clients = {True: cluster.client(), False: cluster.client()}
        if args.vary == "constant-cache":
            clients[True] = cluster.client(constant_cache=0)
        for off in [True, False] * args.rounds:
            if args.vary == "early":
                sd._EARLY_BYTES = 1 << 62 if off else on_bytes
            client = clients[off]
            runs.clear()
            for _ in range(3):          # the first one warm-up
                dask.compute(make(), scheduler=lambda *a, **k: get(client, *a, **k))
            for m in runs[1:]:
                s = m[0]
                print("off" if off else "on ", " ".join(
                    "%s:cpu %.1f/wall %.1f" % (n, (c - s[1]) * 1e3, (w - s[2]) * 1e3)
                    for n, c, w in m[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
