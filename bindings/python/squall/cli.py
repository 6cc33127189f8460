"""squall: the command line tool.

    squall start --governors N [--cpus C]   a local cluster in the foreground
    squall status                           governors, their load, tasks
    squall run FILE.py [ARGS...]            run a pipeline script on the cluster
    squall submit [OPTIONS] -- PROGRAM ARGS a job of commands (docs/jobs.md)
    squall submit --file JOB.toml           a job of a graph of commands
    squall job list|info|wait|cancel|resubmit|forget, squall task list
    squall replay EVENTLOG [--html OUT]     what ran where, from an event log
    squall cancel SESSION...                close sessions a killed client left running

Exit codes (the same for every command, so scripts can rely on them):
    0  success
    1  failure (a pipeline script failed, a process died, a bad event log)
    2  usage error (unknown command or option, missing file)
    3  the cluster is unreachable (no broker answers at the endpoint)

Standard library only: the client library is reached through ctypes, so this
works before (and without) the rest of the Python package being importable.
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import glob
import json
import os
import shutil
import subprocess
import sys
import time

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
#   common/squall_codes.h
_SQ_E_INVALID, _SQ_E_DENIED = 4, 24
DEFAULT_BROKER = "tcp://127.0.0.1:7760"

_HERE = os.path.dirname(os.path.abspath(__file__))
_BIN_DIR = os.path.join(_HERE, "_bin")


class CliError(Exception):
    """An error with the exit code it stands for."""

    def __init__(self, message, code=EXIT_FAILURE):
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------
# Finding the programs and the client library: bundled in the package (pip),
# then $SQUALL_BUILD_DIR (a cmake build tree), then PATH / the linker path.

def find_program(name):
    """Path of squall-broker / squall-governor, or raise CliError."""
    subdir = {"squall-broker": "broker", "squall-governor": "governor"}.get(name, "")
    candidates = [os.path.join(_BIN_DIR, name)]
    build = os.environ.get("SQUALL_BUILD_DIR")
    if build:
        candidates += [os.path.join(build, subdir, name), os.path.join(build, name)]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found:
        return found
    raise CliError("cannot find %s: install squall (pip or cmake --install), or set "
                   "SQUALL_BUILD_DIR to a cmake build directory" % name)


def _load_library():
    candidates = sorted(glob.glob(os.path.join(_BIN_DIR, "libsquall.so*")))
    if os.environ.get("SQUALL_LIBRARY"):
        candidates.append(os.environ["SQUALL_LIBRARY"])
    build = os.environ.get("SQUALL_BUILD_DIR")
    if build:
        candidates.append(os.path.join(build, "client", "libsquall.so"))
    found = ctypes.util.find_library("squall")
    if found:
        candidates.append(found)
    errors = []
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            errors.append("%s: %s" % (path, exc))
            continue
        p = ctypes.c_void_p
        lib.sq_client_new.restype = p
        lib.sq_client_new.argtypes = []
        lib.sq_client_connect.restype = ctypes.c_int
        lib.sq_client_connect.argtypes = [p, ctypes.c_char_p, ctypes.c_int]
        lib.sq_client_errmsg.restype = ctypes.c_char_p
        lib.sq_client_errmsg.argtypes = [p]
        lib.sq_client_info.restype = ctypes.c_int
        lib.sq_client_info.argtypes = [p, ctypes.POINTER(p)]
        lib.sq_client_retire.restype = ctypes.c_int
        lib.sq_client_retire.argtypes = [p, ctypes.c_uint32]
        lib.sq_client_close_session.restype = ctypes.c_int
        lib.sq_client_close_session.argtypes = [p, ctypes.c_uint32]
        lib.sq_free.restype = None
        lib.sq_free.argtypes = [p]
        lib.sq_client_destroy.restype = None
        lib.sq_client_destroy.argtypes = [ctypes.POINTER(p)]
        lib.sq_client_set_keys.restype = ctypes.c_int
        lib.sq_client_set_keys.argtypes = [p, ctypes.c_char_p, ctypes.c_char_p]
        lib.sq_keygen.restype = ctypes.c_int
        lib.sq_keygen.argtypes = [ctypes.c_char_p] * 5 + [ctypes.c_size_t]
        _logs_module().declare(lib)
        return lib
    raise CliError("cannot find libsquall (set SQUALL_BUILD_DIR or SQUALL_LIBRARY)"
                   + ("; tried " + "; ".join(errors) if errors else ""))


def _keys(args):
    """(secret key file, broker key file) from the options or the environment,
    or (None, None)."""
    secret = getattr(args, "secret_key", None) or os.environ.get("SQUALL_SECRET_KEY") or None
    broker = getattr(args, "broker_key", None) or os.environ.get("SQUALL_BROKER_KEY") or None
    if bool(secret) != bool(broker):
        raise CliError("keys need both --secret-key and --broker-key (or $SQUALL_SECRET_KEY "
                       "and $SQUALL_BROKER_KEY)", EXIT_USAGE)
    return secret, broker


def keygen(name, directory, role, tenant=None):
    """Writes DIRECTORY/NAME.key and .pub (libsquall's sq_keygen); the .key path."""
    lib = _load_library()
    err = ctypes.create_string_buffer(600)
    if lib.sq_keygen(name.encode(), os.fsencode(directory), role.encode(),
                     tenant.encode() if tenant else None, err, len(err)):
        raise CliError("keygen %s: %s" % (name, err.value.decode(errors="replace")), EXIT_USAGE)
    return os.path.join(directory, name + ".key")


def _connected(lib, endpoint, timeout, keys):
    """A libsquall client connected to the broker; CliError if none answers."""
    client = ctypes.c_void_p(lib.sq_client_new())
    if not client:
        raise CliError("out of memory")
    try:
        if keys[0] and lib.sq_client_set_keys(client, os.fsencode(keys[0]), os.fsencode(keys[1])):
            raise CliError(lib.sq_client_errmsg(client).decode(errors="replace"), EXIT_USAGE)
        rc = lib.sq_client_connect(client, endpoint.encode(), int(timeout * 1000))
        message = lib.sq_client_errmsg(client).decode(errors="replace") if rc else ""
        if rc == _SQ_E_INVALID:         # not an endpoint
            raise CliError(message, EXIT_USAGE)
        if rc == _SQ_E_DENIED:          # a broker answers, but not to these keys
            raise CliError("cluster unreachable: %s" % message, EXIT_UNREACHABLE)
        if rc:
            raise CliError("cluster unreachable: no broker answers at %s (%s)"
                           % (endpoint, message), EXIT_UNREACHABLE)
    except BaseException:
        lib.sq_client_destroy(ctypes.byref(client))
        raise
    return client


def cluster_info(endpoint, timeout=5.0, keys=(None, None)):
    """INFO from the broker as a dict; CliError(EXIT_UNREACHABLE) if none answers."""
    lib = _load_library()
    client = _connected(lib, endpoint, timeout, keys)
    try:
        buffer = ctypes.c_void_p()
        if lib.sq_client_info(client, ctypes.byref(buffer)):
            raise CliError("cluster unreachable: INFO failed at %s (%s)"
                           % (endpoint, lib.sq_client_errmsg(client).decode(errors="replace")),
                           EXIT_UNREACHABLE)
        try:
            return json.loads(ctypes.string_at(buffer).decode())
        finally:
            lib.sq_free(buffer)
    finally:
        lib.sq_client_destroy(ctypes.byref(client))


def _broker_endpoint(args):
    return getattr(args, "broker", None) or os.environ.get("SQUALL_BROKER") or DEFAULT_BROKER


def _bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0
    return str(n)


def _table(rows, header):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths)).rstrip()]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# squall start (clistart.py) and squall replay (clireplay.py)

def cmd_start(args):
    return _part("clistart").cmd_start(args)


def cmd_replay(args):
    return _part("clireplay").cmd_replay(args)


def read_events(path):
    """The events of an event log (clireplay.py)."""
    return _part("clireplay").read_events(path)


def summarize(events):
    """What ran where, from read_events (clireplay.py)."""
    return _part("clireplay").summarize(events)


# ---------------------------------------------------------------------------
# squall status

def cmd_keygen(args):
    key = keygen(args.name, args.dir, args.role, args.tenant)
    print("%s\n%s" % (key, key[:-4] + ".pub"))
    return EXIT_OK


def cmd_status(args):
    endpoint = _broker_endpoint(args)
    info = cluster_info(endpoint, args.timeout, _keys(args))
    if args.json:
        json.dump(info, sys.stdout, indent=2, sort_keys=True)
        print()
        return EXIT_OK
    govs = info.get("governors", [])
    tasks = info.get("tasks", {})
    print("broker %s (squall %s): %d governor(s), %d session(s), %d client(s), %d object(s)"
          % (endpoint, info.get("version", "?"), len(govs), info.get("sessions", 0),
             info.get("clients", 0), info.get("objects", 0)))
    rows = []
    for g in govs:
        cpus = g.get("cpus", 0) or 1
        load = (g.get("running", 0) + g.get("queued", 0)) / cpus
        name = g.get("name", "") + (" (draining)" if g.get("draining") else "")
        rows.append([g.get("id"), name, g.get("cpus"), "%.2f" % load, g.get("running", 0),
                     g.get("queued", 0), _bytes(g.get("memory", 0)), g.get("objects", 0),
                     g.get("tasks_done", 0)])
    if rows:
        print()
        print(_table(rows, ["id", "name", "cpus", "load", "running", "queued", "memory",
                            "objects", "done"]))
    else:
        print()
        print("no governor connected: tasks wait until one joins")
    print()
    states = ["waiting", "ready", "assigned", "running", "finished", "failed", "cancelled"]
    print("tasks: " + ", ".join("%s %d" % (s, tasks.get(s, 0)) for s in states))
    for line in resource_wait_lines(info):
        print(line)
    for x in info.get("streams") or []:
        print("stream %s/%s on governor %s: %s streamed so far"
              % (x.get("session"), x.get("object"), x.get("governor"), _bytes(x.get("bytes", 0))))
    if info.get("streams_local"):
        print("streams handed over as pipes (governors of one host): %d so far"
              % info["streams_local"])
    if info.get("uploads_local"):
        print("constants handed over as memory files (clients on a governor's host): %d so far"
              % info["uploads_local"])
    if info.get("copies_local"):
        print("copies handed over as memory files (governors of one host): %d so far"
              % info["copies_local"])
    return EXIT_OK


def _by_path(name):
    """squall/NAME.py (standard library only) loaded by its path as this
    file is, as module squall_NAME, once. (jobcli.py, loaded so before
    `cli` is set, has its own.)"""
    module = sys.modules.get("squall_" + name)
    if module is None:
        import importlib.util
        spec = importlib.util.spec_from_file_location("squall_" + name,
                                                      os.path.join(_HERE, name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["squall_" + name] = module
    return module


def _logs_module():
    """squall/_logs.py (stdlib only), loaded by path like this file."""
    return _by_path("_logs")


def _slurm():
    """squall/slurm.py, loaded by path like this file (stdlib only), with
    this module's helpers."""
    module = _by_path("slurm")
    import types
    module.cli = types.SimpleNamespace(cluster_info=cluster_info, retire_governor=retire_governor,
                                       keygen=keygen,
                                       find_program=find_program, CliError=CliError,
                                       EXIT_OK=EXIT_OK, EXIT_USAGE=EXIT_USAGE)
    return module


def retire_governor(endpoint, governor, timeout, keys):
    lib = _load_library()
    client = _connected(lib, endpoint, timeout, keys)
    try:
        if lib.sq_client_retire(client, int(governor)):
            raise CliError("retire: %s" % lib.sq_client_errmsg(client).decode(errors="replace"))
    finally:
        lib.sq_client_destroy(ctypes.byref(client))


# ---------------------------------------------------------------------------
# squall retire

def cmd_retire(args):
    endpoint = _broker_endpoint(args)
    keys = _keys(args)
    governors = cluster_info(endpoint, args.timeout, keys).get("governors", [])
    chosen = [g for g in governors if str(g.get("id")) == args.governor
              or g.get("name") == args.governor]
    if not chosen:
        raise CliError("no governor %s: the broker lists %s" % (
            args.governor, ", ".join("%s (%s)" % (g.get("id"), g.get("name")) for g in governors)
            or "none"), EXIT_USAGE)
    gov = chosen[0]
    retire_governor(endpoint, gov["id"], args.timeout, keys)
    print("governor %s (%s) drains: no new tasks; its work and the objects only it holds move "
          "to other governors, then it leaves" % (gov["id"], gov.get("name")))
    if not args.wait:
        return EXIT_OK
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        listed = cluster_info(endpoint, args.timeout, keys).get("governors", [])
        if not any(g.get("id") == gov["id"] for g in listed):
            print("governor %s left" % gov["id"])
            return EXIT_OK
        time.sleep(0.2)
    raise CliError("governor %s still there after %g s" % (gov["id"], args.wait))


# ---------------------------------------------------------------------------
# squall cancel

def cmd_cancel(args):
    """Closes sessions by id: what a killed client left running (its
    sessions wait the broker's --session-grace for it) stops now."""
    endpoint = _broker_endpoint(args)
    lib = _load_library()
    client = _connected(lib, endpoint, args.timeout, _keys(args))
    code = EXIT_OK
    try:
        for session in args.sessions:
            if lib.sq_client_close_session(client, session):
                print("squall: session %d: %s" % (session, lib.sq_client_errmsg(client).decode(
                    errors="replace")), file=sys.stderr)
                code = EXIT_FAILURE
            else:
                print("session %d closed: its unfinished tasks are cancelled, its objects freed"
                      % session)
    finally:
        lib.sq_client_destroy(ctypes.byref(client))
    return code


# ---------------------------------------------------------------------------
# squall log

def log_target(args, client):
    """(session, task) that `squall log J [TASK]` reads: a job by id or
    name and its task by the name `squall task list` shows (jobcli.py), or
    a plain session's task by ids."""
    return _jobs().log_target(client, args.job, args.task, args.follow)


def cmd_log(args):
    """A task's stdout (or --stderr) as its governor keeps it; --follow
    goes on until the task's attempt ended, through retries."""
    _logs = _logs_module()
    endpoint = _broker_endpoint(args)
    lib = _load_library()
    client = _connected(lib, endpoint, args.timeout, _keys(args))
    session, task = log_target(args, client)
    reader = _logs.Reader(lib, client, session, task, "stderr" if args.stderr else "stdout",
                          args.attempt)
    out = getattr(sys.stdout, "buffer", sys.stdout)
    try:
        said_waiting = False
        while True:
            data = reader.poll()
            if data:
                out.write(data)
                out.flush()
            if reader.error:
                raise CliError("task %d of session %d: %s" % (task, session, reader.error[1]),
                               EXIT_FAILURE)
            if reader.state == _logs.NONE:
                print("squall: task %d of session %d ended without running: it printed "
                      "nothing" % (task, session), file=sys.stderr)
                return EXIT_OK
            if reader.state == _logs.WAITING and not said_waiting:
                print("squall: task %d of session %d has not started yet%s" % (
                    task, session, "; waiting for it" if args.follow else ""), file=sys.stderr)
                said_waiting = True
            if not args.follow or reader.state == _logs.DONE:
                return EXIT_OK
            time.sleep(0.1 if reader.state == _logs.RUNNING else 0.5)
    finally:
        lib.sq_client_destroy(ctypes.byref(client))


def resource_wait_lines(info):
    """`squall status` lines for tasks waiting for a governor that fits
    (the broker's --resource-wait), grouped by what they need."""
    groups = {}
    for w in info.get("resource_waits") or []:
        needs = w.get("needs", "?")
        count, left = groups.get(needs, (0, None))
        ms = w.get("left_ms", 0)
        groups[needs] = (count + 1, ms if left is None else min(left, ms))
    return ["%d task(s) waiting for a governor with %s (%.0f s left)" % (n, needs, left / 1000.0)
            for needs, (n, left) in sorted(groups.items())]


# ---------------------------------------------------------------------------
# squall submit

def cmd_run(args):
    if not os.path.isfile(args.file):
        raise CliError("no such file: %s" % args.file, EXIT_USAGE)
    endpoint = _broker_endpoint(args)
    keys = _keys(args)
    if not args.no_check:
        cluster_info(endpoint, args.timeout, keys)
    env = dict(os.environ, SQUALL_BROKER=endpoint)
    if keys[0]:
        env.update(SQUALL_SECRET_KEY=keys[0], SQUALL_BROKER_KEY=keys[1])
    # the script imports squall from this very package
    package_root = os.path.dirname(_HERE)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, env.get("PYTHONPATH")] if p)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, args.file] + args.args, env=env)
    if proc.returncode != 0:
        print("squall: %s failed with status %d after %.1f s"
              % (args.file, proc.returncode, time.monotonic() - started), file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


# ---------------------------------------------------------------------------

def _ranged(kind, least, most=None, what="a number"):
    """An argparse type: kind(text) in [least, most], else a usage error."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not %s" % (text, what))
        if value != value or value < least or (most is not None and value > most):
            raise argparse.ArgumentTypeError(
                "%s is out of range (%s%s)" % (text, least, " to %s" % most if most is not None
                                               else " or more"))
        return value
    return parse


_SECONDS = _ranged(float, 0.0, 86400.0 * 366, "a number of seconds")
_COUNT = _ranged(int, 0, 1 << 20, "a whole number")


def _part(name):
    """squall/NAME.py (jobcli, clistart, clireplay), loaded by path as this
    file is (standard library only), with `cli` set to what it uses of this
    file."""
    module = _by_path(name)
    # what it uses of this file (loaded by path, maybe not in sys.modules)
    module.cli = argparse.Namespace(**globals())
    return module


def _jobs():
    return _part("jobcli")


def _version():
    from_package = os.path.join(_HERE, "__init__.py")
    try:
        with open(from_package) as f:
            for line in f:
                if line.startswith("__version__"):
                    return line.split("=", 1)[1].strip().strip("\"'")
    except OSError:
        pass
    return "unknown"


def build_parser():
    epilog = ("exit codes: 0 success, 1 failure, 2 usage error, "
              "3 cluster unreachable")
    parser = argparse.ArgumentParser(
        prog="squall", description="squall: start a local cluster, look at it, run pipelines on it.",
        epilog=epilog)
    parser.add_argument("--version", action="version", version="squall %s" % _version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("start", help="start a local cluster in the foreground (Ctrl-C stops it)",
                       description="Starts a broker and N governors on this machine and runs "
                                   "until Ctrl-C (or SIGTERM), then stops them cleanly. Prints "
                                   "SQUALL_BROKER=<endpoint> once the cluster is ready.",
                       epilog=epilog)
    p.add_argument("--governors", "-g", type=_COUNT, default=1, metavar="N",
                   help="governors to start (default 1)")
    p.add_argument("--cpus", "-c", type=_ranged(int, 1, 1000000, "a whole number"), metavar="C",
                   help="CPU slots per governor "
                   "(default: the machine's CPUs)")
    p.add_argument("--gpus", metavar="auto|LIST",
                   help="GPUs each governor offers as devices (squall-governor --gpus: auto, or "
                        "indexes such as 0,1,3); default none")
    p.add_argument("--host", default="127.0.0.1", help="address the broker binds (default 127.0.0.1)")
    p.add_argument("--port", "-p", type=_ranged(int, 0, 65535, "a port"), default=7760,
                   metavar="P",
                   help="broker port (default 7760; 0 picks a free one)")
    p.add_argument("--http", type=_ranged(int, -1, 65535, "a port"), default=8080, metavar="PORT",
                   help="dashboard port (default 8080; 0 picks a free one; -1 no dashboard)")
    p.add_argument("--http-host", help="address the dashboard binds (default: --host)")
    p.add_argument("--event-log", metavar="FILE", help="write the broker's event log to FILE")
    p.add_argument("--log-dir", metavar="DIR", help="where the processes' logs go "
                   "(default: a new temporary directory)")
    p.add_argument("--access", metavar="FILE",
                   help="write FILE (mode 0600): the broker's address as other machines reach "
                        "it and the keys, for `squall slurm` and clients elsewhere")
    p.add_argument("--access-host", metavar="HOST",
                   help="the broker's host name in the access file (default: this machine's)")
    p.add_argument("--python", metavar="PATH",
                   help="interpreter of the governors' Python tasks (default: the one running "
                        "this command, %s)" % sys.executable)
    p.set_defaults(func=cmd_start)

    p = sub.add_parser("slurm", help="governors in Slurm allocations",
                       description="Submits a Slurm job whose step starts one governor per node "
                                   "with the cpus and memory Slurm gave it, for the broker of an "
                                   "access file (squall start --access). Prints the job id.",
                       epilog=epilog)
    p.add_argument("what", choices=["governors"])
    p.add_argument("--access", required=True, metavar="FILE")
    p.add_argument("--nodes", "-N", type=int, default=1)
    p.add_argument("--cpus", "-c", type=int, metavar="C", help="cpus per governor (Slurm's -c)")
    p.add_argument("--gpus", type=_ranged(int, 1, 1024, "a number of GPUs"), metavar="N",
                   help="GPUs per node (Slurm's --gres gpu:N), offered by each governor as "
                        "devices (--gpus auto: the ones Slurm gave the job)")
    p.add_argument("--mem", metavar="MB", help="memory per node (Slurm's --mem)")
    p.add_argument("--time", "-t", metavar="T", help="time limit (Slurm's --time)")
    p.add_argument("--partition", "-p", metavar="P")
    p.add_argument("--log-dir", metavar="DIR", help="where the jobs' output goes (default: the "
                                                      "access file's directory)")
    p.set_defaults(func=lambda args: _slurm().cmd_governors(args))

    p = sub.add_parser("alloc", help="grow and shrink governors with the work (Slurm)",
                       description="Watches the broker of an access file; while ready tasks wait "
                                   "that the governors have no free cpu for (never tasks still "
                                   "waiting on inputs), submits governor jobs, at most "
                                   "--max-governors; retires governors idle for --idle-timeout "
                                   "seconds. Runs until Ctrl-C.", epilog=epilog)
    p.add_argument("what", choices=["slurm"])
    p.add_argument("--access", required=True, metavar="FILE")
    p.add_argument("--max-governors", type=int, default=4, metavar="N")
    p.add_argument("--time-limit", "-t", metavar="T", help="each job's time limit")
    p.add_argument("--idle-timeout", type=float, default=300.0, metavar="S")
    p.add_argument("--cpus", "-c", type=int, metavar="C", help="cpus per governor job")
    p.add_argument("--mem", metavar="MB", help="memory per governor job")
    p.add_argument("--partition", "-p", metavar="P")
    p.add_argument("--interval", type=float, default=2.0, metavar="S", help="how often it looks")
    p.add_argument("--log-dir", metavar="DIR")
    p.set_defaults(func=lambda args: _slurm().cmd_alloc(args))

    p = sub.add_parser("keygen", help="make a CurveZMQ key pair (docs/security.md)",
                       description="Writes DIR/NAME.key (the secret key, mode 0600) and "
                                   "DIR/NAME.pub (the public key) in CZMQ's certificate format. "
                                   "A broker accepts the .pub files in its --authorized-keys "
                                   "directory; role and tenant travel in them.", epilog=epilog)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--dir", default=".", help="where the files go (default .)")
    p.add_argument("--role", default="client", choices=["client", "governor", "admin", "broker"],
                   help="what the key may be (default client; admin sees every tenant)")
    p.add_argument("--tenant", help="the tenant of a client or admin key (default: NAME)")
    p.set_defaults(func=cmd_keygen)

    def key_options(p):
        p.add_argument("--secret-key", metavar="FILE",
                       help="this client's key (default $SQUALL_SECRET_KEY)")
        p.add_argument("--broker-key", metavar="FILE",
                       help="the broker's public key (default $SQUALL_BROKER_KEY)")

    p = sub.add_parser("status", help="governors, their load, memory and tasks",
                       description="Asks the broker ($SQUALL_BROKER, or --broker) about the "
                                   "cluster.", epilog=epilog)
    p.add_argument("--broker", "-b", metavar="ENDPOINT",
                   help="broker endpoint (default $SQUALL_BROKER or %s)" % DEFAULT_BROKER)
    p.add_argument("--json", action="store_true", help="print the broker's INFO as JSON")
    key_options(p)
    p.add_argument("--timeout", type=_SECONDS, default=5.0, metavar="S",
                   help="seconds to wait for the broker (default 5)")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("retire", help="drain a governor and let it leave",
                       description="Drains GOVERNOR (an id or a name from `squall status`): it "
                                   "takes no new task, its queued tasks go to other governors, "
                                   "running ones finish, objects only it holds are copied away, "
                                   "then it exits. With keys, needs an admin key.", epilog=epilog)
    p.add_argument("governor", metavar="GOVERNOR")
    p.add_argument("--broker", "-b", metavar="ENDPOINT",
                   help="broker endpoint (default $SQUALL_BROKER or %s)" % DEFAULT_BROKER)
    p.add_argument("--wait", type=_SECONDS, nargs="?", const=300.0, default=None, metavar="S",
                   help="wait until it left (at most S seconds, default 300)")
    key_options(p)
    p.add_argument("--timeout", type=_SECONDS, default=5.0, metavar="S",
                   help="seconds to wait for the broker (default 5)")
    p.set_defaults(func=cmd_retire)

    p = sub.add_parser("cancel", help="close sessions: cancel their tasks, free their objects",
                       description="Closes sessions by id, whichever client has them: a session "
                                   "of a client that was killed keeps running for the broker's "
                                   "--session-grace; this ends it now. With keys, a session of "
                                   "the key's tenant (an admin key: any).",
                       epilog=epilog)
    p.add_argument("sessions", metavar="SESSION", nargs="+",
                   type=_ranged(int, 1, 2 ** 32 - 1, "a session id"))
    p.add_argument("--broker", "-b", metavar="ENDPOINT",
                   help="broker endpoint (default $SQUALL_BROKER, then %s)" % DEFAULT_BROKER)
    p.add_argument("--timeout", type=_SECONDS, default=5.0, metavar="S",
                   help="how long to wait for the broker (default 5)")
    key_options(p)
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("log", help="what a task printed (its stdout or stderr)",
                       description="Prints the stdout (or --stderr) of task TASK of job J "
                                   "(an id or a name; TASK as `squall task list J` names it: "
                                   "a job file's task id, an array element's index, 0 for a "
                                   "command's one task, which is also the default), or of task id TASK of session id J "
                                   "(any session of your tenant), as the governor "
                                   "that ran it keeps it: past its --log-limit the head and the "
                                   "tail, with a line counting the bytes dropped between. "
                                   "--follow prints on as the task writes, until it ends "
                                   "(through retries). Exit 1 if the log is gone (\"log lost "
                                   "with governor N\") or the task is unknown.",
                       epilog=epilog)
    p.add_argument("job", metavar="J", help="a job's id or name, or a session id")
    p.add_argument("task", metavar="TASK", nargs="?", default=None,
                   help="the task (default: the job's only task)")
    p.add_argument("--stderr", action="store_true", help="its standard error instead")
    p.add_argument("--follow", "-f", action="store_true",
                   help="print on as it writes, until it ends")
    p.add_argument("--attempt", type=_ranged(int, 0, 2 ** 32 - 1, "an attempt number"),
                   default=None, help="this attempt (default: the latest)")
    p.add_argument("--broker", "-b", metavar="ENDPOINT",
                   help="broker endpoint (default $SQUALL_BROKER, then %s)" % DEFAULT_BROKER)
    p.add_argument("--timeout", type=_SECONDS, default=5.0, metavar="S",
                   help="how long to wait for the broker (default 5)")
    key_options(p)
    p.set_defaults(func=cmd_log)

    p = sub.add_parser("run", help="run a pipeline script against the cluster",
                       description="Runs FILE.py with the current Python, SQUALL_BROKER set to "
                                   "the cluster and the squall package importable. Fails with "
                                   "exit code 3 first if no broker answers.", epilog=epilog)
    p.add_argument("file", metavar="FILE.py")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    p.add_argument("--broker", "-b", metavar="ENDPOINT",
                   help="broker endpoint (default $SQUALL_BROKER or %s)" % DEFAULT_BROKER)
    p.add_argument("--timeout", type=_SECONDS, default=5.0, metavar="S",
                   help="seconds to wait for the broker (default 5)")
    p.add_argument("--no-check", action="store_true", help="do not check the broker first")
    key_options(p)
    p.set_defaults(func=cmd_run)

    _jobs().add_parsers(sub, key_options, epilog)

    p = sub.add_parser("replay", help="summarize a finished run from an event log",
                       description="Reads a broker event log (--event-log, docs/eventlog.md) and "
                                   "prints what ran where and how long.", epilog=epilog)
    p.add_argument("file", metavar="EVENTLOG")
    p.add_argument("--html", metavar="OUT", help="also write a timeline page to OUT")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_replay)
    return parser


def main(argv=None):
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    #   `squall submit [options] -- PROGRAM ARGS...`: what follows the first
    #   -- is the program's, never an option of ours (argparse would take
    #   the program's own --flags).
    command = None
    if argv[:1] == ["submit"] and "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1:]
    if argv[:1] == ["submit"] and command is None:
        #   `squall submit pipeline.py --its-options` (the old spelling of
        #   `squall run`) gets told so rather than "unrecognized arguments"
        args, unknown = parser.parse_known_args(argv)
        if unknown and not (args.rest and args.rest[0].endswith(".py")):
            args = parser.parse_args(argv)
        args.rest = args.rest + unknown
    else:
        args = parser.parse_args(argv)
    if args.command == "submit":
        args.program = command
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return args.func(args)
    except CliError as exc:
        print("squall: %s" % exc, file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return EXIT_FAILURE
    except BrokenPipeError:
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
