"""squall on a real one-node Slurm cluster: munged, slurmctld and slurmd on
this machine with a configuration this test writes (its own ports and
directories). A broker (`squall start --governors 0 --access FILE`), then:

1. `squall slurm governors`: a job whose srun step starts a governor with
   the cpus Slurm gave it; a pipeline runs through it; the job is root's,
   so its governor runs execute and Python tasks under task user ids, which
   cannot read its key nor write the broker's authorized keys
   (taskprobe.py), or, when it warned that it cannot (this test's
   interpreter out of their reach), as root, as it said; `squall retire`
   drains it and its job ends; a client run as a step of that job uploads
   through the governors' stream directory, one outside Slurm by PUT.
2. `squall alloc slurm --max-governors 2`: with a gate task running and six
   tasks waiting on its output, no second governor is asked for; once the
   six are ready (more than the first governor's cpus), a second job comes;
   when all is done, both governors are retired as idle and their jobs end.

Skips (77) without root or Slurm (slurm-wlm, munge)."""
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploylib import BUILD, PIPELINE, SKIP, SOURCE, SQUALL, check, fail, wait_until  # noqa: E402

TASKPROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "taskprobe.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONF = """ClusterName=squalltest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldPort={ctld}
SlurmdPort={d}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
KillWait=40
NodeName={host} NodeAddr=127.0.0.1 CPUs=2 RealMemory=2048 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


UPLOAD = """
import os, squall
client = squall.Client()
before = client.info()["uploads_local"]
value = os.urandom(4 << 20)
with client.session() as s:
    o = s.blob(value)
    o.keep()
    s.submit()
    same = o.fetch(120) == value
print("UPLOAD", os.environ.get("SLURM_JOB_ID"), same, client.info()["uploads_local"] - before,
      flush=True)
client.close()
"""


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root to run slurmctld and slurmd")
        return SKIP
    missing = [p for p in ("slurmctld", "slurmd", "sbatch", "squeue", "munged", "munge")
               if not shutil.which(p)]
    if missing:
        print("SKIP: Slurm is not installed (%s; apt-get install slurm-wlm munge)" % ", ".join(missing))
        return SKIP
    work = tempfile.mkdtemp(prefix="squall-slurm-")
    os.makedirs(os.path.join(work, "state"))
    os.makedirs(os.path.join(work, "spool"))
    host = socket.gethostname().split(".")[0]
    conf = os.path.join(work, "slurm.conf")
    with open(conf, "w") as f:
        f.write(CONF.format(host=host, dir=work, ctld=free_port(), d=free_port()))
    # Jobs inherit this environment (sbatch exports it): the governors' Python
    # executors run this interpreter, whose cloudpickle is the clients'.
    env = dict(os.environ, SLURM_CONF=conf, SQUALL_BUILD_DIR=BUILD, SQUALL_PYTHON=sys.executable)
    procs, munged = [], None
    try:
        if subprocess.run(["munge", "-n"], capture_output=True).returncode != 0:
            os.makedirs("/run/munge", exist_ok=True)
            shutil.chown("/run/munge", "munge", "munge")
            munged = subprocess.Popen(["su", "-s", "/bin/sh", "munge", "-c", "exec munged -F"])
            wait_until("munged", lambda: subprocess.run(["munge", "-n"], capture_output=True)
                       .returncode == 0, 20, interval=0.1)
        for daemon in ("slurmctld", "slurmd"):
            procs.append(subprocess.Popen([daemon, "-D", "-f", conf], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_until("the node to be idle", lambda: "idle" in subprocess.run(
            ["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True).stdout, 60,
            interval=0.2)
        check(True, "a one-node Slurm cluster (%s) on this machine" % host)

        access = os.path.join(work, "access.json")
        broker = subprocess.Popen(SQUALL + ["start", "--governors", "0", "--port", "0",
                                            "--http", "-1", "--host", "0.0.0.0", "--access", access,
                                            "--access-host", "127.0.0.1", "--log-dir",
                                            os.path.join(work, "broker")],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(broker)
        wait_until("the access file", lambda: os.path.exists(access), 30, interval=0.1)
        with open(access) as f:
            acc = json.load(f)
        check(oct(os.stat(access).st_mode & 0o777) == "0o600" and acc["broker"].startswith("tcp://"),
              "the broker's access file (0600): %s" % acc["broker"])
        cenv = dict(env, SQUALL_BROKER=acc["broker"], SQUALL_SECRET_KEY=acc["secret_key"],
                    SQUALL_BROKER_KEY=acc["broker_key"])

        def governor_argvs(name):
            """The argument lists of the running governors named `name` of
            this broker (another Slurm test on this machine has its jobs
            numbered from 1 too)."""
            argvs = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        argv = [a.decode() for a in f.read().split(b"\0") if a]
                except OSError:
                    continue
                if (argv and argv[0].endswith("squall-governor") and name in argv
                        and acc["broker"] in argv):
                    argvs.append(argv)
            return argvs

        def info():
            r = subprocess.run(SQUALL + ["status", "--json"], env=cenv, capture_output=True,
                               text=True, timeout=60)
            return json.loads(r.stdout) if r.returncode == 0 else None

        # 1. a governor job, a pipeline, a retire
        r = subprocess.run(SQUALL + ["slurm", "governors", "--access", access, "--cpus", "2",
                                     "--mem", "512", "--time", "10"], env=env, capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 0 and r.stdout.strip().isdigit(), "squall slurm governors: job %s"
              % (r.stdout + r.stderr).strip())
        job = r.stdout.strip()
        gov = wait_until("the governor of job %s" % job, lambda: next(
            (g for g in (info() or {}).get("governors", []) if g["name"].endswith("-" + job)), None),
            60, interval=0.2)
        check(gov["cpus"] == 2 and gov["resources"].get("memory") == 512 << 20,
              "the governor has Slurm's cpus and memory: %s cpus, %s bytes"
              % (gov["cpus"], gov["resources"].get("memory")))
        check(any(a[a.index("--prefault") + 1] == "auto" for a in governor_argvs(gov["name"])
                  if "--prefault" in a[:-1]),
              "it pre-faults its copy heap at start (--prefault auto)")
        # one governor, one identity: a key made for this job's node, its
        # .pub authorised, never the client's or the broker's key
        argv = governor_argvs(gov["name"])[0]
        # governors of this user's jobs on one node share a stream directory
        # of the user's alone, to hand streams over as pipes
        streams = argv[argv.index("--stream-dir") + 1] if "--stream-dir" in argv else None
        check(streams and os.stat(streams).st_uid == os.geteuid()
              and os.stat(streams).st_mode & 0o777 == 0o700,
              "its stream directory (%s) is the user's alone" % streams)
        # The governor masks the path in its command line once it read the
        # key (docs/security.md): the job's key directory is beside the
        # access file, node 0's key in it.
        masked = argv[argv.index("--secret-key") + 1]
        keys_made = glob.glob(os.path.join(os.path.dirname(access), "keys-slurm-*", "*.key"))
        check(len(keys_made) == 1 and set(masked) == {"*"} and len(masked) == len(keys_made[0]),
              "the job's one key (%s), its path masked in the governor's command line"
              % keys_made)
        key = keys_made[0]

        def slurm_pubs():
            return sorted(n for n in os.listdir(acc["authorized_keys"]) if n.startswith("slurm-"))
        first_pubs = slurm_pubs()
        check(os.path.basename(os.path.dirname(key)).startswith("keys-slurm-")
              and key.endswith("-0.key") and key != acc["secret_key"]
              and argv[argv.index("--broker-key") + 1] == acc["broker_key"]
              and not any("broker.key" in a or "client.key" in a for a in argv),
              "the Slurm governor has a key of its own (%s) and the broker's public key (%s)"
              % (key, argv))
        check(first_pubs == [os.path.basename(key)[:-4] + ".pub"],
              "its public key, and only it, was authorised: %s" % first_pubs)
        r = subprocess.run(SQUALL + ["run", PIPELINE, "--parts", "8", "--sleep", "0.05"],
                           env=cenv, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and "pipeline: OK" in r.stdout, "a pipeline through the Slurm governor")
        # A client run as a step of the governor's job, on its node, finds
        # the governors' stream directory itself ($SLURM_JOB_ID) and uploads
        # a constant as a memory file; the same client outside Slurm, by PUT.
        penv = dict(cenv, PYTHONPATH=os.path.join(SOURCE, "bindings", "python"))
        r = subprocess.run(["srun", "--jobid", job, "--overlap", "-N1", "-n1", sys.executable,
                            "-c", UPLOAD], env=penv, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and "UPLOAD %s True 1" % job in r.stdout,
              "a client in a step of job %s on the governor's node uploaded through its stream "
              "directory (uploads_local +1): %s" % (job, (r.stdout + r.stderr).strip()[-400:]))
        r = subprocess.run([sys.executable, "-c", UPLOAD], env=penv, capture_output=True,
                           text=True, timeout=120)
        check(r.returncode == 0 and "UPLOAD None True 0" in r.stdout,
              "and outside Slurm, without SQUALL_LOCAL_DIR, by PUT: %s"
              % (r.stdout + r.stderr).strip()[-400:])
        # A job of root's: its governor runs tasks under the default task
        # ids, and they reach neither its key, the job's key directory nor
        # the broker's authorized keys (taskprobe.py, docs/security.md);
        # unless it said it cannot (an interpreter those ids cannot run,
        # as this test's in root's home), and then runs them as root.
        r = subprocess.run([sys.executable, TASKPROBE, "2", os.path.dirname(key),
                            acc["authorized_keys"], key], env=dict(
            cenv, PYTHONPATH=os.path.join(SOURCE, "bindings", "python")),
            capture_output=True, text=True, timeout=300)
        probes = [json.loads(l[6:]) for l in r.stdout.splitlines() if l.startswith("PROBE ")]
        check(r.returncode == 0 and sorted(p["kind"] for p in probes)
              == ["execute"] * 2 + ["python"] * 2, "execute and Python tasks probed what they "
              "see%s" % ("" if r.returncode == 0 else ": " + (r.stdout + r.stderr)[-600:]))
        with open(os.path.join(work, "governor-%s.log" % job)) as f:
            glog = f.read()
        uids = sorted({p["uid"] for p in probes})
        if "tasks run as user ids 2000000000-2000065535, one per tenant" in glog:
            check(all(2000000000 <= p["uid"] <= 2000065535 and p["gid"] == p["uid"]
                      and p["parent_uid"] == 0 and p["nnp"] == "1" and int(p["cap"], 16) == 0
                      and not p["breaches"] for p in probes),
                  "the root governor's tasks run under a task user id (%s), with no capability, "
                  "and cannot read its key nor list its directory nor write the authorized "
                  "keys: %s" % (uids, [p["breaches"] for p in probes]))
        else:
            warned = [l for l in glog.splitlines() if "tasks run as the governor's own user" in l]
            check(warned and uids == [0] and all(p["breaches"] for p in probes),
                  "the root governor said it runs tasks as itself, and does (user ids %s): "
                  "NOT APART here: %s" % (uids, (warned or ["no warning in its log"])[0][-200:]))
        r = subprocess.run(SQUALL + ["retire", gov["name"], "--wait", "60"], env=cenv,
                           capture_output=True, text=True, timeout=90)
        check(r.returncode == 0, "squall retire: the governor drained and left")
        wait_until("job %s to end" % job, lambda: job not in subprocess.run(
            ["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True).stdout.split(),
            60, interval=0.2)
        check(True, "and its Slurm job ended")

        # 2. the autoscaler
        alloc = subprocess.Popen(SQUALL + ["alloc", "slurm", "--access", access, "--max-governors",
                                           "2", "--cpus", "1", "--mem", "256", "--idle-timeout",
                                           "3", "--interval", "0.3", "--time-limit", "10"],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(alloc)
        graph = os.path.join(work, "graph.py")
        with open(graph, "w") as f:
            f.write(GRAPH)
        g = subprocess.Popen([sys.executable, graph], env=dict(
            cenv, PYTHONPATH=os.path.join(SOURCE, "bindings", "python")),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(g)

        def jobs():
            return subprocess.run(["squeue", "-h", "-o", "%i", "-n", "squall-governor"], env=env,
                                  capture_output=True, text=True).stdout.split()
        wait_until("a first governor for the gate task", lambda: any(
            gv for gv in (info() or {}).get("governors", [])), 60, interval=0.2)
        wait_until("the gate task to run", lambda: (info() or {}).get("tasks", {}).get("running", 0)
                   >= 1, 30, interval=0.1)
        # While the gate runs (4 s), six tasks wait on it: not demand.
        seen = set()
        end = time.monotonic() + 2.5
        while time.monotonic() < end:
            seen.add(len(jobs()))
            time.sleep(0.2)
        check(seen == {1}, "no governor asked for while six tasks wait on the gate's output "
              "(jobs seen: %s)" % sorted(seen))
        wait_until("a second governor once the six are ready", lambda: len(
            (info() or {}).get("governors", [])) == 2, 90, interval=0.2)
        check(True, "a second governor came for the ready tasks")
        dirs = {a[a.index("--stream-dir") + 1] for gv in (info() or {}).get("governors", [])
                for a in governor_argvs(gv["name"]) if "--stream-dir" in a}
        check(dirs == {streams}, "the two governors on this node share it (%s)" % sorted(dirs))
        out, _ = g.communicate(timeout=120)
        check(g.returncode == 0 and "GRAPH OK" in out, "the graph finished (%s)" % out.strip()[-200:])
        wait_until("both governors to be retired as idle", lambda: (info() or {}).get(
            "governors", [None]) == [], 60, interval=0.3)
        wait_until("their jobs to end", lambda: not jobs(), 60, interval=0.3)
        check(True, "idle governors retired, their jobs ended")
        wait_until("the ended jobs' keys to be forgotten", lambda: slurm_pubs() == first_pubs,
                   30, interval=0.3)
        check(True, "squall alloc: an ended job's governor keys are no longer authorised")
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGINT if p is not procs[0] else signal.SIGTERM)
        subprocess.run(["scancel", "-n", "squall-governor"], env=env, capture_output=True)
        for p in reversed(procs):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if munged:
            subprocess.run(["pkill", "-x", "munged"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    print("test_slurm: all passed")
    return 0


GRAPH = """
import os, sys, time, squall
client = squall.Client(os.environ["SQUALL_BROKER"])
def gate():
    time.sleep(4)
    return 1
def after(x, i):
    time.sleep(1)
    return x + i
g = client.submit(gate)
rest = [client.submit(after, g, i) for i in range(6)]
ok = [f.result(timeout=180) for f in rest] == [1 + i for i in range(6)]
print("GRAPH OK" if ok else "GRAPH BAD", flush=True)
client.close()
sys.exit(0 if ok else 1)
"""


if __name__ == "__main__":
    sys.exit(main())
