"""Copies between governors of one host as memory files (LCOPY) against
chunks, in one run: bench/data_heavy.py's `mean` ((x + x.T).mean(), x
4000 x 4000 in 500 x 500 chunks) on 2 governors x 1 cpu that share a stream
directory (copies handed over) and on 2 that have one each (copies in
chunks over CURVE, as before LCOPY), alternated, with Dask's threaded
scheduler (2 threads) beside them. Needs numpy and dask[array] (not
pandas). Prints the best time of each, the result (checked equal) and the
copies handed over (INFO copies_local).

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


def mean():
    x = da.random.RandomState(1).random_sample((4000, 4000), chunks=(500, 500))
    return (x + x.T).mean()


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
            client = cluster.client()
            before = client.info()["copies_local"]
            t, value = _best(lambda: dask.compute(mean(), scheduler=client.get)[0], repeat)
            return t, value, client.info()["copies_local"] - before


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
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
