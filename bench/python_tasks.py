#!/usr/bin/env python3
"""Python no-op function tasks on squall, Dask distributed and Ray.

Two graphs, each run on a 2-CPU local cluster of every system installed:
  independent: N no-op tasks (client.map + gather)
  chain:       M tasks, each taking the previous one's result

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/python_tasks.py
    options: --tasks N (20000) --chain M (2000) --repeat R (3, best kept)
             --only squall,dask,ray

squall: LocalCluster(governors=2, cpus=1). Dask: distributed.LocalCluster(
n_workers=2, threads_per_worker=1). Ray: ray.init(num_cpus=2). Dask and
Ray are skipped (with a note) when not installed. Rates are tasks/s from
first submit to last result; the ratios are squall's rate over theirs.
"""
import argparse
import sys

from timing import best


def noop(x=None):
    return None


def bench_squall(n, m, repeat):
    import squall
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        client.gather(client.map(noop, range(200)))        # executors started

        def independent():
            assert len(client.gather(client.map(noop, range(n)))) == n

        def chain():
            f = client.submit(noop)
            for _ in range(m - 1):
                f = client.submit(noop, f)
            f.result()

        return n / best(independent, repeat), m / best(chain, repeat)


def bench_dask(n, m, repeat):
    import logging
    from distributed import Client, LocalCluster
    logging.getLogger("distributed").setLevel(logging.ERROR)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.gather(client.map(noop, range(200), pure=False))

        def independent():
            assert len(client.gather(client.map(noop, range(n), pure=False))) == n

        def chain():
            f = client.submit(noop, pure=False)
            for _ in range(m - 1):
                f = client.submit(noop, f, pure=False)
            f.result()

        return n / best(independent, repeat), m / best(chain, repeat)


def bench_ray(n, m, repeat):
    import ray
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        remote_noop = ray.remote(noop)
        ray.get([remote_noop.remote(i) for i in range(200)])

        def independent():
            assert len(ray.get([remote_noop.remote(i) for i in range(n)])) == n

        def chain():
            f = remote_noop.remote()
            for _ in range(m - 1):
                f = remote_noop.remote(f)
            ray.get(f)

        return n / best(independent, repeat), m / best(chain, repeat)
    finally:
        ray.shutdown()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", type=int, default=20000)
    p.add_argument("--chain", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", default="squall,dask,ray")
    args = p.parse_args()
    systems = {"squall": bench_squall, "dask": bench_dask, "ray": bench_ray}
    rates = {}
    for name in args.only.split(","):
        try:
            rates[name] = systems[name](args.tasks, args.chain, args.repeat)
        except ImportError as exc:
            print("%-7s skipped: %s" % (name, exc))
            continue
        print("%-7s independent %9.0f tasks/s   chain %9.0f tasks/s"
              % ((name,) + rates[name]), flush=True)
    if "squall" in rates:
        for other, target in (("dask", 20.0), ("ray", 3.0)):
            if other in rates:
                ind = rates["squall"][0] / rates[other][0]
                chn = rates["squall"][1] / rates[other][1]
                print("squall / %-5s independent %6.1fx   chain %6.1fx   (target %gx: %s)"
                      % (other, ind, chn, target,
                         "met" if min(ind, chn) >= target else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
