"""What a task sees on a governor (test_compose_up.py; docs/security.md,
"One governor, one identity"): N execute tasks and N Python tasks, each
printing one line `PROBE {json}` with its governor (the hostname of the
machine or container it runs in), its user and group ids, its parent's
(the governor's) user id, its no_new_privs and effective capabilities, and
what it could reach that it must not: the governor's key at the
--secret-key path of its parent's command line (which the governor masks)
or at KEYFILE (default KEYDIR/HOSTNAME.key), a listing of KEYDIR, a file
written into ENROLL. Used by test_compose_up.py and test_slurm.py.

    python3 taskprobe.py N KEYDIR ENROLL [KEYFILE]   ($SQUALL_BROKER, keys from the environment)
"""
import json
import os
import sys

import squall
from squall import tasks

SHELL = r"""
h=$(cat /proc/sys/kernel/hostname)
cmd_key=$(tr '\0' '\n' < /proc/$PPID/cmdline | sed -n '/^--secret-key$/{n;p;}')
r=""
for k in "$cmd_key" "${KEYFILE:-$KEYDIR/$h.key}"; do
    [ -n "$k" ] && cat "$k" >/dev/null 2>&1 && r="$r KEY-READ:$k"
done
ls "$KEYDIR" >/dev/null 2>&1 && r="$r KEYDIR-LISTED"
( echo x > "$ENROLL/probe-$$.pub" ) 2>/dev/null && r="$r ENROLL-WRITTEN"
printf '{"kind":"execute","host":"%s","uid":%s,"gid":%s,"parent_uid":%s,"cmd_key":"%s","nnp":"%s","cap":"%s","breaches":"%s"}\n' \
    "$h" "$(id -u)" "$(id -g)" "$(awk '/^Uid:/{print $2}' /proc/$PPID/status)" "$cmd_key" \
    "$(awk '/^NoNewPrivs:/{print $2}' /proc/self/status)" \
    "$(awk '/^CapEff:/{print $2}' /proc/self/status)" "$r"
"""


def probe(i, keydir, enroll, keyfile):
    import os

    def status(pid, field):
        with open("/proc/%s/status" % pid) as f:
            return [l.split()[1] for l in f if l.startswith(field + ":")][0]
    with open("/proc/sys/kernel/hostname") as f:
        host = f.read().strip()
    with open("/proc/%d/cmdline" % os.getppid(), "rb") as f:
        argv = f.read().decode(errors="replace").split("\0")
    cmd_key = argv[argv.index("--secret-key") + 1] if "--secret-key" in argv[:-1] else ""
    breaches = []
    for k in (cmd_key, keyfile or os.path.join(keydir, host + ".key")):
        try:
            with open(k, "rb") as f:
                f.read()
            breaches.append("KEY-READ:" + k)
        except OSError:
            pass
    try:
        os.listdir(keydir)
        breaches.append("KEYDIR-LISTED")
    except OSError:
        pass
    try:
        with open(os.path.join(enroll, "probe-py-%d.pub" % i), "w") as f:
            f.write("x")
        breaches.append("ENROLL-WRITTEN")
    except OSError:
        pass
    return {"kind": "python", "host": host, "uid": os.getuid(), "gid": os.getgid(),
            "parent_uid": int(status(os.getppid(), "Uid")), "cmd_key": cmd_key,
            "nnp": status("self", "NoNewPrivs"), "cap": status("self", "CapEff"),
            "breaches": " ".join(breaches)}


def main():
    n, keydir, enroll = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    keyfile = sys.argv[4] if len(sys.argv) > 4 else ""
    client = squall.Client(os.environ["SQUALL_BROKER"])
    with client.session() as s:
        runs = [tasks.Execute(SHELL, stdout=True, env={"KEYDIR": keydir, "ENROLL": enroll,
                                                   "KEYFILE": keyfile})
                for _ in range(n)]
        for t in runs:
            t.output.keep()
        s.submit()
        for t in runs:
            print("PROBE " + t.output.fetch(300).decode().strip(), flush=True)
    for f in [client.submit(probe, i, keydir, enroll, keyfile) for i in range(n)]:
        print("PROBE " + json.dumps(f.result(timeout=300)), flush=True)
    client.close()


if __name__ == "__main__":
    main()
