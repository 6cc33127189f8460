"""client.map adds calls with plain arguments in bulk (sq_tasks_like) and
functions travel once per session as a data object ("fn_in"): results in
order, mixed arguments, options and names carried to every copy, failures
naming their task, and the C call's refusals."""
import ctypes

import pytest

import squall
from squall import _lib as L
from conftest import TIMEOUT


def inc(x):
    return x + 1


def div(a, b):
    return a / b


def test_map_results_in_order(client):
    futures = client.map(inc, range(3000))
    assert client.gather(futures, timeout=TIMEOUT) == list(range(1, 3001))
    # the copies' ids follow the model's: a task and its output each
    tids = [f.task_id for f in futures[1:]]
    assert tids == list(range(tids[0], tids[0] + 2 * len(tids), 2))


def test_map_mixed_arguments(client):
    ten = client.submit(inc, 9)
    xs = [1, ten, 2.5, "a", None, ten, b"xy", 7]
    got = client.gather(client.map(lambda x: (type(x).__name__, x), xs), timeout=TIMEOUT)
    assert got == [("int", 1), ("int", 10), ("float", 2.5), ("str", "a"), ("NoneType", None),
                   ("int", 10), ("bytes", b"xy"), ("int", 7)]
    assert client.gather(client.map(div, [6, 8, 9], [3, 2, 3]), timeout=TIMEOUT) == [2, 4, 3]


def test_map_options_and_failures(client):
    futures = client.map(div, [1, 2, 3], [1, 0, 3], key="ratio", priority=5)
    assert [f.key for f in futures] == ["ratio"] * 3
    assert futures[0].result(TIMEOUT) == 1 and futures[2].result(TIMEOUT) == 1
    with pytest.raises(ZeroDivisionError) as info:
        futures[1].result(TIMEOUT)
    assert "ratio" in str(info.value.__cause__)


def test_tasks_like_refuses_what_is_not_a_pending_task(client):
    with client.session() as s:
        obj = s.blob(b"abc")
        first = ctypes.c_uint32(0)
        ends = (ctypes.c_size_t * 1)(1)
        assert L.sq_tasks_like(s._h, obj.id, 1, b"\xc0", ends, ctypes.byref(first)) == \
            L.SQ_E_INVALID
        assert L.sq_tasks_like(s._h, 999999, 1, b"\xc0", ends, ctypes.byref(first)) == \
            L.SQ_E_INVALID
        t = squall.tasks.Noop(obj)
        model = t.id
        bad = (ctypes.c_size_t * 2)(1, 0)          # ends going back
        assert L.sq_tasks_like(s._h, model, 2, b"\xc0\xc0", bad, ctypes.byref(first)) == \
            L.SQ_E_INVALID
        # a config that is not one msgpack value is refused like sq_task's,
        # and nothing of the call is added (the next id is still model + 2)
        ends2 = (ctypes.c_size_t * 2)(1, 3)
        assert L.sq_tasks_like(s._h, model, 2, b"\xc0\xc0\xc0", ends2,
                               ctypes.byref(first)) == 10
        ok = (ctypes.c_size_t * 2)(1, 2)
        assert L.sq_tasks_like(s._h, model, 2, b"\xc0\xc0", ok, ctypes.byref(first)) == 0
        assert first.value == model + 2
        s.submit()
        s.wait_all(TIMEOUT)
