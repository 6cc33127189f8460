"""/metrics parses as Prometheus text format 0.0.4 (strictly: every sample
belongs to a declared family, names and labels are well formed, histograms
are cumulative and end in +Inf == _count) and reports what a pipeline did;
the JSON API answers with what the dashboard page needs."""
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploylib import PIPELINE, Cluster, check, fail, http_get, run, wait_until  # noqa: E402

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r"^(%s)(?:\{((?:%s)(?:,%s)*)?\})? (\S+)(?: (-?\d+))?$" % (NAME, LABEL, LABEL))
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_prometheus(text):
    """{family: {"type", "help", "samples": [(name, {labels}, value)]}}; fails on any error."""
    if not text.endswith("\n"):
        fail("exposition does not end with a newline")
    families = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line:
            fail("line %d: empty line" % n)
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                if not re.fullmatch(NAME, parts[2]):
                    fail("line %d: bad metric name %r" % (n, parts[2]))
                family = families.setdefault(parts[2], {"type": None, "help": None, "samples": []})
                if parts[1] == "TYPE":
                    if family["type"] or family["samples"] or len(parts) != 4 or parts[3] not in TYPES:
                        fail("line %d: bad or late TYPE: %r" % (n, line))
                    family["type"] = parts[3]
                else:
                    family["help"] = parts[3] if len(parts) == 4 else ""
            continue
        m = SAMPLE.match(line)
        if not m:
            fail("line %d: not a sample: %r" % (n, line))
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        try:
            number = float(value)
        except ValueError:
            fail("line %d: bad value %r" % (n, value))
        family_name = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[:-len(suffix)] in families \
               and families[name[:-len(suffix)]]["type"] == "histogram":
                family_name = name[:-len(suffix)]
        if family_name not in families or not families[family_name]["type"]:
            fail("line %d: sample %s of an undeclared family" % (n, name))
        parsed = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels))
        families[family_name]["samples"].append((name, parsed, number))
    for name, family in families.items():
        if family["type"] == "histogram":
            buckets = [(s[1]["le"], s[2]) for s in family["samples"] if s[0] == name + "_bucket"]
            counts = [s[2] for s in family["samples"] if s[0] == name + "_count"]
            if not buckets or buckets[-1][0] != "+Inf" or not counts or buckets[-1][1] != counts[0]:
                fail("histogram %s: no +Inf bucket equal to _count" % name)
            bounds = [math.inf if b == "+Inf" else float(b) for b, _ in buckets]
            if bounds != sorted(bounds) or [v for _, v in buckets] != sorted(v for _, v in buckets):
                fail("histogram %s: buckets not cumulative" % name)
    return families


def value(families, name, **labels):
    samples = [s for f in families.values() for s in f["samples"] if s[0] == name]
    for sample in samples:
        if all(sample[1].get(k) == v for k, v in labels.items()):
            return sample[2]
    fail("no sample %s%s" % (name, labels))


def main():
    with Cluster(governors=2, cpus=2) as cluster:
        base, token = cluster.http, cluster.token
        check(token and len(token) >= 16, "the dashboard has a token (the cluster has keys)")
        status, ctype, text = http_get(base + "/metrics")
        check(status == 200 and ctype.startswith("text/plain; version=0.0.4"), "/metrics content type")
        families = parse_prometheus(text)
        check(value(families, "squall_governors_alive") == 2, "squall_governors_alive 2")
        r = run([sys.executable, PIPELINE, "--parts", "10"], env=cluster.env())
        check(r.returncode == 0, "a pipeline ran (%s)" % r.stderr.strip())
        families = parse_prometheus(http_get(base + "/metrics")[2])
        for state in ("waiting", "ready", "assigned", "running", "finished", "failed", "cancelled"):
            value(families, "squall_tasks", state=state)
        check(families["squall_tasks"]["type"] == "gauge", "tasks by state are gauges")
        check(value(families, "squall_events_total", event="task_finished") == 21,
              "21 tasks finished (10 sleep + 10 execute + 1 concat)")
        check(value(families, "squall_scheduling_latency_seconds_count") >= 21,
              "scheduling latency observed for each task")
        check(families["squall_scheduling_latency_seconds"]["type"] == "histogram", "latency is a histogram")
        value(families, "squall_bytes_moved_total")
        check(sum(s[2] for s in families["squall_governor_tasks_done_total"]["samples"]) == 21,
              "per-governor tasks done add up")
        try:
            http_get(base + "/api/state")
            fail("/api/state answered without the token")
        except Exception as exc:     # urllib raises HTTPError for 401
            check("401" in str(exc), "/api/state without the token: 401")
        try:
            http_get(base + "/api/state", token="0" * len(token))
            fail("/api/state answered with a wrong token")
        except Exception as exc:
            check("401" in str(exc), "/api/state with a wrong token: 401")
        state = json.loads(http_get(base + "/api/state", token=token)[2])
        check(len(state["info"]["governors"]) == 2 and "tasks" in state["info"]
              and "sessions" in state and "stats" in state, "/api/state has governors, tasks, sessions")
        events = json.loads(http_get(base + "/api/events?since=0", token=token)[2])
        kinds = {(e["event"], e.get("kind")) for e in events["events"]}
        check(("task_finished", "execute") in kinds and all("governor_name" in e for e in events["events"]),
              "/api/events: which governor ran what")
        later = json.loads(http_get(base + "/api/events?since=%d" % events["last"], token=token)[2])
        check(later["events"] == [], "/api/events?since=LAST returns nothing new")
        check("errors" in json.loads(http_get(base + "/api/errors", token=token)[2]), "/api/errors answers")
        page = http_get(base + "/?token=" + token)[2]
        check("<html" in page and "/api/state" in page and "http://" not in page.split("<script>")[1]
              and "https://" not in page, "the page is self-contained")
        try:
            http_get(base + "/nope", token=token)
            fail("/nope answered 200")
        except Exception as exc:     # urllib raises HTTPError for 404
            check("404" in str(exc), "unknown path: 404")
        wait_until("the governors to stay up", lambda: len(cluster.info()["governors"]) == 2, 5)
        cluster.check_stopped()
    print("test_metrics: all passed")


if __name__ == "__main__":
    main()
