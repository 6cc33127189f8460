"""Start-up and elasticity (issue 15): a task needing what no connected
governor offers waits for one that does (--resource-wait), visibly; the
wait is not spent while no governor is connected; a request above every
governor ever seen waits too (a cluster that grows with its work), and is
refused at submit only with --resource-wait 0; wait_for_governors; a client
waiting with no governor says so; --workdir is created."""
import io
import logging
import os
import time
from contextlib import redirect_stdout

import pytest

import squall
from squall import cli

from conftest import TIMEOUT, cluster_options


def inc(x):
    return x + 1


def info_until(client, predicate, seconds=TIMEOUT):
    """INFO, asked again until predicate(info) holds (or the deadline)."""
    deadline = time.monotonic() + seconds
    while True:
        info = client.info()
        if predicate(info) or time.monotonic() >= deadline:
            return info


def status_text(cluster):
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(["status", "--broker", cluster.address, "--secret-key",
                         cluster.secret_key, "--broker-key", cluster.broker_key])
    assert code == 0
    return out.getvalue()


def dashboard_state(cluster):
    import json
    import urllib.request
    request = urllib.request.Request("http://127.0.0.1:%d/api/state" % cluster.http_port,
                                     headers={"Authorization": "Bearer " + cluster.http_token})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as reply:
        return json.loads(reply.read())


def test_a_task_waits_for_a_governor_with_its_resource():
    with squall.LocalCluster(governors=0, broker_args=["--http", "0"],
                             **cluster_options()) as cluster:
        client = cluster.client()
        assert "no governor connected" in status_text(cluster)
        f = client.submit(inc, 1, resources={"a": 1})
        cluster.add_governor()                      # joins first, without `a`
        info = info_until(client, lambda i: i.get("resource_waits"))
        [wait] = info["resource_waits"]
        assert wait["task"] == f.task_id and wait["needs"] == "cpus=1, a=1"
        assert 0 < wait["left_ms"] <= 60000
        assert "1 task(s) waiting for a governor with cpus=1, a=1" in status_text(cluster)
        # the dashboard's data has them, and its page shows them
        state = dashboard_state(cluster)
        assert [w["needs"] for w in state["info"]["resource_waits"]] == ["cpus=1, a=1"]
        assert not f.done()
        cluster.add_governor(args=["--resource", "a=1"])
        assert f.result(TIMEOUT) == 2
        assert client.info()["resource_waits"] == []


def test_the_wait_is_not_spent_while_no_governor_is_connected():
    with squall.LocalCluster(governors=0, broker_args=["--resource-wait", "1"],
                             **cluster_options()) as cluster:
        client = cluster.client()
        f = client.submit(inc, 1, resources={"a": 1})
        with pytest.raises(squall.TimeoutError):
            f.result(timeout=1.5)                   # longer than its wait: not failed
        cluster.add_governor()                      # a governor without `a`: now it counts
        with pytest.raises(squall.TaskFailed) as info:
            f.result(TIMEOUT)
        assert "no live governor can run this task" in info.value.message
        assert "waited 1.0 s" in info.value.message


def test_a_request_above_every_governor_seen_waits_for_one_that_offers_it():
    # A cluster that grows with its work: governors are up, none ever
    # offered `gpu`, and the one that does joins only once such a task waits.
    with squall.LocalCluster(governors=1, broker_args=["--http", "0"],
                             **cluster_options()) as cluster:
        client = cluster.client()
        f = client.submit(inc, 1, resources={"gpu": 2})
        info = info_until(client, lambda i: i.get("resource_waits"))
        [wait] = info["resource_waits"]
        assert wait["task"] == f.task_id and wait["needs"] == "cpus=1, gpu=2"
        assert "1 task(s) waiting for a governor with cpus=1, gpu=2" in status_text(cluster)
        state = dashboard_state(cluster)
        assert [w["needs"] for w in state["info"]["resource_waits"]] == ["cpus=1, gpu=2"]
        assert not f.done()
        cluster.add_governor(args=["--resource", "gpu=2"])
        assert f.result(TIMEOUT) == 2
        assert client.info()["resource_waits"] == []


def test_without_a_wait_a_request_above_every_governor_seen_is_refused_at_once():
    with squall.LocalCluster(governors=1, broker_args=["--resource-wait", "0"],
                             **cluster_options()) as cluster:
        client = cluster.client()
        f = client.submit(inc, 1, resources={"never-offered": 1})
        with pytest.raises(squall.SquallError, match="no governor has ever offered"):
            f.result(TIMEOUT)
        assert client.info()["resource_waits"] == []


def test_wait_for_governors_and_the_no_governor_warning(caplog, monkeypatch):
    monkeypatch.setattr(squall._session_wait, "_NO_GOVERNOR_WARNING", 0.2)
    with squall.LocalCluster(governors=0, **cluster_options()) as cluster:
        client = cluster.client()
        with pytest.raises(squall.TimeoutError):
            client.wait_for_governors(1, timeout=0.2)
        f = client.submit(inc, 1)
        with caplog.at_level(logging.WARNING, logger="squall"):
            with pytest.raises(squall.TimeoutError):
                f.result(timeout=1.0)
        assert "no governor is connected" in caplog.text
        cluster.add_governor(wait=False)
        cluster.add_governor(wait=False)
        assert client.wait_for_governors(2, timeout=TIMEOUT) == 2
        assert f.result(TIMEOUT) == 2


def test_governor_workdir_is_created(tmp_path):
    workdir = tmp_path / "not" / "there"
    with squall.LocalCluster(governors=0, **cluster_options()) as cluster:
        cluster.add_governor(args=["--workdir", str(workdir)])
        client = cluster.client()
        assert client.submit(inc, 1).result(TIMEOUT) == 2
        assert workdir.is_dir()
