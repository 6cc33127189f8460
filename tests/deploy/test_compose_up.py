"""docker-compose.yml for real: a Docker engine (started here if none runs,
stopped by its pid afterwards), the base images made from Debian's archive
when missing (scripts/docker-base-image.sh), the image built, then
`up -d --scale governor=3` with 1 GiB per governor container: keys made by
the keys service, each governor's --memory read from its cgroup, the
example pipeline run and its result checked, the dashboard asking for its
token, /metrics open; one governor, one identity: each governor container
holds its own key and the broker's public key only (no broker key, client
key or token), the broker let each one in by its own key; a task never
sees a key: each governor runs as root (no new privileges, six
capabilities) with its key in a directory of root's, and execute and
Python tasks submitted to the cluster (taskprobe.py) run under a user id
of the task range, with no capabilities, and can read neither the
governor's key (the path on its command line is masked; the known path)
nor its directory, nor write /enroll; on one host, a stream between two
governor containers goes as a pipe and the example client's container
uploads a constant as a memory file (both counted in INFO); health checks that leave the broker's log quiet; the image's
Python packages from PyPI (the client's cloudpickle, numpy, pandas, dask);
one governor stopped with `docker stop` (SIGTERM: it drains and exits 0),
then a second, and the last one, in its 1 GiB container, keeps 24 Python
results of 60 MB: it spills instead of being killed (no restart, no OOM
kill) and every result reads back; `down -v`. Prints the image's size and
how long the build took.

The build downloads Python packages from PyPI: the CAs this machine added
to its trust store (/usr/local/share/ca-certificates, as for a proxy that
inspects TLS) are handed to it (SQUALL_BUILD_CA_CERTS, Dockerfile).

Skips (77), saying why, without root, the docker CLI, dockerd or Compose."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploylib import SKIP, SOURCE, check, fail, wait_until  # noqa: E402

TASKPROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "taskprobe.py")
PROJECT = "squalltest%d" % (os.getpid() % 100000)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sh(argv, timeout=600, env=None, check_rc=True):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    if check_rc and r.returncode != 0:
        fail("%s: %s" % (" ".join(argv), (r.stdout + r.stderr).strip()[-800:]))
    return r


def host_ca_certs():
    """The PEM text of the CAs this machine added to its trust store."""
    out = []
    folder = "/usr/local/share/ca-certificates"
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".crt"):
            with open(os.path.join(folder, name)) as f:
                out.append(f.read().strip())
    return "\n".join(out)


# 24 results of 60 MB kept by one governor of 1 GiB (issue 26): the client
# holds every future until all are done, then reads each back.
KEEP = """
import os, sys, squall
client = squall.Client(os.environ["SQUALL_BROKER"])
size = 60 * 1000 * 1000
def make(i):
    return bytes([i]) * size
futures = [client.submit(make, i) for i in range(24)]
squall.wait(futures, timeout=900)
# the load report comes with the next heartbeat: the last one's, all held
import time
deadline = time.monotonic() + 60
while True:
    g = client.info()["governors"][0]
    if g["memory"] + g["spilled"] >= 24 * size or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print("HELD %d SPILLED %d" % (g["memory"], g["spilled"]), flush=True)
bad = []
for i, f in enumerate(futures):
    r = f.result(timeout=300)
    if len(r) != size or r.count(bytes([i])) != size:
        bad.append(i)
print("KEEP OK" if not bad else "KEEP BAD %s" % bad, flush=True)
client.close()
sys.exit(1 if bad else 0)
"""


# On one host: a stream between two governor containers (each task takes
# every cpu of a governor, so writer and reader are on two) goes as a pipe
# through the `streams` volume (streams_local), and the example client,
# in a container of its own on that host, uploads a constant as a memory
# file (uploads_local).
LOCAL = """
import os, squall
from squall.tasks import Execute
client = squall.Client(os.environ["SQUALL_BROKER"])
cpus = max(g["cpus"] for g in client.info()["governors"])
before = client.info()
with client.session() as s:
    w = Execute("hostname > host; seq 1 1000000", stdout=True, stream=True, outputs=["host"],
                cpus=cpus)
    stream, host = w.outputs
    r = Execute("hostname; wc -l", stdin=stream, stdout=True, cpus=cpus)
    r.output.keep()
    host.keep()
    s.submit()
    read = r.output.fetch(300).decode().split()
    wrote = host.fetch(300).decode().strip()
    s.wait([w], 300)
value = os.urandom(4 << 20)
with client.session() as s:
    o = s.blob(value)
    o.keep()
    s.submit()
    same = o.fetch(300) == value
after = client.info()
print("STREAM %s %s %s %d" % (wrote, read[0], read[1],
                              after["streams_local"] - before["streams_local"]), flush=True)
print("UPLOAD %s %d" % (same, after["uploads_local"] - before["uploads_local"]), flush=True)
client.close()
"""


def health_runs(container, since):
    """How many health checks of the container started after `since`."""
    r = subprocess.run(["docker", "inspect", "-f",
                        "{{range .State.Health.Log}}{{.Start.Unix}} {{end}}", container],
                       capture_output=True, text=True, timeout=60)
    return sum(1 for t in r.stdout.split() if int(t) > since)


def engine_up():
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root to run a Docker engine")
        return SKIP
    if not shutil.which("docker"):
        print("SKIP: no docker CLI (apt-get install docker.io)")
        return SKIP
    compose = None
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        compose = ["docker", "compose"]
    elif shutil.which("docker-compose"):
        compose = ["docker-compose"]
    if not compose:
        print("SKIP: neither `docker compose` nor docker-compose is installed")
        return SKIP
    started = None
    if not engine_up():
        dockerd = shutil.which("dockerd")
        if not dockerd:
            print("SKIP: no Docker engine runs and dockerd is not installed (apt-get install docker.io)")
            return SKIP
        log = open("/tmp/%s-dockerd.log" % PROJECT, "w")
        started = subprocess.Popen([dockerd, "--pidfile", "/tmp/%s-dockerd.pid" % PROJECT],
                                   stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while not engine_up():
            if started.poll() is not None or time.monotonic() > deadline:
                print("SKIP: dockerd did not start here (see /tmp/%s-dockerd.log)" % PROJECT)
                started.kill()
                return SKIP
            time.sleep(0.5)
        check(True, "started dockerd (pid %d)" % started.pid)
    http_port, port = free_port(), free_port()
    env = dict(os.environ, SQUALL_PORT=str(port), SQUALL_HTTP_PORT=str(http_port),
               SQUALL_MEMORY=str(1 << 30), COMPOSE_PROJECT_NAME=PROJECT,
               SQUALL_BUILD_CA_CERTS=host_ca_certs())
    dc = compose + ["-f", os.path.join(SOURCE, "docker-compose.yml"), "-p", PROJECT]
    try:
        t = time.monotonic()
        sh(["bash", os.path.join(SOURCE, "scripts", "docker-base-image.sh")], timeout=900)
        check(True, "base images from Debian's archive (%.0f s)" % (time.monotonic() - t))
        t = time.monotonic()
        sh(dc + ["build"], timeout=1200, env=env)
        build_s = time.monotonic() - t
        size = int(sh(["docker", "image", "inspect", "squall:latest", "--format",
                       "{{.Size}}"]).stdout.strip())
        check(True, "image built in %.0f s, %.0f MB" % (build_s, size / 1e6))
        t = time.monotonic()
        sh(dc + ["up", "-d", "--scale", "governor=3"], timeout=300, env=env)

        def metrics():
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port, timeout=2) as r:
                text = r.read().decode()
            return "squall_governors_alive 3" in text and text
        wait_until("3 governors behind the broker's published port", metrics, 120, interval=0.5)
        check(True, "up --scale governor=3: all joined in %.1f s" % (time.monotonic() - t))

        r = sh(dc + ["run", "--rm", "-T", "example", "squall", "status", "--json"], env=env)
        info = json.loads(r.stdout)
        memories = sorted(g["resources"].get("memory") for g in info["governors"])
        check(memories == [1 << 30] * 3,
              "each governor took its container's 1 GiB limit as --memory (cgroup): %s" % memories)
        check(info.get("secure") == 1 and info.get("journal_bytes", 0) > 0,
              "the broker runs with keys and a journal")

        wait_until("every governor to pre-fault its copy heap", lambda: sh(
            dc + ["logs", "--no-color", "governor"], env=env).stdout.count(
            "pre-faulted 256 MiB of heap") == 3, 120, interval=0.5)
        check(True, "each governor pre-faulted the heap it keeps for copies (a quarter of 1 GiB)")

        r = sh(dc + ["run", "--rm", "-T", "example"], timeout=300, env=env)
        check("pipeline: OK" in r.stdout, "the example pipeline ran (%s)" % r.stdout.strip()[-200:])

        # The image's Python packages: PyPI's, as a client installed with pip
        # has them (Debian's cloudpickle 2.2.0 cannot load 3.x pickles).
        r = sh(dc + ["run", "--rm", "-T", "example", "python3", "-c",
                     "import sys, cloudpickle, numpy, pandas, dask; print(sys.version.split()[0], "
                     "cloudpickle.__version__, numpy.__version__, pandas.__version__, "
                     "dask.__version__)"], env=env)
        versions = r.stdout.split()
        check(len(versions) == 5 and int(versions[1].split(".")[0]) >= 3,
              "the image has cloudpickle %s from PyPI, numpy %s, pandas %s, dask %s (Python %s)"
              % tuple(versions[1:] + versions[:1]))

        t = time.monotonic()
        r = sh(dc + ["run", "--rm", "-T", "example", "python3", "-c", LOCAL], timeout=600,
               env=env)
        stream = next((l.split()[1:] for l in r.stdout.splitlines() if l.startswith("STREAM ")),
                      None)
        upload = next((l.split()[1:] for l in r.stdout.splitlines() if l.startswith("UPLOAD ")),
                      None)
        check(stream and stream[0] != stream[1] and stream[2] == "1000000" and stream[3] == "1",
              "a stream from governor container %s to %s went as a pipe through the shared "
              "volume (streams_local +1), its bytes whole: %s"
              % (stream and stream[0], stream and stream[1], r.stdout.strip()[-300:]))
        check(upload == ["True", "1"],
              "the example client's container, on the governors' host, uploaded a constant as "
              "a memory file (uploads_local +1) in %.0f s: %s"
              % (time.monotonic() - t, r.stdout.strip()[-300:]))

        # One governor, one identity.
        ids = sh(dc + ["ps", "-q", "governor"], env=env).stdout.split()
        broker_id = sh(dc + ["ps", "-q", "broker"], env=env).stdout.strip()
        publics = set()
        for cid in ids:
            host = sh(["docker", "inspect", "-f", "{{.Config.Hostname}}", cid]).stdout.strip()
            mounts = set(sh(["docker", "inspect", "-f",
                             "{{range .Mounts}}{{.Destination}} {{end}}", cid]).stdout.split())
            check(mounts == {"/broker", "/enroll", "/var/lib/squall/streams"},
                  "governor %s mounts the broker's public key, the enroll volume and the "
                  "host's stream volume, not the keys volume: %s" % (host, sorted(mounts)))
            # The governor: root, no new privileges, only the capabilities
            # it needs (CHOWN DAC_OVERRIDE FOWNER KILL SETGID SETUID), its
            # key in a directory of root's; a user of the task range finds
            # nothing of it (the tasks themselves are probed below).
            seen = sh(["docker", "exec", cid, "sh", "-c",
                       "grep -E '^(Uid|NoNewPrivs|CapEff|CapBnd):' /proc/1/status; "
                       "stat -c 'IDENTITY %%u %%a' /var/lib/squall/identity; "
                       "stat -c 'KEYFILE %%u %%a' /var/lib/squall/identity/%s.key; "
                       "stat -c 'STREAMS %%u %%a' /var/lib/squall/streams/governors; "
                       "ls /var/lib/squall/streams/governors | grep -v '^put-' | grep -c '[.]sock$'" % host]
                      ).stdout.split("\n")
            status = dict(l.split(":", 1) for l in seen if ":" in l)
            check(status.get("Uid", "").split()[:1] == ["0"]
                  and status.get("NoNewPrivs", "").strip() == "1"
                  and status.get("CapEff", "").strip() == "00000000000000eb"
                  and status.get("CapBnd", "").strip() == "00000000000000eb",
                  "governor %s runs as root with no new privileges and capabilities CHOWN "
                  "DAC_OVERRIDE FOWNER KILL SETGID SETUID only (%s)" % (host, status))
            check("IDENTITY 0 700" in seen and "KEYFILE 0 600" in seen,
                  "its key is root's, in a directory of root's (0700): %s"
                  % [l for l in seen if l.startswith(("IDENTITY", "KEYFILE"))])
            check("STREAMS 0 700" in seen and "3" in seen,
                  "the governors share a stream directory of root's (0700) with their 3 "
                  "sockets (each also named put-HASH.sock for clients' uploads): %s" % seen)
            glog = sh(["docker", "logs", cid]).stderr
            check("tasks run as user ids 2000000000-2000065535, one per tenant" in glog,
                  "it runs tasks under the user ids of --task-uids")
            seen = sh(["docker", "exec", "-u", "2000012345:2000012345", cid, "sh", "-c",
                       "find / \\( -path /proc -o -path /sys \\) -prune -o \\( -name '*.key' "
                       "-o -name http-token -o -name 'broker.pub' \\) -print 2>/dev/null; "
                       "[ -w /enroll ] && echo ENROLL-WRITABLE; "
                       "ls /var/lib/squall/identity >/dev/null 2>&1 && echo IDENTITY-LISTED; true"]
                      ).stdout.split("\n")
            files = sorted(l for l in seen if l.startswith("/"))
            check(files == ["/broker/broker.pub"] and "ENROLL-WRITABLE" not in seen
                  and "IDENTITY-LISTED" not in seen,
                  "governor %s holds its own key and the broker's public key, nothing else; a "
                  "user of the task range finds only the latter: %s %s"
                  % (host, files, [l for l in seen if l and not l.startswith("/")]))
            pub = sh(["docker", "exec", cid, "cat", "/enroll/%s.pub" % host]).stdout
            publics.add([l for l in pub.splitlines() if "public-key" in l][0])
        check(len(publics) == 3, "three governors, three keys")
        # What a task sees, for real: execute and Python tasks submitted to
        # the cluster (tests/deploy/taskprobe.py).
        hosts = {sh(["docker", "inspect", "-f", "{{.Config.Hostname}}", cid]).stdout.strip()
                 for cid in ids}
        with open(TASKPROBE) as f:
            probe_code = f.read()
        r = sh(dc + ["run", "--rm", "-T", "example", "python3", "-c", probe_code, "6",
                     "/var/lib/squall/identity", "/enroll"], timeout=600, env=env)
        probes = [json.loads(l[6:]) for l in r.stdout.splitlines() if l.startswith("PROBE ")]
        check(sorted(p["kind"] for p in probes) == ["execute"] * 6 + ["python"] * 6,
              "6 execute and 6 Python tasks reported what they see")
        for p in probes:
            check(p["host"] in hosts and 2000000000 <= p["uid"] <= 2000065535
                  and p["gid"] == p["uid"] and p["parent_uid"] == 0,
                  "%s task on %s: runs as user id %d (group %d), not its governor's (%d)"
                  % (p["kind"], p["host"], p["uid"], p["gid"], p["parent_uid"]))
            check(p["nnp"] == "1" and int(p["cap"], 16) == 0 and not p["breaches"]
                  and "/" not in p["cmd_key"],
                  "  no new privileges nor capabilities; reads neither its governor's key "
                  "(command line: %r, nor the known path) nor its directory; cannot write "
                  "/enroll: %s" % (p["cmd_key"], p["breaches"] or "none of it"))
        check(len({p["uid"] for p in probes}) == 1,
              "one tenant, one user id on every governor (a hash of the tenant's name)")
        left = sh(["docker", "exec", ids[0], "ls", "-A", "/enroll"]).stdout.split()
        check(sorted(left) == sorted("%s.pub" % h for h in hosts),
              "/enroll holds the governors' keys only: %s" % left)
        authorized = sh(["docker", "exec", broker_id, "sh", "-c",
                         "cat /var/lib/squall/authorized/governor-*.pub"]).stdout
        check(all(p in authorized for p in publics) and authorized.count('role = "governor"') == 3,
              "the broker lets in each governor by its own key, as a governor")

        # Health checks leave the broker's log quiet: over three rounds of
        # every container's checks (15 s), the broker logs next to nothing
        # (a client connection per check was 2 lines each).
        # From the next whole second: `docker logs --since` takes seconds, and
        # the probe's client may have left within this one.
        logged_from = int(time.time()) + 1
        wait_until("three health checks of every container", lambda: all(
            health_runs(c, logged_from) >= 3 for c in ids + [broker_id]), 90, interval=1.0)
        lines = [l for l in sh(["docker", "logs", "--since", str(logged_from), broker_id]
                               ).stderr.splitlines() + sh(["docker", "logs", "--since",
                                                           str(logged_from), broker_id]
                                                          ).stdout.splitlines() if l.strip()]
        check(len(lines) <= 1, "12 health checks logged %d broker lines%s"
              % (len(lines), (": " + " | ".join(lines[:6])) if lines else ""))
        token = sh(dc + ["exec", "-T", "broker", "cat", "/keys/http-token"], env=env).stdout.strip()
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/api/state" % http_port, timeout=5)
            fail("the dashboard's API answered without its token")
        except urllib.error.HTTPError as e:
            check(e.code == 401, "the dashboard asks for its token (401)")
        request = urllib.request.Request("http://127.0.0.1:%d/api/state" % http_port,
                                         headers={"Authorization": "Bearer " + token})
        with urllib.request.urlopen(request, timeout=5) as r:
            state = json.loads(r.read().decode())
        check(len(state["info"]["governors"]) == 3, "and shows the cluster with it")

        check(len(ids) == 3, "three governor containers")
        sh(["docker", "stop", ids[0]], timeout=120)
        code = sh(["docker", "inspect", "-f", "{{.State.ExitCode}}", ids[0]]).stdout.strip()
        check(code == "0", "docker stop (SIGTERM): the governor drained and exited 0")
        check(wait_until("the broker to list 2 governors", lambda: "squall_governors_alive 2" in
                         urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port,
                                                timeout=2).read().decode(), 60, interval=0.5),
              "the broker lets it go")

        # One governor of 1 GiB left, asked to keep 24 results of 60 MB
        # (1.44 GB): it spills; the kernel never kills it.
        sh(["docker", "stop", ids[1]], timeout=120)
        wait_until("the broker to list 1 governor", lambda: "squall_governors_alive 1" in
                   urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port,
                                          timeout=2).read().decode(), 60, interval=0.5)
        last = ids[2]
        t = time.monotonic()
        r = sh(dc + ["run", "--rm", "-T", "example", "python3", "-c", KEEP], timeout=1200,
               env=env, check_rc=False)
        state = json.loads(sh(["docker", "inspect", "-f", "{{json .State}}", last]).stdout)
        restarts = int(sh(["docker", "inspect", "-f", "{{.RestartCount}}", last]).stdout)
        logs = sh(["docker", "logs", last]).stderr
        check(restarts == 0 and not state.get("OOMKilled") and state.get("Running"),
              "the 1 GiB governor kept 24 results of 60 MB without being killed (restarts %d, "
              "OOMKilled %s)" % (restarts, state.get("OOMKilled")))
        check(r.returncode == 0 and "KEEP OK" in r.stdout,
              "every result read back, byte-exact, in %.0f s (%s)"
              % (time.monotonic() - t, (r.stdout + r.stderr).strip()[-300:]))
        held = [l.split() for l in r.stdout.splitlines() if l.startswith("HELD ")]
        check(held and int(held[0][3]) > 0 and int(held[0][1]) + int(held[0][3]) >= 24 * 60 * 10**6
              and int(held[0][1]) < 1 << 30,
              "it held them all, %.0f MB in memory, %.0f MB spilled (%s)"
              % (int(held[0][1]) / 1e6 if held else -1, int(held[0][3]) / 1e6 if held else -1,
                 " | ".join(l for l in logs.splitlines() if "store: " in l)[-400:]))
    finally:
        subprocess.run(dc + ["down", "-v", "--remove-orphans"], capture_output=True, timeout=300,
                       env=env)
        if started:
            started.send_signal(signal.SIGTERM)
            try:
                started.wait(60)
            except subprocess.TimeoutExpired:
                started.kill()
    print("test_compose_up: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
