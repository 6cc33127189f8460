"""squall on Slurm (README.md, "Slurm"): governors started by srun in
allocations, one per node with the cpus and memory Slurm gave them, for the
broker of an access file (`squall start --access FILE` on the login node or
in a job of its own); and an autoscaler in the manner of HyperQueue's
automatic allocation, which submits governor jobs while ready tasks wait
that the running governors have no free cpu for, never for tasks still
waiting on their inputs, and retires governors that stay idle.

Standard library only, like the `squall` command that loads it; `cli` is
set by cli.py to its helpers (cluster_info, retire_governor, ...)."""
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

cli = None          # set by cli.py


def read_access(path):
    try:
        with open(path) as f:
            access = json.load(f)
    except (OSError, ValueError) as exc:
        raise cli.CliError("access file %s: %s" % (path, exc), cli.EXIT_USAGE)
    for key in ("broker", "secret_key", "broker_key", "authorized_keys"):
        if not access.get(key):
            raise cli.CliError("access file %s has no %s%s" % (
                path, key, " (made by an older squall start: start the cluster again)"
                if key == "authorized_keys" else ""), cli.EXIT_USAGE)
    return access


def governor_keys(access, nodes, log_dir):
    """One governor, one identity (docs/security.md): a key pair for each
    node of a job, the .key files in a directory of their own (mode 0700,
    read by the job's governors through the shared file system), the .pub
    files in the broker's authorized directory (squall start has the
    broker read it again). The directory and the names' common stem."""
    tag = "slurm-%s" % os.urandom(6).hex()
    keydir = os.path.join(log_dir, "keys-" + tag)
    os.mkdir(keydir, 0o700)
    for i in range(nodes):
        name = "%s-%d" % (tag, i)
        cli.keygen(name, keydir, "governor")
        os.replace(os.path.join(keydir, name + ".pub"),
                   os.path.join(access["authorized_keys"], name + ".pub"))
    return keydir, tag


def forget_keys(access, keydir, tag):
    """A finished job's keys: no longer authorised, and deleted."""
    for name in os.listdir(access["authorized_keys"]):
        if name.startswith(tag + "-") and name.endswith(".pub"):
            os.unlink(os.path.join(access["authorized_keys"], name))
    shutil.rmtree(keydir, ignore_errors=True)


def governor_script(access, keydir, tag, gpus=None):
    """The batch script: one srun step, one governor per node, with the
    node's cpus and the job's memory per node (Slurm's variables), named
    after the node and the job so that the autoscaler knows its own, its
    copy heap pre-faulted (--prefault auto: a governor started for a job
    is there to receive work), each with the key pair of its node in the
    job (governor_keys) and the broker's public key."""
    governor = cli.find_program("squall-governor")
    key = os.path.join(keydir, tag + "-")
    inner = ('exec %s --broker %s --secret-key %s"${SLURM_NODEID:-0}.key" --broker-key %s '
             '--listen-host 0.0.0.0 '
             '--cpus "${SLURM_CPUS_ON_NODE:-1}" ${SLURM_MEM_PER_NODE:+--memory ${SLURM_MEM_PER_NODE}MiB} '
             '--name "$(hostname)-$SLURM_JOB_ID" --workdir "${TMPDIR:-/tmp}" --prefault auto'
             % (shlex.quote(governor), shlex.quote(access["broker"]),
                shlex.quote(key), shlex.quote(access["broker_key"])))
    #   Governors of this user's jobs on one node hand streams over as
    #   pipes (docs/security.md, "Streams on one host"): a directory on the
    #   node, the user's alone; one another user made there is not used.
    inner = ('d="${XDG_RUNTIME_DIR:-/tmp}/squall-streams-$(id -u)"; '
             '(umask 077; mkdir -p "$d") 2>/dev/null; '
             'if [ -O "$d" ] && [ "$(stat -c %a "$d")" = 700 ]; then set -- --stream-dir "$d"; '
             'else echo "squall: $d is not ours alone: streams go as chunks" >&2; fi; '
             + inner + ' "$@"')
    if gpus:
        #   The job's GPUs, as Slurm gave them: "auto" reads the step's
        #   $CUDA_VISIBLE_DEVICES (--gres=gpu:N), not every GPU of the node.
        inner += " --gpus %s" % shlex.quote("auto")
    # Slurm sends SIGTERM at the time limit: the governor drains (its work
    # and the objects only it holds go to others) before KillWait ends.
    return "#!/bin/sh\nexec srun --ntasks-per-node=1 --kill-on-bad-exit=1 sh -c %s\n" % shlex.quote(inner)


def submit(access, nodes=1, cpus=None, mem=None, time_limit=None, partition=None, log_dir=None,
           keys_out=None, gpus=None):
    """Submits a governor job; its id. keys_out, a dict, gets the job's
    (keydir, tag) by its id (for forget_keys once it ended)."""
    log_dir = log_dir or os.path.dirname(os.path.abspath(access["_path"]))
    keydir, tag = governor_keys(access, nodes, log_dir)
    try:
        job = _sbatch(access, keydir, tag, nodes, cpus, mem, time_limit, partition, log_dir,
                      gpus)
    except BaseException:
        forget_keys(access, keydir, tag)
        raise
    if keys_out is not None:
        keys_out[job] = (keydir, tag)
    return job


def _sbatch(access, keydir, tag, nodes, cpus, mem, time_limit, partition, log_dir, gpus=None):
    fd, script = tempfile.mkstemp(prefix="squall-governor-", suffix=".sh", dir=log_dir)
    with os.fdopen(fd, "w") as f:
        f.write(governor_script(access, keydir, tag, gpus))
    os.chmod(script, 0o700)
    argv = ["sbatch", "--parsable", "--job-name", "squall-governor", "--nodes", str(nodes),
            "--ntasks-per-node", "1", "--output", os.path.join(log_dir, "governor-%j.log")]
    if cpus:
        argv += ["--cpus-per-task", str(cpus)]
    if gpus:
        argv += ["--gres", "gpu:%d" % int(gpus)]
    if mem:
        argv += ["--mem", str(mem)]
    if time_limit:
        argv += ["--time", str(time_limit)]
    if partition:
        argv += ["--partition", partition]
    try:
        r = subprocess.run(argv + [script], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise cli.CliError("sbatch: %s (is Slurm installed?)" % exc)
    finally:
        os.unlink(script)
    if r.returncode != 0:
        raise cli.CliError("sbatch: %s" % r.stderr.strip())
    return r.stdout.strip().split(";")[0]


def jobs_alive(ids):
    """Those of ids that Slurm still has pending or running."""
    if not ids:
        return set()
    r = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(sorted(ids))],
                       capture_output=True, text=True, timeout=60)
    return set(r.stdout.split()) & set(ids) if r.returncode == 0 else set(ids)


def _load(access_path):
    access = read_access(access_path)
    access["_path"] = access_path
    return access


def cmd_governors(args):
    access = _load(args.access)
    job = submit(access, args.nodes, args.cpus, args.mem, args.time, args.partition, args.log_dir,
                 gpus=getattr(args, "gpus", None))
    print(job)
    return cli.EXIT_OK


def plan(info, mine, coming, max_governors, idle_since, now, idle_timeout):
    """One look of the autoscaler: (submit a job?, governors to retire).
    Demand is ready tasks beyond the free cpus of the governors up, and
    of those Slurm is still starting (`coming`, one cpu each at least):
    tasks waiting on inputs are not demand (HyperQueue's fault: it starts
    workers for them)."""
    governors = [g for g in info.get("governors", []) if not g.get("draining")]
    free = sum(max(0, g.get("cpus", 0) - g.get("assigned", 0)) for g in governors)
    ready = info.get("tasks", {}).get("ready", 0)
    ours = [g for g in governors if g.get("name", "").rsplit("-", 1)[-1] in mine]
    grow = ready > free + coming and len(ours) + coming < max_governors
    retire = []
    for g in ours:
        busy = g.get("assigned", 0) + g.get("running", 0)
        if busy or ready:
            idle_since.pop(g["id"], None)
        else:
            idle_since.setdefault(g["id"], now)
            if now - idle_since[g["id"]] >= idle_timeout:
                retire.append(g)
    return grow, retire


def cmd_alloc(args):
    access = _load(args.access)
    keys = (access["secret_key"], access["broker_key"])
    mine, idle_since = set(), {}
    job_keys = {}
    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)
    print("squall alloc: watching %s (at most %d governors)" % (access["broker"], args.max_governors),
          flush=True)
    while not stopping:
        info = cli.cluster_info(access["broker"], 10.0, keys)
        now = time.monotonic()
        mine = jobs_alive(mine)
        for job in set(job_keys) - mine:         # ended: its keys go with it
            forget_keys(access, *job_keys.pop(job))
        joined = {g.get("name", "").rsplit("-", 1)[-1] for g in info.get("governors", [])}
        coming = len(mine - joined)
        grow, retire = plan(info, mine, coming, args.max_governors, idle_since, now,
                            args.idle_timeout)
        if grow:
            job = submit(access, 1, args.cpus, args.mem, args.time_limit, args.partition,
                         args.log_dir, job_keys)
            mine.add(job)
            print("squall alloc: %d ready task(s) wait: job %s for a governor"
                  % (info.get("tasks", {}).get("ready", 0), job), flush=True)
        for g in retire:
            cli.retire_governor(access["broker"], g["id"], 10.0, keys)
            idle_since.pop(g["id"], None)
            print("squall alloc: governor %s (%s) idle for %g s: retired"
                  % (g["id"], g.get("name"), args.idle_timeout), flush=True)
        deadline = time.monotonic() + args.interval
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.05)
    pending = jobs_alive(mine)
    if pending:
        subprocess.run(["scancel"] + sorted(pending), capture_output=True, timeout=60)
    #   Cancelled or not, this autoscaler's governors leave with it: their
    #   keys are no longer authorised.
    for job in list(job_keys):
        forget_keys(access, *job_keys.pop(job))
    print("squall alloc: stopped", flush=True)
    return cli.EXIT_OK
