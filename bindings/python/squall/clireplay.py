"""`squall replay`: what ran where, from an event log (a table, or a page with
--html). Standard library only, loaded by path by cli.py, which sets `cli`
(what this file uses of cli.py) before the command runs."""
from __future__ import annotations

import collections
import html
import json
import os
import sys
import time

cli = None          # set by cli.py's _part()


def read_events(path):
    events = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError as exc:
                raise cli.CliError("%s:%d: not an event (%s)" % (path, n, exc))
            if not isinstance(event, dict) or "event" not in event or "time" not in event:
                raise cli.CliError("%s:%d: not an event (no 'event' or 'time')" % (path, n))
            events.append(event)
    return events


def summarize(events):
    """What ran where: per governor, per kind, spans, failures."""
    govs = collections.OrderedDict()
    def gov(e):
        key = e.get("governor", 0)
        if key not in govs:
            govs[key] = {"id": key, "name": e.get("governor_name", "#%s" % key), "finished": 0,
                         "failed": 0, "busy_s": 0.0, "first": None, "last": None, "left": None}
        g = govs[key]
        if e.get("governor_name"):
            g["name"] = e["governor_name"]
        return g
    started = {}
    spans = []          # (governor, start, end, task, kind, name, ok)
    kinds = collections.Counter()
    failures = []
    submits = tasks_submitted = 0
    bytes_moved = 0
    for e in events:
        ev, t = e["event"], e["time"]
        task = (e.get("session"), e.get("id"))
        if ev == "governor_joined":
            gov(e)["first"] = t
        elif ev == "governor_left":
            gov(e)["left"] = t
            #   A goodbye is a clean leave (a stop, a drain), not a failure.
            if "said goodbye" not in e.get("reason", ""):
                failures.append({"time": t, "what": "governor %s left" % e.get("governor_name"),
                                 "message": e.get("reason", "")})
        elif ev == "submit":
            submits += 1
            tasks_submitted += e.get("tasks", 0)
        elif ev == "task_assigned":
            started.setdefault(task, t)
        elif ev == "task_started":
            started[task] = t
        elif ev in ("task_finished", "task_failed"):
            g = gov(e)
            ok = ev == "task_finished"
            g["finished" if ok else "failed"] += 1
            begin = started.pop(task, t - e.get("run_us", 0) / 1e6)
            if e.get("run_us"):
                begin = t - e["run_us"] / 1e6
            g["busy_s"] += max(0.0, t - begin)
            kinds[e.get("kind", "?")] += 1
            spans.append((e.get("governor", 0), begin, t, "%s:%s" % task, e.get("kind", ""),
                          e.get("name", ""), ok))
            if not ok:
                failures.append({"time": t, "what": "task %s:%s %s on %s" % (
                    task[0], task[1], e.get("name", ""), e.get("governor_name", "?")),
                    "message": e.get("message", "")})
        elif ev == "object_located":
            bytes_moved += e.get("size", 0)
    first = events[0]["time"] if events else 0
    last = events[-1]["time"] if events else 0
    return {"first": first, "last": last, "duration_s": last - first, "events": len(events),
            "submits": submits, "tasks_submitted": tasks_submitted,
            "finished": sum(g["finished"] for g in govs.values()),
            "failed": sum(g["failed"] for g in govs.values()),
            "governors": list(govs.values()), "kinds": dict(kinds), "failures": failures,
            "bytes_moved": bytes_moved,
            "spans": spans}


def _stamp(t):
    return time.strftime("%H:%M:%S", time.localtime(t)) + ".%03d" % int((t % 1) * 1000)


def replay_html(summary, source):
    s = summary
    e = html.escape
    lanes = [g["id"] for g in s["governors"]]
    names = {g["id"]: g["name"] for g in s["governors"]}
    width, lane_h, left = 1100, 22, 140
    span = max(s["duration_s"], 1e-6)
    bars = []
    for gid, begin, end, task, kind, name, ok in s["spans"][:20000]:
        y = 24 + lanes.index(gid) * lane_h if gid in lanes else 24
        x = left + (begin - s["first"]) / span * (width - left - 10)
        w = max(1.0, (end - begin) / span * (width - left - 10))
        bars.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>'
                    % (x, y + 3, w, lane_h - 6, "#2a9d5b" if ok else "#d64545",
                       e("%s %s %s: %.3f s" % (task, kind, name, end - begin))))
    labels = ['<text x="4" y="%d" font-size="12">%s</text>' % (24 + i * lane_h + 15, e(names[g]))
              for i, g in enumerate(lanes)]
    height = 34 + max(1, len(lanes)) * lane_h
    axis = ['<text x="%d" y="14" font-size="11" fill="#6b7385">%s</text>'
            % (left + k * (width - left - 10) // 4, "+%.2f s" % (span * k / 4)) for k in range(5)]
    gov_rows = "".join("<tr class='gov-row'><td>%s</td><td>%s</td><td>%d</td><td>%d</td>"
                       "<td>%.3f s</td></tr>" % (g["id"], e(g["name"]), g["finished"], g["failed"],
                                                  g["busy_s"]) for g in s["governors"])
    fail_rows = "".join("<tr><td>%s</td><td>%s</td><td>%s</td></tr>"
                        % (_stamp(f["time"]), e(f["what"]), e(f["message"])) for f in s["failures"][:200])
    return """<!DOCTYPE html><html><head><meta charset="utf-8"><title>squall replay: %s</title>
<style>body{font:14px system-ui,sans-serif;margin:20px;color:#1d2330}table{border-collapse:collapse}
td,th{padding:3px 10px;border-bottom:1px solid #e1e4ea;text-align:left}h2{font-size:15px}</style></head>
<body><h1>squall replay</h1><p>%s: %d events, %s to %s (%.3f s); %d submit(s) of %d task(s);
%d finished, %d failed; %s moved between governors.</p>
<h2>Timeline (green finished, red failed)</h2>
<svg width="%d" height="%d" style="background:#f6f7f9">%s%s%s</svg>
<h2>Tasks per governor</h2><table><tr><th>id</th><th>governor</th><th>finished</th><th>failed</th><th>busy</th></tr>%s</table>
<h2>Failures</h2><table><tr><th>time</th><th>what</th><th>message</th></tr>%s</table>
</body></html>
""" % (e(source), e(source), s["events"], _stamp(s["first"]), _stamp(s["last"]), s["duration_s"],
       s["submits"], s["tasks_submitted"], s["finished"], s["failed"], cli._bytes(s["bytes_moved"]),
       width, height, "".join(axis), "".join(labels), "".join(bars), gov_rows,
       fail_rows or "<tr><td colspan=3>none</td></tr>")


def cmd_replay(args):
    if not os.path.isfile(args.file):
        raise cli.CliError("no such file: %s" % args.file, cli.EXIT_USAGE)
    s = summarize(read_events(args.file))
    if args.json:
        out = dict(s)
        out.pop("spans")
        json.dump(out, sys.stdout, indent=2)
        print()
    else:
        print("%s: %d events from %s to %s (%.3f s)" % (args.file, s["events"], _stamp(s["first"]),
                                                      _stamp(s["last"]), s["duration_s"]))
        print("%d submit(s) of %d task(s); %d finished, %d failed; %s moved"
              % (s["submits"], s["tasks_submitted"], s["finished"], s["failed"],
                 cli._bytes(s["bytes_moved"])))
        if s["governors"]:
            print()
            print(cli._table([[g["id"], g["name"], g["finished"], g["failed"],
                               "%.3f s" % g["busy_s"],
                               "left at %s" % _stamp(g["left"]) if g["left"] else ""]
                              for g in s["governors"]],
                             ["id", "governor", "finished", "failed", "busy", ""]))
        if s["kinds"]:
            print()
            print("by kind: " + ", ".join("%s %d" % kv for kv in sorted(s["kinds"].items())))
        if s["failures"]:
            print()
            print("failures:")
            for f in s["failures"][:50]:
                print("  %s  %s: %s" % (_stamp(f["time"]), f["what"], f["message"]))
    if args.html:
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(replay_html(s, args.file))
        print("squall: wrote %s" % args.html, file=sys.stderr)
    return cli.EXIT_OK
