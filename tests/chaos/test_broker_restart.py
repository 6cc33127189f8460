"""A broker restart loses nothing: the broker is SIGKILLed at random moments
(during the submit, while tasks run, while copies are under way, during a
fetch) and started again on the same journal and endpoint.

Each trial runs one graph on 3 governors of 1 cpu, with keys on: Python
producers (sleeps, then 200 KB each, so they stay on their governor), Python
mappers of them, a built-in concat of everything (copies between governors),
an execute task (sha256sum of the concat) and a Python task joining the two.
The client never sees the restart except as time: every result is checked
against the same computation done here, and the governors' own counts of
tasks run (INFO tasks_run, which lives through broker restarts) must add up
to exactly the tasks of the graph: nothing a live governor held or ran was
run again.

    python3 test_broker_restart.py [TRIALS] [SEED]
"""
import hashlib
import os
import random
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import squall  # noqa: E402
from squall import tasks  # noqa: E402
from conftest import cluster_options  # noqa: E402

N = 4                   # producers and mappers
SIZE = 200_000


@squall.remote
def produce(i, delay):
    import time
    time.sleep(delay)
    return bytes([i]) * SIZE


@squall.remote
def mapped(data):
    import hashlib
    return hashlib.sha256(data).digest() * 8000      # 256 KB


@squall.remote
def join(digest, whole):
    import hashlib
    return digest.strip() + b" " + hashlib.sha256(whole).hexdigest().encode()


def unpickle_all(data):
    """The values of a concatenation of pickles (what a concat of Python
    tasks' outputs holds)."""
    import io
    import pickle
    stream, values = io.BytesIO(data), []
    while stream.tell() < len(data):
        values.append(pickle.load(stream))
    return values


def check(cond, message):
    if not cond:
        print("FAIL: " + message, flush=True)
        sys.exit(1)
    print("  ok: " + message, flush=True)


def tasks_run(client):
    info = client.info()
    return sum(g.get("tasks_run", 0) for g in info["governors"]), len(info["governors"])


def trial(cluster, client, rng, n):
    moment = ("submit", "running", "copies", "fetch")[n % 4]
    before, _ = tasks_run(client)
    killed = threading.Event()
    result = {}

    def run():
        try:
            with client.session() as s:
                delay = 0.4
                prods = [produce(i, delay) for i in range(N)]
                maps = [mapped(p) for p in prods]
                whole = tasks.Concat(maps)
                digest = squall.Program("sha256sum | cut -c1-64", stdin=True, stdout=True)(whole)
                final = join(digest, whole)
                final.output.keep()
                whole.output.keep()
                s.submit()
                result["submitted"] = time.monotonic()
                if moment == "fetch":
                    killed.wait(30)
                result["whole"] = whole.output.fetch(timeout=120)
                result["final"] = final.output.fetch(timeout=120)
                result["tasks"] = 2 * N + 3      # produce, mapped, concat, execute, join
        except BaseException as exc:        # noqa: B902 (reported by the main thread)
            result["error"] = exc

    worker = threading.Thread(target=run)
    start = time.monotonic()
    worker.start()
    # The kill: during the submit (right away), while the producers run,
    # while the mappers' outputs are copied to the concat, or during a fetch.
    wait = {"submit": rng.uniform(0.0, 0.05), "running": rng.uniform(0.1, 0.35),
            "copies": rng.uniform(0.45, 0.7), "fetch": 0}[moment]
    if moment == "fetch":
        while "submitted" not in result and worker.is_alive():
            time.sleep(0.01)
        wait = rng.uniform(0.5, 0.9)
    time.sleep(wait)
    t = time.monotonic() - start
    cluster.restart_broker()
    killed.set()
    worker.join(180)
    check(not worker.is_alive(), "trial %d: the client finished" % n)
    if "error" in result:
        raise result["error"]
    maps = [hashlib.sha256(bytes([i]) * SIZE).digest() * 8000 for i in range(N)]
    check(unpickle_all(result["whole"]) == maps,
          "trial %d (kill %s at %.2f s): the concat of %d governors' outputs is exact"
          % (n, moment, t, N))
    h = hashlib.sha256(result["whole"]).hexdigest().encode()
    check(result["final"] == h + b" " + h, "trial %d: the execute and Python results are exact" % n)
    # The governors report their counts every 2 s at most: wait for them.
    want = before + result["tasks"]
    deadline = time.monotonic() + 10
    ran, govs = tasks_run(client)
    while ran != want and time.monotonic() < deadline:
        time.sleep(0.1)
        ran, govs = tasks_run(client)
    check(govs == 3 and ran == want, "trial %d: %d tasks ran on the 3 governors for %d in the "
          "graph: none twice" % (n, ran - before, result["tasks"]))


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int(time.time())
    print("test_broker_restart: %d trials, seed %d" % (trials, seed), flush=True)
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="squall-restart-test-")
    try:
        journal = os.path.join(tmp, "journal")
        options = cluster_options()
        with squall.LocalCluster(governors=3, cpus=1, journal=journal,
                                 broker_args=["--heartbeat-ms", "200", "--reattach-wait", "10000"],
                                 governor_args=["--heartbeat-ms", "200"], **options) as cluster:
            client = cluster.client()
            for n in range(trials):
                trial(cluster, client, rng, n)
            client.close()
            # The journal holds what the sessions left; closed sessions are
            # gone from it after a compaction, which a restart does not need.
            check(os.path.getsize(journal) > 0, "the journal is on disk")
        check(all(code == 0 for code in cluster.exit_codes.values()),
              "broker and governors exited cleanly: %s" % cluster.exit_codes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_broker_restart: all passed", flush=True)


if __name__ == "__main__":
    main()
