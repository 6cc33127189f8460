"""Streams (docs/protocol.md, "Streams"): an execute task's stdout read as
the next one's stdin while it is written, governor to governor, under
flow control; refusals; early readers; a stream group run again when one
of its members is lost."""
import os
import signal

import pytest

import squall
from squall.tasks import Execute

from conftest import TIMEOUT, cluster_options, run_example, tenant_client, until

MIB = 1 << 20


def _hwm(pid):
    """Peak resident memory of a process, in bytes (VmHWM)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM for %d" % pid)


def _local(client):
    """Streams that went over the same-host path so far (INFO)."""
    return client.info()["streams_local"]


def test_three_stage_pipeline(client):
    before = _local(client)
    with client.session() as s:
        seq = Execute("seq 1 200000", stdout=True, stream=True, name="seq")
        grep = Execute("grep 7", stdin=seq.output, stdout=True, stream=True, name="grep")
        count = Execute("wc -l", stdin=grep.output, stdout=True, name="wc")
        count.output.keep()
        s.submit()
        assert count.output.fetch(TIMEOUT).strip() == b"81902"
        # the stream's size is what went through it
        s.wait([seq, grep], TIMEOUT)
    # a LocalCluster's governors share a stream directory: both streams
    # went as pipes handed over, not as chunks (a governor that fell back
    # to chunks said why in a warning, in the captured stderr)
    assert _local(client) == before + 2, "a stream went as chunks: see the governors' warnings"


def test_same_host_path_is_exact(client, tmp_path):
    """48 MiB of random bytes through two hand-overs, checked whole."""
    import hashlib
    data = os.path.join(str(tmp_path), "data")
    before = _local(client)
    with client.session() as s:
        gen = Execute("head -c 48M /dev/urandom > %s; cat %s" % (data, data),
                      stdout=True, stream=True, name="gen")
        cat = Execute("cat", stdin=gen.output, stdout=True, stream=True, name="cat")
        summed = Execute("md5sum", stdin=cat.output, stdout=True, name="sum")
        summed.output.keep()
        s.submit()
        got = summed.output.fetch(TIMEOUT).split()[0].decode()
        s.wait([gen, cat], TIMEOUT)
    with open(data, "rb") as f:
        assert got == hashlib.md5(f.read()).hexdigest()
    assert _local(client) == before + 2


def test_several_readers_and_an_empty_stream(client):
    before = _local(client)
    with client.session() as s:
        text = Execute("seq 1 50000", stdout=True, stream=True)
        a = Execute("wc -l", stdin=text.output, stdout=True)
        b = Execute("tail -n 1", stdin=text.output, stdout=True)
        c = Execute("grep -c 5", stdin=text.output, stdout=True)
        nothing = Execute("true", stdout=True, stream=True)
        d = Execute("wc -c", stdin=nothing.output, stdout=True)
        for t in (a, b, c, d):
            t.output.keep()
        s.submit()
        assert a.output.fetch(TIMEOUT).strip() == b"50000"
        assert b.output.fetch(TIMEOUT).strip() == b"50000"
        assert c.output.fetch(TIMEOUT).strip() == str(
            sum(1 for i in range(1, 50001) if "5" in str(i))).encode()
        assert d.output.fetch(TIMEOUT).strip() == b"0"
        s.wait([text, nothing], TIMEOUT)
    # on one host each reader of `text` got a pipe of its own, which the
    # writer's governor fills (a tee); `nothing`, of one reader, went as the
    # writer's pipe itself
    assert _local(client) == before + 2, "a stream went as chunks: see the governors' warnings"


def test_several_readers_on_one_host_each_get_a_pipe(client, tmp_path):
    """Two readers of 48 MiB, each through a pipe of its own, checked whole;
    a third that leaves early (`head`) does not stop the others."""
    import hashlib
    data = os.path.join(str(tmp_path), "data")
    before = _local(client)
    with client.session() as s:
        gen = Execute("head -c 48M /dev/urandom > %s; cat %s" % (data, data),
                      stdout=True, stream=True, name="gen")
        a = Execute("md5sum", stdin=gen.output, stdout=True, name="a")
        b = Execute("wc -c", stdin=gen.output, stdout=True, name="b")
        c = Execute("head -c 10", stdin=gen.output, stdout=True, name="c")
        for t in (a, b, c):
            t.output.keep()
        s.submit()
        got = a.output.fetch(TIMEOUT).split()[0].decode()
        assert b.output.fetch(TIMEOUT).strip() == str(48 << 20).encode()
        assert len(c.output.fetch(TIMEOUT)) == 10
        s.wait([gen], TIMEOUT)
    with open(data, "rb") as f:
        assert got == hashlib.md5(f.read()).hexdigest()
    assert _local(client) == before + 1, "the stream went as chunks: see the governors' warnings"


def test_many_readers_on_one_governor_each_get_a_pipe(tmp_path):
    """A writer on one governor, 24 readers of its stream on another of the
    same host: more pipes handed over at once than the readers' governor's
    socket queues (the kernel's net.unix.max_dgram_qlen, 10 by default).
    Those that find it full are handed over again a little later
    (governor/stream.c, s_handing_retry), so every reader gets a pipe of its
    own (the writer's governor logs each, at debug), none gets chunks, and
    each has the bytes whole. The governors' stderr goes to a file."""
    import hashlib
    readers = 24
    data = os.path.join(str(tmp_path), "data")
    log = os.path.join(str(tmp_path), "log")
    saved = os.dup(2)
    try:
        with open(log, "wb") as f:
            os.dup2(f.fileno(), 2)
        try:
            cluster = squall.LocalCluster(governors=0, prestart=False, log_level="debug",
                                          **cluster_options())
            cluster.add_governor(cpus=1, args=["--resource", "w=1"])
            cluster.add_governor(cpus=readers, args=["--resource", "r=%d" % readers])
        finally:
            os.dup2(saved, 2)
    finally:
        os.close(saved)
    with cluster:
        with cluster.client() as client, client.session() as s:
            before = _local(client)
            gen = Execute("head -c 4M /dev/urandom > %s; cat %s" % (data, data),
                          stdout=True, stream=True, name="gen", resources={"w": 1})
            sums = [Execute("md5sum", stdin=gen.output, stdout=True, name="md5-%d" % i,
                            resources={"r": 1})
                    for i in range(readers)]
            for t in sums:
                t.output.keep()
            s.submit()
            got = [t.output.fetch(TIMEOUT).split()[0].decode() for t in sums]
            s.wait([gen], TIMEOUT)
            assert _local(client) == before + 1
    assert cluster.exit_codes and all(c == 0 for c in cluster.exit_codes.values())
    with open(data, "rb") as f:
        want = hashlib.md5(f.read()).hexdigest()
    assert got == [want] * readers
    with open(log, errors="replace") as f:
        said = f.read()
    assert "chunks, not a pipe" not in said, said[-4000:]
    assert said.count("pipe handed to") == readers, said[-4000:]


def test_a_reader_that_stops_early(client):
    """`yes | head -n 3`: the reader leaves, the writer's pipe closes under
    it, and its SIGPIPE does not fail it (here over the same-host path: the
    reader's governor closes the pipe handed to it, and the writer's once it
    knows)."""
    before = _local(client)
    with client.session() as s:
        yes = Execute("yes", stdout=True, stream=True, name="yes")
        head = Execute("head -n 3", stdin=yes.output, stdout=True)
        head.output.keep()
        s.submit()
        assert head.output.fetch(TIMEOUT) == b"y\ny\ny\n"
        s.wait([yes], TIMEOUT)
    assert _local(client) == before + 1


@pytest.mark.parametrize("case", ["kept", "fetched", "later", "concat", "deadlock", "unread"])
def test_refusals(client, case, tmp_path):
    with client.session() as s:
        gate = os.path.join(str(tmp_path), "gate")
        command = ("seq 1 10" if case != "fetched"
                   else "sh -c 'seq 1 10; while [ ! -e %s ]; do sleep 0.05; done'" % gate)
        producer = Execute(command, stdout=True, stream=True, outputs=["side"])
        stream, side = producer.outputs
        if case == "kept":
            Execute("wc -l", stdin=stream, stdout=True)
            stream.keep()
            with pytest.raises(squall.SquallError, match="cannot be kept"):
                s.submit()
            return
        if case == "fetched":
            #   A producer that cannot fail before the fetch was refused
            #   (it writes no "side": once failed, the client would report
            #   the failure first); the gate opens after the refusal.
            Execute("wc -l", stdin=stream, stdout=True)
            s.submit()
            try:
                with pytest.raises(squall.SquallError, match="is a stream"):
                    stream.fetch(TIMEOUT)
            finally:
                open(gate, "w").close()
            return
        if case == "later":
            Execute("wc -l", stdin=stream, stdout=True)
            s.submit()
            Execute("cat", stdin=stream, stdout=True)
            with pytest.raises(squall.SquallError, match="earlier submit"):
                s.submit()
            return
        if case == "concat":
            squall.tasks.Concat([stream, b"x"])
            with pytest.raises(squall.SquallError, match="cannot read"):
                s.submit()
            return
        if case == "deadlock":
            # it reads the stream and the producer's other output, which
            # exists only once the producer ended: neither would ever run
            Execute("cat - side", stdin=stream, inputs=[("side", side)], stdout=True)
            with pytest.raises(squall.SquallError, match="would ever run"):
                s.submit()
            return
        with pytest.raises(squall.SquallError, match="no reader"):
            s.submit()


def test_one_gib_in_bounded_memory():
    """1 GiB through three stages on three governors: each governor's peak
    memory stays within a few windows (4 chunks of 1 MiB per reader), far
    below the stream. The same pipeline through finished objects is the
    benchmark's (bench/streams.py)."""
    options = cluster_options()
    asan = "env" in options
    if asan:
        # ASan holds freed memory in quarantine (256 MB by default), which
        # would count as kept: a small one measures what is really held
        env = dict(options["env"])
        env["ASAN_OPTIONS"] += ":quarantine_size_mb=4"
        options["env"] = env
    with squall.LocalCluster(governors=3, cpus=1, **options) as cluster:
        pids = [g.pid for g in cluster.governors]
        before = {pid: _hwm(pid) for pid in pids}
        with cluster.client() as client, client.session() as s:
            gen = Execute("head -c 1G /dev/zero | tr '\\0' a", stdout=True, stream=True)
            swap = Execute("tr a b", stdin=gen.output, stdout=True, stream=True)
            count = Execute("tr -d b | wc -c", stdin=swap.output, stdout=True)
            count.output.keep()
            s.submit()
            assert count.output.fetch(300).strip() == b"0"     # every byte went through tr
            s.wait([gen, swap], TIMEOUT)
        grown = {pid: _hwm(pid) - before[pid] for pid in pids}
        bound = (128 if asan else 64) * MIB    # redzones and a quarantine under ASan
        assert all(g < bound for g in grown.values()), grown


def _gated_producer(tmp_path, lines_before, lines_after):
    """A producer that writes lines_before lines, says which governor runs it
    (its parent) and that it started, then waits for tmp_path/go to write
    the rest."""
    return Execute(
        "echo $PPID >> %(d)s/starts; seq 1 %(a)d; "
        "while [ ! -e %(d)s/go ]; do sleep 0.01; done; seq %(b)d %(c)d"
        % {"d": tmp_path, "a": lines_before, "b": lines_before + 1,
           "c": lines_before + lines_after},
        stdout=True, stream=True, name="gated", max_retries=1)


def _starts(tmp_path):
    path = os.path.join(str(tmp_path), "starts")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(x) for x in f.read().split()]


def test_progress_shows_and_the_group_runs_again_when_the_writer_is_lost(tmp_path):
    with squall.LocalCluster(governors=3, cpus=1, **cluster_options()) as cluster:
        with cluster.client() as client, client.session() as s:
            producer = _gated_producer(tmp_path, 300000, 1000)
            count = Execute("wc -l", stdin=producer.output, stdout=True, name="wc")
            count.output.keep()
            s.submit()
            first = until(lambda: _starts(tmp_path), "the producer to start")[0]
            # INFO (and so the dashboard) shows the bytes streamed so far
            streams = until(lambda: [
                x for x in client.info().get("streams", [])
                if x["object"] == producer.output.id and x["bytes"] > 0],
                "the stream's progress in INFO")
            assert streams[0]["session"] == s.id
            # and `squall status` says it too
            import io
            from contextlib import redirect_stdout
            from squall import cli
            out = io.StringIO()
            with redirect_stdout(out):
                assert cli.main(["status", "--broker", cluster.address, "--secret-key",
                                 cluster.secret_key, "--broker-key", cluster.broker_key]) == 0
            assert "stream %d/%d on governor" % (s.id, producer.output.id) in out.getvalue()
            # it went as a pipe handed over (a LocalCluster's governors share
            # a stream directory), counted once its writer's governor knew
            assert "streams handed over as pipes (governors of one host): 1 so far" \
                in out.getvalue()
            # its governor dies mid-stream: the whole group runs again
            os.kill(first, signal.SIGKILL)
            starts = until(lambda: len(_starts(tmp_path)) >= 2 and _starts(tmp_path),
                           "the producer to start again")
            assert starts[1] != first
            open(os.path.join(str(tmp_path), "go"), "w").close()
            assert count.output.fetch(TIMEOUT).strip() == b"301000"
            assert len(_starts(tmp_path)) == 2


def test_the_group_runs_again_when_the_reader_is_lost_mid_pipe(tmp_path):
    """Over the same-host path, the reader's governor (which holds the
    writer's pipe) dies mid-stream: the writer's stays blocked on its pipe,
    not failed nor ended, and the group runs again whole."""
    with squall.LocalCluster(governors=3, cpus=1, **cluster_options()) as cluster:
        with cluster.client() as client, client.session() as s:
            before = _local(client)
            producer = _gated_producer(tmp_path, 300000, 1000)
            count = Execute("echo $PPID >> %s/readers; wc -l" % tmp_path, stdin=producer.output,
                            stdout=True, name="wc", max_retries=1)
            count.output.keep()
            s.submit()
            until(lambda: _local(client) == before + 1, "the pipe handed over")
            readers = os.path.join(str(tmp_path), "readers")
            until(lambda: os.path.exists(readers) and open(readers).read().split(),
                  "the reader to start")
            with open(readers) as f:
                reader_gov = int(f.read().split()[0])
            assert reader_gov not in _starts(tmp_path)     # not the writer's governor
            os.kill(reader_gov, signal.SIGKILL)
            until(lambda: len(_starts(tmp_path)) >= 2, "the producer to start again")
            open(os.path.join(str(tmp_path), "go"), "w").close()
            assert count.output.fetch(TIMEOUT).strip() == b"301000"


def test_a_reader_failing_runs_its_group_again(client, tmp_path):
    """The reader fails once (its retry is the group's): the writer runs again
    and the reader gets the whole stream the second time."""
    with client.session() as s:
        text = Execute("echo run >> %s/writer; seq 1 100000" % tmp_path, stdout=True,
                       stream=True)
        flaky = Execute("if [ ! -e %(d)s/failed ]; then touch %(d)s/failed; head -n 5 >/dev/null; "
                        "exit 1; fi; wc -l" % {"d": tmp_path},
                        stdin=text.output, stdout=True, max_retries=1)
        flaky.output.keep()
        s.submit()
        assert flaky.output.fetch(TIMEOUT).strip() == b"100000"
        with open(os.path.join(str(tmp_path), "writer")) as f:
            assert f.read().split() == ["run", "run"]


def test_a_reader_failing_before_it_reads_does_not_hold_its_writer(client):
    """A reader whose other input fails never reads: the writer is told
    (UNSTREAM, whether it started or not) and goes on for the others."""
    with client.session() as s:
        text = Execute("seq 1 100", stdout=True, stream=True)
        count = Execute("wc -l", stdin=text.output, stdout=True)
        bad = Execute("exit 1", stdout=True)
        doomed = Execute("cat - extra", stdin=text.output, inputs=[("extra", bad.output)],
                         stdout=True)
        count.output.keep()
        doomed.output.keep()
        s.submit()
        assert count.output.fetch(TIMEOUT).strip() == b"100"
        s.wait([text], TIMEOUT)
        with pytest.raises(squall.SquallError):
            doomed.output.fetch(TIMEOUT)


def test_a_writer_failing_fails_its_readers(client):
    """Also over the same-host path: the pipe's end is not the stream's,
    which only the writer's governor says once its program exited well."""
    before = _local(client)
    with client.session() as s:
        bad = Execute("seq 1 10; exit 3", stdout=True, stream=True)
        reader = Execute("wc -l", stdin=bad.output, stdout=True)
        reader.output.keep()
        s.submit()
        with pytest.raises(squall.SquallError):
            reader.output.fetch(TIMEOUT)
    until(lambda: _local(client) == before + 1, "the hand-over counted")


def test_governors_of_other_directories_send_chunks(tmp_path):
    """Writer and reader on governors that do not share a stream directory
    (as on two hosts): the writer finds no socket of the reader's governor
    and sends chunks; the bytes are the same, and a reader that leaves still
    ends the writer."""
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        # writers only on the one, readers only on the other
        cluster.add_governor(args=["--resource", "w=1", "--stream-dir", str(tmp_path / "a")])
        cluster.add_governor(args=["--resource", "r=1", "--stream-dir", str(tmp_path / "b")])
        with cluster.client() as client, client.session() as s:
            before = _local(client)
            seq = Execute("seq 1 200000", stdout=True, stream=True, resources={"w": 1})
            count = Execute("wc -l", stdin=seq.output, stdout=True, resources={"r": 1})
            yes = Execute("yes", stdout=True, stream=True, resources={"w": 1})
            head = Execute("head -n 2", stdin=yes.output, stdout=True, resources={"r": 1})
            count.output.keep()
            head.output.keep()
            s.submit()
            assert count.output.fetch(TIMEOUT).strip() == b"200000"
            assert head.output.fetch(TIMEOUT) == b"y\ny\n"
            s.wait([seq, yes], TIMEOUT)
            assert _local(client) == before


def test_streams_local_is_counted_per_tenant(cluster, client):
    """INFO's streams_local, as its other figures, shows a tenant its own
    streams; an admin (the cluster's own client) sees every tenant's."""
    alice = tenant_client(cluster, "alice", "team-a")
    bob = tenant_client(cluster, "bob", "team-b")
    try:
        everyone, mine, theirs = _local(client), _local(alice), _local(bob)
        assert mine == 0 and theirs == 0
        with alice.session() as s:
            seq = Execute("seq 1 1000", stdout=True, stream=True)
            count = Execute("wc -l", stdin=seq.output, stdout=True)
            count.output.keep()
            s.submit()
            assert count.output.fetch(TIMEOUT).strip() == b"1000"
            s.wait([seq], TIMEOUT)
        assert _local(alice) == 1
        assert _local(bob) == 0
        assert _local(client) == everyone + 1
    finally:
        alice.close()
        bob.close()


def test_a_governors_socket_is_there_before_the_broker_knows_it(tmp_path):
    """A governor binds its socket in the stream directory before its first
    HELLO: a writer's governor told to hand it a pipe must find it. (It was
    bound by the compute thread once the broker had accepted the governor,
    so a stream given to a governor just accepted went as chunks.) Here no
    broker answers, and the socket is there all the same."""
    import subprocess
    import time
    from squall.cluster import find_binary
    key = squall.keygen("gov", str(tmp_path), "governor")
    broker_pub = squall.keygen("broker", str(tmp_path), "broker")[:-4] + ".pub"
    streams = tmp_path / "streams"
    env = dict(os.environ)
    env.update(cluster_options().get("env") or {})
    env = {k: v for k, v in env.items() if v is not None}
    gov = subprocess.Popen([find_binary("squall-governor"), "--broker", "tcp://127.0.0.1:9",
                            "--secret-key", key, "--broker-key", broker_pub,
                            "--listen-host", "127.0.0.1", "--log-level", "info",
                            "--stream-dir", str(streams)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, env=env)
    try:
        said = []
        deadline = time.monotonic() + TIMEOUT
        for line in gov.stderr:             # HELLO is logged as it goes
            said.append(line)
            if "not answering" in line or time.monotonic() > deadline:
                break
        assert "not answering" in "".join(said), "".join(said)
        # its socket, and the same socket's second name for clients
        socks = sorted(n for n in os.listdir(str(streams)) if n.endswith(".sock"))
        assert len(socks) == 2 and socks[1].startswith("put-"), (socks, "".join(said))
        assert os.path.samefile(str(streams / socks[0]), str(streams / socks[1]))
    finally:
        gov.terminate()
        assert gov.wait(TIMEOUT) == 0
    # and it goes with its governor
    assert os.listdir(str(streams)) == []


def _send_pipes(path, n, payload=b"EVIL"):
    """Sends n pipes' read ends (each holding payload) with made-up tokens
    to a governor's socket, as any process of our user could; returns how
    many went (its queue is short: the rest would wait)."""
    import socket
    sent = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        for _ in range(n):
            r, w = os.pipe()
            os.write(w, payload)
            try:
                sock.sendmsg([os.urandom(16)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                                 bytes(memoryview(
                                                     __import__("array").array("i", [r]))))],
                               socket.MSG_DONTWAIT, path)
                sent += 1
            except BlockingIOError:
                pass
            finally:
                os.close(r)
                os.close(w)
    return sent


def _fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def test_only_governors_use_the_same_host_path(cluster, client):
    """docs/security.md, "Streams on one host": the stream directory is
    the cluster user's alone; a process of another user cannot reach a
    governor's socket; one of the same user that sends pipes there has them
    kept (at most 64 per governor, not for long) but never read for a
    stream, which needs a token only a governor sends over CURVE."""
    import socket
    import stat
    sdir = os.path.join(cluster._keydir, "streams")
    st = os.stat(sdir)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    socks = [os.path.join(sdir, n) for n in os.listdir(sdir) if not n.startswith("put-")]
    assert len(socks) == len(cluster.governors)
    assert all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in socks)
    # each also under the name its clients find it by (uploads on one host):
    # the same socket, linked
    puts = [os.path.join(sdir, n) for n in os.listdir(sdir) if n.startswith("put-")]
    assert sorted(os.stat(p).st_ino for p in puts) == sorted(os.stat(p).st_ino for p in socks)
    if os.geteuid() == 0:
        # another user (nobody) is refused by the kernel
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setgid(65534)
                os.setuid(65534)
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                    sock.sendto(b"x" * 16, socks[0])
            except PermissionError:
                code = 0
            except BaseException:
                code = 2
            os._exit(code)
        assert os.waitpid(pid, 0)[1] == 0
    base = {g.pid: _fds(g.pid) for g in cluster.governors}
    before = _local(client)
    # strangers' pipes, sent while a pipeline runs: never read into it
    for path in socks:
        assert _send_pipes(path, 8) > 0
    with client.session() as s:
        seq = Execute("seq 1 100000", stdout=True, stream=True)
        cat = Execute("cat", stdin=seq.output, stdout=True, stream=True)
        count = Execute("wc -c", stdin=cat.output, stdout=True)
        count.output.keep()
        s.submit()
        for path in socks:
            _send_pipes(path, 8)
        assert count.output.fetch(TIMEOUT).strip() == str(
            sum(len(str(i)) + 1 for i in range(1, 100001))).encode()
        s.wait([seq, cat], TIMEOUT)
    assert _local(client) == before + 2
    # many more (as fast as its socket takes them): a governor keeps 64 at
    # most, the oldest going first
    for path in socks:
        sent = [0]

        def more(path=path, sent=sent):
            sent[0] += _send_pipes(path, 10)
            return sent[0] >= 150
        until(more, "150 pipes sent to " + path)
    for g in cluster.governors:
        assert _fds(g.pid) <= base[g.pid] + 64 + 8, (_fds(g.pid), base[g.pid])


def test_the_example_runs():
    out = run_example("streams.py")
    assert "lines: 2000000" in out
    for code in range(5):
        assert "errors with code=%d: 57143" % code in out


# --------------------------------------------------------------------------
# Python tasks: a generator writes a stream, an iterator reads one


@squall.remote(stream=True)
def _numbers(n):
    for i in range(n):
        yield b"%d\n" % i


@squall.remote(stream=True)
def _evens(lines):
    rest = b""
    for chunk in lines:
        rest += chunk
        *done, rest = rest.split(b"\n")
        yield b"".join(x + b"\n" for x in done if int(x) % 2 == 0)


@squall.remote
def _total(lines):
    return sum(int(x) for x in lines.read().split())


@squall.remote
def _first_bytes(chunks):
    for chunk in chunks:
        return chunk[:10]           # and leaves the rest unread


@squall.remote(stream=True)
def _forever():
    while True:
        yield b"x" * 65536


@squall.remote(stream=True)
def _breaks(n):
    for i in range(n):
        yield b"%d\n" % i
    raise ValueError("the writer broke after %d lines" % n)


def test_python_generators_and_iterators(client):
    with client.session() as s:
        total = _total(_evens(_numbers(300000)))
        counted = Execute("wc -l", stdin=_numbers(1000).output, stdout=True)
        upper = _total(Execute("seq 1 1000", stdout=True, stream=True).output)
        for t in (total, counted, upper):
            t.output.keep()
        s.submit()
        assert total.output.fetch(TIMEOUT) == sum(range(0, 300000, 2))
        assert counted.output.fetch(TIMEOUT).strip() == b"1000"
        assert upper.output.fetch(TIMEOUT) == sum(range(1, 1001))


def test_python_reader_that_stops_early_ends_an_endless_writer(client):
    with client.session() as s:
        endless = _forever()
        first = _first_bytes(endless)
        first.output.keep()
        s.submit()
        assert first.output.fetch(TIMEOUT) == b"x" * 10
        s.wait([endless], TIMEOUT)      # it ended well once nobody read it


def test_python_writer_that_raises_fails_its_reader(client):
    with client.session() as s:
        reader = _total(_breaks(1000))
        reader.output.keep()
        s.submit()
        # the writer's own exception, as for any Python task
        with pytest.raises(ValueError, match="the writer broke after 1000 lines"):
            reader.output.fetch(TIMEOUT)
