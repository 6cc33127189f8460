"""Streams vs finished objects (issues 17, 29): a three-stage pipeline over
SIZE MiB (default 1024) on three governors of one cpu each, `gen | tr a b |
wc -c`, its stages' outputs either streams (read as written) or finished
objects (each stage's whole output stored, then copied to the next), beside
the same pipeline as one shell pipeline on this machine (the speed of a local
pipe, the best a stream could do).

Streams run twice: over the same-host path (a LocalCluster's governors share
a stream directory: the writer's pipe is handed to the reader's governor,
docs/security.md, "Streams on one host") and as chunks over CURVE (the
governors started with `--stream-dir ""`, as governors of different hosts
would send them).

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/streams.py [SIZE_MIB] [ROUNDS] [--no-objects] [--two-readers]

--two-readers adds a stream of two readers, `gen` read by two `wc -c` (on
one host, each through a pipe of its own that the writer's governor fills),
beside the shell's `gen | tee >(wc -c) | wc -c` (bash).

The modes run interleaved, round after round, so that a machine's load
weighs on all alike. Prints, per mode, the median wall time, throughput, and
the largest growth of a governor's peak resident memory (VmHWM) during the
run; the ratio of each squall mode to the shell pipeline is the median of the
rounds' ratios (each squall run against the shell run just before it).
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


def _cluster_run(local, build, went_local_expected):
    """Runs the graph that build() makes (it returns the tasks to wait for
    and the tasks whose kept outputs to fetch) on three governors of one cpu
    each, timing submit to the last fetch. Returns the time, the largest
    growth of a governor's VmHWM and the fetched outputs; checks that as
    many streams as expected went over the same-host path."""
    args = [] if local else ["--stream-dir", ""]
    with squall.LocalCluster(governors=3, cpus=1, log_level="error",
                             governor_args=args) as cluster:
        pids = [g.pid for g in cluster.governors]
        before = {pid: _hwm(pid) for pid in pids}
        with cluster.client() as client, client.session() as s:
            local_before = client.info()["streams_local"]
            waits, fetches = build()
            for task in fetches:
                task.output.keep()
            t0 = time.perf_counter()
            s.submit()
            outs = [task.output.fetch(600) for task in fetches]
            dt = time.perf_counter() - t0
            s.wait(waits, 60)
            went_local = client.info()["streams_local"] - local_before
        # the mode is what it says: streams handed over as many as expected
        assert went_local == went_local_expected, went_local
        grown = max(_hwm(pid) - before[pid] for pid in pids)
    return dt, grown, outs


def squall_run(mib, stream, local=True):
    def build():
        gen = Execute(GEN % mib, stdout=True, stream=stream)
        swap = Execute("tr a b", stdin=gen.output, stdout=True, stream=stream)
        return [gen, swap], [Execute("wc -c", stdin=swap.output, stdout=True)]
    # both streams handed over, or neither
    dt, grown, outs = _cluster_run(local, build, 2 if stream and local else 0)
    assert int(outs[0]) == mib << 20, outs
    return dt, grown


def two_readers_run(mib, local=True):
    def build():
        gen = Execute(GEN % mib, stdout=True, stream=True)
        return [gen], [Execute("wc -c", stdin=gen.output, stdout=True) for _ in range(2)]
    dt, grown, outs = _cluster_run(local, build, 1 if local else 0)
    assert all(int(o) == mib << 20 for o in outs), outs
    return dt, grown


def shell_two_readers_run(mib):
    t0 = time.perf_counter()
    out = subprocess.run(["bash", "-c", (GEN % mib) + " | tee >(wc -c >&2) | wc -c"],
                         check=True, capture_output=True)
    dt = time.perf_counter() - t0
    assert int(out.stdout) == mib << 20 and int(out.stderr) == mib << 20, out
    return dt, 0


def shell_run(mib):
    t0 = time.perf_counter()
    out = subprocess.run(["sh", "-c", (GEN % mib) + " | tr a b | wc -c"], check=True,
                         capture_output=True).stdout
    dt = time.perf_counter() - t0
    assert int(out) == mib << 20, out
    return dt, 0


def main():
    argv = [a for a in sys.argv[1:] if not a.startswith("--")]
    mib = int(argv[0]) if argv else 1024
    rounds = int(argv[1]) if len(argv) > 1 else 3
    shell = "shell pipeline (one machine)"
    modes = [(shell, lambda: shell_run(mib)),
             ("squall streams, same host", lambda: squall_run(mib, True)),
             ("squall streams, as chunks", lambda: squall_run(mib, True, local=False))]
    if "--no-objects" not in sys.argv:
        modes.append(("squall finished objects", lambda: squall_run(mib, False)))
    runs = {name: [] for name, _ in modes}
    ratios = {name: [] for name, _ in modes}
    two = "shell, two readers (tee)"
    if "--two-readers" in sys.argv:
        modes += [(two, lambda: shell_two_readers_run(mib)),
                  ("squall 2 readers, same host", lambda: two_readers_run(mib)),
                  ("squall 2 readers, as chunks", lambda: two_readers_run(mib, False))]
        runs[two] = []
        for name, _ in modes[-3:]:
            runs.setdefault(name, [])
            ratios.setdefault(name, [])
    for _ in range(rounds):
        for name, run in modes:
            if name not in (shell, two):
                # the shell again just before: the same load for both
                base = two if "2 readers" in name else shell
                ratios[name].append(None)
                runs[base].append(shell_run(mib) if base == shell else shell_two_readers_run(mib))
                r = run()
                ratios[name][-1] = runs[base][-1][0] / r[0]
                runs[name].append(r)
    for name, _ in modes:
        dt = statistics.median(r[0] for r in runs[name])
        grown = max(r[1] for r in runs[name])
        line = "%-30s %8.2f s %8.0f MiB/s   governor peak memory +%.0f MiB" % (
            name, dt, mib / dt, grown / 2 ** 20)
        if ratios[name]:
            line += "   %.0f %% of the shell's throughput (rounds: %s)" % (
                100 * statistics.median(ratios[name]),
                ", ".join("%.0f" % (100 * x) for x in ratios[name]))
        print(line, flush=True)
    if "squall finished objects" in runs:
        print("streams (same host) vs finished objects: %.2fx faster" % (
            statistics.median(r[0] for r in runs["squall finished objects"])
            / statistics.median(r[0] for r in runs["squall streams, same host"])))


if __name__ == "__main__":
    main()
