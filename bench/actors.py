#!/usr/bin/env python3
"""Actor method calls per second from one client: squall, Ray, Dask actors.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/actors.py
    options: --calls N (20000) --big M (500: calls with a 1 MiB argument)
             --repeat R (3, best kept) --only squall,squall-put,ray,dask

One actor holding a counter; N calls of `add(1)` made one after the other
without waiting, then every result gathered; the results are checked to be
1..N (so the calls ran once each, in order). Then M calls `size(b)` with a
1 MiB bytes argument, checked the same way. squall: LocalCluster(governors=
2, cpus=1). Ray: ray.init(num_cpus=2), an actor with one cpu. Dask:
distributed.LocalCluster(n_workers=2, threads_per_worker=1), an actor
(`client.submit(Counter, actor=True)`). A peer that is not installed is
skipped with a note; one whose calls ran out of order is flagged (squall
fails instead: its order is part of the contract). squall-put: squall with
a client not given the governors' stream directory, so that its large
arguments go by PUT over CURVE, as from another host (docs/security.md,
"Uploads on one host").
"""
import argparse
import sys

from actor_cluster import Counter, squall_actor
from timing import best

ARG = b"x" * (1 << 20)


def _runs(call, gather, n, big, repeat, strict=False):
    """Rates (calls/s) without and with 1 MiB arguments; call(method, arg)
    makes a call, gather(list) waits for its results."""
    state = {"n": 0, "disorder": 0}

    def check(got, count):
        want = list(range(state["n"] + 1, state["n"] + count + 1))
        state["n"] += count
        assert sorted(got) == want, "calls lost or run twice"
        assert got == want or not strict, "calls run out of order"
        state["disorder"] += got != want

    def plain():
        check(gather([call("add", 1) for _ in range(n)]), n)

    def with_arg():
        check(gather([call("size", ARG) for _ in range(big)]), big)

    gather([call("add", 0) for _ in range(100)])        # warm
    rates = n / best(plain, repeat), big / best(with_arg, repeat)
    if state["disorder"]:
        print("  (%d of %d runs saw the calls run out of the order they were made)"
              % (state["disorder"], 2 * repeat), flush=True)
    return rates


def bench_squall(n, big, repeat, local=True):
    with squall_actor(local) as (client, actor):
        return _runs(lambda m, a: getattr(actor, m)(a), client.gather, n, big, repeat,
                     strict=True)


def bench_ray(n, big, repeat):
    import ray
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        actor = ray.remote(num_cpus=1)(Counter).remote()
        return _runs(lambda m, a: getattr(actor, m).remote(a), ray.get, n, big, repeat)
    finally:
        ray.shutdown()


def bench_dask(n, big, repeat):
    import logging
    from distributed import Client, LocalCluster
    logging.getLogger("distributed").setLevel(logging.ERROR)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        actor = client.submit(Counter, actor=True).result()
        return _runs(lambda m, a: getattr(actor, m)(a), lambda fs: [f.result() for f in fs],
                     n, big, repeat)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--big", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="squall,ray,dask")
    args = parser.parse_args()
    runs = {"squall": bench_squall, "ray": bench_ray, "dask": bench_dask,
            "squall-put": lambda n, big, repeat: bench_squall(n, big, repeat, local=False)}
    rows = []
    for name in args.only.split(","):
        try:
            plain, big = runs[name](args.calls, args.big, args.repeat)
        except ImportError as exc:
            print("%s: skipped (%s)" % (name, exc), file=sys.stderr)
            continue
        except Exception as exc:    # noqa: BLE001 - a peer that breaks under load is reported
            if name == "squall":
                raise
            print("%s: failed (%s: %s)" % (name, type(exc).__name__, exc), flush=True)
            continue
        rows.append((name, plain, big))
        print("%-10s %9.0f calls/s   %7.0f calls/s with a 1 MiB argument" % (name, plain, big),
              flush=True)
    if rows and rows[0][0] == "squall":
        for name, plain, big in rows[1:]:
            print("squall / %s: %.1fx, %.1fx with 1 MiB" % (name, rows[0][1] / plain,
                                                            rows[0][2] / big))


if __name__ == "__main__":
    main()
