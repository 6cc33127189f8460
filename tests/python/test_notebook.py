"""Notebook use: the dashboard a LocalCluster starts by default, and the
rich views (_repr_html_) of clusters, clients, sessions and futures."""
import html
import json
import urllib.request

import pytest

import squall


def fetch(url, token=None):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, r.read()


def test_local_cluster_starts_the_dashboard(cluster):
    link = cluster.dashboard_link
    assert link and link.startswith("http://127.0.0.1:%d/?token=" % cluster.http_port)
    status, page = fetch(link)
    assert status == 200 and b"<html" in page.lower()
    # the token is the cluster's: the JSON API answers with it, and the
    # client of cluster.client() knows the link
    status, body = fetch("http://127.0.0.1:%d/api/state" % cluster.http_port,
                         cluster.http_token)
    assert status == 200 and json.loads(body)
    assert cluster.client().dashboard_link == link


def test_dashboard_can_be_left_out():
    from conftest import cluster_options
    with squall.LocalCluster(governors=1, dashboard=False, **cluster_options()) as c:
        assert c.http_port is None and c.dashboard_link is None
        assert "none" in c._repr_html_()
    assert c.dashboard_link is None


def test_rich_views(cluster):
    client = cluster.client()
    view = client._repr_html_()
    assert "squall.Client" in view and "connected" in view
    assert html.escape(cluster.address) in view
    assert "2 (2 cpus)" in view                     # the session fixture's 2 x 1 cpu
    assert 'href="%s"' % html.escape(cluster.dashboard_link, quote=True) in view
    assert "local-1" in view and "local-2" in view  # the governors' table
    view = cluster._repr_html_()
    assert "squall.LocalCluster" in view and "2 x 1 cpus" in view and "href=" in view

    f = client.submit(lambda: 3)
    f.result(60)
    view = f._repr_html_()
    assert "squall.Future" in view and "finished" in view and "int" in view

    def broken():
        raise ValueError("<b>bad</b>")
    g = client.submit(broken)
    with pytest.raises(ValueError):
        g.result(60)
    view = g._repr_html_()
    assert "error" in view and "&lt;b&gt;bad" in view and "<b>bad" not in view

    with client.session() as s:
        s.pickled(1)
        view = s._repr_html_()
        assert "squall.Session" in view and "open" in view
    assert "closed" in s._repr_html_()
    client.close()
    view = client._repr_html_()
    assert "closed" in view and "connected" not in view


def test_broker_without_dashboard_support_starts_without_one(tmp_path, monkeypatch, caplog):
    """A broker built with -DSQUALL_HTTP=OFF refuses --http: the default
    dashboard is then left out (with a warning), the cluster still starts;
    one asked for explicitly stays an error."""
    from conftest import cluster_options
    from squall.cluster import find_binary
    real_broker, real_governor = find_binary("squall-broker"), find_binary("squall-governor")
    (tmp_path / "broker").mkdir()
    (tmp_path / "governor").mkdir()
    fake = tmp_path / "broker" / "squall-broker"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = --http ] && '
                    '{ echo "--http: this broker was built without libmicrohttpd" >&2; exit 1; }; '
                    'done\nexec "%s" "$@"\n' % real_broker)
    fake.chmod(0o755)
    (tmp_path / "governor" / "squall-governor").symlink_to(real_governor)
    monkeypatch.setattr("squall.cluster.BIN_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("SQUALL_BUILD_DIR", str(tmp_path))
    with caplog.at_level("WARNING", logger="squall"):
        with squall.LocalCluster(governors=1, **cluster_options()) as c:
            assert c.dashboard_link is None
            assert c.client().submit(abs, -5).result(60) == 5
    assert any("without a dashboard" in r.getMessage() for r in caplog.records)
    with pytest.raises(squall.SquallError, match="exited"):
        squall.LocalCluster(governors=1, broker_args=["--http", "0"], **cluster_options())
