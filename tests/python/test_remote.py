"""Python functions as tasks: @remote, arguments, outputs, failures,
retries, killed executors, timeouts, closures."""
import os
import signal

import pytest

import squall

from conftest import TIMEOUT


@squall.remote
def add(a, b=0):
    return a + b


@squall.remote(outputs=2)
def split(data):
    half = len(data) // 2
    return data[:half], data[half:]


@squall.remote(outputs=1, cpus=1, max_retries=0)
def fail(message):
    raise RuntimeError(message)


def test_remote_with_objects_outputs_and_values(client):
    with client.session() as s:
        x = squall.pickled(40)
        t = add(x, b=2)
        u = add(t, 100)                         # a task as argument
        v = add(b=[t.output, 1][1], a=squall.pickled(1))
        halves = split(squall.blob(b"abcdef"))  # bytes input, two outputs
        nested = add([t], [x])                  # references inside containers
        for task in (t, u, v, nested):
            task.output.keep()
        for o in halves.outputs:
            o.keep()
        s.submit()
        assert t.output.fetch(TIMEOUT) == 42
        assert u.output.fetch(TIMEOUT) == 142
        assert v.output.fetch(TIMEOUT) == 2
        assert nested.output.fetch(TIMEOUT) == [42, 40]
        assert [o.fetch(TIMEOUT) for o in halves.outputs] == [b"abc", b"def"]
        assert add.local(1, 2) == 3


def test_outside_session_is_an_error():
    with pytest.raises(squall.SquallError):
        add(1, 2)


def test_closures_and_lambdas_travel(client):
    factor = 7
    offsets = {"k": 3}

    def scale(v):
        return v * factor + offsets["k"]

    remote_scale = squall.remote(scale)
    with client.session() as s:
        t = remote_scale(squall.pickled(6))
        lam = squall.remote(lambda v: [scale(i) for i in range(v)])(3)
        t.output.keep()
        lam.output.keep()
        s.submit()
        assert t.output.fetch(TIMEOUT) == 45
        assert lam.output.fetch(TIMEOUT) == [3, 10, 17]


def test_failure_carries_remote_traceback(client):
    with client.session() as s:
        t = fail("something broke")
        after = add(t, 1)
        after.output.keep()
        t.output.keep()
        s.submit()
        with pytest.raises(RuntimeError, match="something broke") as info:
            t.output.fetch(TIMEOUT)
        cause = info.value.__cause__
        assert isinstance(cause, squall.RemoteTraceback)
        assert cause.task.startswith("task %d" % t.id)
        assert "in fail" in cause.traceback
        # the function's own file and source line (squall keeps co_filename,
        # which cloudpickle 3.1.3 replaces by "<dynamic-code>")
        assert "raise RuntimeError(message)" in cause.traceback
        assert "RuntimeError: something broke" in str(cause)
        with pytest.raises(RuntimeError, match="something broke") as info:
            after.output.fetch(TIMEOUT)
        assert info.value.__cause__.task.startswith("task %d" % t.id)


def test_retries_rerun_a_failed_task(client, tmp_path):
    marker = str(tmp_path / "attempts")

    @squall.remote(max_retries=2)
    def flaky():
        with open(marker, "a") as f:
            f.write("x")
        if os.path.getsize(marker) < 2:
            raise OSError("first attempt fails")
        return "ok"

    with client.session() as s:
        t = flaky()
        t.output.keep()
        s.submit()
        assert t.output.fetch(TIMEOUT) == "ok"
    assert os.path.getsize(marker) == 2


def test_killed_executor_fails_cleanly_and_governor_survives(client):
    @squall.remote
    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    with client.session() as s:
        t = die()
        t.output.keep()
        s.submit()
        with pytest.raises(squall.TaskFailed) as info:
            t.output.fetch(TIMEOUT)
        assert "died" in info.value.message and "signal 9" in info.value.message
    # the executor is restarted on demand and the governors still work
    assert client.gather(client.map(lambda v: v + 1, range(10)), timeout=TIMEOUT) == \
        list(range(1, 11))


def test_killed_executor_task_is_retried(client, tmp_path):
    marker = str(tmp_path / "killed")

    @squall.remote(max_retries=1)
    def die_once():
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return os.getpid()

    with client.session() as s:
        t = die_once()
        t.output.keep()
        s.submit()
        assert isinstance(t.output.fetch(TIMEOUT), int)


def test_timeout_kills_a_running_python_task(client):
    import time

    @squall.remote(timeout=0.5)
    def forever():
        time.sleep(3600)

    with client.session() as s:
        t = forever()
        t.output.keep()
        s.submit()
        with pytest.raises(squall.TaskFailed) as info:
            t.output.fetch(TIMEOUT)
        assert "timed out" in info.value.message
    assert client.submit(lambda: "alive").result(TIMEOUT) == "alive"


def test_raw_bytes_output_content_type(client):
    @squall.remote
    def text():
        return "plain"

    with client.session() as s:
        t = text()
        t.output.keep()
        joined = squall.tasks.Concat([t, squall.blob(b"!")])
        joined.output.keep()
        s.submit()
        assert t.output.fetch(TIMEOUT) == "plain"
        assert t.output.content_type == squall.PICKLE_CONTENT_TYPE
