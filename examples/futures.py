#!/usr/bin/env python3
"""Futures on a local squall cluster: submit, map, gather, as_completed.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 examples/futures.py
(or just `python3 examples/futures.py` after `pip install ./bindings/python`)
"""
import math

import squall


def is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1))


def main() -> None:
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        flags = client.map(is_prime, range(10_000))
        # futures are arguments of other tasks: the flags never come back here
        count = client.submit(lambda fs: sum(fs), flags)
        print("primes below 10000:", count.result())

        squares = [client.submit(lambda x: x * x, i) for i in range(5)]
        for future in squall.as_completed(squares):
            print("done:", future.result())

        # a task's own exception is raised here, with the remote traceback
        # as its cause
        bad = client.submit(lambda: 1 / 0)
        try:
            bad.result()
        except ZeroDivisionError as error:
            print("failed as expected:", error)


if __name__ == "__main__":
    main()
