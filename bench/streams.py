"""Streams vs finished objects (issue 17): a three-stage pipeline over SIZE
MiB (default 1024) on three governors of one cpu each, `gen | tr a b | wc -c`,
its stages' outputs either streams (read as written) or finished objects
(each stage's whole output stored, then copied to the next), beside the same
pipeline as one shell pipeline on this machine (the speed of a local pipe,
the best a stream could do).

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/streams.py [SIZE_MIB] [ROUNDS]

Prints, per mode, the median wall time, throughput, and the largest growth
of a governor's peak resident memory (VmHWM) during the run, and the ratios.
"""
import statistics
import subprocess
import sys
import time

import squall
from squall.tasks import Execute

GEN = "head -c %dM /dev/zero | tr '\\0' a"


def _hwm(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def squall_run(mib, stream):
    with squall.LocalCluster(governors=3, cpus=1, log_level="error") as cluster:
        pids = [g.pid for g in cluster.governors]
        before = {pid: _hwm(pid) for pid in pids}
        with cluster.client() as client, client.session() as s:
            gen = Execute(GEN % mib, stdout=True, stream=stream)
            swap = Execute("tr a b", stdin=gen.output, stdout=True, stream=stream)
            count = Execute("wc -c", stdin=swap.output, stdout=True)
            count.output.keep()
            t0 = time.perf_counter()
            s.submit()
            out = count.output.fetch(600)
            dt = time.perf_counter() - t0
        assert int(out) == mib << 20, out
        grown = max(_hwm(pid) - before[pid] for pid in pids)
    return dt, grown


def shell_run(mib):
    t0 = time.perf_counter()
    out = subprocess.run(["sh", "-c", (GEN % mib) + " | tr a b | wc -c"], check=True,
                         capture_output=True).stdout
    dt = time.perf_counter() - t0
    assert int(out) == mib << 20, out
    return dt, 0


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    results = {}
    for name, run in (("shell pipeline (one machine)", lambda: shell_run(mib)),
                      ("squall streams", lambda: squall_run(mib, True)),
                      ("squall finished objects", lambda: squall_run(mib, False))):
        runs = [run() for _ in range(rounds)]
        dt = statistics.median(r[0] for r in runs)
        grown = max(r[1] for r in runs)
        results[name] = dt
        print("%-30s %8.2f s %8.0f MiB/s   governor peak memory +%.0f MiB"
              % (name, dt, mib / dt, grown / 2 ** 20), flush=True)
    streams = results["squall streams"]
    print("streams vs finished objects: %.2fx faster" % (results["squall finished objects"] / streams))
    print("streams vs a shell pipeline: %.0f %% of its throughput"
          % (100 * results["shell pipeline (one machine)"] / streams))


if __name__ == "__main__":
    main()
