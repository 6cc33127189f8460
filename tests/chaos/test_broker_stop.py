#!/usr/bin/env python3
"""A broker's stop is bounded whatever its peers do: the broker (SIGTERM)
and its governors (SIGINT) are stopped at the same moment, over and over, so that governors
leave while the broker tears its sockets down. The broker must exit 0 each
time, on its own: its watchdog (exit 1 and "stopping took too long" ten
seconds after the signal) firing is a failure. This caught a deadlock in
the broker's shutdown (the socket monitor closed before it was stopped)
that showed up about once in 30 stops.

    test_broker_stop.py [CYCLES]          (SQUALL_BUILD_DIR: the build)
"""
import os
import signal
import subprocess
import sys


def main():
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    build = os.environ["SQUALL_BUILD_DIR"]
    broker_bin = os.path.join(build, "broker", "squall-broker")
    governor_bin = os.path.join(build, "governor", "squall-governor")
    env = dict(os.environ)
    strict = env.pop("SQUALL_TEST_CHILD_ASAN_OPTIONS", None)
    if strict:
        env["ASAN_OPTIONS"] = strict
    env.pop("LD_PRELOAD", None)
    for cycle in range(cycles):
        broker = subprocess.Popen([broker_bin, "--listen", "tcp://127.0.0.1:*", "--log-level",
                                   "error"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env)
        line = broker.stdout.readline()
        assert line.startswith("LISTENING "), line
        endpoint = line.split()[1]
        governors = [subprocess.Popen([governor_bin, "--broker", endpoint, "--cpus", "1",
                                       "--log-level", "error", "--name", "g%d" % i],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True, env=env)
                     for i in range(3)]
        for g in governors:
            assert g.stdout.readline().startswith("READY"), "governor joined"
        broker.send_signal(signal.SIGTERM)
        for g in governors:
            g.send_signal(signal.SIGINT)       # they leave without draining
        try:
            _, err = broker.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            broker.kill()
            raise SystemExit("cycle %d: the broker did not exit at all" % cycle)
        for g in governors:
            g.wait(60)
        if broker.returncode != 0 or "took too long" in err:
            raise SystemExit("cycle %d: the broker's stop was not clean (exit %d): %s"
                             % (cycle, broker.returncode, err.strip()[-500:]))
    print("test_broker_stop: %d stops, each clean" % cycles)


if __name__ == "__main__":
    main()
