"""Jobs from the command line: `squall submit`, `squall job ...`, `squall
task list` (docs/jobs.md).

A job is a detached session (docs/protocol.md, "Jobs"): it lives on the
broker after the submitting process exits; any process of the same tenant
lists it, waits for it, reads its tasks, cancels, resubmits or forgets it by
id or name. Standard library only, loaded by path by cli.py, which sets
`cli` (what this file uses of cli.py) before any command runs.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time

cli = None          # set by cli.py's _jobs()

# Exit codes beyond cli.py's 0 / 1 / 2 / 3 (docs/jobs.md)
EXIT_NO_JOB = 4     # no such job (or another tenant's)
EXIT_TIMEOUT = 5    # `job wait --timeout` / `submit --wait --timeout` ran out

#   common/squall_codes.h
_SQ_E_DUPLICATE_ID, _SQ_E_SESSION, _SQ_E_TIMEOUT = 5, 11, 16

JOB_STATES = ("running", "finished", "failed", "cancelled")          # bits 1, 2, 4, 8
TASK_STATES = ("waiting", "running", "finished", "failed", "cancelled")  # 1 .. 16


def _by_path(name, filename):
    """squall/<filename> loaded by its path as module `name`, once."""
    module = sys.modules.get(name)
    if module is None:
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(os.path.dirname(os.path.abspath(__file__)), filename))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return module


def _jobfile():
    return _by_path("squall_jobfile", "jobfile.py")


def _records():
    """squall/_records.py (sq_job_t, sq_task_record_t), loaded by path."""
    return _by_path("squall_records", "_records.py")


_Job, _TaskRecord = _records().Job, _records().TaskRecord


def _usage(message):
    return cli.CliError(message, cli.EXIT_USAGE)


# ---------------------------------------------------------------------------
# The client library's job calls (client/squall.h, "Jobs")

def _library():
    lib = cli._load_library()
    if getattr(lib, "_squall_jobs", False):
        return lib
    p, u32, u64, i32, c = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int,
                           ctypes.c_char_p)
    sizep = ctypes.POINTER(ctypes.c_size_t)
    strs = ctypes.POINTER(ctypes.c_char_p)
    table = {
        "sq_session_new_job": (p, [p, c, ctypes.c_bool]),
        "sq_session_new_job_after": (p, [p, c, ctypes.c_bool, ctypes.POINTER(u32),
                                         ctypes.c_size_t]),
        "sq_session_id": (u32, [p]),
        "sq_session_detach": (None, [ctypes.POINTER(p)]),
        "sq_session_destroy": (None, [ctypes.POINTER(p)]),
        "sq_client_errcode": (i32, [p]),
        "sq_blob": (u32, [p, ctypes.c_void_p, ctypes.c_size_t, c]),
        "sq_task": (u32, [p, c, ctypes.POINTER(u32), ctypes.c_size_t, u32, ctypes.c_void_p,
                          ctypes.c_size_t]),
        "sq_output": (u32, [u32, u32]),
        "sq_task_set_name": (i32, [p, u32, c]),
        "sq_task_set_resource": (i32, [p, u32, c, u64]),
        "sq_task_set_gpus": (i32, [p, u32, ctypes.c_double]),
        "sq_task_set_priority": (i32, [p, u32, ctypes.c_int32]),
        "sq_task_set_max_retries": (i32, [p, u32, u32]),
        "sq_task_set_timeout": (i32, [p, u32, ctypes.c_double]),
        "sq_task_set_array": (i32, [p, u32, u32, u32, u32]),
        "sq_task_set_array_items": (i32, [p, u32, strs, ctypes.c_size_t]),
        "sq_keep": (i32, [p, u32]),
        "sq_submit": (i32, [p]),
        "sq_config_execute": (p, [strs, ctypes.c_size_t, strs, ctypes.c_size_t, i32, strs,
                                  ctypes.c_size_t, i32, strs, sizep]),
        "sq_client_jobs": (i32, [p, u32, u32, c, ctypes.POINTER(ctypes.POINTER(_Job)), sizep]),
        "sq_client_job_wait": (i32, [p, u32, i32, ctypes.POINTER(_Job)]),
        "sq_client_tasks": (i32, [p, u32, u32, u64, u32,
                                  ctypes.POINTER(ctypes.POINTER(_TaskRecord)), sizep,
                                  ctypes.POINTER(u64)]),
        "sq_client_resubmit": (i32, [p, u32, ctypes.POINTER(u32), ctypes.c_size_t,
                                     ctypes.POINTER(u64)]),
        "sq_client_job_cancel": (i32, [p, u32]),
        "sq_client_forget": (i32, [p, u32]),
    }
    for name, (restype, argtypes) in table.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise cli.CliError("this libsquall has no %s: jobs need a newer squall" % name)
        fn.restype = restype
        fn.argtypes = argtypes
    lib._squall_jobs = True
    return lib


def _cstrs(strings):
    """A char* array, NULL-terminated (env is read to its NULL)."""
    arr = (ctypes.c_char_p * (len(strings) + 1))()
    for i, s in enumerate(strings):
        arr[i] = s.encode() if isinstance(s, str) else s
    return arr


class _Client:
    """A connected libsquall client for one command."""

    def __init__(self, args, handle=None):
        self.lib = _library()
        if handle is not None:          # a caller's connection: it closes it
            self.h, self.borrowed = handle, True
            return
        self.borrowed = False
        self.h = cli._connected(self.lib, cli._broker_endpoint(args),
                                getattr(args, "connect_timeout", 5.0), cli._keys(args))

    def close(self):
        if self.h and not self.borrowed:
            self.lib.sq_client_destroy(ctypes.byref(self.h))
            self.h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def error(self, what, code=None):
        errcode = self.lib.sq_client_errcode(self.h)
        message = self.lib.sq_client_errmsg(self.h).decode(errors="replace")
        if errcode == _SQ_E_SESSION:
            return cli.CliError("%s: %s" % (what, message or "no such job"), EXIT_NO_JOB)
        return cli.CliError("%s: %s" % (what, message), code or cli.EXIT_FAILURE)

    def jobs(self, states=0, session=0, name=None):
        out = ctypes.POINTER(_Job)()
        n = ctypes.c_size_t()
        if self.lib.sq_client_jobs(self.h, states, session, name.encode() if name else None,
                                   ctypes.byref(out), ctypes.byref(n)):
            raise self.error("listing jobs")
        try:
            return [job_dict(out[i]) for i in range(n.value)]
        finally:
            if out:
                self.lib.sq_free(ctypes.cast(out, ctypes.c_void_p))

    def resolve(self, ref):
        """The job dict of an id or a name; CliError(EXIT_NO_JOB) if none."""
        if ref.isdigit():
            found = self.jobs(session=int(ref)) if 0 < int(ref) < 2 ** 32 else []
        else:
            found = self.jobs(name=ref)
        if not found:
            raise cli.CliError("no job %s" % ref if ref.isdigit() else "no job named %s" % ref,
                               EXIT_NO_JOB)
        return found[0]

    def wait(self, session, timeout_ms):
        job = _Job()
        rc = self.lib.sq_client_job_wait(self.h, session, timeout_ms, ctypes.byref(job))
        if rc == _SQ_E_TIMEOUT:
            return None
        if rc:
            raise self.error("job %d" % session)
        return job_dict(job)

    def tasks(self, session, states=0, elements=None):
        """Every task record of the session, as task_dict; elements, a
        set, gains the positions of array elements' records."""
        records, offset = [], 0
        while True:
            out = ctypes.POINTER(_TaskRecord)()
            n = ctypes.c_size_t()
            total = ctypes.c_uint64()
            if self.lib.sq_client_tasks(self.h, session, states, offset, 10000,
                                        ctypes.byref(out), ctypes.byref(n), ctypes.byref(total)):
                raise self.error("job %d" % session)
            try:
                for i in range(n.value):
                    if elements is not None and out[i].index >= 0:
                        elements.add(len(records))
                    records.append(task_dict(out[i]))
            finally:
                if out:
                    self.lib.sq_free(ctypes.cast(out, ctypes.c_void_p))
            offset += n.value
            if n.value == 0 or offset >= total.value:
                return records


def _state_name(bit, names):
    for i, name in enumerate(names):
        if bit == 1 << i:
            return name
    return "unknown"


def _seconds(ms):
    return ms / 1000.0 if ms else None


def job_dict(job):
    """A job as `--json` prints it."""
    return {"id": job.id, "name": job.name.decode(errors="replace") or None,
            "state": _state_name(job.state, JOB_STATES), "detached": bool(job.detached),
            "attached": bool(job.attached),
            "tasks": dict(zip(TASK_STATES, (int(n) for n in job.tasks))),
            "created": _seconds(job.created_ms), "ended": _seconds(job.ended_ms)}


def task_dict(rec):
    """A task as `--json` prints it: `id` the array index, else the task's
    name (a job file's id), else its id in the session."""
    name = rec.name.decode(errors="replace")
    return {"id": rec.index if rec.index >= 0 else (name or rec.id), "task": rec.id,
            "state": _state_name(rec.state, TASK_STATES),
            "exit_code": rec.exit_code if rec.has_exit_code else None,
            "governor": rec.governor or None, "attempts": rec.attempts,
            "started": _seconds(rec.started_ms), "ended": _seconds(rec.ended_ms),
            "error": rec.error.decode(errors="replace") or None,
            "element_task": rec.task or None}


def _states(texts, names, where):
    """A filter of state bits from `--state a,b --state c`."""
    bits = 0
    for text in texts or ():
        for one in text.split(","):
            one = one.strip()
            if one not in names:
                raise _usage("%s: %r is not a state (%s)" % (where, one, ", ".join(names)))
            bits |= 1 << names.index(one)
    return bits


# ---------------------------------------------------------------------------
# Printing for people

def _stamp(seconds):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) if seconds else "-"


def _duration(start, end):
    if not start:
        return "-"
    seconds = (end or time.time()) - start
    if seconds < 60:
        return "%.1fs" % seconds
    if seconds < 3600:
        return "%dm%02ds" % divmod(int(seconds), 60)
    return "%dh%02dm" % divmod(int(seconds) // 60, 60)


def _counts(tasks):
    parts = ["%d %s" % (tasks[s], s) for s in TASK_STATES if tasks.get(s)]
    return ", ".join(parts) or "no tasks"


def jobs_table(jobs):
    return cli._table([[j["id"], j["name"] or "-", j["state"], sum(j["tasks"].values()),
                        _counts(j["tasks"]), _stamp(j["created"]),
                        _duration(j["created"], j["ended"])] for j in jobs],
                      ["id", "name", "state", "tasks", "by state", "submitted", "took"])


def tasks_table(tasks):
    return cli._table([[t["id"], t["state"], "-" if t["exit_code"] is None else t["exit_code"],
                        t["governor"] or "-", t["attempts"], _stamp(t["started"]),
                        _duration(t["started"], t["ended"]) if t["ended"] or
                        t["state"] == "running" else "-",
                        (t["error"] or "").splitlines()[0][:80] if t["error"] else ""]
                       for t in tasks],
                      ["id", "state", "exit", "governor", "attempts", "started", "took",
                       "error"])


def _print_json(value):
    json.dump(value, sys.stdout, indent=2)
    sys.stdout.write("\n")


class _Bar:
    """`--progress`: a bar on a terminal, else a line when the counts change
    (at most one a second)."""

    def __init__(self):
        self.tty = sys.stderr.isatty()
        self.last = None
        self.printed = 0.0

    def show(self, job):
        t = job["tasks"]
        total = sum(t.values())
        done = t["finished"] + t["failed"] + t["cancelled"]
        if self.tty:
            width = 30
            filled = int(width * done / total) if total else width
            sys.stderr.write("\rjob %d [%-*s] %d/%d  %s   " % (
                job["id"], width, "#" * filled, done, total, _counts(t)))
            sys.stderr.flush()
        elif (done, t["failed"]) != self.last and time.monotonic() - self.printed >= 1.0:
            sys.stderr.write("job %d: %d/%d ended (%s)\n" % (job["id"], done, total, _counts(t)))
            self.printed = time.monotonic()
        self.last = (done, t["failed"])

    def end(self):
        if self.tty and self.last is not None:
            sys.stderr.write("\n")


def _wait_jobs(client, sessions, timeout, progress):
    """Waits for each job; the job dicts at their end, or None for one the
    timeout cut short."""
    deadline = None if timeout is None else time.monotonic() + timeout
    bar = _Bar() if progress else None
    ended = []
    try:
        for session in sessions:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    ended.append(None)
                    break
                # In slices when something is shown or a deadline is near:
                # the broker answers a SESSION_WAIT only at the end.
                step = 500 if bar else -1
                if left is not None:
                    step = int(min(left, 0.5 if bar else left) * 1000)
                job = client.wait(session, max(step, 0))
                if job is not None:
                    if bar:
                        bar.show(job)
                    ended.append(job)
                    break
                if bar:
                    found = client.jobs(session=session)
                    if found:
                        bar.show(found[0])
    finally:
        if bar:
            bar.end()
    return ended


def _wait_code(ended):
    if any(job is None for job in ended):
        return EXIT_TIMEOUT
    return cli.EXIT_OK if all(job["state"] == "finished" for job in ended) else cli.EXIT_FAILURE


# ---------------------------------------------------------------------------
# squall submit

def _submit():
    """jobsubmit.py (squall submit), loaded by path as this file is."""
    module = cli._part("jobsubmit")
    module.jobs = sys.modules[__name__]
    return module


def cmd_submit(args):
    return _submit().cmd_submit(args)


# ---------------------------------------------------------------------------
# squall job ..., squall task list

def cmd_job_list(args):
    states = _states(args.state, JOB_STATES, "--state")
    with _Client(args) as client:
        jobs = client.jobs(states)
    if not args.all:
        jobs = [j for j in jobs if j["detached"]]
    if args.json:
        _print_json(jobs)
    elif jobs:
        print(jobs_table(jobs))
    return cli.EXIT_OK


def cmd_job_info(args):
    with _Client(args) as client:
        job = client.resolve(args.job)
    if args.json:
        _print_json(job)
        return cli.EXIT_OK
    total = sum(job["tasks"].values())
    print("job %d%s: %s" % (job["id"], " (%s)" % job["name"] if job["name"] else "", job["state"]))
    print("  tasks      %d: %s" % (total, _counts(job["tasks"])))
    print("  submitted  %s" % _stamp(job["created"]))
    print("  ended      %s" % (_stamp(job["ended"]) if job["ended"] else "-"))
    print("  took       %s" % _duration(job["created"], job["ended"]))
    print("  attached   %s" % ("yes" if job["attached"] else "no"))
    return cli.EXIT_OK


def cmd_job_wait(args):
    with _Client(args) as client:
        sessions = [client.resolve(ref)["id"] for ref in args.jobs]
        ended = _wait_jobs(client, sessions, args.wait_timeout, args.progress)
    if args.json:
        _print_json(ended)
    else:
        for ref, job in zip(args.jobs, ended):
            print("job %s: %s" % (ref, "still running (timeout)" if job is None else
                                  "%s (%s)" % (job["state"], _counts(job["tasks"]))))
    return _wait_code(ended)


def cmd_job_cancel(args):
    code = cli.EXIT_OK
    with _Client(args) as client:
        for ref in args.jobs:
            job = client.resolve(ref)
            if client.lib.sq_client_job_cancel(client.h, job["id"]):
                raise client.error("job %s" % ref)
            print("job %d cancelled" % job["id"])
    return code


def cmd_job_resubmit(args):
    if not args.failed:
        raise _usage("say what to run again: --failed (its failed and cancelled tasks)")
    with _Client(args) as client:
        job = client.resolve(args.job)
        again = ctypes.c_uint64()
        if client.lib.sq_client_resubmit(client.h, job["id"], None, 0, ctypes.byref(again)):
            raise client.error("job %s" % args.job)
    print("job %d: %d task(s) submitted again" % (job["id"], again.value))
    return cli.EXIT_OK


def cmd_job_forget(args):
    with _Client(args) as client:
        for ref in args.jobs:
            job = client.resolve(ref)
            if client.lib.sq_client_forget(client.h, job["id"]):
                raise client.error("job %s" % ref)
            print("job %d forgotten" % job["id"])
    return cli.EXIT_OK


def cmd_task_list(args):
    states = _states(args.state, TASK_STATES, "--state")
    with _Client(args) as client:
        job = client.resolve(args.job)
        tasks = client.tasks(job["id"], states)
    if args.json:
        _print_json(tasks)
    elif tasks:
        print(tasks_table(tasks))
    return cli.EXIT_OK


def log_target(handle, job_ref, task_ref, follow=False):
    """(session, task) that `squall log J [TASK]` reads. J a job's id or
    name; TASK a job file's task id, an array element's index, the
    command's task (`0`, the default when the job has one task), or a task
    id in the session. A session id that is not a job (a plain session of
    this tenant) takes task ids as given. An element is read by its own
    task id, which TASKS gives once the broker made it a task; with follow,
    an element not made yet is waited for."""
    client = _Client(None, handle)
    ids = job_ref.isdigit() and task_ref is not None and task_ref.isdigit()
    try:
        job = client.resolve(job_ref)
    except cli.CliError:
        if ids:
            return int(job_ref), int(task_ref)     # LOG's answer says what is wrong
        raise
    if ids and not job["detached"]:
        return int(job_ref), int(task_ref)         # a plain session: ids as given
    elements = set()
    records = client.tasks(job["id"], elements=elements)
    if task_ref is None:
        if len(records) != 1:
            raise _usage("job %s has %d tasks: name one (squall task list %s)"
                         % (job_ref, len(records), job_ref))
        at = 0
    else:
        # as `squall task list` names it (an index, a name), else a task id
        at = next((i for i, r in enumerate(records) if str(r["id"]) == task_ref), None)
        if at is None and task_ref.isdigit():
            at = next((i for i, r in enumerate(records)
                       if i not in elements and r["task"] == int(task_ref)), None)
        if at is None:
            raise cli.CliError("job %s has no task %s (squall task list %s)"
                               % (job_ref, task_ref, job_ref), EXIT_NO_JOB)
    record = records[at]
    if at in elements:
        return job["id"], _element_task(client, job["id"], job_ref, record, follow)
    return job["id"], record["task"]


def _element_task(client, session, job_ref, record, follow):
    """An array element's own task id, from its TASKS record (read again
    every half second while it waits, with follow)."""
    said = False
    while True:
        if record["element_task"]:
            return record["element_task"]
        what = "element %s of job %s" % (record["id"], job_ref)
        if record["state"] != "waiting" and not record["attempts"]:
            raise cli.CliError("%s ended without running: it printed nothing" % what,
                               cli.EXIT_OK)
        if record["state"] != "waiting":
            # ended before a broker restart: its task, and the id LOG
            # names it by, did not outlive that broker
            raise cli.CliError("%s ran before the broker restarted: its log is not known "
                               "(write output to files with --stdout)" % what,
                               cli.EXIT_FAILURE)
        if not follow:
            raise cli.CliError("%s has not started yet" % what, cli.EXIT_OK)
        if not said:
            print("squall: %s has not started yet; waiting for it" % what, file=sys.stderr)
            said = True
        time.sleep(0.5)
        elements = set()
        records = client.tasks(session, elements=elements)
        index = record["id"]
        record = next((r for i, r in enumerate(records)
                       if i in elements and r["id"] == index), None)
        if record is None:
            raise cli.CliError("job %s has no task %s any more" % (job_ref, index),
                               EXIT_NO_JOB)


# ---------------------------------------------------------------------------

EXIT_HELP = ("exit codes: 0 success (wait: every task finished), 1 failure (wait: a task "
             "failed or was cancelled), 2 usage error (bad option or job file), 3 cluster "
             "unreachable, 4 no such job (or another tenant's), 5 wait timed out")


def add_parsers(sub, key_options, epilog):
    def connection(p):
        p.add_argument("--broker", "-b", metavar="ENDPOINT",
                       help="broker endpoint (default $SQUALL_BROKER or %s)" % cli.DEFAULT_BROKER)
        p.add_argument("--connect-timeout", type=cli._SECONDS, default=5.0, metavar="S",
                       help="seconds to wait for the broker (default 5)")
        key_options(p)

    p = sub.add_parser(
        "submit", help="submit a job: a command, an array of them, or a job file",
        usage="squall submit [OPTIONS] -- PROGRAM [ARGS...]\n       squall submit [OPTIONS] "
              "--file JOB.toml",
        description="Submits a job and prints its id at once; the job runs on the cluster "
                    "whether or not this process stays (docs/jobs.md). Each element of an "
                    "array sees SQUALL_JOB_ID, SQUALL_TASK_ID (its index) and "
                    "SQUALL_ARRAY_SIZE; %{JOB_ID}, %{TASK_ID}, %{ARRAY_SIZE} and %{ITEM} "
                    "expand in its arguments, environment and paths, %{CWD} (the task's "
                    "working directory) in its arguments, environment and --stdout/--stderr.",
        epilog=EXIT_HELP, allow_abbrev=False)
    p.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    p.add_argument("--file", "-f", metavar="JOB.toml", help="a job file: a graph of commands")
    p.add_argument("--name", "-n", help="the job's name (unique among your jobs; default: the "
                                        "program's or the file's name)")
    p.add_argument("--array", metavar="A-B[:STEP]",
                   help="an array: one element per index, e.g. 1-10000 or 0-99:2")
    p.add_argument("--array-file", metavar="FILE",
                   help="an array: one element per line of FILE, in SQUALL_ARRAY_ITEM and "
                        "%%{ITEM}, indices from 0")
    p.add_argument("--cpus", metavar="N", help="cpus of each task (default 1)")
    p.add_argument("--memory", metavar="SIZE", help="memory of each task (512M, 4GiB)")
    p.add_argument("--gpus", metavar="N", help="GPUs of each task (whole, or 0.5, 0.25)")
    p.add_argument("--resource", action="append", metavar="NAME=AMOUNT",
                   help="another resource of each task (repeatable)")
    p.add_argument("--max-retries", metavar="N", help="runs again after its governor was lost")
    p.add_argument("--timeout", metavar="DURATION",
                   help="each task fails if it runs longer (seconds, or 90s, 10m, 2h)")
    p.add_argument("--priority", metavar="N", help="higher runs first (default 0)")
    p.add_argument("--cwd", metavar="DIR",
                   help="working directory of each task on its governor: absolute, or "
                        "relative to the task's own private directory (the default)")
    p.add_argument("--env", action="append", metavar="NAME=VALUE",
                   help="environment of each task (repeatable)")
    p.add_argument("--stdout", metavar="PATH",
                   help="write each task's standard output to PATH on its governor (relative: "
                        "to this directory; %%{JOB_ID}, %%{TASK_ID} expand) instead of "
                        "keeping it for `squall log`")
    p.add_argument("--stderr", metavar="PATH",
                   help="the same for standard error (the same PATH as --stdout: both, "
                        "interleaved)")
    p.add_argument("--stdin", metavar="FILE", help="a local file, the standard input of each task")
    p.add_argument("--after", action="append", metavar="JOB",
                   help="start when these jobs (ids or names, repeatable or comma-separated) "
                        "finished (the broker holds its tasks; cancelled if one of them fails)")
    p.add_argument("--wait", "-w", action="store_true",
                   help="wait for the job; exit 0 only if every task finished")
    p.add_argument("--progress", action="store_true", help="wait, drawing a progress bar")
    p.add_argument("--wait-timeout", type=cli._SECONDS, metavar="S",
                   help="with --wait: give up after S seconds (exit 5)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the job as it would be submitted (JSON) and exit")
    p.add_argument("--json", action="store_true", help="print {id, name, size} as JSON")
    connection(p)
    p.set_defaults(func=cmd_submit)

    job = sub.add_parser("job", help="list, wait for, cancel, resubmit, forget jobs",
                         description="Jobs of your tenant (an admin key: every tenant's), by "
                                     "id or name.", epilog=EXIT_HELP)
    jsub = job.add_subparsers(dest="job_command", metavar="SUBCOMMAND")
    job.set_defaults(func=lambda args: (job.print_help(sys.stderr), cli.EXIT_USAGE)[1])

    def job_parser(name, help, func, many=False, json_out=True):
        q = jsub.add_parser(name, help=help, description=help + ".", epilog=EXIT_HELP)
        if many:
            q.add_argument("jobs", metavar="JOB", nargs="+", help="job ids or names")
        elif many is not None:
            q.add_argument("job", metavar="JOB", help="a job id or name")
        if json_out:
            q.add_argument("--json", action="store_true", help="print JSON for scripts")
        connection(q)
        q.set_defaults(func=func)
        return q

    q = job_parser("list", "list jobs, oldest first", cmd_job_list, many=None)
    q.add_argument("--state", action="append", metavar="STATE",
                   help="only these states: %s (repeatable or comma-separated)"
                        % ", ".join(JOB_STATES))
    q.add_argument("--all", action="store_true", help="also the plain sessions of clients")
    job_parser("info", "a job's state and task counts", cmd_job_info)
    q = job_parser("wait", "wait until jobs ended; exit 0 only if every task finished",
                   cmd_job_wait, many=True)
    q.add_argument("--timeout", dest="wait_timeout", type=cli._SECONDS, metavar="S",
                   help="give up after S seconds (exit 5)")
    q.add_argument("--progress", action="store_true", help="draw a progress bar")
    job_parser("cancel", "cancel jobs' unfinished tasks (their records stay)", cmd_job_cancel,
               many=True, json_out=False)
    q = job_parser("resubmit", "run a job's failed and cancelled tasks again",
                   cmd_job_resubmit, json_out=False)
    q.add_argument("--failed", action="store_true",
                   help="its failed and cancelled tasks, and those downstream of them")
    job_parser("forget", "cancel what is left of jobs and drop their records", cmd_job_forget,
               many=True, json_out=False)

    task = sub.add_parser("task", help="a job's tasks", epilog=EXIT_HELP)
    tsub = task.add_subparsers(dest="task_command", metavar="SUBCOMMAND")
    task.set_defaults(func=lambda args: (task.print_help(sys.stderr), cli.EXIT_USAGE)[1])
    q = tsub.add_parser("list", help="a job's tasks: state, exit code, governor, times, error",
                        description="A job's tasks (array elements by index, a job file's by "
                                    "id) with their state, exit code, governor, attempts, "
                                    "times and error.", epilog=EXIT_HELP)
    q.add_argument("job", metavar="JOB", help="a job id or name")
    q.add_argument("--state", action="append", metavar="STATE",
                   help="only these states: %s" % ", ".join(TASK_STATES))
    q.add_argument("--json", action="store_true", help="print JSON for scripts")
    connection(q)
    q.set_defaults(func=cmd_task_list)
