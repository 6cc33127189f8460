"""The `squall` command line tool: --help everywhere, exit codes, start /
status / submit / replay against a real local cluster, clean Ctrl-C."""
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploylib import SQUALL, PIPELINE, BUILD, Cluster, check, run  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    env = dict(os.environ, SQUALL_BUILD_DIR=BUILD)
    for cmd in ([], ["start"], ["status"], ["submit"], ["replay"], ["retire"]):
        r = run(SQUALL + cmd + ["--help"], env=env)
        check(r.returncode == 0 and "usage: squall" in r.stdout and "exit codes" in r.stdout,
              "squall %s --help" % " ".join(cmd))
    check(run(SQUALL, env=env).returncode == 2, "no command: exit 2")
    check(run(SQUALL + ["frobnicate"], env=env).returncode == 2, "unknown command: exit 2")
    check(run(SQUALL + ["start", "--governors", "x"], env=env).returncode == 2, "bad option: exit 2")
    check(run(SQUALL + ["submit", "/nonexistent.py"], env=env).returncode == 2, "missing file: exit 2")
    nobody = "tcp://127.0.0.1:%d" % free_port()
    r = run(SQUALL + ["status", "--broker", nobody, "--timeout", "0.5"], env=env)
    check(r.returncode == 3 and "unreachable" in r.stderr, "status, no broker: exit 3")
    r = run(SQUALL + ["submit", "--broker", nobody, "--timeout", "0.5", PIPELINE], env=env)
    check(r.returncode == 3, "submit, no broker: exit 3")

    tmp = os.environ.get("TMPDIR", "/tmp")
    event_log = os.path.join(tmp, "squall-cli-test-%d.jsonl" % os.getpid())
    html = event_log + ".html"
    try:
        with Cluster(governors=2, cpus=2, event_log=event_log) as cluster:
            info = cluster.info()
            check(len(info["governors"]) == 2, "status --json lists 2 governors")
            r = run(SQUALL + ["status"], env=cluster.env())
            check(r.returncode == 0 and "governor-1" in r.stdout and "governor-2" in r.stdout
                  and "tasks:" in r.stdout, "status table shows both governors and tasks")
            r = run(SQUALL + ["submit", PIPELINE, "--parts", "6", "--sleep", "0.05"], env=cluster.env())
            check(r.returncode == 0 and "pipeline: OK" in r.stdout, "submit runs a pipeline: exit 0")
            bad = os.path.join(tmp, "squall-cli-test-fail-%d.py" % os.getpid())
            with open(bad, "w") as f:
                f.write("import os, sys\nassert os.environ['SQUALL_BROKER']\nsys.exit(7)\n")
            r = run(SQUALL + ["submit", bad], env=cluster.env())
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
            code = cluster.stop()
            check(code == 0, "Ctrl-C (SIGINT) stops squall start with exit 0")
            check(not cluster.leftovers(), "no broker or governor left running")
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
        for path in (event_log, html):
            if os.path.exists(path):
                os.unlink(path)
    print("test_cli: all passed")


if __name__ == "__main__":
    main()
