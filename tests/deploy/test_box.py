"""A governor in a memory cgroup of its own (a child of this process's, as
Docker makes one per container) spills before the group's limit, whatever
runs beside its store (issue 26): its --memory is given far above the
group's limit, so that its store's own limit never binds and only the box
(governor/store.h, store_set_box) can keep it alive. In a group of 640 MiB,
another program holds 300 MB while 20 tasks each return 20 MB, all kept
(760 MB with the executors and the governor: over the limit unless the
store spills). The kernel must kill nothing in the group (without the box
it kills a process), the program must hold its memory to the end, every
result must read back byte-exact, and the store must have spilled.

Needs root and a cgroup memory controller (v1 or v2) it may make groups
in; skips (77) otherwise."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploylib import BUILD, SKIP, SOURCE, Cluster, check, wait_until  # noqa: E402

sys.path.insert(0, os.path.join(SOURCE, "bindings", "python"))
LIMIT = 640 << 20
HOLD = 300 * 1000 * 1000
SIZE = 20 * 1000 * 1000
COUNT = 20


def own_group():
    """(version, directory of this process's memory group), or None."""
    with open("/proc/self/cgroup") as f:
        lines = [l.rstrip("\n").split(":", 2) for l in f]
    for _, controllers, path in lines:
        if "memory" in controllers.split(","):
            base = "/sys/fs/cgroup/memory"
            if os.path.isdir(base + path):
                return 1, base + path
            if os.path.isfile(base + "/memory.limit_in_bytes"):    # a namespace's view
                return 1, base
    for hid, controllers, path in lines:
        if hid == "0" and controllers == "":
            d = "/sys/fs/cgroup" + path
            if os.path.isfile(os.path.join(d, "cgroup.controllers")):
                return 2, d
    return None


def make_group():
    found = own_group()
    if not found:
        return None
    version, parent = found
    group = os.path.join(parent, "squall-box-%d" % os.getpid())
    try:
        if version == 2:
            with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                f.write("+memory")
        os.mkdir(group)
        with open(os.path.join(group, "memory.max" if version == 2 else
                               "memory.limit_in_bytes"), "w") as f:
            f.write(str(LIMIT))
    except OSError as exc:
        print("SKIP: cannot make a memory cgroup under %s: %s" % (parent, exc))
        try:
            os.rmdir(group)
        except OSError:
            pass
        return None
    return group


def oom_kills(group):
    """Processes the kernel killed in the group for its limit (v1
    memory.oom_control, v2 memory.events), or None if it does not say."""
    for name in ("memory.events", "memory.oom_control"):
        try:
            with open(os.path.join(group, name)) as f:
                for line in f:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except OSError:
            pass
    return None


# Beside the store in the box: a program holding memory until told to go.
HOLDER = """
import os, sys, time
block = bytearray(int(sys.argv[1]))
for i in range(0, len(block), 4096):
    block[i] = 1
print("held", flush=True)
deadline = time.monotonic() + 600
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.05)
print(sum(block[::4096]), flush=True)
"""


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root to make a memory cgroup")
        return SKIP
    group = make_group()
    if not group:
        print("SKIP: no cgroup memory controller to make a group in")
        return SKIP
    import squall
    tmp = tempfile.mkdtemp(prefix="squall-box-test-")
    gov = holder = None
    try:
        with Cluster(governors=0) as cluster:
            keydir = os.path.dirname(cluster.keys["SQUALL_BROKER_KEY"])
            squall.keygen("boxed", tmp, "governor")
            os.replace(os.path.join(tmp, "boxed.pub"),
                       os.path.join(keydir, "authorized", "boxed.pub"))
            log = open(os.path.join(tmp, "governor.log"), "w")
            procs_file = os.path.join(group, "cgroup.procs")

            def enter_group():
                with open(procs_file, "w") as f:
                    f.write(str(os.getpid()))
            gov = subprocess.Popen(
                [os.path.join(BUILD, "governor", "squall-governor"), "--broker", cluster.broker,
                 "--name", "boxed", "--cpus", "2", "--memory", "16GiB", "--prefault", "0",
                 "--workdir", os.path.join(tmp, "work"), "--listen-host", "127.0.0.1",
                 "--secret-key", os.path.join(tmp, "boxed.key"),
                 "--broker-key", cluster.keys["SQUALL_BROKER_KEY"], "--log-level", "info"],
                stdout=subprocess.DEVNULL, stderr=log, preexec_fn=enter_group,
                env=dict(os.environ, SQUALL_PYTHON=sys.executable))
            client = squall.Client(cluster.broker, secret_key=cluster.keys["SQUALL_SECRET_KEY"],
                                   broker_key=cluster.keys["SQUALL_BROKER_KEY"])
            try:
                client.wait_for_governors(1, timeout=30)
                check(True, "a governor in a cgroup of %d MiB, --memory 16GiB" % (LIMIT >> 20))
                marker = os.path.join(tmp, "release")
                holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(HOLD), marker],
                                          stdout=subprocess.PIPE, text=True,
                                          preexec_fn=enter_group)
                check(holder.stdout.readline().strip() == "held",
                      "a program beside the governor holds %d MB in the group" % (HOLD // 10**6))

                def make(i, size):
                    return bytes([i]) * size
                futures = [client.submit(make, i, SIZE) for i in range(COUNT)]
                squall.wait(futures, timeout=300)
                kills = oom_kills(group)
                check(kills in (0, None), "the kernel killed nothing in the group (oom_kill %s)"
                      % kills)
                check(gov.poll() is None and holder.poll() is None,
                      "the governor is alive with %d results of %d MB kept beside a program "
                      "holding %d MB, which still runs" % (COUNT, SIZE // 10**6, HOLD // 10**6))
                g = wait_until("the governor's load report", lambda: next(
                    (g for g in client.info()["governors"]
                     if g["memory"] + g["spilled"] >= COUNT * SIZE), None), 30, interval=0.2)
                check(g["spilled"] > 0, "its store spilled %d MB, keeps %d MB in memory"
                      % (g["spilled"] // 10**6, g["memory"] // 10**6))
                bad = [i for i, f in enumerate(futures)
                       if (lambda r: len(r) != SIZE or r.count(bytes([i])) != SIZE)(
                           f.result(timeout=120))]
                check(not bad, "every result reads back byte-exact")
                open(marker, "w").close()
                out, _ = holder.communicate(timeout=120)
                check(holder.returncode == 0 and out.strip() == str(HOLD // 4096 + (HOLD % 4096 > 0)),
                      "the program beside the store held its memory to the end")
                check(gov.poll() is None, "and the governor is still alive")
            finally:
                client.close()
            log.flush()
            with open(log.name) as f:
                text = f.read()
            check("in use beside the store" in text,
                  "the box made the store spill: %s" % " | ".join(
                      l for l in text.splitlines() if "beside the store" in l)[:300])
            gov.send_signal(signal.SIGINT)
            check(gov.wait(30) == 0, "the governor stops cleanly")
    finally:
        for p in (gov, holder):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        # whatever is left in the group (executors of a killed governor)
        # goes, then the group
        def emptied():
            try:
                with open(os.path.join(group, "cgroup.procs")) as f:
                    pids = [int(p) for p in f.read().split()]
            except OSError:
                return True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            return not pids
        try:
            wait_until("the test's cgroup to empty", emptied, 30, interval=0.1)
        finally:
            try:
                os.rmdir(group)
            except OSError as exc:
                print("note: cgroup %s not removed: %s" % (group, exc), file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_box: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
