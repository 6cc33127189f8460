#!/usr/bin/env python3
"""Fair share between tenants: one tenant's no-op latency while another
floods the cluster with high-priority sleeping tasks (bench/tenants.c).

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 bench/tenants.py \
        [--build build] [--broker PATH] [--flood 300] [--sleep 0.2] [--probes 10]

Makes keys for two tenants ("flood" and "probe") in a private temporary
directory, starts a keyed broker (--broker: another squall-broker binary,
e.g. one built before fair share, for comparison) and 2 governors of 1 cpu
on loopback, and runs squall-bench-tenants against them.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import squall  # noqa: E402
from squall.keys import local_keys  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--broker", default=None)
    ap.add_argument("--flood", type=int, default=300)
    ap.add_argument("--sleep", type=float, default=0.2)
    ap.add_argument("--probes", type=int, default=10)
    ap.add_argument("--governors", type=int, default=2)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    broker_bin = args.broker or os.path.join(build, "broker", "squall-broker")
    governor_bin = os.path.join(build, "governor", "squall-governor")
    keydir = tempfile.mkdtemp(prefix="squall-bench-tenants-")
    procs = []
    try:
        keys = local_keys(keydir)
        flood = squall.keygen("flood", keys["authorized"], "client", "flood")
        probe = squall.keygen("probe", keys["authorized"], "client", "probe")
        broker_pub = os.path.join(keydir, "broker.pub")
        broker = subprocess.Popen(
            [broker_bin, "--listen", "tcp://127.0.0.1:*", "--log-level", "warn",
             "--secret-key", keys["broker_key"], "--authorized-keys", keys["authorized"]],
            stdout=subprocess.PIPE, text=True)
        procs.append(broker)
        line = broker.stdout.readline()
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"broker said {line!r}")
        endpoint = line.split()[1]
        governors = []
        for i in range(args.governors):
            g = subprocess.Popen(
                [governor_bin, "--broker", endpoint, "--cpus", "1", "--name", f"g{i}",
                 "--listen-host", "127.0.0.1", "--advertise", "127.0.0.1", "--log-level", "warn",
                 "--secret-key", keys["governor_key"], "--broker-key", broker_pub],
                stdout=subprocess.PIPE, text=True)
            procs.append(g)
            governors.append(g)
        for g in governors:
            line = g.stdout.readline()
            if not line.startswith("READY "):
                raise RuntimeError(f"governor said {line!r}")
        tool = os.path.join(build, "bench", "squall-bench-tenants")
        out = subprocess.run([tool, endpoint, broker_pub, flood, probe, str(args.flood),
                              str(args.sleep), str(args.probes)],
                             check=True, capture_output=True, text=True).stdout
        print("%d governors x 1 cpu, broker %s:" % (args.governors, broker_bin))
        print(out.strip())
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(keydir, ignore_errors=True)


if __name__ == "__main__":
    main()
