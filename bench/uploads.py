#!/usr/bin/env python3
"""Time to submit a session's large constants (issue 29: parallel uploads
of client constants, uploads on one host).
    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/uploads.py
    options: --count N (48) --size BYTES (1 MiB) --repeat R (3, best kept)
A LocalCluster(governors=2, cpus=1); a session of N constants of SIZE
random bytes each (`s.blob`), all kept; the time of `s.submit()` (the
uploads to governors and the SUBMIT), then every constant fetched back and
checked equal. Two clients in turn: "put", not given the governors' stream
directory (its uploads go by PUT over CURVE, as from another host), and
"local", given it (memory files handed over, docs/security.md, "Uploads on
one host"); a build without the local path runs "put" only.
"""
import argparse
import os
import time

import squall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=48)
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    values = [os.urandom(args.size) for _ in range(args.count)]
    has_local = "local_dir" in squall.Client.__init__.__code__.co_varnames
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        times = {}
        for _ in range(args.repeat):
            for mode in ("put", "local") if has_local else ("put",):
                extra = {"local_dir": cluster.local_dir if mode == "local" else None} \
                    if has_local else {}
                client = squall.Client(cluster.address, secret_key=cluster.secret_key,
                                       broker_key=cluster.broker_key, **extra)
                with client.session() as s:
                    objs = [s.blob(v) for v in values]
                    for o in objs:
                        o.keep()
                    t0 = time.perf_counter()
                    s.submit()
                    times.setdefault(mode, []).append(time.perf_counter() - t0)
                    for o, v in zip(objs, values):
                        assert o.fetch(60) == v
                client.close()
        for mode, ts in times.items():
            print("%-6s %d constants of %d KiB: submitted in %.1f ms (best of %d; all: %s)"
                  % (mode, args.count, args.size >> 10, min(ts) * 1e3, len(ts),
                     " ".join("%.0f" % (t * 1e3) for t in ts)), flush=True)


if __name__ == "__main__":
    main()
