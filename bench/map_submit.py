#!/usr/bin/env python3
"""Building and submitting a graph of N Python tasks with client.map from
Python (issue 18: 1 000 000 in under 5 s), and the memory it costs.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/map_submit.py [N]

Prints the time from calling client.map to having every task accepted by
the broker (map returns after the SUBMIT's reply), the time to the first
result, the broker's and this client's resident memory per task (VmRSS
before and after), then the time to run them all on 2 governors x 1 cpu.
"""
import os
import sys
import time

import squall


def noop(x=None):
    return None


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) << 10
    return 0


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        client.gather(client.map(noop, range(100)))         # executors up
        broker = cluster._broker.pid
        b0, c0 = rss(broker), rss(os.getpid())
        t0 = time.perf_counter()
        futures = client.map(noop, range(n))
        t1 = time.perf_counter()
        futures[0].result()
        t2 = time.perf_counter()
        b1, c1 = rss(broker), rss(os.getpid())
        print("client.map of %d Python tasks: built and submitted in %.2f s (%.0f tasks/s), "
              "first result after %.2f s" % (n, t1 - t0, n / (t1 - t0), t2 - t0))
        print("memory per task: broker %.0f B, client %.0f B (resident, before any ran)"
              % ((b1 - b0) / n, (c1 - c0) / n))
        t3 = time.perf_counter()
        client.gather(futures)
        print("ran in %.2f s more (%.0f tasks/s)" % (time.perf_counter() - t3,
                                                  n / (time.perf_counter() - t0)))
        print("RESULT map_submit_s=%.3f broker_bytes_per_task=%.0f client_bytes_per_task=%.0f"
              % (t1 - t0, (b1 - b0) / n, (c1 - c0) / n))


if __name__ == "__main__":
    main()
