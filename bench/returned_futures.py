#!/usr/bin/env python3
"""Futures a task returns: the time the task spends pickling N of them
(adopting them into its caller's session, ADOPT), in batches of up to
1024 per request as the executor does (squall._worker.adopt_returned
before pickling) against one request per future (pickled without it, as
before batching), alternated in one run on one cluster.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/returned_futures.py
    options: --n N (10000 futures) --rounds R (3)

LocalCluster(governors=1, cpus=2); the task maps N additions, waits for
them, then times adopt_returned (batched only) and pickle.dumps of the
list. Printed: each round's times, the medians and their ratio.
"""
import argparse
import pickle
import statistics
import time

import squall


def add(a, b):
    return a + b


def returning(n, batched):
    from squall import _worker
    c = squall.get_client()
    fs = c.map(add, range(n), range(n))
    squall.wait(fs)
    start = time.perf_counter()
    if batched:
        _worker.adopt_returned(fs)
    pickle.dumps(fs)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with squall.LocalCluster(governors=1, cpus=2) as cluster:
        client = cluster.client()
        times = {True: [], False: []}
        for _ in range(args.rounds):
            for batched in (True, False):
                times[batched].append(client.submit(returning, args.n, batched)
                                      .result(timeout=3600))
    for batched in (True, False):
        print("%-16s %s" % ("batched" if batched else "one per future",
                            " ".join("%.3f s" % t for t in times[batched])))
    b, o = statistics.median(times[True]), statistics.median(times[False])
    print("%d futures: batched %.3f s, one per future %.3f s (median), ratio %.1f"
          % (args.n, b, o, o / b))


if __name__ == "__main__":
    main()
