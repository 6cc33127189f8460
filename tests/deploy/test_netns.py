"""The docker-compose topology without Docker: one network namespace per
service (broker, governor-1, governor-2, example), joined by a bridge in a
namespace of its own, addresses in 10.213.0.0/24 that exist only inside the
namespaces this test creates, and service names resolved through per-
namespace hosts files (/etc/netns/NS/hosts, which `ip netns exec` binds over
/etc/hosts), as compose's DNS would. Governors reach the broker as
tcp://broker:7760; the pipeline runs from the example namespace; the
dashboard is read there as http://broker:8080. Everything is torn down even
on failure. Skips (77) without root or `ip netns`."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploylib import BUILD, PIPELINE, SKIP, SOURCE, check, fail, wait_until  # noqa: E402

TAG = "sqt%d" % (os.getpid() % 100000)
SWITCH = TAG + "-sw"
SERVICES = {"broker": "10.213.0.2", "governor-1": "10.213.0.11", "governor-2": "10.213.0.12",
            "governor-3": "10.213.0.13", "example": "10.213.0.20"}
MIDGRAPH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "midgraph.py")


def ns(service):
    return "%s-%s" % (TAG, service)


def sh(*argv, check_rc=True):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check_rc and r.returncode != 0:
        fail("%s: %s" % (" ".join(argv), r.stderr.strip()))
    return r


def setup():
    sh("ip", "netns", "add", SWITCH)
    sh("ip", "-n", SWITCH, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", SWITCH, "link", "set", "br0", "up")
    hosts = "127.0.0.1 localhost\n" + "".join("%s %s\n" % (ip, name) for name, ip in SERVICES.items())
    for i, (service, ip) in enumerate(SERVICES.items()):
        name = ns(service)
        sh("ip", "netns", "add", name)
        os.makedirs("/etc/netns/" + name, exist_ok=True)
        with open("/etc/netns/%s/hosts" % name, "w") as f:
            f.write(hosts)
        port = "p%d" % i
        sh("ip", "-n", SWITCH, "link", "add", port, "type", "veth", "peer", "name", "eth0",
           "netns", name)
        sh("ip", "-n", SWITCH, "link", "set", port, "master", "br0")
        sh("ip", "-n", SWITCH, "link", "set", port, "up")
        sh("ip", "-n", name, "addr", "add", ip + "/24", "dev", "eth0")
        sh("ip", "-n", name, "link", "set", "eth0", "up")
        sh("ip", "-n", name, "link", "set", "lo", "up")


def teardown(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)        # governors leave without draining; the broker stops
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for service in SERVICES:
        # any process still in the namespace (there should be none)
        r = sh("ip", "netns", "pids", ns(service), check_rc=False)
        for pid in r.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", ns(service), check_rc=False)
        shutil.rmtree("/etc/netns/" + ns(service), ignore_errors=True)
    sh("ip", "netns", "del", SWITCH, check_rc=False)


def in_ns(service, argv, **kwargs):
    return subprocess.Popen(["ip", "netns", "exec", ns(service)] + argv, **kwargs)


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root to create network namespaces")
        return SKIP
    if not shutil.which("ip") or subprocess.run(["ip", "netns", "list"], capture_output=True).returncode:
        print("SKIP: `ip netns` is not available")
        return SKIP
    probe = subprocess.run(["ip", "netns", "add", TAG + "-probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("SKIP: cannot create network namespaces here: %s" % probe.stderr.strip())
        return SKIP
    subprocess.run(["ip", "netns", "del", TAG + "-probe"], capture_output=True)
    broker_bin = os.path.join(BUILD, "broker", "squall-broker")
    governor_bin = os.path.join(BUILD, "governor", "squall-governor")
    logdir = os.path.join(BUILD or "/tmp", "netns-test-logs")
    os.makedirs(logdir, exist_ok=True)
    procs = []
    keys = None
    try:
        setup()
        check(True, "namespaces %s-{broker,governor-1,governor-2,example} on a bridge" % TAG)
        log = open(os.path.join(logdir, "broker.log"), "w")
        env = dict(os.environ, SQUALL_BUILD_DIR=BUILD, SQUALL_BROKER="tcp://broker:7760")
        squall = [sys.executable, os.path.join(SOURCE, "bin", "squall")]
        # the compose file's keys service, into a private directory, and
        # each governor's own key (one governor, one identity), its .pub
        # authorised as the compose broker's enrolment does
        keys = tempfile.mkdtemp(prefix="squall-netns-keys-")
        authorized = os.path.join(keys, "authorized")
        os.makedirs(authorized)
        for name, role in [("broker", "broker"), ("client", "admin")] + [
                ("governor-%d" % i, "governor") for i in (1, 2, 3)]:
            subprocess.run(squall + ["keygen", name, "--dir", keys, "--role", role], env=env,
                           check=True, capture_output=True, timeout=30)
            if name != "broker":
                os.replace(os.path.join(keys, name + ".pub"),
                           os.path.join(authorized, name + ".pub"))
        with open(os.path.join(keys, "http-token"), "w") as f:
            f.write("netns-test-token-0123456789\n")
        env.update(SQUALL_SECRET_KEY=os.path.join(keys, "client.key"),
                   SQUALL_BROKER_KEY=os.path.join(keys, "broker.pub"))
        # the compose file's broker command
        procs.append(in_ns("broker", [broker_bin, "--listen", "tcp://*:7760",
                                      "--secret-key", os.path.join(keys, "broker.key"),
                                      "--authorized-keys", authorized,
                                      "--journal", os.path.join(keys, "broker.journal"),
                                      "--http", "*:8080", "--http-token",
                                      os.path.join(keys, "http-token"),
                                      "--event-log", os.path.join(logdir, "events.jsonl")],
                           stdout=log, stderr=log))

        def status():
            r = subprocess.run(["ip", "netns", "exec", ns("example")] + squall +
                               ["status", "--json", "--timeout", "1"],
                               env=env, capture_output=True, text=True, timeout=30)
            return json.loads(r.stdout) if r.returncode == 0 else None
        wait_until("the broker to answer as tcp://broker:7760", status, 20, interval=0.2)
        check(True, "the example namespace reaches the broker by service name")
        govs = {}

        def start_governor(g):
            glog = open(os.path.join(logdir, g + ".log"), "w")
            # the compose file's governor command, SQUALL_* from the environment;
            # --memory, which a container's cgroup gives there, is explicit here
            procs.append(in_ns(g, ["sh", "-c", 'exec "$0" --broker "$SQUALL_BROKER" '
                                   '${SQUALL_CPUS:+--cpus $SQUALL_CPUS} '
                                   '--memory "$SQUALL_MEMORY" --name "$1" --workdir /tmp '
                                   '--secret-key "$2" --broker-key "$SQUALL_BROKER_KEY"',
                                   governor_bin, g, os.path.join(keys, g + ".key")],
                               env=dict(env, SQUALL_CPUS="2", SQUALL_MEMORY="1073741824",
                                        SQUALL_PYTHON=sys.executable),
                               stdout=glog, stderr=glog))
            govs[g] = procs[-1]
        for g in ("governor-1", "governor-2"):
            start_governor(g)
        info = wait_until("both governors to join", lambda: (lambda i: i if i and len(
            i["governors"]) == 2 else None)(status()), 20, interval=0.2)
        endpoints = sorted(g["data_endpoint"] for g in info["governors"])
        check(all("10.213.0.1" in e for e in endpoints),
              "governors advertise their namespace addresses: %s" % endpoints)
        check(all(g["resources"].get("memory") == 1073741824 for g in info["governors"]),
              "memory resource from SQUALL_MEMORY")
        r = subprocess.run(["ip", "netns", "exec", ns("example")] + squall +
                           ["run", PIPELINE, "--parts", "12", "--rounds", "2"],
                           env=env, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and "pipeline: OK" in r.stdout,
              "the pipeline ran through the topology (%s)" % (r.stdout + r.stderr).strip()[-300:])
        r = subprocess.run(["ip", "netns", "exec", ns("example"), sys.executable, "-c",
                            "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("
                            "'http://broker:8080/metrics', timeout=5).read().decode())"],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0 and "squall_governors_alive 2" in r.stdout,
              "the dashboard port answers as http://broker:8080")
        r = subprocess.run(["ip", "netns", "exec", ns("example"), sys.executable, "-c",
                            "import urllib.request,urllib.error\n"
                            "try:\n"
                            "    urllib.request.urlopen('http://broker:8080/api/state', timeout=5)\n"
                            "except urllib.error.HTTPError as e:\n"
                            "    print(e.code)"],
                           capture_output=True, text=True, timeout=30)
        check(r.stdout.strip() == "401", "the dashboard's API wants its token")
        r = subprocess.run(["ip", "netns", "exec", ns("example")] + squall +
                           ["status", "--json", "--timeout", "1"],
                           env=dict(env, SQUALL_SECRET_KEY="", SQUALL_BROKER_KEY=""),
                           capture_output=True, text=True, timeout=30)
        check(r.returncode != 0, "a client without keys gets nothing from the broker")
        done = sum(g["tasks_done"] for g in status()["governors"])
        check(done >= 50, "%d tasks done on the governors" % done)

        # Mid-graph, governor-1 is stopped with SIGTERM (it drains) and
        # governor-3 joins: exact results, each task run once, governor-3
        # ran some, nothing recomputed, governor-1 left with status 0.
        runlog = os.path.join(keys, "runs")
        n = 36
        graph = subprocess.Popen(["ip", "netns", "exec", ns("example"), sys.executable, MIDGRAPH,
                                  runlog, str(n)],
                                 env=dict(env, PYTHONPATH=os.path.join(SOURCE, "bindings", "python")),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(graph)
        line = graph.stdout.readline()
        check(line.startswith("SUBMITTED"), "the graph of %d Python tasks is in (%s)" % (n, line.strip()))
        wait_until("tasks to run on governor-1", lambda: any(
            g["name"] == "governor-1" and g["running"] > 0 for g in status()["governors"]), 30,
            interval=0.05)
        govs["governor-1"].send_signal(signal.SIGTERM)
        start_governor("governor-3")
        out, err = graph.communicate(timeout=180)
        check(graph.returncode == 0 and "RESULTS OK" in out,
              "exact results across the drain and the join (%s)" % (out + err).strip()[-400:])
        check(govs["governor-1"].wait(30) == 0, "governor-1 drained and left with status 0")
        with open(runlog) as f:
            runs = [int(x) for x in f.read().split()]
        counts = {i: runs.count(i) for i in range(n)}
        check(all(c == 1 for c in counts.values()),
              "each task ran exactly once (%s)" % {i: c for i, c in counts.items() if c != 1})
        final = status()
        by_name = {g["name"]: g for g in final["governors"]}
        check("governor-1" not in by_name and by_name.get("governor-3", {}).get("tasks_done", 0) > 0,
              "governor-3 joined and ran tasks: %s" % {k: v.get("tasks_done") for k, v in by_name.items()})
        check(final.get("recomputed") == 0, "nothing recomputed")
    finally:
        teardown(procs)
        if keys:
            shutil.rmtree(keys, ignore_errors=True)
    left = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                      text=True).stdout.split() if n.startswith(TAG)]
    check(not left, "no namespace left behind")
    print("test_netns: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
