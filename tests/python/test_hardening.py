"""Nothing unauthenticated exhausts the broker (docs/security.md, "Limits"):
idle connections under a small descriptor limit, bursts on the dashboard,
the dashboard's binding and Host check, busy ports named, private files.

Each test starts its own broker (real processes, loopback, ephemeral ports)."""
import os
import resource
import select
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest

import squall
from squall.keys import local_keys
from squall.cluster import find_binary
from conftest import cluster_options, until


class Broker:
    """A squall-broker started with `args`, its stderr collected."""

    def __init__(self, *args, keys=None, nofile=None):
        self.dir = tempfile.mkdtemp(prefix="squall-hardening-")
        self.keys = local_keys(os.path.join(self.dir, "keys")) if keys else None
        argv = [find_binary("squall-broker"), "--listen", "tcp://127.0.0.1:*"]
        if self.keys:
            argv += ["--secret-key", self.keys["broker_key"],
                     "--authorized-keys", self.keys["authorized"]]
        argv += list(args)
        if nofile:
            argv = ["prlimit", "--nofile=%d:%d" % (nofile, nofile)] + argv
        env = dict(os.environ)
        for k, v in cluster_options().get("env", {}).items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        self.log_path = os.path.join(self.dir, "broker.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, env=env,
                                     text=True)
        self.endpoint = self.http_port = None
        line = self.proc.stdout.readline()
        if line.startswith("LISTENING "):
            self.endpoint = line.split()[1]
            if "--http" in args:
                self.http_port = int(self.proc.stdout.readline().split()[1])

    def text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def cpu_seconds(self):
        fields = open("/proc/%d/stat" % self.proc.pid).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def client(self, timeout=10.0):
        if self.keys:
            return squall.Client(self.endpoint, timeout=timeout,
                                 secret_key=self.keys["client_key"],
                                 broker_key=self.keys["broker_pub"])
        return squall.Client(self.endpoint, timeout=timeout)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(30)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return code

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        code = self.close()
        assert exc[0] or code == 0, "broker exit status %s" % code


def _get(port, path="/metrics", host=None, timeout=5.0):
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path))
    if host:
        request.add_header("Host", host)
    with urllib.request.urlopen(request, timeout=timeout) as r:
        return r.status, r.read()


def _serves(port):
    try:
        return _get(port, timeout=2.0)[0] == 200
    except (OSError, urllib.error.URLError):
        return False


def _raise_own_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < n:
        pytest.skip("this test needs %d descriptors (hard limit %d)" % (n, hard))
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


# ---------------------------------------------------------------------------
# Connections

def test_idle_connections_under_a_small_descriptor_limit():
    """1100 idle TCP connections to a broker limited to 1024 descriptors:
    an authorised client is still served, and the broker does not spin
    (libzmq spins on a listener it cannot accept from)."""
    if not shutil.which("prlimit"):
        pytest.skip("prlimit (util-linux) is needed")
    _raise_own_nofile(4096)
    with Broker(keys=True, nofile=1024) as b:
        assert b.endpoint, b.text()
        port = int(b.endpoint.rsplit(":", 1)[1])
        cpu0, wall0 = b.cpu_seconds(), time.monotonic()
        socks = []
        try:
            poller = select.poll()
            for _ in range(1100):
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                socks.append(s)
                poller.register(s, select.POLLOUT)
            # Every connection is made (the kernel's backlog may delay some:
            # a refused SYN is sent again), or the broker closed it.
            pending = {s.fileno() for s in socks}

            def settled():
                for fd, _ in poller.poll(200):
                    pending.discard(fd)
                    poller.unregister(fd)
                return not pending
            until(settled, "1100 connections made", timeout=60)
            # A client with a key, while they stand: served. The kernel
            # still hands the broker connections whose last ACK it dropped
            # with the backlog full (it sends SYN-ACK again 1, 3, 7... s
            # later): for a second after such a burst every idle one is
            # younger than a second, and the client's connections are
            # closed as newcomers. Each is closed before its handshake
            # ends, so its HELLO goes out on the next (test_broker_admission).
            t = time.monotonic()
            try:
                c = b.client(timeout=10.0)
                assert c.info()["governors"] == []
                c.close()
            except Exception as e:
                raise AssertionError("%s after %.1f s; the broker's log ends:\n%s"
                                     % (e, time.monotonic() - t, b.text()[-3000:])) from e
            served = time.monotonic() - t
            # Then the broker rests: over a second window its CPU time is a
            # small part of it (spinning, it would be all of a core's share).
            cpu1, wall1 = b.cpu_seconds(), time.monotonic()
            until(lambda: time.monotonic() - wall1 > 2.0, "a 2 s window", timeout=10)
            window_cpu = b.cpu_seconds() - cpu1
            window = time.monotonic() - wall1
            total_cpu = b.cpu_seconds() - cpu0
            total = time.monotonic() - wall0
            print("client served in %.3f s; broker CPU %.2f s in %.1f s, %.2f s in the last %.1f s"
                  % (served, total_cpu, total, window_cpu, window))
            assert window_cpu < 0.1 * window + 0.1, (window_cpu, window)
            assert total_cpu < 0.5 * total + 1.0, (total_cpu, total)
            assert "closed: too many connections from its address" in b.text()
        finally:
            for s in socks:
                s.close()


def _expect_closed(s):
    """The peer closes `s` (a connection that never says anything) well
    before libzmq's default handshake timeout (30 s)."""
    s.settimeout(30)
    t = time.monotonic()
    try:
        data = s.recv(4096)          # the greeting (ZMTP), then the end
        while data:
            data = s.recv(4096)
    except ConnectionResetError:
        pass
    except socket.timeout:
        pass
    finally:
        s.close()
    assert time.monotonic() - t < 25, "the silent connection was kept"


def _zmtp_null_server(conn):
    """The server's half of a ZMTP 3 NULL handshake on `conn` (a ROUTER,
    as the broker is); then the frames of the client's first message."""
    conn.sendall(b"\xff" + bytes(8) + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00")
                 + b"\x00" + bytes(31))
    f = conn.makefile("rb")
    assert len(f.read(64)) == 64                    # the client's greeting

    def frame():
        flags = f.read(1)[0]
        size = int.from_bytes(f.read(8 if flags & 2 else 1), "big")
        return flags, f.read(size)
    flags, body = frame()
    assert flags & 4 and body[1:6] == b"READY", (flags, body)
    prop = b"\x0bSocket-Type" + (6).to_bytes(4, "big") + b"ROUTER"
    body = b"\x05READY" + prop
    conn.sendall(bytes([4, len(body)]) + body)
    frames = []
    while True:
        flags, body = frame()
        frames.append(body)
        if not flags & 1:
            return frames


def test_hello_lost_with_its_connection_is_said_again():
    """A broker over its connection limits may close a connection after its
    handshake (without keys there is no ZAP answer to hold it back, security.md
    "Limits"): the client's HELLO went with it. The client says HELLO again,
    on a new connection, instead of waiting for its timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    hellos = []

    def serve():
        # Each connection: handshake, read the first message, close it.
        listener.settimeout(30)
        try:
            while len(hellos) < 2:
                conn, _ = listener.accept()
                with conn:
                    conn.settimeout(30)
                    hellos.append(_zmtp_null_server(conn))
        except OSError:
            pass
    import threading
    server = threading.Thread(target=serve, daemon=True)
    server.start()
    t = time.monotonic()
    with pytest.raises(squall.SquallError):
        squall.Client("tcp://127.0.0.1:%d" % port, timeout=3.0)
    listener.close()
    server.join(30)
    assert len(hellos) == 2, "the HELLO was said %d time(s) in %.1f s" % (
        len(hellos), time.monotonic() - t)
    assert hellos[0] != hellos[1]                   # a new request number
    assert all(len(h) == 1 for h in hellos), hellos


def test_silent_connection_is_closed():
    """A connection that completes no handshake is closed by the broker
    (ZMQ_HANDSHAKE_IVL), without anyone else doing anything."""
    with Broker(keys=True) as b:
        port = int(b.endpoint.rsplit(":", 1)[1])
        _expect_closed(socket.create_connection(("127.0.0.1", port)))


# ---------------------------------------------------------------------------
# The dashboard

def test_dashboard_recovers_after_a_burst():
    """64 connections opened and closed (the dashboard's limit): /metrics
    answers again at once."""
    with Broker("--http", "127.0.0.1:0") as b:
        assert _serves(b.http_port)
        for _ in range(2):
            burst = [socket.create_connection(("127.0.0.1", b.http_port)) for _ in range(64)]
            # The broker has taken what it could of them.
            until(lambda: _count_established(b.proc.pid) >= 32, "the burst accepted", 30)
            for s in burst:
                s.close()
            until(lambda: _serves(b.http_port), "/metrics after a burst of 64", timeout=15)
            status, body = _get(b.http_port, "/api/state")
            assert status == 200 and body.startswith(b"{")


def _count_established(pid):
    return sum(1 for fd in os.listdir("/proc/%d/fd" % pid)
               if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:"))


def test_dashboard_bound_like_the_broker():
    """Without keys, a dashboard beyond loopback is refused unless --insecure."""
    b = Broker("--http", "*:0")
    try:
        assert b.proc.wait(30) != 0
        assert "refusing to serve the dashboard on *:0 without keys" in b.text()
    finally:
        b.close()
    with Broker("--http", "*:0", "--insecure") as b:
        assert b.http_port and _serves(b.http_port)
        assert "INSECURE: the dashboard on *:0" in b.text()


def test_dashboard_host_check_without_keys():
    """Without keys (no token), only requests addressed to this machine are
    answered: a DNS-rebinding page's Host is refused."""
    with Broker("--http", "127.0.0.1:0") as b:
        port = b.http_port
        for host in ("localhost:%d" % port, "127.0.0.1:%d" % port, "127.0.0.1", "[::1]:%d" % port,
                     "LOCALHOST"):
            assert _get(port, "/api/state", host=host)[0] == 200, host
        for host in ("evil.example:%d" % port, "evil.example", "10.1.2.3:%d" % port,
                     "localhost.evil.example"):
            with pytest.raises(urllib.error.HTTPError) as e:
                _get(port, "/api/state", host=host)
            assert e.value.code in (400, 421), host


def test_busy_ports_are_named():
    """A port in use is an error naming it, for the broker and the dashboard
    (no SO_REUSEPORT: two brokers never share one)."""
    with Broker("--http", "127.0.0.1:0") as first:
        http = first.http_port
        second = Broker("--http", "127.0.0.1:%d" % http)
        try:
            assert second.proc.wait(30) != 0
            assert "port %d is in use" % http in second.text(), second.text()
        finally:
            second.close()
        endpoint = first.endpoint
        third = Broker("--listen", endpoint)
        try:
            assert third.proc.wait(30) != 0
            assert "cannot listen on %s: the port is in use" % endpoint in third.text(), third.text()
        finally:
            third.close()


# ---------------------------------------------------------------------------
# Files

def test_event_log_and_journal_are_private(tmp_path):
    events = tmp_path / "events.jsonl"
    journal = tmp_path / "journal"
    journal.write_bytes(b"")
    os.chmod(journal, 0o666)
    with Broker("--event-log", str(events), "--journal", str(journal)) as b:
        assert b.endpoint, b.text()
        assert stat.S_IMODE(os.stat(events).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(journal).st_mode) == 0o600


def test_event_log_refuses_a_symlink(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("")
    link = tmp_path / "events.jsonl"
    os.symlink(target, link)
    b = Broker("--event-log", str(link))
    try:
        assert b.proc.wait(30) != 0
        assert "cannot open the event log" in b.text()
        assert target.read_text() == ""
    finally:
        b.close()


# ---------------------------------------------------------------------------
# Frames and handshakes

def _curve(sock, secret_key_file, server_pub_file):
    import zmq.auth
    public, secret = zmq.auth.load_certificate(secret_key_file)
    server, _ = zmq.auth.load_certificate(server_pub_file)
    sock.curve_publickey, sock.curve_secretkey, sock.curve_serverkey = public, secret, server


def test_governor_refuses_an_oversized_frame():
    """A frame larger than the protocol allows on a governor's data socket
    (a chunk: 64 MiB, and CURVE's overhead) closes the connection before it is read, even from a
    peer with a governor's key."""
    zmq = pytest.importorskip("zmq")
    with squall.LocalCluster(governors=1, cpus=1, **cluster_options()) as cluster:
        c = cluster.client()
        governor = until(lambda: c.info()["governors"], "a governor")[0]
        c.close()
        keys = cluster._keys
        ctx = zmq.Context()
        push = ctx.socket(zmq.PUSH)
        push.linger = 0
        #   A governor's key (a spare one), and the running governor's public
        #   key as the server's: each governor has a key of its own.
        live = keys["governor_keys"][0]
        _curve(push, keys["governor_keys"][1], live[:-4] + ".pub")
        monitor = push.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
        push.connect(governor["data_endpoint"])
        from zmq.utils.monitor import recv_monitor_message

        def event(kind, timeout):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if monitor.poll(200):
                    if recv_monitor_message(monitor)["event"] == kind:
                        return True
            return False
        try:
            assert event(zmq.EVENT_HANDSHAKE_SUCCEEDED, 30), "the governor's key was refused"
            push.send(b"\0" * ((65 << 20) + 1))
            assert event(zmq.EVENT_DISCONNECTED, 30), "the oversized frame was taken"
            # A silent connection to its serve socket is closed too.
            host, port = governor["serve_endpoint"][len("tcp://"):].rsplit(":", 1)
            _expect_closed(socket.create_connection((host, int(port))))
        finally:
            push.disable_monitor()
            monitor.close()
            push.close()
            ctx.term()
    assert all(code == 0 for code in cluster.exit_codes.values()), cluster.exit_codes


def test_refused_handshakes_are_rate_limited():
    """40 handshakes with a key the broker does not know: at most 10 lines
    a window, the rest said as a count once the window ended."""
    zmq = pytest.importorskip("zmq")
    with Broker(keys=True) as b:
        ctx = zmq.Context()
        stranger = os.path.join(b.dir, "stranger")
        os.mkdir(stranger, 0o700)
        from squall.keys import keygen
        key = keygen("stranger", stranger, "client")
        socks = []
        try:
            for _ in range(40):
                s = ctx.socket(zmq.DEALER)
                s.linger = 0
                s.reconnect_ivl = 600000        # one handshake each
                _curve(s, key, b.keys["broker_pub"])
                s.connect(b.endpoint)
                socks.append(s)
            import re

            def counted():
                text = b.text()
                lines = text.count("connection refused: key not authorized")
                more = sum(int(n) for n in re.findall(r"(\d+) more connections refused", text))
                return (lines, more) if lines + more >= 40 else None
            lines, more = until(counted, "40 refused handshakes logged or counted", timeout=60)
            assert lines + more == 40, (lines, more)
            assert lines <= 20, "%d lines for 40 refused handshakes" % lines
        finally:
            for s in socks:
                s.close()
            ctx.term()
