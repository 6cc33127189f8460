"""Moving results by hand (issue 17, docs/protocol.md DELETE and PLACE):
scatter straight onto a governor, replicate, move, who has it, delete, and
a constant without lineage that is lost."""
import os
import signal
import time

import pytest

import squall
from conftest import TIMEOUT, cluster_options, run_example, until


def make(n):
    return bytes(range(256)) * (n // 256)


def size_of(x):
    return len(x)


def double(x):
    return x + x


def gated(path, x):
    while not os.path.exists(path):
        time.sleep(0.01)
    return len(x)



@pytest.fixture(scope="module")
def cluster3():
    c = squall.LocalCluster(governors=3, cpus=1, **cluster_options())
    with c:
        yield c
    # a clean stop (under ASan: no leak, no error report) is part of the test
    assert c.exit_codes and all(code == 0 for code in c.exit_codes.values()), c.exit_codes


def gov_ids(client, n=1):
    client.wait_for_governors(n, timeout=TIMEOUT)
    return sorted(g["id"] for g in client.governors())


def test_scatter_onto_a_governor_and_where(cluster3):
    client = cluster3.client()
    try:
        ids = gov_ids(client, 3)
        small = client.scatter(12345, governor=ids[-1])
        assert small.where() == [ids[-1]]
        # by name too
        name = [g["name"] for g in client.governors() if g["id"] == ids[0]][0]
        named = client.scatter((1, 2, 3), governor=name)[1]
        assert named.where() == [ids[0]]
        assert client.submit(lambda x: x * 3, named).result(TIMEOUT) == 6
        assert client.submit(lambda x: x + 1, small).result(TIMEOUT) == 12346
        # a small scatter without a governor stays with the broker
        assert client.scatter(7).where() == []
        with pytest.raises(ValueError):
            client.scatter(1, governor="no-such-governor")
        with pytest.raises(squall.SquallError) as info:
            client.scatter(1, governor=999999)
        assert "999999" in str(info.value)
    finally:
        client.close()


def test_replicate_and_move(cluster3):
    client = cluster3.client()
    try:
        ids = gov_ids(client, 3)
        big = client.submit(make, 1 << 20)
        first = big.where()
        assert len(first) == 1
        held = big.replicate(3)
        assert sorted(held) == ids
        assert sorted(client.who_has([big])[big.key]) == ids
        # replicate to a named governor it is on already: nothing changes
        assert sorted(big.replicate(governors=[ids[0]])) == ids
        # move: one copy left, where asked
        assert big.move(ids[1]) == [ids[1]]
        assert big.where() == [ids[1]]
        assert client.submit(size_of, big).result(TIMEOUT) == 1 << 20
        # broadcast scatter: on every governor
        b = client.scatter(make(1 << 16), broadcast=True)
        assert sorted(b.where()) == ids
        # a move needs somewhere to go
        with pytest.raises(ValueError):
            big.move("nobody")
    finally:
        client.close()


def test_delete_fails_what_needs_it(cluster3, tmp_path):
    client = cluster3.client()
    try:
        gate = str(tmp_path / "gate")
        data = client.submit(make, 1 << 20)
        data.replicate(2)

        def held():
            return sum(g["memory"] for g in client.governors())
        before = until(lambda: held() >= 2 << 20 and held(), "both copies in the load reports")
        waiting = client.submit(gated, gate, data)
        data.delete()
        with pytest.raises(squall.SquallError) as info:
            waiting.result(TIMEOUT)
        assert "deleted" in str(info.value)
        with pytest.raises(squall.ObjectDeleted) as info:
            data.result(TIMEOUT)
        assert "object %d was deleted" % data._oid in str(info.value)
        with pytest.raises(squall.ObjectDeleted):
            data.where()
        # its copies went from every governor
        # (what else the governors hold: the functions and arguments, a few KiB)
        until(lambda: held() <= before - (2 << 20) + (64 << 10),
              "the deleted object's copies to be dropped")
        # what does not need it goes on
        with open(gate, "w"):
            pass
        assert client.submit(size_of, b"abc").result(TIMEOUT) == 3
    finally:
        client.close()


def kill(client, proc, gid):
    """SIGKILLs a governor and waits until the broker knows it is gone."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(TIMEOUT)
    until(lambda: gid not in gov_ids(client), "governor %d to be gone" % gid)


def test_a_scattered_constant_has_no_lineage():
    """A constant put on a governor by hand, lost with its governor: what
    needs it fails naming it; and a result computed from it before, lost
    later, fails the same way rather than wait for ever (seed 003)."""
    with squall.LocalCluster(governors=3, cpus=1, **cluster_options()) as cluster:
        client = cluster.client()
        by_name = {g["name"]: g["id"] for g in client.governors()}
        by_id = {by_name["local-%d" % (i + 1)]: proc
                 for i, proc in enumerate(cluster.governors)}
        ids = sorted(by_id)
        a, b = ids[0], ids[1]
        constant = client.scatter(make(1 << 16), governor=a)
        derived = client.submit(double, constant)     # too big for the broker to hold
        assert client.submit(size_of, derived).result(TIMEOUT) == 1 << 17
        assert derived.move(b) == [b]
        kill(client, by_id[a], a)
        later = client.submit(size_of, constant)
        with pytest.raises(squall.SquallError) as info:
            later.result(TIMEOUT)
        assert "constant object %d" % constant._oid in str(info.value)
        # now the derived result's only copy goes too: recomputing it would
        # need the lost constant
        kill(client, by_id[b], b)
        again = client.submit(size_of, derived)
        with pytest.raises(squall.SquallError) as info:
            again.result(TIMEOUT)
        assert "constant object %d" % constant._oid in str(info.value)
        client.close()
    assert cluster.exit_codes["broker"] == 0, cluster.exit_codes


def test_the_example_runs():
    out = run_example("repartition.py")
    assert "joined rows: 80000" in out
    assert "lookup table on governors [" in out
