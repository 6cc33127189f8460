#!/usr/bin/env python3
"""What keys and the journal cost: the same workloads with CurveZMQ off and
on, and the journal off and on, in one run, rounds interleaved so that the
machine's drift hits every mode alike.

    python3 bench/keys_journal.py BUILD_DIR [--quick] [--results FILE]

- Task rates of built-in noop tasks (squall-bench-throughput: independent,
  chain, tree) on a broker and two governors of one cpu each, in four modes:
  plain, keys, journal, keys + journal. Median of the rounds, and each mode's
  ratio to plain (aims: keys >= 70 %, journal >= 80 %).
- Object copies of 64 MiB between two governors (squall-bench-transfer),
  keys off and on (aim: >= 1 GiB/s encrypted).
- The journal's bytes per task, and the time a broker restarted on a
  journal of 1 000 000 finished tasks takes to serve again (aim: < 3 s).

Needs only the build (and the Python package of bindings/python for keygen).
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class Cluster:
    """A broker and governors from the build tree, with or without keys and
    a journal."""

    def __init__(self, build, keys=None, journal=None, governors=(("g0", []), ("g1", [])),
                 cpus=1, listen="tcp://127.0.0.1:*"):
        self.build, self.keys, self.procs = build, keys, []
        args = [os.path.join(build, "broker", "squall-broker"), "--listen", listen,
                "--log-level", "warn"]
        if keys:
            args += ["--secret-key", keys["broker_key"], "--authorized-keys", keys["authorized"]]
        if journal:
            args += ["--journal", journal]
        self.started = time.monotonic()
        self.broker = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.procs.append(self.broker)
        line = self.broker.stdout.readline()
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"broker said {line!r}")
        self.listening = time.monotonic() - self.started
        self.endpoint = line.split()[1]
        self.governors = []
        for i, (name, extra) in enumerate(governors):
            g = [os.path.join(build, "governor", "squall-governor"), "--broker", self.endpoint,
                 "--cpus", str(cpus), "--name", name, "--log-level", "warn",
                 "--listen-host", "127.0.0.1", "--advertise", "127.0.0.1"] + extra
            if keys:
                # one key per governor: the broker refuses a key already connected
                g += ["--secret-key", keys["governor_keys"][i], "--broker-key", keys["broker_pub"]]
            p = subprocess.Popen(g, stdout=subprocess.PIPE, text=True)
            self.procs.append(p)
            self.governors.append(p)
        for p in self.governors:
            line = p.stdout.readline()
            if not line.startswith("READY"):
                raise RuntimeError(f"governor said {line!r}")

    def env(self):
        env = dict(os.environ)
        env.pop("SQUALL_SECRET_KEY", None)
        env.pop("SQUALL_BROKER_KEY", None)
        if self.keys:
            env.update(SQUALL_SECRET_KEY=self.keys["client_key"],
                       SQUALL_BROKER_KEY=self.keys["broker_pub"])
        return env

    def close(self, sig=signal.SIGTERM):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(sig if p is self.broker else signal.SIGINT)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def make_keys(build, dir):
    os.environ.setdefault("SQUALL_BUILD_DIR", build)
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    from squall.keys import local_keys
    return local_keys(dir, governors=4)


def run_tool(cluster, shape, n):
    tool = os.path.join(cluster.build, "bench", "squall-bench-throughput")
    out = subprocess.run([tool, cluster.endpoint, shape, str(n)], check=True,
                         capture_output=True, text=True, env=cluster.env(), timeout=600).stdout
    return float(re.search(r"tasks_per_second=(\d+)", out).group(1))


def rates(build, keys, tmp, sizes, rounds):
    modes = {"plain": (None, False), "keys": (keys, False), "journal": (None, True),
             "keys+journal": (keys, True)}
    figures = {(m, s): [] for m in modes for s in sizes}
    journal_bytes = {}
    for r in range(rounds):
        for mode, (k, journaled) in modes.items():
            for shape, n in sizes.items():
                journal = os.path.join(tmp, f"j-{mode}-{shape}-{r}") if journaled else None
                c = Cluster(build, keys=k, journal=journal)
                try:
                    figures[(mode, shape)].append(run_tool(c, shape, n))
                finally:
                    c.close()
                if journal:
                    journal_bytes[(mode, shape)] = os.path.getsize(journal) / n
                    os.unlink(journal)
            print(f"round {r + 1}/{rounds} {mode}: " + ", ".join(
                f"{s} {figures[(mode, s)][-1]:,.0f}/s" for s in sizes), flush=True)
    return {k: statistics.median(v) for k, v in figures.items()}, journal_bytes


def copies(build, keys, objects, mib, rounds):
    result = {}
    for label, k in (("plain", None), ("keys", keys)):
        c = Cluster(build, keys=k, cpus=2,
                    governors=(("A", ["--resource", "src=1024"]), ("B", ["--resource", "dst=1024"])))
        try:
            tool = os.path.join(build, "bench", "squall-bench-transfer")
            out = subprocess.run([tool, c.endpoint, str(objects), str(mib), str(rounds)],
                                 check=True, capture_output=True, text=True, env=c.env(),
                                 timeout=900).stdout
        finally:
            c.close()
        fields = dict(kv.split("=") for kv in out.strip().splitlines()[-1].split()[1:])
        result[label] = {k2: float(v) for k2, v in fields.items()}
        print(f"copies {label}: " + out.strip().splitlines()[-2 if rounds > 1 else -3], flush=True)
    return result


def restart(build, keys, tmp, n):
    """A journal of n finished tasks in an open session; the broker is
    SIGKILLed and started again on it, at the same endpoint."""
    journal = os.path.join(tmp, "j-restart")
    c = Cluster(build, keys=keys, journal=journal)
    tool = os.path.join(build, "bench", "squall-bench-throughput")
    env = c.env()
    env["SQUALL_BENCH_HOLD"] = "1"
    holder = subprocess.Popen([tool, c.endpoint, "independent", str(n)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    line = holder.stdout.readline()
    rate = float(re.search(r"tasks_per_second=(\d+)", line).group(1))
    size = os.path.getsize(journal)
    c.broker.send_signal(signal.SIGKILL)
    c.broker.wait()
    holder.kill()
    holder.wait()
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import squall
    started = time.monotonic()
    again = subprocess.Popen([os.path.join(build, "broker", "squall-broker"), "--listen",
                              c.endpoint, "--log-level", "warn", "--journal", journal,
                              "--secret-key", keys["broker_key"],
                              "--authorized-keys", keys["authorized"]],
                             stdout=subprocess.PIPE, text=True)
    try:
        line = again.stdout.readline()
        if not line.startswith("LISTENING"):
            raise RuntimeError(f"restarted broker said {line!r}")
        client = squall.Client(c.endpoint, secret_key=keys["client_key"],
                               broker_key=keys["broker_pub"])
        info = client.info()
        serving = time.monotonic() - started
        deadline = time.monotonic() + 60
        while info.get("recovering") and time.monotonic() < deadline:
            info = client.info()
        recovered = time.monotonic() - started
        sessions = info.get("sessions")
        client.close()
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(30)
        c.close()
    return dict(tasks=n, rate=rate, journal=size, serving=serving, recovered=recovered,
                sessions=sessions)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--quick", action="store_true", help="small sizes, one round")
    ap.add_argument("--results", help="append a summary to this file (bench/RESULTS.md)")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    tmp = tempfile.mkdtemp(prefix="squall-bench-kj-")
    try:
        keys = make_keys(build, os.path.join(tmp, "keys"))
        if args.quick:
            sizes, rounds = {"independent": 20000, "chain": 5000, "tree": 10000}, 1
            copy_args, million = (4, 64, 2), 100000
        else:
            sizes, rounds = {"independent": 200000, "chain": 50000, "tree": 100000}, 3
            copy_args, million = (16, 64, 4), 1000000
        medians, per_task = rates(build, keys, tmp, sizes, rounds)
        copy = copies(build, keys, *copy_args)
        rs = restart(build, keys, tmp, million)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    lines = ["| shape | plain tasks/s | keys | journal | keys + journal |", "|---|---|---|---|---|"]
    for shape in sizes:
        p = medians[("plain", shape)]
        cells = [f"{medians[(m, shape)]:,.0f} ({medians[(m, shape)] / p:.0%})"
                 for m in ("keys", "journal", "keys+journal")]
        lines.append(f"| {shape} ({sizes[shape]:,}) | {p:,.0f} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Journal bytes per task (records of the submit and the finish): " + ", ".join(
        f"{s} {per_task[('journal', s)]:.0f}" for s in sizes))
    pc, kc = copy["plain"], copy["keys"]
    lines.append("")
    lines.append(f"Copies of 64 MiB objects, governor to governor (warm, median): plain "
                 f"{pc['copy_warm']:.2f} GiB/s, keys {kc['copy_warm']:.2f} GiB/s "
                 f"({kc['copy_warm'] / pc['copy_warm']:.0%}); cold {pc['copy_cold']:.2f} / "
                 f"{kc['copy_cold']:.2f} GiB/s; client fetch warm {pc['fetch_warm']:.2f} / "
                 f"{kc['fetch_warm']:.2f} GiB/s; raw ZeroMQ (no CURVE) {pc['raw_warm']:.2f} GiB/s.")
    lines.append("")
    lines.append(f"Restart on a journal of {rs['tasks']:,} finished tasks in an open session "
                 f"({rs['journal'] / 2**20:.0f} MiB, {rs['journal'] / rs['tasks']:.0f} bytes/task; "
                 f"made at {rs['rate']:,.0f} tasks/s with keys and journal): serving (a client's "
                 f"INFO answered) {rs['serving']:.2f} s after start, both governors reattached "
                 f"{rs['recovered']:.2f} s after start, {rs['sessions']} session(s) back.")
    text = "\n".join(lines)
    print()
    print(text)
    aims = [
        ("keys >= 70 % of plain", min(medians[("keys", s)] / medians[("plain", s)] for s in sizes) >= 0.7),
        ("journal >= 80 % of plain", min(medians[("journal", s)] / medians[("plain", s)] for s in sizes) >= 0.8),
        ("encrypted copies >= 1 GiB/s", kc["copy_warm"] >= 1.0),
        ("restart serving < 3 s", rs["serving"] < 3.0),
    ]
    print()
    for name, ok in aims:
        print(f"aim {name}: {'met' if ok else 'NOT met'}")
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n## Keys and journal (bench/keys_journal.py)\n\n" + text + "\n\n" +
                    "\n".join(f"- aim {n}: {'met' if ok else 'not met'}" for n, ok in aims) + "\n")


if __name__ == "__main__":
    main()
