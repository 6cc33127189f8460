"""Uploads on one host (docs/protocol.md, "Uploads on one host (PUTLOCAL)";
docs/security.md, "Uploads on one host"): a client given the governors'
stream directory hands large constants over as memory files, bound to a
token sent over its CURVE channel; a hand-over without its token is
refused and the constant goes by PUT; a client elsewhere (no directory, or
no governor's socket in it) uploads by PUT; a client killed between its
hand-over and its PUTLOCAL leaves nothing on the governor; a segment goes
when its object goes."""
import glob
import os
import socket
import subprocess
import sys
import tempfile

import pytest

import squall

from conftest import TIMEOUT, cluster_options, tenant_client, until

MIB = 1 << 20


class Keeper:
    """An actor: what each large argument it was given was."""

    def digest(self, x):
        import hashlib
        return hashlib.sha256(memoryview(x).cast("B")).hexdigest(), x.shape, x.flags.writeable


def _digest(x):
    import hashlib
    return hashlib.sha256(memoryview(x).cast("B")).hexdigest(), x.shape, x.flags.writeable


def _local(client):
    """INFO's uploads_local once the broker has matched every upload's
    claim (the SUBMIT) with its governor's confirmation (UPLOADED): the two
    come on different connections, so a submit can return before the
    governor's report is counted."""
    until(lambda: client.info()["uploads"] == 0, "the broker to match every upload")
    return client.info()["uploads_local"]


def _segments_in(pid, name):
    """Descriptors and mappings of process pid onto memory files called
    `name` (memfd:NAME in /proc)."""
    found = 0
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            found += ("memfd:" + name + " ") in os.readlink(os.path.join(fd_dir, fd)) + " "
        except OSError:
            pass
    with open("/proc/%d/maps" % pid) as f:
        found += sum(1 for line in f if "/memfd:" + name + " " in line + " ")
    return found


@pytest.fixture(scope="module")
def one_host():
    """Governors of this host sharing a stream directory (LocalCluster's)."""
    with squall.LocalCluster(governors=1, cpus=2, **cluster_options()) as c:
        yield c


def _client(cluster, local_dir):
    return squall.Client(cluster.address, secret_key=cluster.secret_key,
                         broker_key=cluster.broker_key, local_dir=local_dir)


@pytest.mark.parametrize("size", [MIB, 64 * MIB])
def test_numpy_arguments_arrive_equal_through_the_same_host_path(one_host, size):
    np = pytest.importorskip("numpy")
    client = one_host.client()
    assert one_host.local_dir
    rng = np.random.default_rng(size)
    x = rng.random(size // 8)
    want = (_digest(x)[0], x.shape)
    keeper = client.actor(Keeper)
    before = _local(client)
    got = keeper.digest(x).result(TIMEOUT)
    assert got[:2] == want and got[2] is False      # read in place, read-only
    assert _local(client) == before + 1
    got = client.submit(_digest, x).result(TIMEOUT)
    assert got[:2] == want
    assert _local(client) == before + 2
    client.close()


def test_the_remote_path_still_works(one_host, tmp_path):
    """Without a directory, or with one where its governor has no socket
    (a governor on another host): PUT, and the value is the same."""
    np = pytest.importorskip("numpy")
    elsewhere = str(tmp_path / "elsewhere")
    os.mkdir(elsewhere, 0o700)
    x = np.arange(2 * MIB // 8, dtype=np.int64)
    for local_dir in (None, elsewhere):
        client = _client(one_host, local_dir)
        before = _local(client)
        keeper = client.actor(Keeper)
        assert keeper.digest(x).result(TIMEOUT)[:2] == _digest(x)[:2]
        assert client.submit(_digest, x).result(TIMEOUT)[:2] == _digest(x)[:2]
        assert _local(client) == before
        client.close()


def test_a_directory_open_to_others_is_refused(tmp_path):
    open_dir = str(tmp_path / "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o755)
    with pytest.raises(squall.SquallError, match="closed to others"):
        squall.Client("tcp://127.0.0.1:1", local_dir=open_dir)


def test_a_hand_over_without_its_token_is_refused(one_host):
    """The client's memory file goes to a socket standing in for the
    governor's (the same user could make one): the governor never got it,
    so the PUTLOCAL naming its token is refused, and the constant goes by
    PUT, equal."""
    np = pytest.importorskip("numpy")
    (put,) = glob.glob(os.path.join(one_host.local_dir, "put-*.sock"))
    real = put + ".real"
    os.rename(put, real)
    thief = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        thief.bind(put)
        client = one_host.client()
        before = _local(client)
        x = np.arange(MIB // 8, dtype=np.float64) * 3
        assert client.submit(_digest, x).result(TIMEOUT)[:2] == _digest(x)[:2]
        assert _local(client) == before
        # the stand-in was handed the file, with a token
        msg, fds, _, _ = socket.recv_fds(thief, 64, 1, socket.MSG_DONTWAIT)
        assert len(msg) == 16 and len(fds) == 1
        os.close(fds[0])
        # several in one submit (uploaded together): each refused, each by PUT
        with client.session() as s:
            values = [os.urandom(MIB + i) for i in range(5)]
            objs = [s.blob(v) for v in values]
            for o in objs:
                o.keep()
            s.submit()
            assert [o.fetch(TIMEOUT) for o in objs] == values
        assert _local(client) == before
        for _ in values:
            msg, fds, _, _ = socket.recv_fds(thief, 64, 1, socket.MSG_DONTWAIT)
            assert len(msg) == 16 and len(fds) == 1
            os.close(fds[0])
        client.close()
    finally:
        thief.close()
        os.unlink(put)
        os.rename(real, put)
    # the governor's own name back: the path is used again
    client = one_host.client()
    before = _local(client)
    x = np.arange(MIB // 8, dtype=np.float64)
    assert client.submit(_digest, x).result(TIMEOUT)[:2] == _digest(x)[:2]
    assert _local(client) == before + 1
    client.close()


_HAND_OVER_AND_DIE = r"""
import os, socket, sys
fd = os.memfd_create("squall-test-killed", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
os.write(fd, b"k" * (1 << 20))
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect(sys.argv[1])
socket.send_fds(s, [os.urandom(16)], [fd])
print("handed", flush=True)
sys.stdin.read()            # killed here, before any PUTLOCAL
"""


def test_a_client_killed_mid_hand_over_leaks_no_segment(one_host):
    (put,) = glob.glob(os.path.join(one_host.local_dir, "put-*.sock"))
    gov = one_host._governors[0].pid
    child = subprocess.Popen([sys.executable, "-c", _HAND_OVER_AND_DIE, put],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdout.readline() == b"handed\n"
    child.kill()
    child.wait()
    # the governor took it in (its socket is in its poll set) ...
    until(lambda: _segments_in(gov, "squall-test-killed"), "the governor to hold the file")
    # ... and closes it unclaimed (after 20 s): no descriptor, no mapping
    until(lambda: _segments_in(gov, "squall-test-killed") == 0,
          "the unclaimed file to be closed", timeout=TIMEOUT)


def test_the_segment_goes_with_its_object(one_host):
    np = pytest.importorskip("numpy")
    gov = one_host._governors[0].pid
    client = one_host.client()
    base = _segments_in(gov, "squall-put")
    before = _local(client)
    with client.session() as s:
        value = s.pickled(np.ones(4 * MIB // 8))
        value.keep()
        s.submit()
        assert _local(client) == before + 1
        until(lambda: _segments_in(gov, "squall-put") > base, "the governor to map the segment")
        assert float(np.sum(value.fetch(TIMEOUT))) == 4 * MIB // 8
    # the session closed: the object is freed, and the segment with it
    until(lambda: _segments_in(gov, "squall-put") <= base, "the segment to go with its object")
    client.close()


def test_many_constants_of_one_submit_are_uploaded_together(one_host):
    """A submit's large constants go with their UPLOADs in flight together
    and each governor's uploads pipelined (client/session.c,
    s_upload_together): of several ranges (9 MiB: three PUT ranges) or one,
    on this host as memory files or by PUT, every one arrives whole; one
    put on a governor that does not exist fails the submit, as one at a
    time did; one only preferred there goes elsewhere."""
    from squall import _lib as L
    sizes = [64 << 10, MIB, 9 * MIB, 100 << 10, 3 * MIB + 5, MIB, 70 << 10, 2 * MIB]
    values = [os.urandom(17) * (size // 17) + os.urandom(size % 17) for size in sizes]
    for local_dir in (one_host.local_dir, None):
        client = _client(one_host, local_dir)
        before = _local(client)
        with client.session() as s:
            objs = [s.blob(v) for v in values]
            gov = int(client.governors()[0]["id"])
            s._check(L.sq_object_prefer_governor(s._h, objs[1].id, 4242))
            s._check(L.sq_object_prefer_governor(s._h, objs[2].id, gov))
            for o in objs:
                o.keep()
            s.submit()
            for o, v in zip(objs, values):
                assert o.fetch(TIMEOUT) == v
            assert s.place(objs[2], timeout=TIMEOUT) == [gov]
        assert _local(client) == before + (len(values) if local_dir else 0)
        with client.session() as s:
            objs = [s.blob(v) for v in values[:3]]
            s._check(L.sq_object_set_governor(s._h, objs[1].id, 4242))
            with pytest.raises(squall.SquallError, match="could not be put on governor 4242"):
                s.submit()
        client.close()


def test_uploads_local_is_counted_per_tenant(one_host):
    """INFO's uploads_local, as its other figures, shows a tenant its own
    uploads on this host; an admin (the cluster's own client) sees every
    tenant's."""
    admin = one_host.client()
    alice = tenant_client(one_host, "alice", "team-a", local_dir=one_host.local_dir)
    bob = tenant_client(one_host, "bob", "team-b", local_dir=one_host.local_dir)
    try:
        everyone = _local(admin)
        assert _local(alice) == 0 and _local(bob) == 0
        value = os.urandom(2 * MIB)
        with alice.session() as s:
            obj = s.blob(value)
            obj.keep()
            s.submit()
            assert obj.fetch(TIMEOUT) == value
        assert _local(alice) == 1
        assert _local(bob) == 0
        assert _local(admin) == everyone + 1
    finally:
        alice.close()
        bob.close()
        admin.close()


def test_a_client_in_a_slurm_job_finds_the_governors_directory(tmp_path, monkeypatch):
    """With no $SQUALL_LOCAL_DIR, a client in a Slurm job ($SLURM_JOB_ID)
    takes the directory squall's Slurm governors of its user use on its node
    (${XDG_RUNTIME_DIR:-/tmp}/squall-streams-UID, squall/slurm.py) when it is
    the user's alone; outside Slurm, or with that directory open to others,
    it uploads by PUT."""
    run = tmp_path / "run"
    run.mkdir()
    streams = run / ("squall-streams-%d" % os.getuid())
    monkeypatch.delenv("SQUALL_LOCAL_DIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    value = os.urandom(2 * MIB)
    with squall.LocalCluster(governors=0, prestart=False, **cluster_options()) as cluster:
        cluster.add_governor(args=["--stream-dir", str(streams)])

        def uploaded():
            client = squall.Client(cluster.address, secret_key=cluster.secret_key,
                                   broker_key=cluster.broker_key)
            try:
                before = _local(client)
                with client.session() as s:
                    obj = s.blob(value)
                    obj.keep()
                    s.submit()
                    assert obj.fetch(TIMEOUT) == value
                return _local(client) - before
            finally:
                client.close()
        monkeypatch.delenv("SLURM_JOB_ID", raising=False)
        assert uploaded() == 0
        monkeypatch.setenv("SLURM_JOB_ID", "42")
        assert uploaded() == 1
        os.chmod(str(streams), 0o755)
        try:
            assert uploaded() == 0
        finally:
            os.chmod(str(streams), 0o700)
