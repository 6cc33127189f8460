"""Copies between governors of one host as memory files (LCOPY) against
chunks, in one run: bench/data_heavy.py's `mean` ((x + x.T).mean(), x
4000 x 4000 in 500 x 500 chunks) on 2 governors x 1 cpu that share a stream
directory (copies handed over) and on 2 that have one each (copies in
chunks over CURVE, as before LCOPY), alternated, with Dask's threaded
scheduler (2 threads) beside them. Needs numpy and dask[array] (not
pandas). Prints the best time of each, the result (checked equal) and the
copies handed over (INFO copies_local).

--from-array: x is a numpy array of the client's (da.from_array), and the
client is not given the stream directory (as one on another host or in a
container without it): the array goes to one governor over CURVE in
chunks, and a governor copies it into a segment of its own for its
executors; the other governor's tasks need it too (before: a copy in
chunks; now that governor's own segment handed over).

    SQUALL_BUILD_DIR=build PYTHONPATH=bindings/python python3 bench/local_copies.py
"""
import argparse
import os
import tempfile
import time

import dask
import dask.array as da

import squall
import squall.dask  # noqa: F401  (client.get as a Dask scheduler)


_ARRAY = None


def mean():
    if _ARRAY is not None:
        x = da.from_array(_ARRAY, chunks=(500, 500))
    else:
        x = da.random.RandomState(1).random_sample((4000, 4000), chunks=(500, 500))
    return (x + x.T).mean()


def _client(cluster):
    if _ARRAY is None:
        return cluster.client()
    os.environ.pop("SQUALL_LOCAL_DIR", None)
    return squall.Client(cluster.address, secret_key=cluster.secret_key,
                         broker_key=cluster.broker_key)


def _best(compute, repeat):
    times, value = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = float(compute())
        times.append(time.perf_counter() - t0)
    return min(times), value


def run_squall(shared, repeat):
    with tempfile.TemporaryDirectory() as d:
        with squall.LocalCluster(governors=2 if shared else 0, cpus=1) as cluster:
            if not shared:
                for i in range(2):
                    cluster.add_governor(args=["--stream-dir", os.path.join(d, str(i))])
            client = _client(cluster)
            before = client.info()["copies_local"]
            t, value = _best(lambda: dask.compute(mean(), scheduler=client.get)[0], repeat)
            copies = client.info()["copies_local"] - before
            client.close()
            return t, value, copies


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--from-array", action="store_true")
    args = ap.parse_args()
    if args.from_array:
        import numpy
        global _ARRAY
        _ARRAY = numpy.random.RandomState(1).random_sample((4000, 4000))
    for r in range(args.rounds):
        t, want = _best(lambda: dask.compute(mean(), scheduler="threads", num_workers=2)[0],
                        args.repeat)
        print("round %d threaded        %.3f s" % (r, t), flush=True)
        for shared in (True, False):
            t, value, copies = run_squall(shared, args.repeat)
            assert abs(value - want) < 1e-9, (value, want)
            print("round %d squall %-8s %.3f s, %d copies handed over"
                  % (r, "shared" if shared else "separate", t, copies), flush=True)


if __name__ == "__main__":
    main()
