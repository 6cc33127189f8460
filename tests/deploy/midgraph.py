"""A graph for test_netns.py's drain and join: N Python tasks, each logging
its index to RUNLOG (every namespace sees the same file system) and
returning about 10 KB (so its result stays on a governor, not in the
broker). Prints SUBMITTED once the graph is in, then waits for every result,
checks each, and prints RESULTS OK (exit 0) or RESULTS BAD (exit 1).

    python3 midgraph.py RUNLOG N      ($SQUALL_BROKER, keys from the environment)
"""
import os
import sys

import squall


def work(i, runlog):
    import time
    with open(runlog, "a") as f:
        f.write("%d\n" % i)
    time.sleep(0.4)
    return ("t%d " % i) * 2000


def main():
    runlog, n = sys.argv[1], int(sys.argv[2])
    client = squall.Client(os.environ["SQUALL_BROKER"])
    futures = client.map(work, range(n), [runlog] * n)     # sent in one request
    print("SUBMITTED", flush=True)
    results = [f.result(timeout=120) for f in futures]
    ok = all(r == ("t%d " % i) * 2000 for i, r in enumerate(results))
    print("RESULTS", "OK" if ok else "BAD", flush=True)
    client.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
