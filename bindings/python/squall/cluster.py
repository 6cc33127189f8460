"""LocalCluster: a broker and governors as child processes on loopback."""
from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import logging
import time
from typing import List, Optional, Sequence

from ._client import Client
from ._lib import BIN_DIR
from .errors import SquallError
from .keys import local_keys

#   Governor keys a LocalCluster makes besides one per initial governor,
#   for those add_governor starts later.
_SPARE_GOVERNOR_KEYS = 16

__all__ = ["LocalCluster", "find_binary"]
_log = logging.getLogger("squall")

#   common/parentwatch.h: the read end of a pipe the starter holds open.
PARENT_FD_ENV = "SQUALL_PARENT_FD"


def find_binary(name: str) -> str:
    """Path of squall-broker / squall-governor: bundled in the package, then
    $SQUALL_BUILD_DIR (a cmake build directory), then PATH."""
    bundled = os.path.join(BIN_DIR, name)
    if os.access(bundled, os.X_OK):
        return bundled
    build = os.environ.get("SQUALL_BUILD_DIR")
    if build:
        sub = "broker" if name.endswith("broker") else "governor"
        for path in (os.path.join(build, sub, name), os.path.join(build, name)):
            if os.access(path, os.X_OK):
                return path
    found = shutil.which(name)
    if found:
        return found
    raise SquallError("cannot find %s: install squall with pip, set SQUALL_BUILD_DIR "
                      "to a cmake build directory, or put it in PATH" % name)


def _read_line(proc: subprocess.Popen, prefix: str, timeout: float, what: str) -> str:
    """Reads the child's stdout until a line starting with prefix."""
    deadline = time.monotonic() + timeout
    #   What came after the line asked for stays for the next call (the
    #   broker's LISTENING and HTTP lines often arrive in one read).
    buf = getattr(proc, "_squall_rest", b"")
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                text = line.decode("utf-8", "replace").strip()
                if text.startswith(prefix):
                    proc._squall_rest = buf
                    return text[len(prefix):].strip()
            left = deadline - time.monotonic()
            if left <= 0:
                raise SquallError("%s did not say %s within %.0f s" % (what, prefix, timeout))
            if not sel.select(left):
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                raise SquallError("%s exited (status %s) before saying %s"
                                  % (what, proc.wait(), prefix))
            buf += chunk


def _drain(proc: subprocess.Popen) -> None:
    """Discards the rest of a child's stdout so that it never blocks on it."""
    def run() -> None:
        try:
            while os.read(proc.stdout.fileno(), 65536):
                pass
        except (OSError, ValueError):
            pass
    threading.Thread(target=run, daemon=True, name="squall-drain").start()


class LocalCluster:
    """A broker and `governors` governors of `cpus` CPU slots each, started
    as child processes on free loopback ports and stopped on exit.

        with squall.LocalCluster(governors=2, cpus=1) as cluster:
            client = cluster.client()

    Governors run Python tasks with this interpreter (sys.executable) and
    this process's sys.path, so functions of the calling program's modules
    load there too. `log_level` is passed to both programs (logs go to this
    process's stderr); `broker_args` / `governor_args` add options;
    `env` adds to (or, with None values, removes from) their environment.
    After close(), `exit_codes` maps "broker" / "local-N" to exit statuses.

    The broker and governors end with this process: they watch a pipe whose
    write end only this process holds ($SQUALL_PARENT_FD, common/
    parentwatch.h), so when it dies in any way (killed, os._exit, a
    segfault) they stop, and a governor's executors die with it.

    Every connection is authenticated and encrypted (docs/security.md): the
    cluster makes keys of its own in a private temporary directory, removed
    on close; `secret_key` and `broker_key` are the paths a client outside
    `client()` needs (squall.Client(address, secret_key=..., broker_key=...)).

    Python executors start with the governors, one per cpu (`prestart`),
    and import the modules in `preload` before any task, so the first
    compute is not slowed by interpreter start-up (bench/first_compute.py).

    With `journal` (a file), the broker keeps its journal there: after
    `restart_broker()` (or a crash and a new cluster on the same journal)
    sessions, graphs and results come back, the governors reattach with
    what they hold, and clients resume (docs/architecture.md, "A broker
    restart").

    Tasks run as the user that started the cluster (`task_uids` "none"),
    unconfined (`task_landlock` "off"): a cluster of one user's, whose
    tasks read and write that user's files like any program of theirs. A
    cluster started as root for several tenants gives `task_uids`
    ("FIRST-LAST", or None for the governor's default) so that each
    tenant's tasks run under a user id of its own; one of a user's whose
    tasks must not reach its keys gives `task_landlock` "auto" or "on"
    (docs/security.md, "Tasks on a governor").

    `gpus` ("auto", "0,1,3" or a list of indexes) is every governor's
    `--gpus`: the devices it offers (README, "GPUs").
    """

    def __init__(self, governors: int = 2, cpus: int = 1, log_level: str = "warn",
                 python: Optional[str] = None, broker_args: Sequence[str] = (),
                 governor_args: Sequence[str] = (), timeout: float = 30.0,
                 env: Optional[dict] = None, journal: Optional[str] = None,
                 prestart: bool = True, preload: Sequence[str] = (),
                 task_uids: Optional[str] = "none", task_landlock: Optional[str] = "off",
                 gpus: Optional[str] = None, dashboard: bool = True):
        self.n_governors = governors
        self.cpus = cpus
        self.address: Optional[str] = None
        self.http_port: Optional[int] = None
        self._broker: Optional[subprocess.Popen] = None
        self._governors: List[subprocess.Popen] = []
        self._clients: list = []
        self.exit_codes: dict = {}
        self._journal = journal
        #   Executors start with the governors (one per cpu), importing
        #   `preload`: the first compute does not pay for an interpreter.
        if prestart or preload:
            governor_args = list(governor_args) + ["--python-prestart"]
        if preload:
            governor_args = list(governor_args) + ["--python-preload", ",".join(preload)]
        if task_uids is not None:
            governor_args = ["--task-uids", task_uids] + list(governor_args)
        if task_landlock is not None:
            governor_args = ["--task-landlock", task_landlock] + list(governor_args)
        if gpus is not None:
            #   GPUs as devices: "auto", or indexes ("0,1,3"); a list works too.
            if not isinstance(gpus, str):
                gpus = ",".join(str(int(g)) for g in gpus)
            governor_args = ["--gpus", gpus] + list(governor_args)
        self._log_level = log_level
        #   The dashboard, on a free loopback port, as Dask's LocalCluster
        #   starts its own (dashboard_link); dashboard=False: none.
        self._default_dashboard = bool(dashboard) and "--http" not in broker_args
        if self._default_dashboard:
            broker_args = list(broker_args) + ["--http", "0"]
        self._broker_args: List[str] = []
        self._keydir = tempfile.mkdtemp(prefix="squall-keys-")
        #   One key per governor, made before the broker reads them: the
        #   broker lets one live governor use a governor key. Governors
        #   added later take the spare ones.
        self._keys = local_keys(self._keydir, governors + _SPARE_GOVERNOR_KEYS)
        self.secret_key = self._keys["client_key"]
        self.broker_key = self._keys["broker_pub"]
        self._env = dict(os.environ)
        #   The children's lifeline: they see end of file on the read end
        #   when the write end closes, i.e. when this process is gone.
        #   os.pipe() fds are not inherited by other children (O_CLOEXEC).
        self._lifeline = os.pipe()
        self._env[PARENT_FD_ENV] = str(self._lifeline[0])
        for name, value in (env or {}).items():
            if value is None:
                self._env.pop(name, None)
            else:
                self._env[name] = value
        try:
            self._start(log_level, python or sys.executable, list(broker_args),
                        list(governor_args), timeout)
        except BaseException:
            self.close()
            raise

    def _start(self, log_level: str, python: str, broker_args: List[str],
               governor_args: List[str], timeout: float) -> None:
        find_binary("squall-governor")         # missing: fail before anything starts
        keys = ["--secret-key", self._keys["broker_key"],
                "--authorized-keys", self._keys["authorized"]]
        if any(a == "--http" for a in broker_args):
            keys += ["--http-token", self._keys["http_token"]]
        if self._journal:
            keys += ["--journal", self._journal]
        self._broker_args = keys + broker_args
        try:
            self._start_broker("tcp://127.0.0.1:*", timeout)
        except SquallError:
            if not self._default_dashboard or (self._broker and self._broker.poll() is None):
                raise
            #   A broker built without the dashboard (-DSQUALL_HTTP=OFF)
            #   refuses --http: the default dashboard is left out.
            _log.warning("squall: LocalCluster without a dashboard: the broker could not "
                         "serve one (built without libmicrohttpd?)")
            if self._broker.stdout:
                self._broker.stdout.close()
            self._default_dashboard = False
            self._broker_args = [a for a in keys if a != "--http-token" and
                                 a != self._keys["http_token"]] + broker_args[:-2]
            self._start_broker("tcp://127.0.0.1:*", timeout)
        env = dict(self._env)
        paths = [p for p in sys.path if p and os.path.isdir(p)]
        if os.environ.get("PYTHONPATH"):
            paths.append(os.environ["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        self._governor_env = env
        self._python = python
        self._governor_args = governor_args
        procs = [self._spawn_governor("local-%d" % (i + 1), self.cpus, governor_args)
                 for i in range(self.n_governors)]
        for i, proc in enumerate(procs):
            _read_line(proc, "READY", timeout, "squall-governor local-%d" % (i + 1))
            _drain(proc)

    def _spawn_governor(self, name: str, cpus: int, args: Sequence[str]) -> subprocess.Popen:
        proc = subprocess.Popen(
            [find_binary("squall-governor"), "--broker", self.address, "--cpus", str(cpus),
             "--name", name, "--listen-host", "127.0.0.1",
             "--advertise", "127.0.0.1", "--python", self._python, "--log-level", self._log_level,
             "--secret-key", self._governor_key(), "--broker-key", self.broker_key,
             #   its governors hand streams over as pipes (same host, same
             #   user: docs/security.md, "Streams on one host")
             "--stream-dir", os.path.join(self._keydir, "streams")]
            + list(args),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=self._governor_env,
            pass_fds=self._pass_fds(self._governor_env))
        self._governors.append(proc)
        return proc

    def _governor_key(self) -> str:
        # governors are never restarted under a name of before: each new
        # process is a new governor with a key of its own
        keys = self._keys["governor_keys"]
        if len(self._governors) >= len(keys):
            raise SquallError("LocalCluster: at most %d governors over its life (one key each)"
                              % len(keys))
        return keys[len(self._governors)]

    def add_governor(self, cpus: Optional[int] = None, args: Sequence[str] = (),
                     wait: bool = True, timeout: float = 30.0) -> subprocess.Popen:
        """Starts one more governor (e.g. args=["--resource", "gpu=1"]), named
        local-N; with wait, returns once it is connected."""
        name = "local-%d" % (len(self._governors) + 1)
        proc = self._spawn_governor(name, cpus or self.cpus,
                                    list(self._governor_args) + list(args))
        if wait:
            _read_line(proc, "READY", timeout, "squall-governor " + name)
            _drain(proc)
        return proc

    def _start_broker(self, endpoint: str, timeout: float) -> None:
        self._broker = subprocess.Popen(
            [find_binary("squall-broker"), "--listen", endpoint, "--log-level", self._log_level]
            + self._broker_args,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=self._env,
            pass_fds=self._pass_fds(self._env))
        self.address = _read_line(self._broker, "LISTENING", timeout, "squall-broker")
        if "--http" in self._broker_args:
            #   the dashboard's port (--http 0 picks one)
            self.http_port = int(_read_line(self._broker, "HTTP", timeout, "squall-broker"))
        _drain(self._broker)

    def _pass_fds(self, env: dict) -> tuple:
        """The lifeline's read end, unless the caller's env= took it away."""
        if env.get(PARENT_FD_ENV) == str(self._lifeline[0]):
            return (self._lifeline[0],)
        return ()

    def restart_broker(self, sig: int = signal.SIGKILL, timeout: float = 30.0) -> None:
        """Stops the broker with `sig` (SIGKILL: a crash) and starts it again
        on the same endpoint. Without a journal everything it knew is gone;
        with one, it comes back (see the class doc)."""
        if self._broker and self._broker.poll() is None:
            self._broker.send_signal(sig)
            self._broker.wait(timeout)
        if self._broker and self._broker.stdout:
            self._broker.stdout.close()
        self._start_broker(self.address, timeout)

    @property
    def broker(self) -> Optional[subprocess.Popen]:
        """The broker process."""
        return self._broker

    @property
    def governors(self) -> List[subprocess.Popen]:
        """The governor processes (for tests that stop one)."""
        return list(self._governors)

    def client(self, timeout: float = 10.0, asynchronous: bool = False,
               constant_cache: Optional[int] = None):
        """A new Client connected to this cluster (closed with it); with
        asynchronous=True, `await` it (squall.Client's asynchronous);
        constant_cache: squall.Client's."""
        client = Client(self.address, timeout=timeout, secret_key=self.secret_key,
                        broker_key=self.broker_key, asynchronous=asynchronous,
                        local_dir=self.local_dir, constant_cache=constant_cache)
        client.dashboard_link = self.dashboard_link
        self._clients.append(client)
        return client

    @property
    def local_dir(self) -> Optional[str]:
        """The governors' --stream-dir: a client of this host given it
        (Client(local_dir=...), $SQUALL_LOCAL_DIR) hands large constants
        over as memory files. None once the cluster is closed."""
        keydir = getattr(self, "_keydir", None)
        path = os.path.join(keydir, "streams") if keydir else None
        return path if path and os.path.isdir(path) else None

    @property
    def dashboard_link(self) -> Optional[str]:
        """The dashboard's address with its token (open it in a browser
        once: the token then sits in a cookie), or None without one. The
        token is a secret: the link lets its holder see every tenant."""
        if not self.http_port or self._broker is None:
            return None
        return "http://127.0.0.1:%d/?token=%s" % (self.http_port, self.http_token)

    def _repr_html_(self) -> str:
        from ._html import cluster_html     # Jupyter's view only: loaded when first shown
        return cluster_html(self)

    def _stop(self, procs, sig: int, deadline: float) -> None:
        """Signals the processes, then waits for each until `deadline`
        (SIGKILL after it), recording their exit codes."""
        for _, proc in procs:
            if proc.poll() is None:
                try:
                    proc.send_signal(sig)
                except OSError:
                    pass
        for name, proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self.exit_codes[name] = proc.returncode
            if proc.stdout:
                proc.stdout.close()

    def close(self, timeout: float = 10.0) -> None:
        """Stops the governors, then the broker (SIGTERM, SIGKILL after
        `timeout` seconds)."""
        for client in self._clients:
            try:
                client._close()
            except Exception:
                pass
        self._clients = []
        #   The whole cluster stops: governors leave at once (SIGINT) rather
        #   than drain into each other (SIGTERM), then the broker, so that
        #   it answers their BYE (they would wait for that answer).
        names = ["local-%d" % (i + 1) for i in range(len(self._governors))]
        deadline = time.monotonic() + timeout
        self._stop(list(zip(names, self._governors)), signal.SIGINT, deadline)
        if self._broker:
            self._stop([("broker", self._broker)], signal.SIGTERM, deadline)
        self._governors = []
        self._broker = None
        if getattr(self, "_keydir", None):
            shutil.rmtree(self._keydir, ignore_errors=True)
            self._keydir = None
        for fd in getattr(self, "_lifeline", ()):
            try:
                os.close(fd)
            except OSError:
                pass
        self._lifeline = ()

    @property
    def http_token(self) -> str:
        """The dashboard's token (when started with --http in broker_args)."""
        with open(self._keys["http_token"]) as f:
            return f.read().strip()

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        #   Never waits for a client's lock (the collector may run this in a
        #   thread the lock's holder waits for): its clients close as their
        #   locks are let go (Client._close).
        try:
            clients, self._clients = self.__dict__.get("_clients", ()), []
            for client in clients:
                client._close(wait=False)
            self.close(timeout=2.0)
        except Exception:
            pass

    def __repr__(self) -> str:
        return "<squall.LocalCluster %s, %d governors x %d cpus>" % (
            self.address, self.n_governors, self.cpus)
