#!/usr/bin/env python3
"""Tasks that submit tasks, on a local squall cluster: a recursive
Fibonacci where every call is a task that submits its two children and
waits for them.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 examples/nested.py

Inside a task, squall.get_client() is a client of the same cluster, as the
tenant that submitted the task, with a key the governor made for this task
alone (the task never sees your key). A task that waits on its children
gives its cpu back meanwhile, so this recursion, far deeper than the two
cpus of the cluster, finishes. A child's exception reaches its parent as
itself: here the parent catches the ValueError of a child it gave a bad
argument. A task may also return its children's futures: the caller gets
futures of its own, whose values go from governor to governor, never
through the task that made them.
"""
import squall


def fib(n):
    if n < 0:
        raise ValueError("fib of a negative number: %d" % n)
    if n < 2:
        return n
    client = squall.get_client()
    a = client.submit(fib, n - 1)
    b = client.submit(fib, n - 2)
    return a.result() + b.result()


def careful(n):
    try:
        return squall.get_client().submit(fib, n).result()
    except ValueError as exc:
        return "the child said: %s" % exc


def split(n):
    """Starts a child per part and returns their futures, not their values."""
    client = squall.get_client()
    return [client.submit(fib, k) for k in range(n)]


def main():
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        print("fib(12) =", client.submit(fib, 12).result())
        print(client.submit(careful, -1).result())
        parts = client.submit(split, 8).result()
        print("futures a task returned:", client.gather(parts),
              "summed by another task:", client.submit(sum, parts).result())


if __name__ == "__main__":
    main()
