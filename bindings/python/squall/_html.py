"""Jupyter's rich views (`_repr_html_`) of clients, clusters, sessions and
futures: what Dask's show in a notebook (state, governors, tasks, the
dashboard's link). Every value shown is escaped."""
from __future__ import annotations

from html import escape
from typing import Any, List, Optional

_STYLE = "text-align:left;padding:1px 8px"


def _rows(rows: List[tuple]) -> str:
    return "".join('<tr><th style="%s">%s</th><td style="%s">%s</td></tr>'
                   % (_STYLE, escape(str(k)), _STYLE, v) for k, v in rows)


def _table(title: str, rows: List[tuple], extra: str = "") -> str:
    return ('<div class="squall-repr"><strong>%s</strong><table>%s</table>%s</div>'
            % (escape(title), _rows(rows), extra))


def _link(url: Optional[str]) -> str:
    if not url:
        return "none (start the broker with --http)"
    return '<a href="%s" target="_blank">%s</a>' % (escape(url, quote=True),
                                                    escape(url.split("?")[0]))


def _governors(info: dict) -> str:
    govs = info.get("governors") or []
    if not govs:
        return ""
    head = "".join('<th style="%s">%s</th>' % (_STYLE, h)
                   for h in ("id", "name", "cpus", "running", "queued", "objects", "memory"))
    body = "".join(
        "<tr>%s</tr>" % "".join('<td style="%s">%s</td>' % (_STYLE, escape(str(g.get(k, ""))))
                                for k in ("id", "name", "cpus", "running", "queued", "objects",
                                          "memory"))
        for g in govs)
    return "<details><summary>Governors</summary><table><tr>%s</tr>%s</table></details>" % (
        head, body)


def _info_rows(info: Optional[dict], error: Optional[str]) -> List[tuple]:
    if info is None:
        return [("state", escape(error or "closed"))]
    govs = info.get("governors") or []
    tasks = info.get("tasks") or {}
    return [("state", "connected"),
            ("governors", "%d (%d cpus)" % (len(govs), sum(int(g.get("cpus", 0)) for g in govs))),
            ("tasks", escape(", ".join("%s %s" % (v, k) for k, v in tasks.items()) or "none")),
            ("sessions", escape(str(info.get("sessions", 0))))]


def _info(client: Any):
    """(info, error) of a client, without raising."""
    if client is None or not getattr(client, "_h", None) or not client._h.value \
            or not getattr(client, "_connected", True):
        return None, "closed" if client is not None else "no client"
    try:
        return client.info(), None
    except Exception as exc:       # a view must not raise in a notebook
        return None, "unreachable: %s" % exc


def client_html(client: Any) -> str:
    info, error = _info(client)
    rows = [("broker", escape(client.address))] + _info_rows(info, error) + \
        [("dashboard", _link(client.dashboard_link))]
    if client.asynchronous:
        rows.append(("mode", "asynchronous"))
    return _table("squall.Client", rows, _governors(info or {}))


def cluster_html(cluster: Any) -> str:
    client = None
    for c in cluster._clients:
        if getattr(c, "_h", None) and c._h.value:
            client = c
            break
    info, error = _info(client) if client is not None else (None, None)
    rows = [("broker", escape(str(cluster.address))),
            ("governors", "%d x %d cpus" % (len(cluster.governors), cluster.cpus)),
            ("dashboard", _link(cluster.dashboard_link))]
    if info is not None:
        rows += _info_rows(info, error)[2:]
    elif cluster.broker is None:
        rows.append(("state", "closed"))
    return _table("squall.LocalCluster", rows, _governors(info or {}))


def session_html(session: Any) -> str:
    rows = [("id", str(session.id)), ("state", "closed" if session.closed else "open"),
            ("tasks", str(session._n_tasks)),
            ("broker", escape(session.client.address)),
            ("dashboard", _link(session.client.dashboard_link))]
    return _table("squall.Session", rows)


def future_html(future: Any) -> str:
    state = future._state_name()
    rows = [("key", escape(future.key)), ("state", escape(state))]
    if state == "finished":
        rows.append(("type", escape(type(future._value).__name__)))
    elif state == "error":
        rows.append(("exception", escape(repr(future._exc))))
    rows.append(("dashboard", _link(future._session.client.dashboard_link)))
    return _table("squall.Future", rows)
