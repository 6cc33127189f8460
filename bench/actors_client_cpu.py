#!/usr/bin/env python3
"""The client's CPU per actor call, split into making the calls and gathering them.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/actors_client_cpu.py [ROUNDS]

One actor (bench/actor_cluster.py's Counter in a LocalCluster(governors=2,
cpus=1)); each of ROUNDS (4) rounds makes 20 000 calls `add(1)` without
waiting, then gathers them and checks their order. time.process_time (all
the client's threads) is read around each phase. Prints the least and
every round's figure per phase. Compare two builds alternately, in the same
period: on a loaded machine one run says little.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from actor_cluster import squall_actor         # noqa: E402

N = 20000


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    with squall_actor() as (client, actor):
        client.gather([actor.add(0) for _ in range(200)])
        made, gathered = [], []
        for _ in range(rounds):
            t0 = time.process_time()
            futures = [actor.add(1) for _ in range(N)]
            t1 = time.process_time()
            got = client.gather(futures)
            t2 = time.process_time()
            assert got == list(range(got[0], got[0] + N)), "calls out of order"
            made.append((t1 - t0) / N * 1e6)
            gathered.append((t2 - t1) / N * 1e6)
            del futures, got
        print("make %.1f gather %.1f us/call (least of %d; all make %s gather %s)" % (
            min(made), min(gathered), rounds, " ".join("%.1f" % x for x in made),
            " ".join("%.1f" % x for x in gathered)))


if __name__ == "__main__":
    main()
