"""`squall start`: a local cluster (a broker and governors) in the foreground, until
Ctrl-C. Standard library only, loaded by path by cli.py, which sets `cli`
(what this file uses of cli.py) before the command runs."""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

cli = None          # set by cli.py's _part()


def _private_log(path):
    """A log file only its owner reads (task names, errors, endpoints), never
    written through a symlink; an existing one is appended to, made 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise cli.CliError("%s is not a regular file" % path)
        os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "ab")


def _last_error(log_path):
    """The last ERROR line of a process's log (its reason for leaving), or ""."""
    try:
        with open(log_path, errors="replace") as f:
            errors = [line.split(" ERROR ", 1)[1].strip() for line in f if " ERROR " in line]
    except OSError:
        return ""
    return errors[-1] if errors else ""


class _Child:
    def __init__(self, name, argv, log_path, lifeline=None):
        self.name = name
        self.log = _private_log(log_path)
        # The child stops when the read end of `lifeline` sees end of file,
        # i.e. when this process is gone however it ended (common/
        # parentwatch.h): a killed `squall start` leaves no cluster behind.
        env = pass_fds = None
        if lifeline is not None:
            env = dict(os.environ, SQUALL_PARENT_FD=str(lifeline))
            pass_fds = (lifeline,)
        # Own session: the terminal's Ctrl-C reaches only us, and we stop the
        # governors before the broker.
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     env=env, pass_fds=pass_fds or ())
        self.lines = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            with self.cond:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_line(self, prefix, deadline):
        """The first stdout line starting with prefix, or None at the deadline / exit."""
        with self.cond:
            while True:
                for line in self.lines:
                    if line.startswith(prefix):
                        return line
                if self.proc.poll() is not None and not self.reader.is_alive():
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 0.2))

    def stop(self, grace=5.0):
        if self.proc.poll() is None:
            try:
                #   The whole cluster stops: governors leave at once (SIGINT)
                #   rather than drain into each other (SIGTERM).
                self.proc.send_signal(signal.SIGTERM if self.name == "broker" else signal.SIGINT)
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class _Stop:
    """SIGINT and SIGTERM as a flag the main loop waits on, from install()
    to close(). The handler takes no lock: Python runs it in the main thread
    between two bytecodes, maybe while that thread holds one, and a
    threading.Event set there can wait forever for its own lock (held
    inside Event.wait): `squall start` then ignored Ctrl-C until killed.
    The wakeup fd ends a wait() as soon as a signal arrives."""

    def __init__(self):
        self.signalled = False
        self._fds = None
        self._old = {}
        self._old_fd = -1

    def install(self):
        self._fds = os.pipe()
        for fd in self._fds:
            os.set_blocking(fd, False)
        self._old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        self._old_fd = signal.set_wakeup_fd(self._fds[1])
        return self

    def _on_signal(self, signum, frame):
        self.signalled = True

    def wait(self, timeout):
        """True once a signal came; waits at most timeout seconds for one."""
        if not self.signalled:
            select.select([self._fds[0]], [], [], timeout)
            try:
                while os.read(self._fds[0], 64):
                    pass
            except BlockingIOError:
                pass
        return self.signalled

    def close(self):
        signal.set_wakeup_fd(self._old_fd)
        for s, handler in self._old.items():
            signal.signal(s, handler)
        for fd in self._fds or ():
            os.close(fd)
        self._fds = None


def _dir_state(path):
    """The names and change times of a directory's files."""
    try:
        return sorted((e.name, e.stat().st_mtime_ns) for e in os.scandir(path))
    except OSError:
        return None


def cmd_start(args):
    if args.governors < 0 or (args.cpus is not None and args.cpus < 1):
        raise cli.CliError("--governors must be >= 0 and --cpus >= 1", cli.EXIT_USAGE)
    broker_bin = cli.find_program("squall-broker")
    governor_bin = cli.find_program("squall-governor")
    logdir = args.log_dir or tempfile.mkdtemp(prefix="squall-start-")
    os.makedirs(logdir, mode=0o700, exist_ok=True)
    # Keys of its own (docs/security.md): the cluster is closed to anyone
    # without them, even on this machine. A new set per start.
    keydir = tempfile.mkdtemp(prefix="keys-", dir=logdir)
    authorized = os.path.join(keydir, "authorized")
    os.mkdir(authorized, 0o700)
    broker_key = cli.keygen("broker", keydir, "broker")
    #   One governor, one identity (docs/security.md): a key pair each, made
    #   before the broker starts so that it reads their .pub at once. No
    #   secret key is kept in the authorized directory.
    names = ["governor-%d" % (i + 1) for i in range(args.governors)]
    for name, role in [("client", "admin")] + [(n, "governor") for n in names]:
        cli.keygen(name, keydir, role)
        os.replace(os.path.join(keydir, name + ".pub"), os.path.join(authorized, name + ".pub"))
    client_key = os.path.join(keydir, "client.key")
    broker_pub = broker_key[:-4] + ".pub"
    token_file = os.path.join(keydir, "http-token")
    token = os.urandom(24).hex()
    with os.fdopen(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(token + "\n")
    port = "*" if args.port == 0 else str(args.port)
    argv = [broker_bin, "--listen", "tcp://%s:%s" % (args.host, port),
            "--secret-key", broker_key, "--authorized-keys", authorized,
            "--journal", os.path.join(logdir, "journal")]
    if args.http is not None and args.http >= 0:
        host = args.http_host or args.host
        argv += ["--http", "%s:%d" % ("*" if host == "0.0.0.0" else host, args.http),
                 "--http-token", token_file]
    if args.event_log:
        argv += ["--event-log", args.event_log]
    children = []
    stop = _Stop().install()
    code = cli.EXIT_OK
    lifeline = os.pipe()            # only this process holds the write end
    try:
        broker = _Child("broker", argv, os.path.join(logdir, "broker.log"), lifeline[0])
        children.append(broker)
        deadline = time.monotonic() + 10
        line = broker.wait_line("LISTENING ", deadline)
        if not line:
            try:
                broker.proc.wait(5)         # its last words are in its log
            except subprocess.TimeoutExpired:
                pass
            why = _last_error(os.path.join(logdir, "broker.log"))
            raise cli.CliError("the broker did not start%s; see %s"
                           % (": " + why if why else "", os.path.join(logdir, "broker.log")))
        endpoint = line.split(None, 1)[1]
        if args.port == 0 or args.host in ("0.0.0.0", "*"):
            endpoint = endpoint.replace("0.0.0.0", "127.0.0.1")
        dashboard = None
        if args.http is not None and args.http >= 0:
            line = broker.wait_line("HTTP ", deadline)
            if not line:
                raise cli.CliError("the broker did not serve HTTP; see %s/broker.log" % logdir)
            host = args.http_host or args.host
            dashboard = "http://%s:%s/?token=%s" % ("127.0.0.1" if host in ("0.0.0.0", "*")
                                                    else host, line.split()[1], token)
        governors = []
        #   Governors listen where the broker does: on loopback unless
        #   --host opens the broker to other machines.
        listen_host = "0.0.0.0" if args.host in ("0.0.0.0", "*") else args.host
        for i, name in enumerate(names):
            gargv = [governor_bin, "--broker", endpoint, "--name", name,
                     "--secret-key", os.path.join(keydir, name + ".key"),
                     "--broker-key", broker_pub, "--listen-host", listen_host,
                     #   all on this host: streams between them go as pipes
                     #   (docs/security.md, "Streams on one host")
                     "--stream-dir", os.path.join(keydir, "streams")]
            if args.cpus:
                gargv += ["--cpus", str(args.cpus)]
            if args.gpus:
                gargv += ["--gpus", args.gpus]
            gargv += ["--python", args.python or os.environ.get("SQUALL_PYTHON") or sys.executable]
            child = _Child("governor-%d" % (i + 1), gargv,
                           os.path.join(logdir, "governor-%d.log" % (i + 1)), lifeline[0])
            children.append(child)
            governors.append(child)
        for child in governors:
            if not child.wait_line("READY", time.monotonic() + 10):
                raise cli.CliError("%s did not start; see %s/%s.log"
                                   % (child.name, logdir, child.name))
        print("squall: cluster running: broker %s, %d governor(s)%s"
              % (endpoint, len(governors), ", %d cpus each" % args.cpus if args.cpus else ""))
        if dashboard:
            print("squall: dashboard %s" % dashboard)
        print("squall: logs in %s; Ctrl-C stops the cluster" % logdir)
        # In one write: whoever reads them sees all or none.
        lines = ["SQUALL_BROKER=%s" % endpoint, "SQUALL_SECRET_KEY=%s" % client_key,
                 "SQUALL_BROKER_KEY=%s" % broker_pub,
                 #   clients of this host hand large constants to the
                 #   governors there (docs/security.md, "Uploads on one host")
                 "SQUALL_LOCAL_DIR=%s" % os.path.join(keydir, "streams")]
        if dashboard:
            lines.append("SQUALL_DASHBOARD=%s" % dashboard)
        if args.access:
            #   For governors and clients elsewhere (Slurm, squall/slurm.py):
            #   the broker as they reach it, and the keys, in a file only
            #   its owner reads.
            port_now = endpoint.rsplit(":", 1)[1]
            access = {"broker": "tcp://%s:%s" % (args.access_host or socket.getfqdn(), port_now),
                      "secret_key": client_key, "broker_key": broker_pub,
                      "authorized_keys": authorized, "dashboard": dashboard}
            #   A new file of a name nobody could plant (mkstemp: O_EXCL,
            #   0600), renamed over the access file (a symlink there is
            #   replaced, never written through).
            where = os.path.dirname(os.path.abspath(args.access))
            fd, tmp = tempfile.mkstemp(dir=where, prefix="." + os.path.basename(args.access) + ".")
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump(access, f, indent=2)
                os.replace(tmp, args.access)
            except BaseException:
                os.unlink(tmp)
                raise
            lines.append("SQUALL_ACCESS=%s" % os.path.abspath(args.access))
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        #   Governors elsewhere (`squall slurm`) are authorised by their .pub
        #   put in the authorized directory: the broker reads it again
        #   (SIGHUP) whenever what it holds changes.
        seen = _dir_state(authorized)
        while not stop.signalled:
            now = _dir_state(authorized)
            if now != seen:
                seen = now
                broker.proc.send_signal(signal.SIGHUP)
            #   A governor that left with status 0 was retired (squall retire):
            #   the cluster goes on without it.
            dead = [c for c in children if c.proc.poll() is not None
                    and (c.name == "broker" or c.proc.returncode != 0)]
            if dead:
                print("squall: %s exited with status %s; stopping the cluster (see %s)"
                      % (dead[0].name, dead[0].proc.returncode, logdir), file=sys.stderr)
                code = cli.EXIT_FAILURE
                break
            stop.wait(0.2)
        if stop.signalled:
            print("squall: stopping", file=sys.stderr)
    finally:
        # governors first (they say goodbye), then the broker
        for child in reversed(children):
            child.stop()
        stop.close()
        for fd in lifeline:
            os.close(fd)
    # a process that failed on its way out (a crash, a sanitizer report)
    # makes the run a failure too
    for child in children:
        if child.proc.returncode not in (0, -signal.SIGTERM, -signal.SIGINT) \
                and code == cli.EXIT_OK:
            print("squall: %s exited with status %s (see %s)"
                  % (child.name, child.proc.returncode, logdir), file=sys.stderr)
            code = cli.EXIT_FAILURE
    return code
