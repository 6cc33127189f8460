#!/usr/bin/env python3
"""Moving results by hand on a local squall cluster: a broadcast join and a
repartition.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 examples/repartition.py

1. Broadcast join: a lookup table is scattered to every governor once
   (`broadcast=True`), then every partition is joined with it where it is.
2. Repartition: partitions keyed by customer are split into buckets, the
   buckets of one key range are gathered into a new partition placed on a
   governor chosen by hand (`move`), and the old partitions are deleted at
   once (`delete`) rather than when their futures are garbage-collected.
"""
import random

import squall


def make_orders(seed, n):
    rng = random.Random(seed)
    return [(rng.randrange(100), rng.randrange(1, 50)) for _ in range(n)]


def join(orders, table):
    return [(customer, amount, table[customer]) for customer, amount in orders]


def bucket(rows, lo, hi):
    return [row for row in rows if lo <= row[0] < hi]


def merge(*buckets):
    return sorted(row for b in buckets for row in b)


def main() -> None:
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        governors = [g["id"] for g in client.governors()]

        # 1. broadcast join
        # (a dict given to scatter is scattered value by value: wrap it)
        table = client.scatter([{c: "region-%d" % (c % 7) for c in range(100)}],
                               broadcast=True)[0]
        print("lookup table on governors", sorted(table.where()))
        parts = [client.submit(make_orders, seed, 20_000) for seed in range(4)]
        joined = [client.submit(join, part, table) for part in parts]
        print("joined rows:", sum(client.gather(client.map(len, joined))))

        # 2. repartition into two key ranges, each on a governor chosen here
        ranges = [(0, 50), (50, 100)]
        new_parts = []
        for (lo, hi), governor in zip(ranges, governors * len(ranges)):
            buckets = [client.submit(bucket, part, lo, hi) for part in joined]
            merged = client.submit(merge, *buckets)
            merged.move(governor)
            new_parts.append(merged)
        client.delete(joined + parts)       # freed on every governor now
        for (lo, hi), part in zip(ranges, new_parts):
            rows = part.result()
            print("customers %d-%d: %d rows on governor %s"
                  % (lo, hi - 1, len(rows), part.where()))


if __name__ == "__main__":
    main()
