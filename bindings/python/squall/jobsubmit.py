"""`squall submit`: a job of commands from options or a job file (docs/jobs.md),
checked (jobfile.py) and submitted as a detached session. Standard library
only, loaded by path by jobcli.py, which sets `cli` (what this file uses of
cli.py) and `jobs` (of jobcli.py) before the command runs."""
from __future__ import annotations

import ctypes
import os
import sys

cli = None          # set by cli.py's _part()
jobs = None         # set by jobcli.py's _submit()


def _spec_from_args(args):
    jf = jobs._jobfile()
    rest = args.rest or []
    if args.program is None:
        if args.file:
            if rest:
                raise jobs._usage("--file takes no program: %s" % " ".join(rest))
        elif rest and rest[0].endswith(".py"):
            raise jobs._usage("`squall submit` submits commands; to run the pipeline script %s, "
                         "use `squall run %s`" % (rest[0], " ".join(rest)))
        elif rest:
            raise jobs._usage("put the program after --: squall submit [OPTIONS] -- %s"
                         % " ".join(rest))
        else:
            raise jobs._usage("give the program after -- (squall submit [OPTIONS] -- PROGRAM "
                         "ARGS...) or a job file (squall submit --file JOB.toml)")
    elif rest:
        raise jobs._usage("unexpected %s before --" % " ".join(rest))
    try:
        if args.file:
            if args.program is not None:
                raise jobs._usage("give either --file or a program after --, not both")
            task_options = [o for o, v in (
                ("--array", args.array), ("--array-file", args.array_file), ("--cpus", args.cpus),
                ("--memory", args.memory), ("--gpus", args.gpus), ("--resource", args.resource),
                ("--max-retries", args.max_retries), ("--timeout", args.timeout),
                ("--priority", args.priority), ("--cwd", args.cwd), ("--env", args.env),
                ("--stdout", args.stdout), ("--stderr", args.stderr),
                ("--stdin", args.stdin)) if v]
            if task_options:
                raise jobs._usage("%s: with --file, tasks take their options from the file"
                             % ", ".join(task_options))
            spec = jf.from_file(args.file)
            if args.name:
                if not jf._job_name_ok(args.name):
                    raise jf.JobError("--name: %r: 1 to 64 letters, digits, _ . or -, not "
                                      "only digits" % args.name)
                spec.name = args.name
            spec.after += [a for a in jf._check_after(args.after or (), "--after")
                           if a not in spec.after]
            return spec
        return jf.from_command(
            args.program, name=args.name, array=args.array, array_file=args.array_file,
            cpus=args.cpus, memory=args.memory, gpus=args.gpus, resources=args.resource or (),
            max_retries=args.max_retries, timeout=args.timeout, priority=args.priority,
            cwd=args.cwd, env=args.env or (), stdout=args.stdout, stderr=args.stderr,
            after=args.after or (), stdin=args.stdin)
    except jf.JobError as exc:
        raise jobs._usage(str(exc))


def _read_local(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise cli.CliError("%s: %s" % (path, exc.strerror or exc), cli.EXIT_USAGE)


def _with_str_key(config, key, value):
    """The execute config (a msgpack map, as sq_config_execute packs it)
    with one more string key."""
    raw = os.fsencode(value)
    return _with_key(config, key, b"\xda" + len(raw).to_bytes(2, "big") + raw)


def _with_key(config, key, packed):
    """config with one more key, its value already packed (_msgmap.py,
    which the package shares, loaded by path as this file is)."""
    msgmap = sys.modules.get("squall__msgmap") or cli._part("_msgmap")
    try:
        return msgmap.with_key(config, key.encode(), packed)
    except ValueError:
        raise cli.CliError("task config: not a map") from None


def _add_task(lib, session, job_id, task, ids, spec):
    """Records one TaskSpec in the batch; its id."""
    jf = jobs._jobfile()
    plain = task.array is None
    text = (lambda s: jf.expand(s, job_id, task.id)) if plain else (lambda s: s)
    inputs, in_paths, stdin_index = [], [], -1

    def source(src):
        if isinstance(src, jf.LocalFile):
            data = _read_local(src.path)
            oid = lib.sq_blob(session, data, len(data), None)
        else:
            producer = spec.task(src.task)
            oid = lib.sq_output(ids[src.task], producer.output_names().index(src.output))
        if not oid:
            raise cli.CliError("building the job: out of memory")
        return oid

    if task.stdin is not None:
        stdin_index = 0
        inputs.append(source(task.stdin))
        in_paths.append("")
    for path, src in task.inputs:
        inputs.append(source(src))
        in_paths.append(text(path))
    for dep in task.deps:
        inputs.append(lib.sq_output(ids[dep], 0))
        in_paths.append("%s/%s" % (jf.DEP_DIR, dep))
    out_paths = ([""] if task.stdout else []) + [text(p) for p in task.outputs]
    argv = [text(a) for a in task.command]
    env = ["%s=%s" % (k, text(v)) for k, v in task.env.items()]
    if plain:
        # what the broker gives an array's elements (docs/protocol.md,
        # "Array tasks"), for a job file's plain tasks too
        env += ["SQUALL_JOB_ID=%d" % job_id, "SQUALL_TASK_ID=%s" % task.id,
                "SQUALL_ARRAY_SIZE=1"]
    size = ctypes.c_size_t()
    config = lib.sq_config_execute(jobs._cstrs(argv), len(argv),
                                   jobs._cstrs(in_paths), len(in_paths), stdin_index,
                                   jobs._cstrs(out_paths), len(out_paths),
                                   0 if task.stdout else -1, jobs._cstrs(env) if env else None,
                                   ctypes.byref(size))
    if not config:
        raise cli.CliError("task %s: its command, paths or environment cannot be encoded"
                           % task.id, cli.EXIT_USAGE)
    try:
        packed = ctypes.string_at(config, size.value)
    finally:
        lib.sq_free(config)
    for key, path in (("stdout_path", task.stdout_path), ("stderr_path", task.stderr_path),
                      ("cwd", task.cwd)):
        if path is not None:
            packed = _with_str_key(packed, key, text(path))
    if task.done:
        # one more output, its last, made empty when it exits well: what
        # the tasks that have it in deps read (docs/protocol.md, execute)
        packed = _with_key(packed, "done", b"\xc3")
    arr = (ctypes.c_uint32 * max(1, len(inputs)))(*inputs)
    tid = lib.sq_task(session, b"execute", arr, len(inputs), len(out_paths) + task.done,
                      packed, len(packed))
    if not tid:
        return 0
    rc = 0
    if spec.name_tasks:
        rc |= lib.sq_task_set_name(session, tid, task.id.encode())
    for name, amount in task.resources.items():
        if name == "gpus":
            rc |= lib.sq_task_set_gpus(session, tid, float(amount))
        else:
            rc |= lib.sq_task_set_resource(session, tid, name.encode(), int(amount))
    if task.max_retries:
        rc |= lib.sq_task_set_max_retries(session, tid, task.max_retries)
    if task.timeout:
        rc |= lib.sq_task_set_timeout(session, tid, task.timeout)
    if task.priority:
        rc |= lib.sq_task_set_priority(session, tid, task.priority)
    if task.array_items is not None:
        items = jobs._cstrs(task.array_items)
        rc |= lib.sq_task_set_array_items(session, tid, items, len(task.array_items))
    elif task.array is not None:
        rc |= lib.sq_task_set_array(session, tid, task.array.start, task.array[-1],
                                    task.array.step)
    return 0 if rc else tid


def submit_spec(client, spec):
    """Opens the job on the broker and submits its tasks; the job's id. The
    job is left running (detached) whatever happens to this process; with
    spec.after, its tasks wait in the broker for those jobs."""
    lib = client.lib
    after = [client.resolve(ref)["id"] for ref in spec.after]
    if after:
        arr = (ctypes.c_uint32 * len(after))(*after)
        session = ctypes.c_void_p(lib.sq_session_new_job_after(
            client.h, spec.name.encode(), True, arr, len(after)))
    else:
        session = ctypes.c_void_p(lib.sq_session_new_job(client.h, spec.name.encode(), True))
    if not session:
        if lib.sq_client_errcode(client.h) == jobs._SQ_E_DUPLICATE_ID:
            raise cli.CliError("a job named %s exists: give another --name, or forget it "
                               "(squall job forget %s)" % (spec.name, spec.name), cli.EXIT_USAGE)
        raise client.error("opening the job")
    job_id = lib.sq_session_id(session)
    try:
        ids = {}
        read = {ref.task for t in spec.tasks for ref in
                [t.stdin] + [s for _, s in t.inputs] if ref is not None
                and not hasattr(ref, "path")} | {d for t in spec.tasks for d in t.deps}
        for task in spec.tasks:
            tid = _add_task(lib, session, job_id, task, ids, spec)
            if not tid:
                raise client.error("task %s" % task.id)
            ids[task.id] = tid
            # What nothing else reads is the job's result: kept, so that
            # client.attach(...) can fetch it.
            if task.id not in read and task.array is None:
                for i in range(len(task.output_names())):
                    if lib.sq_keep(session, lib.sq_output(tid, i)):
                        raise client.error("task %s" % task.id)
        if lib.sq_submit(session):
            raise client.error("submitting the job", cli.EXIT_USAGE)
    except BaseException:
        # nothing of it ran: drop the empty job rather than leave it listed
        lib.sq_client_forget(client.h, job_id)
        lib.sq_session_detach(ctypes.byref(session))
        raise
    lib.sq_session_detach(ctypes.byref(session))
    return job_id


def cmd_submit(args):
    spec = _spec_from_args(args)
    if args.dry_run:
        jobs._print_json(spec.to_dict())
        return cli.EXIT_OK
    with jobs._Client(args) as client:
        job_id = submit_spec(client, spec)
        if args.json:
            jobs._print_json({"id": job_id, "name": spec.name, "size": spec.size()})
        else:
            print(job_id)
        sys.stdout.flush()
        if not (args.wait or args.progress):
            return cli.EXIT_OK
        ended = jobs._wait_jobs(client, [job_id], args.wait_timeout, args.progress)
        code = jobs._wait_code(ended)
        if ended[0] is not None and code:
            print("squall: job %d %s: %s" % (job_id, ended[0]["state"],
                                             jobs._counts(ended[0]["tasks"])), file=sys.stderr)
        return code
