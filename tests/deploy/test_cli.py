"""The `squall` command line tool: --help everywhere, exit codes, start /
status / run / submit / replay against a real local cluster, clean Ctrl-C."""
import json
import os
import socket
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploylib import SQUALL, PIPELINE, BUILD, Cluster, check, run  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    env = dict(os.environ, SQUALL_BUILD_DIR=BUILD)
    for cmd in ([], ["start"], ["status"], ["run"], ["submit"], ["job"], ["job", "list"], ["task", "list"], ["replay"], ["retire"]):
        r = run(SQUALL + cmd + ["--help"], env=env)
        check(r.returncode == 0 and "usage: squall" in r.stdout and "exit codes" in r.stdout,
              "squall %s --help" % " ".join(cmd))
    check(run(SQUALL, env=env).returncode == 2, "no command: exit 2")
    check(run(SQUALL + ["frobnicate"], env=env).returncode == 2, "unknown command: exit 2")
    check(run(SQUALL + ["start", "--governors", "x"], env=env).returncode == 2, "bad option: exit 2")
    check(run(SQUALL + ["run", "/nonexistent.py"], env=env).returncode == 2, "missing file: exit 2")
    nobody = "tcp://127.0.0.1:%d" % free_port()
    r = run(SQUALL + ["status", "--broker", nobody, "--timeout", "0.5"], env=env)
    check(r.returncode == 3 and "unreachable" in r.stderr, "status, no broker: exit 3")
    r = run(SQUALL + ["run", "--broker", nobody, "--timeout", "0.5", PIPELINE], env=env)
    check(r.returncode == 3, "run, no broker: exit 3")

    tmp = os.environ.get("TMPDIR", "/tmp")
    event_log = os.path.join(tmp, "squall-cli-test-%d.jsonl" % os.getpid())
    html = event_log + ".html"
    # The access file (--access) is written safely: a symlink planted at its
    # old temporary name, or at its own name, is never written through.
    access = os.path.join(tmp, "squall-cli-test-access-%d.json" % os.getpid())
    planted = access + ".planted"
    with open(planted, "w") as f:
        f.write("planted\n")
    os.symlink(planted, access + ".tmp")
    os.symlink(planted, access)
    try:
        with Cluster(governors=2, cpus=2, event_log=event_log, extra=["--access", access]) as cluster:
            with open(planted) as f:
                check(f.read() == "planted\n", "--access wrote through no symlink")
            check(not os.path.islink(access) and stat.S_IMODE(os.stat(access).st_mode) == 0o600,
                  "--access: a regular file of mode 0600")
            with open(access) as f:
                check(json.load(f)["secret_key"] == cluster.keys["SQUALL_SECRET_KEY"],
                      "--access holds the cluster's keys")
            logdir = os.path.join(cluster.tmp, "logs")
            modes = {name: stat.S_IMODE(os.stat(os.path.join(logdir, name)).st_mode)
                     for name in os.listdir(logdir) if name.endswith(".log")}
            check(set(modes) >= {"broker.log", "governor-1.log"}
                  and set(modes.values()) == {0o600}, "logs in --log-dir are private: %s" % modes)
            check(stat.S_IMODE(os.stat(event_log).st_mode) == 0o600, "the event log is private")
            # A busy port is an error naming it, for the broker and the
            # dashboard (two clusters never share one).
            port = cluster.broker.rsplit(":", 1)[1]
            r = run(SQUALL + ["start", "--governors", "0", "--port", port, "--http", "0",
                              "--log-dir", os.path.join(cluster.tmp, "second")], env=env, timeout=60)
            check(r.returncode != 0 and "the port is in use" in r.stderr and port in r.stderr,
                  "a second cluster on the broker's port: named (%s)" % r.stderr.strip())
            http_port = cluster.http.rsplit(":", 1)[1]
            r = run(SQUALL + ["start", "--governors", "0", "--port", "0", "--http", http_port,
                              "--log-dir", os.path.join(cluster.tmp, "third")], env=env, timeout=60)
            check(r.returncode != 0 and "port %s is in use" % http_port in r.stderr,
                  "a second cluster on the dashboard's port: named (%s)" % r.stderr.strip())
            info = cluster.info()
            check(len(info["governors"]) == 2, "status --json lists 2 governors")
            r = run(SQUALL + ["status"], env=cluster.env())
            check(r.returncode == 0 and "governor-1" in r.stdout and "governor-2" in r.stdout
                  and "tasks:" in r.stdout, "status table shows both governors and tasks")
            r = run(SQUALL + ["run", PIPELINE, "--parts", "6", "--sleep", "0.05"], env=cluster.env())
            check(r.returncode == 0 and "pipeline: OK" in r.stdout, "run runs a pipeline: exit 0")
            bad = os.path.join(tmp, "squall-cli-test-fail-%d.py" % os.getpid())
            with open(bad, "w") as f:
                f.write("import os, sys\nassert os.environ['SQUALL_BROKER']\nsys.exit(7)\n")
            r = run(SQUALL + ["run", bad], env=cluster.env())
            os.unlink(bad)
            check(r.returncode == 1 and "failed with status 7" in r.stderr, "failing script: exit 1")
            done = json.loads(run(SQUALL + ["status", "--json"], env=cluster.env()).stdout)
            check(sum(g["tasks_done"] for g in done["governors"]) >= 13, "governors counted the tasks")
            r = run(SQUALL + ["retire", "nosuch"], env=cluster.env())
            check(r.returncode == 2 and "no governor nosuch" in r.stderr, "retire an unknown governor: exit 2")
            r = run(SQUALL + ["retire", "governor-2", "--wait", "60"], env=cluster.env())
            check(r.returncode == 0 and "drains" in r.stdout and "left" in r.stdout,
                  "retire governor-2 --wait: it drained and left (%s)" % (r.stdout + r.stderr).strip())
            after = json.loads(run(SQUALL + ["status", "--json"], env=cluster.env()).stdout)
            check([g["name"] for g in after["governors"]] == ["governor-1"],
                  "the cluster goes on with governor-1")
            #   Ctrl-C (SIGINT): squall start exits 0 and leaves no broker or
            #   governor running.
            cluster.check_stopped()
        r = run(SQUALL + ["replay", event_log], env=env)
        check(r.returncode == 0 and "13 finished, 0 failed" in r.stdout
              and "governor-1" in r.stdout, "replay summarizes the run")
        r = run(SQUALL + ["replay", event_log, "--json", "--html", html], env=env)
        summary = json.loads(r.stdout)
        check(r.returncode == 0 and summary["finished"] == 13
              and {g["name"] for g in summary["governors"]} == {"governor-1", "governor-2"},
              "replay --json: tasks per governor")
        with open(html) as f:
            page = f.read()
        check("<svg" in page and page.count("class='gov-row'") == 2, "replay --html writes a timeline")
        with open(event_log, "a") as f:
            f.write("not json\n")
        check(run(SQUALL + ["replay", event_log], env=env).returncode == 1, "corrupt event log: exit 1")
    finally:
        for path in (event_log, html, access, access + ".tmp", planted):
            if os.path.lexists(path):
                os.unlink(path)
    print("test_cli: all passed")


if __name__ == "__main__":
    main()
