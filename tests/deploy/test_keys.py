"""`squall start`: one governor, one identity (docs/security.md). Each
governor gets a key pair of its own, whose .pub the broker authorises and
whose .key no other governor is given; no governor is handed the broker's
key, the admin client key or the dashboard token; governors listen on
loopback like the broker. A .pub put in the authorized directory afterwards
(as `squall slurm` does) is read by the broker without a restart: a
governor with that key joins."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploylib import BUILD, SOURCE, Cluster, check, run, wait_until  # noqa: E402

sys.path.insert(0, os.path.join(SOURCE, "bindings", "python"))


def cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def listening(pid):
    """(ip, port) of the TCP sockets pid listens on (IPv4)."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    with open("/proc/%d/net/tcp" % pid) as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                ip_hex, port_hex = fields[1].split(":")
                ip = ".".join(str(b) for b in reversed(bytes.fromhex(ip_hex)))
                out.append((ip, int(port_hex, 16)))
    return out


def public_key(path):
    with open(path) as f:
        for line in f:
            if line.strip().startswith("public-key"):
                return line.split("=", 1)[1].strip().strip('"')
    return None


def main():
    with Cluster(governors=2, cpus=1) as cluster:
        info = cluster.info()
        check(len(info["governors"]) == 2, "two governors joined")
        by_name = {}
        for pid in cluster.pids:
            argv = cmdline(pid)
            if argv and argv[0].endswith("squall-governor"):
                by_name[argv[argv.index("--name") + 1]] = (pid, argv)
        check(sorted(by_name) == ["governor-1", "governor-2"], "both governor processes found")
        keydir = os.path.dirname(cluster.keys["SQUALL_BROKER_KEY"])
        authorized = os.path.join(keydir, "authorized")
        keys = {}
        for name, (pid, argv) in by_name.items():
            #   A governor masks its key's path in its command line once it
            #   read the key (docs/security.md, "Tasks on a governor"), so the
            #   path is found where squall start makes it.
            check(set(argv[argv.index("--secret-key") + 1]) == {"*"},
                  "%s's key path is masked in its command line" % name)
            key = os.path.join(keydir, name + ".key")
            keys[name] = key
            check(os.path.isfile(key) and not os.path.exists(os.path.join(authorized, name + ".key")),
                  "%s has a key of its own, outside the authorized directory" % name)
            check(argv[argv.index("--broker-key") + 1] == cluster.keys["SQUALL_BROKER_KEY"],
                  "%s is given the broker's public key" % name)
            given = " ".join(argv)
            check("broker.key" not in given and "client.key" not in given and
                  "http-token" not in given,
                  "%s is given no broker key, client key or token" % name)
            socks = listening(pid)
            check(socks and all(ip == "127.0.0.1" for ip, _ in socks),
                  "%s listens on loopback only: %s" % (name, socks))
            pub = os.path.join(authorized, name + ".pub")
            check(os.path.isfile(pub) and public_key(pub) == public_key(key),
                  "the broker authorises %s's own public key" % name)
        check(public_key(keys["governor-1"]) != public_key(keys["governor-2"]),
              "the two governors' keys differ")
        check(not os.path.exists(os.path.join(authorized, "governor.key")) and
              not any(n.endswith(".key") for n in os.listdir(authorized)),
              "no secret key in the authorized directory")

        # A governor authorised later, as squall slurm does it: its .pub put
        # in the authorized directory; squall start has the broker read it.
        import squall
        extra = os.path.join(cluster.tmp, "extra")
        os.mkdir(extra, 0o700)
        squall.keygen("late", extra, "governor")
        governor = os.path.join(BUILD, "governor", "squall-governor")
        argv = [governor, "--broker", cluster.broker, "--name", "late", "--cpus", "1",
                "--secret-key", os.path.join(extra, "late.key"),
                "--broker-key", cluster.keys["SQUALL_BROKER_KEY"], "--listen-host", "127.0.0.1"]
        os.replace(os.path.join(extra, "late.pub"), os.path.join(authorized, "late.pub"))
        late = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until("the late governor to join", lambda: "late" in
                       [g["name"] for g in cluster.info()["governors"]], 30, interval=0.2)
            check(True, "a .pub added to the authorized directory is read at once (SIGHUP)")
        finally:
            late.terminate()
            late.wait(30)
        r = run([sys.executable, os.path.join(SOURCE, "bin", "squall"), "status", "--json"],
                env=cluster.env())
        check(r.returncode == 0 and json.loads(r.stdout)["governors"], "the cluster still answers")
    print("test_keys: all passed")


if __name__ == "__main__":
    main()
