"""Figures that must not lie (issue 26): what the broker shows and learns
about a task's run (the event log's task_started / run_us, INFO's running,
`squall replay`'s busy time) counts from when the task really started, as
its governor measured it, not from when it was written to an executor or
from when the broker happened to read a batch of reports."""
import json
import os
import tempfile

import squall
from squall import tasks
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
