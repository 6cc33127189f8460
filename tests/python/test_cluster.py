"""Client, LocalCluster and connection errors."""
import socket

import pytest

import squall
from conftest import cluster_options


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


def test_connection_error_names_address():
    address = "tcp://127.0.0.1:%d" % _free_port()
    with pytest.raises(squall.ConnectionError) as info:
        squall.Client(address, timeout=0.3)
    assert info.value.address == address
    assert address in str(info.value)
    assert isinstance(info.value, ConnectionError)


def test_default_address_from_environment(cluster, monkeypatch):
    monkeypatch.setenv("SQUALL_BROKER", cluster.address)
    with squall.Client() as client:
        assert client.address == cluster.address
        assert client.submit(int, "7").result(timeout=30) == 7
    monkeypatch.delenv("SQUALL_BROKER")
    address = "tcp://127.0.0.1:%d" % _free_port()
    # the documented default when nothing is set
    assert squall._core.DEFAULT_ADDRESS == "tcp://127.0.0.1:7760"
    with pytest.raises(squall.ConnectionError):
        squall.Client(address, timeout=0.2)


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
