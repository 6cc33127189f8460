#!/usr/bin/env python3
"""What an `execute` task's input file costs (issue 29): a Python task
makes an object of SIZE MiB on a governor (a shared segment in its store);
an execute task on the same governor takes it as a file (`wc -c in`), and
the same program runs without the input. The difference is writing the
governor's memory into the task's directory (governor/execute.c,
s_write_inputs), a copy. Medians of R.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/execute_inputs.py [SIZE_MIB] [R]
"""
import os
import statistics
import sys
import time

import squall
from squall.tasks import Execute


def _bytes(n):
    return b"a" * n


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    with squall.LocalCluster(governors=1, cpus=1) as cluster, cluster.client() as client, \
            client.session() as s:
        made = squall.remote(_bytes)(mib << 20)
        made.output.keep()
        s.submit()
        made.output.fetch(600)
        timings = {"with the input file": [], "without": []}
        for _ in range(rounds + 1):
            for label in timings:
                if label == "without":
                    task = Execute("wc -c < /dev/null", stdout=True)
                else:
                    task = Execute("wc -c in", inputs=[("in", made.output)], stdout=True)
                task.output.keep()
                t0 = time.perf_counter()
                s.submit()
                out = task.output.fetch(600)
                timings[label].append(time.perf_counter() - t0)
                assert int(out.split()[0]) >= (0 if label == "without" else mib << 20)
        for label in timings:
            timings[label] = statistics.median(timings[label][1:])
        extra = timings["with the input file"] - timings["without"]
        print("input of %d MiB: task %.1f ms with it, %.1f ms without: %.1f ms, %.2f GiB/s"
              % (mib, timings["with the input file"] * 1e3, timings["without"] * 1e3,
                 extra * 1e3, (mib / 1024) / extra if extra > 0 else float("inf")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
