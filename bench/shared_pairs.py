#!/usr/bin/env python3
"""Pairs of Python tasks moving one numpy array each (a task makes it, the
next sums it) on 2 governors x 1 cpu: where shared segments (issue 29) pay.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/shared_pairs.py N COUNT

N float64 per array, COUNT pairs per run, best of 3 runs; prints pairs/s.
"""
import sys, time
import squall
def make(n):
    import numpy
    return numpy.ones(n)
def total(a):
    return float(a.sum())
n = int(sys.argv[1]); count = int(sys.argv[2])
with squall.LocalCluster(governors=2, cpus=1) as c:
    cl = c.client()
    cl.gather(cl.map(total, cl.map(make, [n] * 20)))
    best = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        r = cl.gather(cl.map(total, cl.map(make, [n] * count)))
        best = min(best, time.perf_counter() - t0)
        assert r == [float(n)] * count
    print("n=%d bytes=%d: %.0f pairs/s" % (n, n * 8, count / best))
