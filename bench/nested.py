#!/usr/bin/env python3
"""Nested tasks per second: a recursive Fibonacci where every call is a
task that submits its two children and waits for them, on squall, Dask
distributed and Ray, in the same run.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/nested.py
    options: --n N (16: 2 fib(N+1) - 1 = 3193 tasks) --only squall,dask,ray
             --dask-python PATH --ray-python PATH (another interpreter
             where that system is installed; this script runs there with
             --only)

squall: LocalCluster(governors=2, cpus=1), squall.get_client().submit
(each task's client has a key of its own; a waiting task secedes).
Dask: distributed.LocalCluster(n_workers=2, threads_per_worker=1),
distributed.get_client().submit with secede()/rejoin() around the wait
(as worker_client does). Ray: ray.init(num_cpus=2), nested .remote() and
ray.get (which releases the cpu while blocked). A system not installed is
skipped with a note. Rates are tasks/s from the root's submit to its
result, after a warm-up of fib(8); the ratio is squall's rate over theirs.
"""
import argparse
import json
import subprocess
import sys
import time


def _tasks(n):
    a, b = 0, 1
    for _ in range(n + 1):
        a, b = b, a + b
    return 2 * a - 1            # calls of the naive recursion: 2 fib(n+1) - 1


def _fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def sq_fib(n):
    import squall
    if n < 2:
        return n
    c = squall.get_client()
    a = c.submit(sq_fib, n - 1)
    b = c.submit(sq_fib, n - 2)
    return a.result() + b.result()


def dask_fib(n):
    from distributed import get_client, rejoin, secede
    if n < 2:
        return n
    c = get_client()
    a = c.submit(dask_fib, n - 1, pure=False)
    b = c.submit(dask_fib, n - 2, pure=False)
    secede()
    r = a.result() + b.result()
    rejoin()
    return r


def bench_squall(n):
    import squall
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        assert client.submit(sq_fib, 8).result() == _fib(8)
        t0 = time.perf_counter()
        assert client.submit(sq_fib, n).result() == _fib(n)
        return _tasks(n) / (time.perf_counter() - t0)


def bench_dask(n):
    import logging
    from distributed import Client, LocalCluster
    logging.getLogger("distributed").setLevel(logging.ERROR)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        assert client.submit(dask_fib, 8, pure=False).result() == _fib(8)
        t0 = time.perf_counter()
        assert client.submit(dask_fib, n, pure=False).result() == _fib(n)
        return _tasks(n) / (time.perf_counter() - t0)


def bench_ray(n):
    import ray
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        @ray.remote
        def fib(k):
            if k < 2:
                return k
            return sum(ray.get([fib.remote(k - 1), fib.remote(k - 2)]))
        assert ray.get(fib.remote(8)) == _fib(8)
        t0 = time.perf_counter()
        assert ray.get(fib.remote(n)) == _fib(n)
        return _tasks(n) / (time.perf_counter() - t0)
    finally:
        ray.shutdown()


def _elsewhere(python, name, n):
    """Runs this script's bench of one system in another interpreter."""
    out = subprocess.run([python, __file__, "--n", str(n), "--only", name, "--json"],
                         capture_output=True, text=True)
    if out.returncode:
        return None, out.stderr.strip().splitlines()[-1:] or ["failed"]
    return json.loads(out.stdout.strip().splitlines()[-1]).get(name), None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--only", default="squall,dask,ray")
    parser.add_argument("--dask-python")
    parser.add_argument("--ray-python")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rates, notes = {}, {}
    for name, fn, other in (("squall", bench_squall, None), ("dask", bench_dask, args.dask_python),
                            ("ray", bench_ray, args.ray_python)):
        if name not in args.only.split(","):
            continue
        if other:
            rates[name], why = _elsewhere(other, name, args.n)
            if why:
                notes[name] = why[0]
            continue
        try:
            rates[name] = fn(args.n)
        except ImportError as exc:
            notes[name] = "not installed (%s)" % exc
    if args.json:
        print(json.dumps(rates))
        return
    print("fib(%d) through nested submits: %d tasks, 2 workers x 1 cpu" % (args.n, _tasks(args.n)))
    for name in ("squall", "dask", "ray"):
        if name in rates and rates[name]:
            ratio = ""
            if name != "squall" and rates.get("squall"):
                ratio = "  (squall %.2fx)" % (rates["squall"] / rates[name])
            print("  %-7s %9.0f tasks/s%s" % (name, rates[name], ratio))
        elif name in notes:
            print("  %-7s %s" % (name, notes[name]))


if __name__ == "__main__":
    sys.exit(main())
