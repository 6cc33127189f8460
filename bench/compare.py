#!/usr/bin/env python3
"""Task-throughput benchmark of squall against Dask distributed and Ray.

Runs the same graph shapes on a local squall cluster (a broker and two
governors of one cpu each) and, when they are installed, on Dask distributed
(LocalCluster of 2 single-thread worker processes) and Ray (num_cpus=2),
in the same run, and prints every rate and the ratios:

  independent  N no-op tasks
  chain        N no-op tasks, each taking the previous one's output
  tree         a binary reduction over N leaves (2N-1 tasks)
  1M           1 000 000 independent tasks on squall: end-to-end time, the
               broker's peak memory per task and its CPU time per task
  memtree      a reduction over 64 leaves of 8 MiB each: the workers' peak
               memory (the memory-ordering case)

The peers run smaller graphs where the full size would take them minutes
(their rate is what is compared; the sizes are printed). Usage:

  python3 bench/compare.py [--build build] [--results bench/RESULTS.md] [--quick]
"""
import argparse
import datetime
import os
import platform
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def proc_status(pid, field):
    """A kB field of /proc/PID/status, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class SquallCluster:
    """A broker and governors started from the build tree."""

    def __init__(self, build, governors=2, cpus=1):
        self.procs = []
        broker = os.path.join(build, "broker", "squall-broker")
        governor = os.path.join(build, "governor", "squall-governor")
        self.broker = subprocess.Popen(
            [broker, "--listen", "tcp://127.0.0.1:*", "--log-level", "warn"],
            stdout=subprocess.PIPE, text=True)
        self.procs.append(self.broker)
        line = self.broker.stdout.readline()
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"broker said {line!r}")
        self.endpoint = line.split()[1]
        self.governors = []
        for i in range(governors):
            g = subprocess.Popen(
                [governor, "--broker", self.endpoint, "--cpus", str(cpus), "--name", f"g{i}",
                 "--listen-host", "127.0.0.1", "--advertise", "127.0.0.1", "--log-level", "warn"],
                stdout=subprocess.PIPE, text=True)
            self.procs.append(g)
            self.governors.append(g)
        for g in self.governors:
            line = g.stdout.readline()
            if not line.startswith("READY "):
                raise RuntimeError(f"governor said {line!r}")

    def close(self):
        for p in reversed(self.procs):
            p.send_signal(signal.SIGINT)    # governors leave without draining
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def squall_run(build, endpoint, shape, n):
    tool = os.path.join(build, "bench", "squall-bench-throughput")
    out = subprocess.run([tool, endpoint, shape, str(n)], check=True,
                         capture_output=True, text=True).stdout
    fields = dict(kv.split("=") for kv in out.split()[1:])
    return int(fields["tasks"]), float(fields["seconds"])


# ---------------------------------------------------------------------------
#  Dask

def noop(*args):
    return args[0] if args else None


def first(a, b):
    return a


def make_leaf():
    return bytes(8 << 20)


def dask_graphs(n_ind, n_chain, n_leaves):
    ind = {("i", k): (noop,) for k in range(n_ind)}
    chain = {("c", 0): (noop,)}
    for k in range(1, n_chain):
        chain[("c", k)] = (noop, ("c", k - 1))
    tree = {("t", 0, k): (noop,) for k in range(n_leaves)}
    width, level = n_leaves, 0
    while width > 1:
        for k in range(width // 2):
            tree[("t", level + 1, k)] = (first, ("t", level, 2 * k), ("t", level, 2 * k + 1))
        width //= 2
        level += 1
    return (ind, list(ind)), (chain, [("c", n_chain - 1)]), (tree, [("t", level, 0)])


def dask_memtree(client, leaves=64):
    dsk = {("m", 0, k): (make_leaf,) for k in range(leaves)}
    width, level = leaves, 0
    while width > 1:
        for k in range(width // 2):
            dsk[("m", level + 1, k)] = (first, ("m", level, 2 * k), ("m", level, 2 * k + 1))
        width //= 2
        level += 1
    client.get(dsk, [("m", level, 0)])
    peaks = client.run(lambda: proc_status(os.getpid(), "VmHWM"))
    return max(peaks.values())


def run_dask(sizes, quick):
    try:
        import dask  # noqa: F401
        from distributed import Client, LocalCluster
    except ImportError:
        return None
    results = {}
    graphs = dask_graphs(*sizes)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for name, (dsk, keys) in zip(("independent", "chain", "tree"), graphs):
            start = time.perf_counter()
            client.get(dsk, keys)
            results[name] = (len(dsk), time.perf_counter() - start)
    if not quick:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            results["memtree_peak"] = dask_memtree(client)
    return results


def run_ray(sizes):
    try:
        import ray
    except ImportError:
        return None
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        @ray.remote
        def rnoop(*args):
            return args[0] if args else None

        n_ind, n_chain, n_leaves = sizes
        results = {}
        start = time.perf_counter()
        ray.get([rnoop.remote() for _ in range(n_ind)])
        results["independent"] = (n_ind, time.perf_counter() - start)
        start = time.perf_counter()
        ref = rnoop.remote()
        for _ in range(n_chain - 1):
            ref = rnoop.remote(ref)
        ray.get(ref)
        results["chain"] = (n_chain, time.perf_counter() - start)
        start = time.perf_counter()
        level = [rnoop.remote() for _ in range(n_leaves)]
        while len(level) > 1:
            level = [rnoop.remote(level[k], level[k + 1]) for k in range(0, len(level), 2)]
        ray.get(level[0])
        results["tree"] = (2 * n_leaves - 1, time.perf_counter() - start)
        return results
    finally:
        ray.shutdown()


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = re.search(r"model name\s*:\s*(.*)", f.read()).group(1)
    except (OSError, AttributeError):
        pass
    mem = proc_status("self", "VmRSS") and os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return (f"{os.cpu_count()} cpus ({model}), {mem / 2**30:.0f} GiB, "
            f"Linux {platform.release()}, Python {platform.python_version()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--results", help="write a Markdown summary here")
    parser.add_argument("--quick", action="store_true", help="smaller graphs, no 1M run")
    args = parser.parse_args()
    quick = args.quick
    n_ind, n_chain, n_leaves = (20000, 2000, 8192) if quick else (100000, 10000, 65536)
    peer_sizes = (5000, 500, 2048) if quick else (20000, 2000, 16384)

    rows = []
    cluster = SquallCluster(args.build)
    try:
        for shape, n in (("independent", n_ind), ("chain", n_chain), ("tree", n_leaves)):
            tasks, seconds = squall_run(args.build, cluster.endpoint, shape, n)
            rows.append([shape, tasks, tasks / seconds])
            print(f"squall {shape}: {tasks} tasks in {seconds:.3f} s = {tasks / seconds:,.0f} tasks/s",
                  flush=True)
    finally:
        cluster.close()

    million = None
    if not quick:
        cluster = SquallCluster(args.build)
        try:
            pid = cluster.broker.pid
            rss0, cpu0 = proc_status(pid, "VmHWM"), proc_cpu_seconds(pid)
            tasks, seconds = squall_run(args.build, cluster.endpoint, "independent", 1000000)
            rss1, cpu1 = proc_status(pid, "VmHWM"), proc_cpu_seconds(pid)
            million = (tasks, seconds, (rss1 - rss0) / tasks, (cpu1 - cpu0) / tasks * 1e6)
            print(f"squall 1M: {seconds:.2f} s, broker peak {million[2]:.0f} B/task, "
                  f"broker CPU {million[3]:.2f} us/task", flush=True)
        finally:
            cluster.close()

    memtree = None
    cluster = SquallCluster(args.build)
    try:
        squall_run(args.build, cluster.endpoint, "memtree", 64)
        memtree = max(proc_status(g.pid, "VmHWM") for g in cluster.governors)
        print(f"squall memtree: governors' peak {memtree / 2**20:.0f} MiB", flush=True)
    finally:
        cluster.close()

    placement = subprocess.run([os.path.join(args.build, "bench", "squall-bench-placement")],
                               check=True, capture_output=True, text=True).stdout.strip()
    print(placement, flush=True)

    print("running Dask distributed ...", flush=True)
    dask_results = run_dask(peer_sizes, quick)
    print("running Ray ...", flush=True)
    ray_results = run_ray(peer_sizes)

    lines = ["| graph | squall tasks/s | Dask tasks/s | squall / Dask | Ray tasks/s | squall / Ray |",
             "|---|---|---|---|---|---|"]
    for shape, tasks, rate in rows:
        cells = [f"{shape} ({tasks:,} tasks)", f"{rate:,.0f}"]
        for peer in (dask_results, ray_results):
            if peer and shape in peer:
                n, s = peer[shape]
                cells += [f"{n / s:,.0f} ({n:,} tasks)", f"{rate / (n / s):.0f}x"]
            else:
                cells += ["not installed", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    if million:
        lines.append("")
        lines.append(f"1 000 000 independent tasks on squall: {million[1]:.2f} s end to end "
                     f"({million[0] / million[1]:,.0f} tasks/s), broker peak memory "
                     f"{million[2]:.0f} bytes/task, broker CPU {million[3]:.2f} us/task.")
    if memtree:
        lines.append("")
        text = f"Memory ordering (64 leaves x 8 MiB, pairwise reduction): squall governors' peak " \
               f"{memtree / 2**20:.0f} MiB"
        if dask_results and "memtree_peak" in dask_results:
            dpeak = dask_results["memtree_peak"]
            text += f", Dask workers' peak {dpeak / 2**20:.0f} MiB (ratio {memtree / dpeak:.2f})"
        lines.append(text + ".")
    lines += ["", "Broker placement cost against cluster size (bench/placement.c, in-process: "
              "200 000 tasks placed and finished on simulated governors):", "", "```",
              placement, "```"]
    table = "\n".join(lines)
    print()
    print(table)
    if args.results:
        with open(args.results, "w") as f:
            f.write("# Benchmark results\n\n")
            f.write(f"Command: `python3 bench/compare.py --results bench/RESULTS.md`"
                    f"{' --quick' if quick else ''}\n\n")
            f.write(f"Run on {datetime.date.today()}: {machine()}.\n")
            f.write("squall: a broker and 2 governors of 1 cpu each, built-in noop tasks from the C "
                    "client. Dask distributed: LocalCluster(n_workers=2, threads_per_worker=1). "
                    "Ray: ray.init(num_cpus=2). Peers run smaller graphs of the same shapes (sizes "
                    "in the table); rates are compared.\n\n")
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
