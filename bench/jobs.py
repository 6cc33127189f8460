#!/usr/bin/env python3
"""Jobs from the command line (issue 27), beside xargs in the same run:

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/jobs.py [N] [JOBS]

1. An array of N (default 20 000) elements of `true`, then of a 1 ms
   program (`sleep 0.001`): the time from `squall submit` starting to
   `squall job wait` returning, on one governor with this machine's cpus,
   beside `xargs -P <cpus> -I{}` running the same commands (the limit:
   starting processes). Target: within 1.3x of xargs; the ratio is printed.
2. `squall job list` with JOBS (default 1 000) jobs: the command's wall
   time (a new Python process, as a user runs it) and the listing call
   alone. Target: under 0.2 s.
"""
import os
import subprocess
import sys
import time

import squall
from squall.tasks import Execute

SOURCE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SQUALL = [sys.executable, os.path.join(SOURCE, "bin", "squall")]


def sq(env, *argv):
    out = subprocess.run(SQUALL + list(argv), env=env, capture_output=True, text=True)
    if out.returncode:
        sys.exit("squall %s: exit %d: %s" % (" ".join(argv), out.returncode, out.stderr))
    return out.stdout


def array_vs_xargs(env, n, cpus, program):
    t0 = time.perf_counter()
    out = subprocess.run(SQUALL + ["submit", "--array", "0-%d" % (n - 1), "--"] + program,
                         env=env, capture_output=True, text=True)
    if out.returncode:
        print("%-14s x %d: not measured: %s" % (" ".join(program), n, out.stderr.strip()))
        return
    job = out.stdout.strip()
    t_submit = time.perf_counter() - t0
    sq(env, "job", "wait", job)
    t_squall = time.perf_counter() - t0
    sq(env, "job", "forget", job)
    t0 = time.perf_counter()
    # -I: one line a command, the line not appended (`-n 1` would run
    # `sleep 0.001 17`, which sleeps 17 s)
    subprocess.run(["xargs", "-P", str(cpus), "-I{}"] + program,
                   input="".join("%d\n" % i for i in range(n)), text=True, check=True,
                   stdout=subprocess.DEVNULL)
    t_xargs = time.perf_counter() - t0
    print("%-14s x %d: squall submit..job wait %.2f s (submit returned after %.3f s), "
          "xargs -P %d %.2f s: ratio %.2fx (target <= 1.3x)"
          % (" ".join(program), n, t_squall, t_submit, cpus, t_xargs, t_squall / t_xargs))


def job_list(env, client, jobs):
    for i in range(jobs):
        with client.session(name="bench-%d" % i, detached=True) as s:
            Execute(["true"], session=s)
            s.submit()
    sq(env, "job", "list")           # warm the page cache for the timed run
    t0 = time.perf_counter()
    out = sq(env, "job", "list")
    t_cli = time.perf_counter() - t0
    # what any command costs (a Python process, libsquall, a CURVE
    # handshake, one question): `squall status`
    t0 = time.perf_counter()
    sq(env, "status")
    t_status = time.perf_counter() - t0
    t0 = time.perf_counter()
    listed = client.jobs()
    t_call = time.perf_counter() - t0
    assert len(listed) >= jobs and out.count("bench-") >= jobs
    print("squall job list with %d jobs: %.3f s (the command, a new process; `squall status` "
          "%.3f s), %.4f s (the listing call alone); target < 0.2 s"
          % (len(listed), t_cli, t_status, t_call))
    sq(env, "job", "forget", *[str(j["id"]) for j in listed
                               if (j["name"] or "").startswith("bench-")])


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    cpus = os.cpu_count() or 1
    with squall.LocalCluster(governors=1, cpus=cpus) as cluster:
        env = dict(os.environ, SQUALL_BROKER=cluster.address,
                   SQUALL_SECRET_KEY=cluster.secret_key, SQUALL_BROKER_KEY=cluster.broker_key)
        print("machine: %d cpus, load average %s" % (cpus, " ".join(
            "%.2f" % x for x in os.getloadavg())))
        array_vs_xargs(env, n, cpus, ["true"])
        array_vs_xargs(env, n, cpus, ["sleep", "0.001"])
        client = cluster.client()
        job_list(env, client, jobs)
        client.close()


if __name__ == "__main__":
    main()
