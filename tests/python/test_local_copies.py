"""Copies on one host (docs/protocol.md, "Copies on one host (LCOPY)";
docs/security.md, "Copies on one host"): an object held in a memory file
on one governor, needed by a task on another governor sharing its stream
directory, goes as that file (no byte copied, counted in INFO's
copies_local, per tenant) and arrives equal; the copy outlives its holder;
governors of different directories (as on two hosts) copy in chunks as
ever."""
import os
import signal

import pytest

import squall
from conftest import TIMEOUT, cluster_options, until

np = pytest.importorskip("numpy")

N = 1 << 20                                     # 8 MiB of float64


def make(n, value):
    import numpy
    return numpy.arange(n, dtype=numpy.float64) * value


def read(a):
    """The array's sum and the name of the mapping its data lies in."""
    address = a.__array_interface__["data"][0]
    name = ""
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if low <= address < high:
                name = " ".join(fields[5:])
    return float(a.sum()), a.shape, name


def _copies(client):
    return client.info()["copies_local"]


def _want(value):
    return float(np.arange(N, dtype=np.float64).sum() * value)


def _two_governors(cluster, dirs=None):
    """Governors "a" and "b" (resources of those names); dirs: their own
    stream directories instead of the cluster's shared one."""
    procs = []
    for i, name in enumerate("ab"):
        args = ["--resource", name + "=1"]
        if dirs:
            args += ["--stream-dir", str(dirs[i])]
        procs.append(cluster.add_governor(args=args))
    return procs


def test_an_object_goes_to_a_governor_of_this_host_as_its_memory_file():
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        holder, _ = _two_governors(cluster)
        with cluster.client() as client:
            before = _copies(client)
            made = client.submit(make, N, 3.0, resources={"a": 1})
            got = client.submit(read, made, resources={"b": 1}).result(timeout=TIMEOUT)
            assert got[0] == _want(3.0) and got[1] == (N,)
            assert got[2].startswith("/memfd:squall"), got
            assert _copies(client) == before + 1
            #   The holder goes (its store, its memory file with it): the
            #   copy lives on in the pages the other governor holds, read
            #   there again without running make again.
            recomputed = client.info()["recomputed"]
            holder.send_signal(signal.SIGKILL)
            holder.wait(TIMEOUT)
            got = client.submit(read, made, resources={"b": 1}).result(timeout=TIMEOUT)
            assert got[0] == _want(3.0)
            assert client.info()["recomputed"] == recomputed
            assert _copies(client) == before + 1


def test_governors_of_other_directories_copy_in_chunks(tmp_path):
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        _two_governors(cluster, [tmp_path / "a", tmp_path / "b"])
        with cluster.client() as client:
            before = _copies(client)
            made = client.submit(make, N, 5.0, resources={"a": 1})
            got = client.submit(read, made, resources={"b": 1}).result(timeout=TIMEOUT)
            assert got[0] == _want(5.0) and got[1] == (N,)
            assert _copies(client) == before


def _tenant_client(cluster, name, tenant):
    """A client (no admin) of `tenant`: a key added to the broker's keyring,
    re-read on SIGHUP (as test_streams.py's)."""
    authorized = os.path.join(cluster._keydir, "authorized")
    key = squall.keygen("%s-%d" % (name, os.getpid()), authorized, "client", tenant=tenant)
    cluster.broker.send_signal(signal.SIGHUP)

    def connect():
        try:
            return squall.Client(cluster.address, secret_key=key, broker_key=cluster.broker_key,
                                 timeout=2.0)
        except squall.ConnectionError:
            return None
    return until(connect, "the broker to accept %s's key" % name)


def test_copies_local_is_counted_per_tenant():
    """INFO's copies_local shows a tenant its own copies; an admin (the
    cluster's own client) sees every tenant's."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        _two_governors(cluster)
        alice = _tenant_client(cluster, "alice", "team-a")
        bob = _tenant_client(cluster, "bob", "team-b")
        try:
            with cluster.client() as client:
                everyone = _copies(client)
                assert _copies(alice) == 0 and _copies(bob) == 0
                made = alice.submit(make, N, 2.0, resources={"a": 1})
                got = alice.submit(read, made, resources={"b": 1}).result(timeout=TIMEOUT)
                assert got[0] == _want(2.0)
                assert _copies(alice) == 1
                assert _copies(bob) == 0
                assert _copies(client) == everyone + 1
        finally:
            alice.close()
            bob.close()


def _remote_client(cluster):
    """A client not given the stream directory: its uploads go over CURVE
    in chunks (PUT), stored by the governor as received, not as a memory
    file."""
    env = os.environ.pop("SQUALL_LOCAL_DIR", None)
    try:
        return squall.Client(cluster.address, secret_key=cluster.secret_key,
                             broker_key=cluster.broker_key, timeout=10.0)
    finally:
        if env is not None:
            os.environ["SQUALL_LOCAL_DIR"] = env


def _sockets(cluster):
    return {n for n in os.listdir(cluster.local_dir)
            if n.endswith(".sock") and not n.startswith("put-")}


def test_a_segment_the_governor_made_goes_as_its_memory_file():
    """An object uploaded in chunks becomes, once a task on its governor
    reads it, a segment that governor wrote itself (store_get_shared):
    sealed against writes as an executor's result is, it goes to a
    governor of this host as that file too."""
    value = np.arange(N, dtype=np.float64) * 7.0
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        _two_governors(cluster)
        with _remote_client(cluster) as client, cluster.client() as admin:
            uploads = admin.info()["uploads_local"]
            before = _copies(admin)
            x = client.scatter(value, governor="local-2")
            got = client.submit(read, x, resources={"a": 1}).result(timeout=TIMEOUT)
            assert got[0] == _want(7.0) and got[2].startswith("/memfd:squall"), got
            assert _copies(admin) == before
            got = client.submit(read, x, resources={"b": 1}).result(timeout=TIMEOUT)
            assert got[0] == _want(7.0) and got[1] == (N,)
            assert got[2].startswith("/memfd:squall"), got
            assert _copies(admin) == before + 1
            assert admin.info()["uploads_local"] == uploads
            assert np.array_equal(client.gather(x), value)


def test_a_copy_not_taken_on_this_host_goes_in_chunks():
    """The receiving governor cannot take the memory file: a socket of
    the test's stands where its own was, so the file handed over never
    reaches it; the LCOPY naming it is refused (CREDIT > 0) and the holder
    sends the copy in chunks, whole. Then with no socket there at all the
    holder does not hand over and sends chunks at once."""
    import socket
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        cluster.add_governor(args=["--resource", "a=1"])
        known = _sockets(cluster)
        cluster.add_governor(args=["--resource", "b=1"])
        (name,) = _sockets(cluster) - known
        path = os.path.join(cluster.local_dir, name)
        os.unlink(path)
        decoy = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        decoy.bind(path)
        try:
            with cluster.client() as client:
                before = _copies(client)
                made = client.submit(make, N, 11.0, resources={"a": 1})
                got = client.submit(read, made, resources={"b": 1}).result(timeout=TIMEOUT)
                assert got[0] == _want(11.0) and got[1] == (N,)
                assert _copies(client) == before
                #   The holder did hand the file over (to the decoy): the
                #   chunks came after the receiver's refusal.
                decoy.settimeout(TIMEOUT)
                token, fds, _, _ = socket.recv_fds(decoy, 64, 4)
                assert len(token) == 16 and len(fds) == 1
                for fd in fds:
                    os.close(fd)
                decoy.close()
                os.unlink(path)
                made = client.submit(make, N, 13.0, resources={"a": 1})
                got = client.submit(read, made, resources={"b": 1}).result(timeout=TIMEOUT)
                assert got[0] == _want(13.0) and got[1] == (N,)
                assert _copies(client) == before
        finally:
            decoy.close()


def test_a_hand_over_lost_with_its_holder_is_made_again():
    """The holder dies between handing its memory file over and the copy's
    end: as for a copy in chunks whose sender died, the broker makes the
    object again (its only copy went) and the reader gets it whole. The
    receiving governor is stopped while the holder hands the file over (to
    a socket of the test's standing where the receiver's was, so the file
    cannot be taken either way), then the holder is killed and the
    receiver let go on: the LCOPY it finds names a file it does not have,
    and its refusal goes to a dead holder. (10 heartbeats missed make a
    governor dead, not 5: the receiver stopped a while under a sanitizer
    must not be.)"""
    import socket
    with squall.LocalCluster(governors=1, cpus=1, broker_args=["--liveness", "10"],
                             **cluster_options()) as cluster:
        cluster.add_governor(args=["--resource", "a=1"])
        known = _sockets(cluster)
        receiver = cluster.add_governor(args=["--resource", "b=1"])
        (name,) = _sockets(cluster) - known
        path = os.path.join(cluster.local_dir, name)
        os.unlink(path)
        decoy = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        decoy.bind(path)
        decoy.settimeout(TIMEOUT)
        holder = cluster.governors[1]
        try:
            with cluster.client() as client:
                before = _copies(client)
                made = client.submit(make, N, 17.0, resources={"a": 1})
                made.result(timeout=TIMEOUT)
                cluster.add_governor(args=["--resource", "a=1"])     # to make it again
                recomputed = client.info()["recomputed"]
                receiver.send_signal(signal.SIGSTOP)
                try:
                    read_it = client.submit(read, made, resources={"b": 1})
                    _, fds, _, _ = socket.recv_fds(decoy, 64, 4)
                    for fd in fds:
                        os.close(fd)
                    holder.send_signal(signal.SIGKILL)
                    holder.wait(TIMEOUT)
                finally:
                    receiver.send_signal(signal.SIGCONT)
                got = read_it.result(timeout=TIMEOUT)
                assert got[0] == _want(17.0) and got[1] == (N,)
                assert client.info()["recomputed"] > recomputed
                assert _copies(client) == before
        finally:
            decoy.close()


def _governor(client, resource):
    (g,) = [g for g in client.info()["governors"] if resource in g["resources"]]
    return g


def test_a_shared_object_is_spilled_after_an_unshared_one():
    """Spilling prefers objects whose spill frees memory: one whose memory
    file the other governor of the host holds too (it came by LCOPY) stays
    while the governor spills an unshared one, though it was used longer
    ago. INFO's `shared` counts it on both governors. Governor "b" has 512
    MiB: its store spills above about 134 MiB, down to 96; three objects of
    46 MiB make it spill one."""
    n = 46 << 17                                # 46 MiB of float64
    size = n * 8
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        cluster.add_governor(args=["--resource", "a=1"])
        cluster.add_governor(args=["--resource", "b=1", "--memory", "512MiB"])
        with cluster.client() as client:
            before = _copies(client)
            shared = client.submit(make, n, 3.0, resources={"a": 1})
            got = client.submit(read, shared, resources={"b": 1}).result(timeout=TIMEOUT)
            assert got[0] == float(np.arange(n, dtype=np.float64).sum() * 3.0)
            assert _copies(client) == before + 1

            def counted():
                a, b = _governor(client, "a"), _governor(client, "b")
                return a["shared"] >= size and b["shared"] >= size and (a, b)
            a, b = until(counted, "both governors to count the copy shared")
            assert a["shared"] < size + (1 << 20) and b["shared"] < size + (1 << 20)
            assert b["spilled"] == 0
            #   Two objects made on "b" after it: the second passes the mark.
            unshared = client.submit(make, n, 5.0, resources={"b": 1})
            unshared.result(timeout=TIMEOUT)
            last = client.submit(make, n, 7.0, resources={"b": 1})
            last.result(timeout=TIMEOUT)
            b = until(lambda: (lambda g: g["spilled"] > 0 and g)(_governor(client, "b")),
                      "governor b to spill")
            #   One object spilled, not the shared one.
            assert size <= b["spilled"] < size + (1 << 20), b
            assert size <= b["shared"] < size + (1 << 20), b
            #   Every object reads back whole.
            for x, v in ((shared, 3.0), (unshared, 5.0), (last, 7.0)):
                got = client.submit(read, x, resources={"b": 1}).result(timeout=TIMEOUT)
                assert got[0] == float(np.arange(n, dtype=np.float64).sum() * v)
