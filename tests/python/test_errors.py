"""A Python task's exception is raised in the client as itself (with the
remote traceback as its __cause__), also for the tasks downstream of it and
through every way of reading a result; warnings a task raised are re-emitted
in the client when its result is read (issue 15)."""
import threading
import warnings

import pytest

import squall
from squall import tasks

from conftest import TIMEOUT

pytestmark = pytest.mark.filterwarnings("ignore:old api:DeprecationWarning")


class CustomError(Exception):
    """An exception class of the test module: the client must get this very
    class back (pickled by reference)."""

    def __init__(self, message, code):
        super().__init__(message, code)
        self.code = code


class NeedsTwo(Exception):
    """Pickles (args are ("x",)) but cannot be unpickled: __init__ wants two."""

    def __init__(self, a, b):
        super().__init__(a)


class LongText(Exception):
    """Small when pickled, 20 000 characters when formatted."""

    def __str__(self):
        return "y" * 20000


class TaskWarning(UserWarning):
    pass


def raise_value_error(x):
    raise ValueError("bad x %r" % (x,))


def inc(x):
    return x + 1


def test_future_result_raises_the_tasks_own_exception(client):
    f = client.submit(raise_value_error, 7, key="the-root")
    with pytest.raises(ValueError, match="bad x 7") as info:
        f.result(TIMEOUT)
    cause = info.value.__cause__
    assert isinstance(cause, squall.RemoteTraceback)
    assert cause.task == "task %d (the-root)" % f.task_id
    assert "in raise_value_error" in cause.traceback
    assert 'raise ValueError("bad x %r" % (x,))' in str(cause)
    assert f.exception() is info.value          # the same object each time
    with pytest.raises(ValueError):
        f.result()


def test_downstream_tasks_raise_the_root_exception(client):
    root = client.submit(raise_value_error, 1, key="root-key")
    mid = client.submit(inc, root)
    leaf = client.submit(inc, mid)
    with pytest.raises(ValueError, match="bad x 1") as info:
        leaf.result(TIMEOUT)
    assert "(root-key)" in info.value.__cause__.task
    with pytest.raises(ValueError):
        client.gather([mid, leaf], timeout=TIMEOUT)


def test_gather_of_many_raises_the_original(client):
    # >= 4 futures take the concat path of gather, then the one-by-one path
    futures = client.map(inc, range(20))
    futures.append(client.submit(raise_value_error, "g"))
    with pytest.raises(ValueError, match="bad x 'g'"):
        client.gather(futures, timeout=TIMEOUT)


def test_custom_exception_class_and_attributes(client):
    def fail():
        raise CustomError("custom", 42)

    with pytest.raises(CustomError) as info:
        client.submit(fail).result(TIMEOUT)
    assert type(info.value) is CustomError and info.value.code == 42


def test_class_defined_in_a_function_comes_back_as_itself(client):
    # cloudpickle carries the class by value and gives the client's own
    # class back (its class tracker), so `except Local` works
    class Local(Exception):
        pass

    def fail():
        raise Local("local")

    with pytest.raises(Local):
        client.submit(fail).result(TIMEOUT)


def test_session_fetch_and_wait_raise_the_original(client):
    @squall.remote
    def lookup(d, k):
        return d[k]

    with client.session() as s:
        t = lookup({"a": 1}, "missing")
        after = tasks.Concat([t])
        t.output.keep()
        after.output.keep()
        s.submit()
        with pytest.raises(KeyError):
            t.output.fetch(TIMEOUT)
        with pytest.raises(KeyError):
            after.output.fetch(TIMEOUT)
        with pytest.raises(KeyError):
            s.wait([after], TIMEOUT)
        with pytest.raises(KeyError):
            s.wait_all(TIMEOUT)


def test_dask_compute_raises_the_original(client):
    dask = pytest.importorskip("dask")
    import dask.bag as db

    def check(v):
        if v == 3:
            raise ZeroDivisionError("three")
        return v

    b = db.from_sequence(range(6), npartitions=3).map(check)
    with pytest.raises(ZeroDivisionError, match="three"):
        dask.compute(b.sum(), scheduler=client.get)


def test_system_exit_is_task_failed_with_the_exception(client):
    def leave():
        raise SystemExit(3)

    with pytest.raises(squall.TaskFailed) as info:
        client.submit(leave).result(TIMEOUT)
    assert isinstance(info.value.exception, SystemExit)
    assert info.value.exception.code == 3
    assert "SystemExit" in info.value.message


def test_unpicklable_exception_is_task_failed(client):
    def fail_with_lock():
        e = RuntimeError("holds a lock")
        e.lock = threading.Lock()
        raise e

    with pytest.raises(squall.TaskFailed) as info:
        client.submit(fail_with_lock).result(TIMEOUT)
    assert info.value.exception is None
    assert "RuntimeError: holds a lock" in info.value.message
    assert "in fail_with_lock" in info.value.remote_traceback

    def fail_needs_two():
        raise NeedsTwo("x", "y")

    with pytest.raises(squall.TaskFailed) as info:
        client.submit(fail_needs_two).result(TIMEOUT)
    assert info.value.exception is None and "NeedsTwo" in info.value.message


def test_exception_too_big_to_carry_is_task_failed(client):
    def fail_big():
        raise ValueError("x" * 100000)

    with pytest.raises(squall.TaskFailed) as info:
        client.submit(fail_big).result(TIMEOUT)
    assert info.value.exception is None
    assert info.value.message.startswith("ValueError: xxx")
    assert len(str(info.value)) < 20000

    # a long text with a small pickle: the text is cut, the exception
    # still comes back whole
    def fail_long_text():
        raise LongText("short args")

    with pytest.raises(LongText) as info:
        client.submit(fail_long_text).result(TIMEOUT)
    assert info.value.args == ("short args",)
    assert "\n...\n" in info.value.__cause__.traceback


def test_non_python_failure_has_no_exception(client):
    with client.session() as s:
        bad = tasks.Execute("exit 3", stdout=True)
        bad.output.keep()
        s.submit()
        with pytest.raises(squall.TaskFailed) as info:
            bad.output.fetch(TIMEOUT)
        assert info.value.exception is None


def warn_and_return(x):
    warnings.warn("careful with %d" % x, TaskWarning)
    warnings.warn("old api", DeprecationWarning)
    return x * 2


def test_warnings_are_reemitted_when_the_result_is_read(client):
    f = client.submit(warn_and_return, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert f.result(TIMEOUT) == 10
    got = {(w.category, str(w.message)) for w in caught}
    assert (TaskWarning, "careful with 5") in got
    assert (DeprecationWarning, "old api") in got
    assert any("test_errors.py" in w.filename for w in caught)


def test_warnings_go_through_the_clients_filters(client):
    f = client.submit(warn_and_return, 1)
    g = client.submit(warn_and_return, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore")
        assert f.result(TIMEOUT) == 2
    assert caught == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", TaskWarning)
        with pytest.raises(TaskWarning):
            g.result(TIMEOUT)


def test_warnings_in_gather_dask_and_fetch(client):
    futures = client.map(warn_and_return, range(10))
    with pytest.warns(TaskWarning) as caught:
        assert client.gather(futures, timeout=TIMEOUT) == [2 * i for i in range(10)]
    assert {str(w.message) for w in caught if w.category is TaskWarning} == \
        {"careful with %d" % i for i in range(10)}

    dsk = {"a": 4, "b": (warn_and_return, "a"), "c": (inc, "b")}
    with pytest.warns(TaskWarning, match="careful with 4"):
        assert client.get(dsk, "b") == 8
    # b fused into c's task (a linear chain): its warnings come with c
    with pytest.warns(TaskWarning, match="careful with 4"):
        assert client.get(dsk, "c") == 9
    # consumers in other tasks read b's value with the warnings after it,
    # unharmed, and carry them on: they come back with what the client reads
    dsk2 = dict(dsk, d=(inc, "b"), e=(lambda x, y: x + y, "c", "d"))
    with pytest.warns(TaskWarning, match="careful with 4"):
        assert client.get(dsk2, ["c", "d"]) == (9, 9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert client.get(dsk2, "e") == 18      # b is two tasks upstream of e
    assert [str(w.message) for w in caught if w.category is TaskWarning] == ["careful with 4"]


def test_warnings_are_bounded(client):
    def many():
        for i in range(1000):
            warnings.warn("w%d" % i)
        return "ok"

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert client.submit(many).result(TIMEOUT) == "ok"
    assert len(caught) == 100
