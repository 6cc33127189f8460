"""Figures that must not lie (issue 26): what the broker shows and learns
about a task's run (the event log's task_started / run_us, INFO's running,
`squall replay`'s busy time) counts from when the task really started, as
its governor measured it, not from when it was written to an executor or
from when the broker happened to read a batch of reports."""
import json
import os
import tempfile
import time

import squall
from squall import tasks
from squall.cli import read_events, summarize
from conftest import TIMEOUT, cluster_options, until


def events(path, kind=None):
    """The event log's events (of one kind), in order."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        out = [json.loads(line) for line in f if line.strip()]
    return [e for e in out if kind is None or e["event"] == kind]


def logged_cluster(**options):
    path = os.path.join(tempfile.mkdtemp(prefix="squall-figures-"), "events.jsonl")
    args = ["--event-log", path] + list(options.pop("broker_args", ()))
    return squall.LocalCluster(broker_args=args, **options, **cluster_options()), path


def test_fast_execute_tasks_have_the_run_time_their_governor_measured():
    """A program that exits at once is STARTED and FINISHED in one UPDATE
    batch, which the broker stamps with one time: its run time is the
    governor's measure, never 0 (a process cannot start and exit in 0 us)."""
    n = 20
    cluster, path = logged_cluster(governors=1, cpus=2)
    with cluster:
        client = cluster.client()
        with client.session() as s:
            runs = [tasks.Execute("true", stdout=True) for _ in range(n)]
            for t in runs:
                t.output.keep()
            s.submit()
            for t in runs:
                t.output.fetch(TIMEOUT)
        finished = until(lambda: len(events(path, "task_finished")) >= n and
                         events(path, "task_finished"), "the finished events")
    assert [e["kind"] for e in finished] == ["execute"] * n
    assert all(e["run_us"] > 0 for e in finished), [e["run_us"] for e in finished]


def double(x):
    return 2 * x


def nap(seconds, value):
    import time
    time.sleep(seconds)
    return value


def test_piped_python_tasks_start_when_their_executor_starts_them():
    """On one cpu, small Python tasks are piped to the busy executor behind
    the one it runs: none is STARTED (nor counted running) before the one
    before it ended, so task_started / task_finished alternate in the event
    log, the governor never reports more running than its cpu, and the run
    times add up to no more than the time the governor was there (replay's
    busy time)."""
    naps = 4
    cluster, path = logged_cluster(governors=1, cpus=1, broker_args=["--queue-ms", "60000"])
    with cluster:
        client = cluster.client()
        #   Known durations let the broker queue all the naps on the governor.
        client.gather(client.map(double, range(60)))
        futures = [client.submit(nap, 0.3, i) for i in range(naps)]
        running = piped = 0
        while not all(f.done() for f in futures):
            (g,) = client.governors()
            running, piped = max(running, g["running"]), max(piped, g["piped"])
            time.sleep(0.02)
        assert [f.result(timeout=TIMEOUT) for f in futures] == list(range(naps))
        log = until(lambda: len(events(path, "task_finished")) >= 60 + naps and events(path),
                    "the finished events")
    assert running <= 1, running
    current = None
    for e in log:
        task = (e.get("session"), e.get("id"))
        if e["event"] == "task_started":
            assert current is None, "%s started while %s runs on one cpu" % (task, current)
            current = task
        elif e["event"] == "task_finished":
            assert current in (None, task), "%s finished while %s runs" % (task, current)
            current = None
    naps_run = [e["run_us"] for e in log if e["event"] == "task_finished" and e.get("name") == "nap"]
    #   Each nap counts from its own start: about 0.3 s, never the 0.6, 0.9
    #   and 1.2 s of naps timed from when they were written. A start is
    #   never taken before the governor read the reply of the task before
    #   (no overlap on one cpu), so a reply read late (a loaded machine, the
    #   sanitizer build) may take a little off.
    assert len(naps_run) == naps and all(200_000 <= us < 600_000 for us in naps_run), naps_run
    summary = summarize(read_events(path))
    (g,) = summary["governors"]
    assert g["busy_s"] <= summary["last"] - g["first"], (g, summary["last"])
