"""What the actor benches share: the actor's class and squall's set-up.

bench/actors.py, bench/actors_cpu.py and bench/actors_client_cpu.py call
one Counter, started in a LocalCluster(governors=2, cpus=1). The class is
found by reference (LocalCluster gives its governors the client's sys.path,
this folder in it); for the peers' processes (Ray, Dask), which are given no
such path, cloudpickle is told to send this module by value, as it sends a
class of __main__.
"""
import contextlib
import sys

try:
    import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
except (ImportError, AttributeError):   # no cloudpickle, or one older than 2.0
    pass


class Counter:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n

    def size(self, b):
        self.n += 1
        return self.n + len(b) - len(b)


@contextlib.contextmanager
def squall_actor(local=True):
    """(client, actor): a Counter in a LocalCluster(governors=2, cpus=1), for
    a client given the governors' stream directory (local) or not, so that
    its large arguments go by PUT over CURVE, as from another host."""
    import squall
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = squall.Client(cluster.address, secret_key=cluster.secret_key,
                               broker_key=cluster.broker_key,
                               local_dir=cluster.local_dir if local else None)
        try:
            yield client, client.actor(Counter)
        finally:
            client.close()
