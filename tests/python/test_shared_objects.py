"""Objects shared, not copied, between a governor and its Python executors
(issue 29; docs/architecture.md, "Shared objects"): a big input is mapped
read-only from the governor's memory file, a big result is written once
into a memory file the governor keeps and serves, and the files live
exactly as long as the store holds the object or an executor maps it (a
killed executor leaks nothing). The governor's memory files and the
executors' mappings are read from /proc."""
import os
import signal

import pytest

import squall
from conftest import TIMEOUT, children_of, clean_exit, cluster_options, until

np = pytest.importorskip("numpy")

MiB = 1 << 20


def make(n, value=1.0):
    import numpy
    return numpy.full(n, value)


def where(a):
    """How the executor holds the array: writable, owns its data, and the
    name of the mapping its data lies in (from /proc/self/maps)."""
    address = a.__array_interface__["data"][0]
    name = ""
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if low <= address < high:
                name = " ".join(fields[5:])
    return a.flags.writeable, a.flags.owndata, name, float(a.sum())


def keep(a):
    """Keeps the array past the task (the executor maps it on)."""
    import builtins
    builtins._squall_test_kept = a
    return os.getpid()


def drop():
    import builtins
    builtins.__dict__.pop("_squall_test_kept", None)
    import gc
    gc.collect()
    return os.getpid()


def keep_and_die(a):
    import builtins
    builtins._squall_test_kept = a
    os.kill(os.getpid(), signal.SIGKILL)


def total(*arrays):
    return float(sum(float(a.sum()) for a in arrays))


def memfds(pid):
    """The memory files a process holds open."""
    found = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("/memfd:squall"):
            found.append(target)
    return found


def mapped(pid):
    """The squall memory files a process maps."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            return {line.split()[5] for line in f if "memfd:squall" in line}
    except OSError:
        return set()


@pytest.fixture
def one():
    c = squall.LocalCluster(governors=1, cpus=1, **cluster_options())
    with c:
        yield c, c.client(), c.governors[0].pid
    clean_exit(c)


def test_a_big_input_is_read_in_place_and_a_big_result_comes_back_equal(one):
    _, client, governor = one
    n = 1 << 20                                 # 8 MiB of float64
    made = client.submit(make, n, 2.0)
    writable, owns, name, s = client.submit(where, made).result(timeout=TIMEOUT)
    #   A view of the governor's memory file, read-only, not a copy.
    assert (writable, owns, s) == (False, False, 2.0 * n)
    assert name.startswith("/memfd:squall"), name
    #   The client gets it whole, a writable array of its own.
    back = made.result(timeout=TIMEOUT)
    assert back.shape == (n,) and back.flags.writeable and float(back.sum()) == 2.0 * n
    #   Several values at once (gather reads them one after the other from
    #   one concatenated object), big and small, several outputs.
    futures = [client.submit(make, k, float(k)) for k in (3, 1 << 18, 5, 1 << 17)]
    got = client.gather(futures)
    assert [float(a.sum()) for a in got] == [9.0, float((1 << 18) ** 2), 25.0,
                                             float((1 << 17) ** 2)]
    nested = client.submit(lambda: {"a": np.arange(1 << 16), "b": [np.ones(1 << 15)] * 2,
                                    "s": "x" * 100000}).result(timeout=TIMEOUT)
    assert nested["a"][-1] == (1 << 16) - 1 and nested["b"][1].sum() == 1 << 15
    assert nested["s"] == "x" * 100000
    #   An input the client sent (a plain pickle) goes through a segment
    #   too, unpickled from it.
    assert client.submit(where, np.ones(n)).result(timeout=TIMEOUT)[3] == float(n)


def test_arrays_the_client_sends_are_read_in_place(one):
    _, client, governor = one
    n = 1 << 18                                 # 2 MiB of float64
    #   Pickled with their buffers out of band by the client: the task's
    #   array is a read-only view of the governor's memory file, as a
    #   result's is, not a copy unpickled from it.
    sent = np.arange(n, dtype=np.float64)
    for value in (client.scatter(sent), sent):
        writable, owns, name, s = client.submit(where, value).result(timeout=TIMEOUT)
        assert (writable, owns, s) == (False, False, float(sent.sum()))
        assert name.startswith("/memfd:squall"), name
    #   A pandas frame's blocks too, and the client reads the same object
    #   back whole and writable.
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": sent, "b": sent * 2})
    scattered = client.scatter(frame)
    assert client.submit(lambda f: (f["b"].sum(), f["a"].to_numpy().flags.writeable),
                         scattered).result(timeout=TIMEOUT) == (float(sent.sum()) * 2, False)
    assert scattered.result(timeout=TIMEOUT).equals(frame)
    back = client.scatter(sent).result(timeout=TIMEOUT)
    assert back.flags.writeable and np.array_equal(back, sent)
    #   Small values stay plain pickles, copied as before, and so do arrays
    #   pickle cannot leave out of band (not contiguous).
    small = np.arange(10.0)
    assert client.submit(where, small).result(timeout=TIMEOUT)[0] is True
    strided = np.arange(2 * n, dtype=np.float64)[::2]
    assert client.submit(where, strided).result(timeout=TIMEOUT)[0::3] == \
        (True, float(strided.sum()))
    #   A value only cloudpickle can pickle (a lambda beside the array) keeps
    #   its array out of band too.
    import types
    both = client.scatter(types.SimpleNamespace(f=lambda a: a * 2, a=sent))
    assert client.submit(lambda d: (d.a.flags.writeable, float(d.f(d.a).sum())),
                         both).result(timeout=TIMEOUT) == (False, float(sent.sum()) * 2)


def odd_parts():
    """A value with several out-of-band buffers of odd sizes (padding
    between them in the layout) and a plain part."""
    import numpy
    return {"a": numpy.arange(200_003, dtype=numpy.float64),
            "b": numpy.arange(77_777, dtype=numpy.uint8),
            "c": bytearray(b"xyz" * 300_001), "d": "plain"}


def digest(v):
    import hashlib
    return {k: hashlib.sha256(bytes(memoryview(x).cast("B")) if not isinstance(x, str)
                              else x.encode()).hexdigest() for k, x in v.items()}


def test_a_value_pickled_out_of_band_is_stored_as_its_joined_bytes(one):
    #   The client hands the layout's parts to libsquall, which copies them
    #   once into the constant (sq_blob_gather): the same bytes as joined.
    from squall._pickling import dumps_value, dumps_value_parts
    _, client, _ = one
    value = odd_parts()
    parts = dumps_value_parts(value)
    assert len(parts) > 3 and b"".join(parts) == dumps_value(value)
    want = digest(value)
    scattered = client.scatter([value])[0]      # Session.pickled
    assert client.submit(digest, scattered).result(timeout=TIMEOUT) == want
    assert digest(scattered.result(timeout=TIMEOUT)) == want
    #   A large argument of submit travels the same way.
    assert client.submit(digest, value).result(timeout=TIMEOUT) == want
    #   Parts that are not buffers are refused before anything is stored.
    from squall import _lib
    with client.session() as s:
        with pytest.raises(TypeError):
            _lib.blob_gather(s._h, [b"a", 3], b"")


def test_a_segment_lives_while_the_store_or_an_executor_holds_it(one):
    _, client, governor = one
    made = client.submit(make, 1 << 20)
    executor = client.submit(keep, made).result(timeout=TIMEOUT)
    assert executor in children_of(governor)
    #   The store holds it, and the executor maps it (it keeps the array).
    assert len(memfds(governor)) == 1
    assert len(mapped(executor)) == 1
    made.delete()
    #   Gone from the store, still mapped by the executor: the governor
    #   keeps (and accounts for) it until the executor lets go.
    assert client.submit(os.getpid).result(timeout=TIMEOUT) == executor
    assert len(mapped(executor)) == 1
    assert len(memfds(governor)) == 1
    assert client.submit(drop).result(timeout=TIMEOUT) == executor
    until(lambda: not memfds(governor), "the governor to free the segment")
    assert not mapped(executor)


def test_a_segment_is_freed_with_the_store_when_no_executor_maps_it(one):
    _, client, governor = one
    made = client.submit(make, 1 << 20)
    assert client.submit(total, made).result(timeout=TIMEOUT) == float(1 << 20)
    executor = client.submit(os.getpid).result(timeout=TIMEOUT)
    #   The task is over: the executor let go of it; only the store has it.
    until(lambda: not mapped(executor), "the executor to unmap its input")
    assert len(memfds(governor)) == 1
    made.delete()
    until(lambda: not memfds(governor), "the store to free the segment")


def test_a_killed_executor_leaks_nothing(one):
    _, client, governor = one
    made = client.submit(make, 1 << 20)
    assert client.submit(total, made).result(timeout=TIMEOUT) == float(1 << 20)
    died = client.submit(keep_and_die, made, max_retries=0)
    with pytest.raises(squall.TaskFailed, match="died"):
        died.result(timeout=TIMEOUT)
    made.delete()
    until(lambda: not memfds(governor), "the governor to free the segment")
    #   The next executor works as before.
    assert client.submit(total, client.submit(make, 1 << 20, 3.0)).result(
        timeout=TIMEOUT) == 3.0 * (1 << 20)


def test_spilled_objects_are_still_read_and_the_inputs_do_not_count_as_task_memory():
    #   A 512 MiB governor: its store spills above about 134 MiB.
    args = ["--memory", "512MiB"]
    c = squall.LocalCluster(governors=1, cpus=1, governor_args=args, **cluster_options())
    with c:
        client = c.client()
        governor = c.governors[0].pid
        n = 6 << 20                             # 48 MiB each
        parts = [client.submit(make, n, float(k)) for k in range(4)]
        assert client.gather([client.submit(total, p) for p in parts]) == \
            [float(k * n) for k in range(4)]

        def spilled():
            with open("/proc/%d/maps" % governor) as f:
                return any("/spill-" in line for line in f)
        until(spilled, "the store to spill")
        #   All four read at once, spilled or not, by a task that may grow
        #   by 64 MiB only: it maps 192 MiB of inputs, which are not its own.
        got = client.submit(total, *parts, resources={"memory": 64 * MiB}).result(
            timeout=TIMEOUT)
        assert got == float(sum(k * n for k in range(4)))
    clean_exit(c)


def made_where(n):
    return where(make(n))[2], "asan" in os.environ.get("LD_PRELOAD", "")


def test_an_executor_makes_big_arrays_in_its_heap(one):
    # A 2 MB block and a 20 MB one come from malloc's heap, not from
    # mappings of their own that free unmaps (each made again would fault
    # in every page anew: executor.py, _heap_configure).
    _, client, _ = one
    name, sanitized = client.submit(made_where, 2 * MiB // 8).result(timeout=TIMEOUT)
    if sanitized:
        pytest.skip("the executor's malloc is the sanitizer's, which has no such thresholds")
    assert name == "[heap]"
    assert client.submit(made_where, 20 * MiB // 8).result(timeout=TIMEOUT)[0] == "[heap]"
