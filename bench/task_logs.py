#!/usr/bin/env python3
"""What capturing every task's stdout and stderr costs (governor/tasklog.c):
N tiny Python tasks (client.map + gather) and N/4 execute tasks of `true`,
on one governor with 2 cpus, best of 3, with the build SQUALL_BUILD_DIR
names. Run it against a build without task logs (an older checkout) and
this one, in the same minutes, and compare the per-task times.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/task_logs.py [N]
"""
import sys
import time

import squall
from squall.tasks import Execute

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000


def tiny(i):
    return i


def main():
    with squall.LocalCluster(governors=1, cpus=2) as c, c.client() as client:
        client.gather(client.map(tiny, range(100)))          # executors warm
        best_py = best_ex = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            client.gather(client.map(tiny, range(N)))
            best_py = min(best_py, time.perf_counter() - t)
            with client.session() as s:
                ts = [Execute(["true"]) for _ in range(N // 4)]
                t = time.perf_counter()
                s.submit()
                s.wait(ts, 600)
                best_ex = min(best_ex, time.perf_counter() - t)
        print("py %d tasks: %.3f s (%.1f us/task); execute %d: %.3f s (%.1f us/task)"
              % (N, best_py, 1e6 * best_py / N, N // 4, best_ex, 1e6 * best_ex / (N // 4)))


if __name__ == "__main__":
    main()
