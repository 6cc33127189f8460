"""The client's constant cache (client/constants.c; docs/architecture.md,
"Shared objects"): on a governor's host, a large constant of exactly the
bytes of a recent one is handed over as the same sealed memory file, in any
session, instead of being written into a new one; one byte different
anywhere, also where the sampled fingerprint does not look, is written
anew and read as such by its task; the cache stays within its bound,
least recently used evicted; 0 turns it off. The files are seen where they
are: the memory files (their inodes) the governors and this process map,
from /proc."""
import hashlib
import os
import subprocess
import sys

import pytest

import squall
from squall._objects import PyTask
from conftest import TIMEOUT, clean_exit, cluster_options, until

MIB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")


def _sha_task(data):
    import hashlib
    return hashlib.sha256(memoryview(data).cast("B")).hexdigest()


def sha(obj):
    """A task of obj's session: the digest of obj as the task reads it."""
    return PyTask(_sha_task, (obj,), {}, session=obj.session)


def _sha(data):
    return hashlib.sha256(data).hexdigest()


def _total(a):
    return float(a.sum())


def _put_files(pid, size):
    """Inodes of the mappings of process pid onto the clients' memory
    files (memfd:squall-put) of `size` bytes: one per stored object."""
    inodes = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == "/memfd:squall-put":
                low, high = (int(x, 16) for x in fields[0].split("-"))
                if high - low == size:
                    inodes.append(int(fields[4]))
    return inodes


def _holders(inode):
    """Processes of this machine mapping, or holding a descriptor of, the
    memory file of that inode."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/maps" % pid) as f:
                mapped = any(line.split()[4:6] == [str(inode), "/memfd:squall-put"] for line in f)
            fds = os.listdir("/proc/%s/fd" % pid) if not mapped else ()
            held = any(os.stat("/proc/%s/fd/%s" % (pid, fd)).st_ino == inode
                       and "memfd:squall-put" in os.readlink("/proc/%s/fd/%s" % (pid, fd))
                       for fd in fds)
        except OSError:
            continue
        if mapped or held:
            found.append(int(pid))
    return found


def _governors_files(cluster, size):
    return sorted(i for g in cluster._governors for i in _put_files(g.pid, size))


def _mine(size):
    return _put_files(os.getpid(), size)


@pytest.fixture(scope="module")
def cluster():
    with squall.LocalCluster(governors=2, cpus=1, **cluster_options()) as c:
        assert c.local_dir
        yield c


def _constant(session, value):
    """A kept constant of session and a task's digest of it, submitted."""
    obj = session.blob(value)
    obj.keep()
    digest = sha(obj)
    digest.output.keep()
    session.submit()
    return obj, digest


@pytest.mark.parametrize("cache", [None, 0])
def test_a_constant_made_again_is_handed_over_as_the_same_file(cluster, cache):
    """Two sessions, the same bytes: with the cache (default) the second
    writes no new file, both stored objects map the same inode (and a copy
    of one on the other governor too), and either is read while the other
    is freed; off (0), each has a file of its own."""
    size = 4 * MIB + 3 * PAGE
    value = os.urandom(size)
    client = cluster.client(constant_cache=cache)
    before = client.constant_cache_stats()
    s1 = client.session()
    o1, d1 = _constant(s1, value)
    assert d1.output.fetch(TIMEOUT) == _sha(value)
    with client.session() as s2:
        o2, d2 = _constant(s2, value)
        assert d2.output.fetch(TIMEOUT) == _sha(value)
        files = _governors_files(cluster, size)
        stats = client.constant_cache_stats()
        if cache is None:
            assert len(files) == 2 and files[0] == files[1]
            assert _mine(size) == files[:1]         # the cache's reference
            assert stats["hits"] == before["hits"] + 1
            assert stats["misses"] == before["misses"] + 1
            assert stats["bytes_written"] == before["bytes_written"] + size
            assert stats["bytes_reused"] == before["bytes_reused"] + size
        else:
            assert len(files) == 2 and files[0] != files[1]
            assert _mine(size) == []
            assert stats["hits"] == before["hits"] == 0 and stats["entries"] == 0
            assert stats["misses"] == before["misses"] + 2
            assert stats["bytes_written"] == before["bytes_written"] + 2 * size
        # the second copied to the other governor (LCOPY hands the file over)
        assert len(s2.place(o2, copies=2, timeout=TIMEOUT)) == 2
        files = _governors_files(cluster, size)
        assert len(files) == 3 and len(set(files)) == (1 if cache is None else 2)
        # the first object freed: the second, the same file, is read as before
        s1.close()
        until(lambda: len(_governors_files(cluster, size)) == 2, "the first object to go")
        again = sha(o2)
        again.output.keep()
        s2.submit()
        assert again.output.fetch(TIMEOUT) == _sha(value)
        assert o2.fetch(TIMEOUT) == value
    until(lambda: _governors_files(cluster, size) == [], "the second object to go")
    if cache is None:
        # the cluster freed both; the cache keeps the file, and hands the
        # same one to a governor again (a fresh PUTLOCAL of it)
        (inode,) = _mine(size)
        with client.session() as s3:
            o3, d3 = _constant(s3, value)
            assert d3.output.fetch(TIMEOUT) == _sha(value)
            assert _governors_files(cluster, size) == [inode]
        assert client.constant_cache_stats()["hits"] == before["hits"] + 2
    client.close()
    # the client's references go with it
    assert _mine(size) == []


def test_one_byte_changed_where_no_sample_looks_is_not_reused(cluster):
    """Same size, one byte different between the fingerprint's samples
    (64 words evenly spaced and the last): the sampled bytes match (a
    collision, compared), the bytes do not, and the task reads the new
    ones."""
    size = 4 * MIB + 5 * PAGE
    value = bytearray(os.urandom(size))
    client = cluster.client()
    before = client.constant_cache_stats()
    with client.session() as s:
        _, d = _constant(s, bytes(value))
        assert d.output.fetch(TIMEOUT) == _sha(value)
    (first,) = _mine(size)
    value[size // 2 + 3] ^= 0x5A
    with client.session() as s:
        o, d = _constant(s, bytes(value))
        assert d.output.fetch(TIMEOUT) == _sha(value)
        assert o.fetch(TIMEOUT) == bytes(value)
        (second,) = set(_mine(size)) - {first}      # both kept, each its own file
        assert second in _governors_files(cluster, size)
    stats = client.constant_cache_stats()
    assert stats["collisions"] == before["collisions"] + 1
    assert stats["hits"] == before["hits"]
    assert stats["misses"] == before["misses"] + 2
    client.close()


def test_the_cache_stays_within_its_bound_the_oldest_evicted(cluster):
    size = MIB + 7 * PAGE
    limit = 3 * size + size // 2                    # room for 3
    values = [os.urandom(size) for _ in range(5)]
    client = cluster.client(constant_cache=limit)
    inodes = []
    for v in values:
        with client.session() as s:
            _, d = _constant(s, v)
            assert d.output.fetch(TIMEOUT) == _sha(v)
        stats = client.constant_cache_stats()
        assert stats["bytes"] <= limit and stats["entries"] <= 3
        inodes.append(sorted(set(_mine(size)) - set(inodes))[0])
    stats = client.constant_cache_stats()
    assert stats["entries"] == 3 and stats["bytes"] == 3 * size and stats["limit"] == limit
    # what this process maps of them: the 3 newest files, the others unmapped
    assert sorted(_mine(size)) == sorted(inodes[2:])
    with client.session() as s:
        _, d = _constant(s, values[4])              # the newest: reused
        assert d.output.fetch(TIMEOUT) == _sha(values[4])
        assert client.constant_cache_stats()["hits"] == stats["hits"] + 1
        _, d = _constant(s, values[0])              # the oldest: written again
        assert d.output.fetch(TIMEOUT) == _sha(values[0])
    after = client.constant_cache_stats()
    assert after["misses"] == stats["misses"] + 1 and after["bytes"] <= limit
    assert inodes[2] not in _mine(size)             # the least recently used went for it
    client.close()


def test_the_bound_from_the_environment(cluster, monkeypatch):
    monkeypatch.setenv("SQUALL_CONSTANT_CACHE", "3MiB")
    client = cluster.client()
    assert client.constant_cache_stats()["limit"] == 3 * MIB
    client.close()
    monkeypatch.setenv("SQUALL_CONSTANT_CACHE", "0")
    client = cluster.client()
    value = os.urandom(MIB)
    for _ in range(2):
        with client.session() as s:
            _, d = _constant(s, value)
            assert d.output.fetch(TIMEOUT) == _sha(value)
    stats = client.constant_cache_stats()
    assert stats["limit"] == 0 and stats["hits"] == 0 and stats["misses"] == 2
    client.close()
    monkeypatch.setenv("SQUALL_CONSTANT_CACHE", "a lot")
    with pytest.raises(squall.ConnectionError, match="SQUALL_CONSTANT_CACHE=a lot is not a size"):
        cluster.client()
    # the option wins over the environment
    client = cluster.client(constant_cache=MIB)
    assert client.constant_cache_stats()["limit"] == MIB
    client.close()
    with pytest.raises(ValueError, match="constant_cache"):
        cluster.client(constant_cache=-1)


def test_a_dask_collection_computed_twice_writes_its_data_once(cluster):
    np = pytest.importorskip("numpy")
    da = pytest.importorskip("dask.array")
    import dask
    client = cluster.client()
    x = np.random.default_rng(5).random((512, 4096))      # 16 MiB, 4 chunks of 4 MiB

    def compute(a):
        """Its sum on the cluster and in this process (the same order of
        additions: equal to the bit). Unoptimised, the chunks are the
        graph's data (the partitions of from_pandas are so even
        optimised); optimised, they are inlined into the tasks."""
        return (dask.compute(a.sum(), scheduler=client.get, optimize_graph=False)[0],
                dask.compute(a.sum(), scheduler="sync", optimize_graph=False)[0])
    a = da.from_array(x, chunks=(128, 4096))
    before = client.constant_cache_stats()
    first, want = compute(a)
    mid = client.constant_cache_stats()
    second, _ = compute(a)
    after = client.constant_cache_stats()
    assert first == want and second == want
    written = mid["bytes_written"] - before["bytes_written"]
    assert written >= x.nbytes
    assert after["bytes_written"] == mid["bytes_written"]
    assert after["bytes_reused"] - mid["bytes_reused"] == written
    # another array, one chunk's one byte different: that chunk alone is
    # written again, and the sum is the new array's
    y = x.copy()
    y.reshape(-1).view(np.uint8)[300 * 4096 * 8 + 5] ^= 1
    third, want = compute(da.from_array(y, chunks=(128, 4096)))
    assert third == want and want != first
    last = client.constant_cache_stats()
    assert last["bytes_written"] - after["bytes_written"] == written // 4
    assert last["hits"] - after["hits"] == 3
    client.close()


def test_objects_of_one_file_spilled_and_read():
    """A 512 MiB governor spills above about 134 MiB: two sessions' objects
    of one file and two others (48 MiB each) make it spill; every one is
    read right, spilled or not, and one freed leaves the other whole."""
    np = pytest.importorskip("numpy")
    args = ["--memory", "512MiB"]
    c = squall.LocalCluster(governors=1, cpus=1, governor_args=args, **cluster_options())
    with c:
        client = c.client()
        governor = c._governors[0].pid
        n = 6 * MIB                                 # float64: 48 MiB
        arrays = [np.full(n, float(k)) for k in (1, 2, 3)]
        s1, s2 = client.session(), client.session()
        shared1 = s1.pickled(arrays[0])
        shared1.keep()
        s1.submit()
        objs = [s2.pickled(a) for a in arrays]      # the first: the same file
        for o in objs:
            o.keep()
        s2.submit()
        assert client.constant_cache_stats()["hits"] == 1

        def spilled():
            with open("/proc/%d/maps" % governor) as f:
                return any("/spill-" in line for line in f)
        until(spilled, "the store to spill")
        assert _totals(s1, [shared1]) == [float(n)]
        assert _totals(s2, objs) == [float(k * n) for k in (1, 2, 3)]
        s1.close()
        assert _totals(s2, objs[:1]) == [float(n)]
        assert float(np.sum(objs[0].fetch(TIMEOUT))) == float(n)
        s2.close()
        client.close()
    clean_exit(c)


def _totals(session, objs):
    tasks = [PyTask(_total, (o,), {}, session=session) for o in objs]
    for t in tasks:
        t.output.keep()
    session.submit()
    return [t.output.fetch(TIMEOUT) for t in tasks]


_KEEP_AND_DIE = r"""
import os, sys
import squall
client = squall.Client(sys.argv[1], secret_key=sys.argv[2], broker_key=sys.argv[3],
                       local_dir=sys.argv[4])
s = client.session()
value = b"q" * int(sys.argv[5])
for _ in range(2):                  # the second: a hit
    obj = s.blob(value)
    obj.keep()
    s.submit()
    assert obj.fetch(60) == value
assert client.constant_cache_stats()["hits"] == 1
print(s.id, flush=True)
sys.stdin.read()                    # killed here
"""


def test_a_killed_client_leaves_no_file_behind(cluster):
    """The cache's references are descriptors and mappings of the client's
    process: killed, it holds nothing, and once its session is closed no
    process holds the file."""
    from squall import _lib as L
    size = 2 * MIB + 11 * PAGE
    child = subprocess.Popen([sys.executable, "-c", _KEEP_AND_DIE, cluster.address,
                              cluster.secret_key, cluster.broker_key, cluster.local_dir,
                              str(size)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    try:
        session = int(child.stdout.readline())
        (inode,) = set(_put_files(child.pid, size))
        assert child.pid in _holders(inode)
        assert len(_governors_files(cluster, size)) == 2     # two objects, one file
    finally:
        child.kill()
        child.wait()
    assert child.pid not in _holders(inode)
    closer = cluster.client()
    with closer._lock:
        closer._check(L.sq_client_close_session(closer._h, session))
    until(lambda: not _holders(inode), "every holder of the file to let it go")
    closer.close()
