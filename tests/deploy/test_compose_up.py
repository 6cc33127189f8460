"""docker-compose.yml for real: a Docker engine (started here if none runs,
stopped by its pid afterwards), the base images made from Debian's archive
when missing (scripts/docker-base-image.sh), the image built, then
`up -d --scale governor=3` with 1 GiB per governor container: keys made by
the keys service, each governor's --memory read from its cgroup, the
example pipeline run and its result checked, the dashboard asking for its
token, /metrics open, one governor stopped with `docker stop` (SIGTERM: it
drains and exits 0), and `down -v`. Prints the image's size and how long
the build took.

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
               SQUALL_MEMORY=str(1 << 30), COMPOSE_PROJECT_NAME=PROJECT)
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

        ids = sh(dc + ["ps", "-q", "governor"], env=env).stdout.split()
        check(len(ids) == 3, "three governor containers")
        sh(["docker", "stop", ids[0]], timeout=120)
        code = sh(["docker", "inspect", "-f", "{{.State.ExitCode}}", ids[0]]).stdout.strip()
        check(code == "0", "docker stop (SIGTERM): the governor drained and exited 0")
        check(wait_until("the broker to list 2 governors", lambda: "squall_governors_alive 2" in
                         urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port,
                                                timeout=2).read().decode(), 60, interval=0.5),
              "the broker lets it go")
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
