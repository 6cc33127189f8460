#!/usr/bin/env python3
"""Actors on a local squall cluster: a parameter server that keeps state
across calls, fed by ordinary tasks.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 examples/actors.py

Workers (plain tasks) compute gradients of a tiny linear model on their
shards of data; the parameter server (an actor: one instance, in one
executor on one governor) applies them in the order the calls were made,
and hands out the current weights. A call takes a task's future as its
argument, so the gradient never comes back through the client.
"""
import random

import squall


def make_shard(seed, n=2000):
    rng = random.Random(seed)
    xs = [rng.uniform(-1, 1) for _ in range(n)]
    return [(x, 3.0 * x + 0.5 + rng.gauss(0, 0.01)) for x in xs]


def gradient(shard, weights):
    w, b = weights
    gw = sum((w * x + b - y) * x for x, y in shard) / len(shard)
    gb = sum((w * x + b - y) for x, y in shard) / len(shard)
    return gw, gb


@squall.actor
class ParameterServer:
    def __init__(self, rate):
        self.rate = rate
        self.weights = (0.0, 0.0)
        self.updates = 0

    def get(self):
        return self.weights

    def apply(self, grad):
        w, b = self.weights
        self.weights = (w - self.rate * grad[0], b - self.rate * grad[1])
        self.updates += 1
        return self.updates


def main():
    with squall.LocalCluster(governors=2, cpus=2) as cluster:
        client = cluster.client()
        shards = [client.submit(make_shard, seed) for seed in range(4)]
        server = ParameterServer.start(client, 0.2)
        for _ in range(40):
            weights = server.get()
            grads = [client.submit(gradient, shard, weights) for shard in shards]
            done = [server.apply(g) for g in grads]
        print("updates applied:", done[-1].result())
        w, b = server.get().result()
        print("learned w=%.2f b=%.2f" % (w, b))
        server.stop()
        client.close()


if __name__ == "__main__":
    main()
