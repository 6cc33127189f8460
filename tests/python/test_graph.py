"""Rain-style graphs: constants, built-in tasks, keep/fetch/wait, sessions."""
import os

import pytest

import squall
from squall import tasks

from conftest import TIMEOUT


def test_blob_concat_slice_noop(client):
    with client.session() as s:
        a = squall.blob(b"hello, ")
        b = squall.blob(b"squall")
        joined = tasks.Concat([a, b])
        part = tasks.Slice(joined, 2, 5)
        same = tasks.Noop(a, b)
        joined.output.keep()
        part.output.keep()
        for o in same.outputs:
            o.keep()
        s.submit()
        assert joined.output.fetch(TIMEOUT) == b"hello, squall"
        assert part.output.fetch(TIMEOUT) == b"llo"
        assert [o.fetch(TIMEOUT) for o in same.outputs] == [b"hello, ", b"squall"]
        with pytest.raises(squall.SquallError):
            same.output            # two outputs


def test_pickled_constant_and_submit_repeatable(client):
    with client.session() as s:
        p = squall.pickled({"a": [1, 2, 3]}).keep()
        s.submit()
        assert p.fetch(TIMEOUT) == {"a": [1, 2, 3]}
        t = tasks.Concat([p, squall.blob(b"")])
        t.output.keep()
        s.submit()                 # a second submit in the same session
        s.wait_all(TIMEOUT)
        assert isinstance(t.output.fetch(TIMEOUT), bytes)


def test_sleep_wait_some_and_wait(client):
    with client.session() as s:
        fast = tasks.Sleep(squall.blob(b"x"), 0.0)
        slow = tasks.Sleep(squall.blob(b"y"), 30.0)
        s.submit()
        done, pending = s.wait_some([fast, slow], TIMEOUT)
        assert fast in done and slow in pending
        s.wait([fast], TIMEOUT)
        fast.wait(TIMEOUT)
        with pytest.raises(squall.TimeoutError):
            s.wait([slow], 0.05)
        s.cancel([slow])


def test_load_store(client, tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(b"file contents")
    dst = tmp_path / "out.txt"
    with client.session() as s:
        loaded = tasks.Load(str(src))
        stored = tasks.Store(loaded, str(dst))
        loaded.output.keep()
        s.submit()
        stored.wait(TIMEOUT)
        assert loaded.output.fetch(TIMEOUT) == b"file contents"
    assert dst.read_bytes() == b"file contents"


def test_execute_and_program(client):
    with client.session() as s:
        text = squall.blob(b"b\na\nc\n")
        sort = tasks.Execute(["sort"], stdin=text, stdout=True)
        both = tasks.Execute("cat x y > out; wc -c < out", inputs=[("x", text), ("y", text)],
                             outputs=["out"], stdout=True)
        upper = squall.Program("tr a-z A-Z", stdin=True, stdout=True)
        shout = upper(sort)
        count = squall.Program(["wc", "-l", "f"], inputs=["f"], stdout=True)
        lines = count(inputs={"f": text})
        for t in (sort, shout, lines):
            t.output.keep()
        for o in both.outputs:
            o.keep()
        s.submit()
        assert sort.output.fetch(TIMEOUT) == b"a\nb\nc\n"
        assert shout.output.fetch(TIMEOUT) == b"A\nB\nC\n"
        assert lines.output.fetch(TIMEOUT).split()[0] == b"3"
        size, out = (o.fetch(TIMEOUT) for o in both.outputs)
        assert int(size) == 12 and out == b"b\na\nc\n" * 2


def test_execute_failure(client):
    with client.session() as s:
        bad = tasks.Execute("echo oops >&2; exit 3", stdout=True)
        after = tasks.Concat([bad])
        after.output.keep()
        s.submit()
        with pytest.raises(squall.TaskFailed) as info:
            bad.wait(TIMEOUT)
        assert info.value.task_id == bad.id
        with pytest.raises(squall.UpstreamFailed) as info:
            after.output.fetch(TIMEOUT)
        assert info.value.root_id == bad.id


def test_keep_unkeep_and_close(client):
    s = client.session()
    with s:
        a = squall.blob(b"abc").keep()
        s.submit()
        assert a.fetch(TIMEOUT) == b"abc"
        a.unkeep()
        with pytest.raises(squall.SquallError):
            a.fetch(TIMEOUT)
    assert s.closed
    with pytest.raises(squall.SquallError):
        squall.blob(b"outside")    # no active session


def test_wait_all_reports_failure(client):
    with client.session() as s:
        tasks.Execute("exit 1", stdout=True)
        with pytest.raises(squall.TaskFailed):
            s.wait_all(TIMEOUT)
