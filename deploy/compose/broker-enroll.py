"""The broker of docker-compose.yml with its governors' keys enrolled.

One governor, one identity (docs/security.md): each governor container makes
a key pair of its own at its first start and puts its public key in the
`enroll` volume, which only root in a governor container may write (the
governor runs as root, its tasks under user ids of their own, so a task
cannot enroll a key). This program runs squall-broker with an authorized-keys directory of
its own, kept as the union of
  - /keys/authorized/*.pub: the clients and admins (the `keys` service's),
  - ENROLL/*.pub: the governors, each written anew here with role governor
    whatever its file says (an enrolled key is never more than a governor),
and has the broker read it again (SIGHUP) whenever that union changes, so a
governor container started by `--scale` is let in within a second.

    broker-enroll.py KEYS_DIR ENROLL_DIR AUTHORIZED_DIR -- squall-broker ARGS...

ARGS get `--authorized-keys AUTHORIZED_DIR` added. SIGTERM, SIGINT and
SIGHUP go to the broker (`docker compose kill -s HUP broker` still has it
read its keys again, though a key put in /keys/authorized is picked up
within a second anyway); this program exits with its status. Standard
library only."""
import os
import re
import signal
import subprocess
import sys
import threading

_Z85 = re.compile(r'^\s*public-key\s*=\s*"([0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40})"\s*$')
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\.pub$")
_PUB_MAX = 4096


def public_key(path):
    """The Z85 public key of a zcert .pub file, or None."""
    try:
        with open(path, "rb") as f:
            data = f.read(_PUB_MAX + 1)
    except OSError:
        return None
    if len(data) > _PUB_MAX:
        return None
    for line in data.decode(errors="replace").splitlines():
        m = _Z85.match(line)
        if m:
            return m.group(1)
    return None


def wanted(keys_dir, enroll_dir):
    """File name -> content of the authorized directory as it should be."""
    out = {}
    src = os.path.join(keys_dir, "authorized")
    for name in sorted(os.listdir(src)) if os.path.isdir(src) else []:
        if name.endswith(".pub") and _NAME.match(name):
            try:
                with open(os.path.join(src, name), "rb") as f:
                    out[name] = f.read(_PUB_MAX)
            except OSError:
                pass
    for name in sorted(os.listdir(enroll_dir)) if os.path.isdir(enroll_dir) else []:
        if not _NAME.match(name):
            continue
        key = public_key(os.path.join(enroll_dir, name))
        if key is None:
            continue
        out["governor-" + name] = ('#   a governor enrolled by its container (%s)\n'
                                   'metadata\n    role = "governor"\n'
                                   'curve\n    public-key = "%s"\n' % (name, key)).encode()
    return out


def sync(authorized, want):
    """Makes the directory hold exactly `want`; True if anything changed."""
    changed = False
    have = {n for n in os.listdir(authorized) if n.endswith(".pub")}
    for name, content in want.items():
        path = os.path.join(authorized, name)
        try:
            with open(path, "rb") as f:
                if f.read() == content:
                    continue
        except OSError:
            pass
        tmp = path + ".tmp"
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(content)
        os.replace(tmp, path)
        changed = True
    for name in have - set(want):
        os.unlink(os.path.join(authorized, name))
        changed = True
    return changed


def main(argv):
    if len(argv) < 6 or argv[4] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    keys_dir, enroll_dir, authorized = argv[1:4]
    os.makedirs(authorized, mode=0o700, exist_ok=True)
    sync(authorized, wanted(keys_dir, enroll_dir))
    broker = subprocess.Popen(argv[5:] + ["--authorized-keys", authorized],
                              stdout=subprocess.PIPE)
    # SIGHUP only once the broker handles it: it prints LISTENING after.
    listening = threading.Event()

    def relay():
        for line in broker.stdout:
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            if line.startswith(b"LISTENING "):
                listening.set()

    threading.Thread(target=relay, daemon=True).start()

    def forward(signum, frame):
        if broker.poll() is None:
            broker.send_signal(signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, forward)
    while broker.poll() is None:
        try:
            if listening.is_set() and sync(authorized, wanted(keys_dir, enroll_dir)):
                broker.send_signal(signal.SIGHUP)
        except OSError as exc:
            print("broker-enroll: %s" % exc, file=sys.stderr, flush=True)
        try:
            broker.wait(0.5)
        except subprocess.TimeoutExpired:
            pass
    return broker.returncode if broker.returncode >= 0 else 128 - broker.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
