"""Client, LocalCluster and connection errors."""
import socket

import pytest

import squall
from conftest import cluster_options, finalised_under_lock


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_local_cluster_context_and_address():
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        assert cluster.address.startswith("tcp://127.0.0.1:")
        procs = cluster.governors
        client = cluster.client()
        info = client.info()
        assert isinstance(info, dict)
        assert client.submit(lambda: 5).result(timeout=30) == 5
    assert all(p.poll() is not None for p in procs)


def test_a_cluster_collected_in_a_thread_a_client_lock_holder_waits_for():
    # LocalCluster's finaliser closes its clients: never waiting for their
    # locks (the collector may run it in a thread the holder of one waits
    # for), they close as the lock is let go; its processes stop
    cluster = squall.LocalCluster(governors=1, cpus=1, **cluster_options())
    procs = cluster.governors
    client = cluster.client()
    assert isinstance(client.info(), dict)
    lock, handle = client._lock, client._h
    box = [cluster]
    del cluster
    finalised_under_lock(box, lock, handle, "cluster")
    assert all(p.poll() is not None for p in procs)


def test_connection_error_names_address():
    address = "tcp://127.0.0.1:%d" % _free_port()
    with pytest.raises(squall.ConnectionError) as info:
        squall.Client(address, timeout=0.3)
    assert info.value.address == address
    assert address in str(info.value)
    assert isinstance(info.value, ConnectionError)


def test_default_address_from_environment(cluster, monkeypatch):
    monkeypatch.setenv("SQUALL_BROKER", cluster.address)
    monkeypatch.setenv("SQUALL_SECRET_KEY", cluster.secret_key)
    monkeypatch.setenv("SQUALL_BROKER_KEY", cluster.broker_key)
    with squall.Client() as client:
        assert client.address == cluster.address
        assert client.submit(int, "7").result(timeout=30) == 7
    monkeypatch.delenv("SQUALL_BROKER")
    address = "tcp://127.0.0.1:%d" % _free_port()
    # the documented default when nothing is set
    assert squall._client.DEFAULT_ADDRESS == "tcp://127.0.0.1:7760"
    with pytest.raises(squall.ConnectionError):
        squall.Client(address, timeout=0.2)


def test_local_cluster_needs_its_keys(cluster, tmp_path):
    """A LocalCluster is closed to strangers: no keys, or keys it does not
    know, get no connection; its own keys do."""
    with pytest.raises(squall.ConnectionError):
        squall.Client(cluster.address, timeout=0.5)
    stranger = squall.keygen("stranger", str(tmp_path))
    with pytest.raises(squall.ConnectionError):
        squall.Client(cluster.address, timeout=0.5, secret_key=stranger,
                      broker_key=cluster.broker_key)
    with pytest.raises(squall.SquallError):
        squall.Client(cluster.address, timeout=0.5, secret_key=stranger)
    with squall.Client(cluster.address, secret_key=cluster.secret_key,
                       broker_key=cluster.broker_key) as client:
        assert client.submit(len, "abc").result(timeout=30) == 3


def test_keygen_files(tmp_path):
    import os
    import stat
    key = squall.keygen("alice", str(tmp_path), role="client", tenant="team")
    assert key == str(tmp_path / "alice.key")
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    pub = (tmp_path / "alice.pub").read_text()
    assert 'role = "client"' in pub and 'tenant = "team"' in pub and "secret-key" not in pub
    assert "secret-key" in open(key).read()
    with pytest.raises(squall.SquallError):
        squall.keygen("alice", str(tmp_path))        # never overwrites a key
    with pytest.raises(squall.SquallError):
        squall.keygen("bad name", str(tmp_path))


def test_progress_only_on_a_tty():
    import io
    from squall._progress import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    plain = io.StringIO()
    with Progress(1000, stream=plain) as p:
        p.update(500)
    assert plain.getvalue() == ""
    tty = Tty()
    with Progress(1000, stream=tty) as p:
        p.update(500)
    assert "500/1000" in tty.getvalue() and tty.getvalue().endswith("\n")
