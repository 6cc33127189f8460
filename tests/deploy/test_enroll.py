"""deploy/compose/broker-enroll.py without Docker: the broker of the
compose file, run on loopback with a keys directory and an enroll
directory. A governor whose public key is put in the enroll directory
after the broker started joins (the broker read its keys again); an
enrolled key is only ever a governor's, whatever its file says (a key
enrolled with role admin cannot act as a client); files that are not keys,
or not named like one, are ignored; a key taken out of the enroll directory
is no longer authorised; SIGTERM stops the broker and the program with it."""
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploylib import BUILD, SOURCE, check, run, wait_until  # noqa: E402

sys.path.insert(0, os.path.join(SOURCE, "bindings", "python"))
ENROLL = os.path.join(SOURCE, "deploy", "compose", "broker-enroll.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    import squall
    spec = importlib.util.spec_from_file_location("broker_enroll", ENROLL)
    enroll_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(enroll_mod)
    tmp = tempfile.mkdtemp(prefix="squall-enroll-test-")
    procs = []
    try:
        keys, enroll, authorized = (os.path.join(tmp, d) for d in ("keys", "enroll", "auth"))
        os.makedirs(os.path.join(keys, "authorized"))
        os.makedirs(os.path.join(keys, "clients"))
        os.mkdir(enroll)
        squall.keygen("broker", keys, "broker")
        squall.keygen("client", os.path.join(keys, "clients"), "admin")
        shutil.copy(os.path.join(keys, "clients", "client.pub"), os.path.join(keys, "authorized"))
        gdir = os.path.join(tmp, "gov")
        os.mkdir(gdir)
        squall.keygen("g1", gdir, "governor")
        squall.keygen("sneaky", gdir, "admin")      # enrolled: must not be an admin
        with open(os.path.join(enroll, "junk.pub"), "w") as f:
            f.write("not a key\n")
        with open(os.path.join(enroll, "..hidden.pub"), "w") as f:
            f.write(open(os.path.join(gdir, "g1.pub")).read())

        want = enroll_mod.wanted(keys, enroll)
        check(sorted(want) == ["client.pub"], "junk and badly named files are not enrolled: %s"
              % sorted(want))

        port = free_port()
        broker = subprocess.Popen(
            [sys.executable, ENROLL, keys, enroll, authorized, "--",
             os.path.join(BUILD, "broker", "squall-broker"), "--listen", "tcp://127.0.0.1:%d" % port,
             "--secret-key", os.path.join(keys, "broker.key")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(broker)
        check(broker.stdout.readline().startswith("LISTENING "), "the broker runs behind it")
        endpoint = "tcp://127.0.0.1:%d" % port
        env = dict(os.environ, SQUALL_BUILD_DIR=BUILD, SQUALL_BROKER=endpoint,
                   SQUALL_BROKER_KEY=os.path.join(keys, "broker.pub"))

        def info(key):
            r = run([sys.executable, os.path.join(SOURCE, "bin", "squall"), "status", "--json",
                     "--timeout", "2"], env=dict(env, SQUALL_SECRET_KEY=key))
            return json.loads(r.stdout) if r.returncode == 0 else None
        admin = os.path.join(keys, "clients", "client.key")
        check(info(admin) is not None, "the client key of keys/authorized is let in")

        shutil.copy(os.path.join(gdir, "g1.pub"), os.path.join(enroll, "g1.pub"))
        shutil.copy(os.path.join(gdir, "sneaky.pub"), os.path.join(enroll, "sneaky.pub"))
        gov = subprocess.Popen([os.path.join(BUILD, "governor", "squall-governor"), "--broker",
                                endpoint, "--name", "g1", "--cpus", "1", "--listen-host",
                                "127.0.0.1", "--secret-key", os.path.join(gdir, "g1.key"),
                                "--broker-key", os.path.join(keys, "broker.pub")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(gov)
        wait_until("the enrolled governor to join", lambda: [
            g["name"] for g in (info(admin) or {}).get("governors", [])] == ["g1"], 30, 0.2)
        check(True, "a governor enrolled after the broker started joins (keys read again)")
        with open(os.path.join(authorized, "governor-sneaky.pub")) as f:
            text = f.read()
        check('role = "governor"' in text and "admin" not in text.split("#", 1)[0],
              "a key enrolled with role admin is authorised as a governor only")
        check(info(os.path.join(gdir, "sneaky.key")) is None,
              "and cannot act as a client")

        os.unlink(os.path.join(enroll, "g1.pub"))
        wait_until("the governor's key to be withdrawn", lambda: not os.path.exists(
            os.path.join(authorized, "governor-g1.pub")), 10, 0.1)
        wait_until("the broker to end the governor of a withdrawn key", lambda: not (
            info(admin) or {"governors": [1]})["governors"], 30, 0.2)
        check(True, "a key taken out of the enroll directory is no longer authorised")

        # SIGHUP reaches the broker (it reads its keys again), not this
        # program's default action (which would end it)
        broker.send_signal(signal.SIGHUP)
        check(info(admin) is not None and broker.poll() is None,
              "SIGHUP is passed to the broker, which goes on")
        broker.send_signal(signal.SIGTERM)
        check(broker.wait(30) == 0, "SIGTERM stops the broker and the program, status 0")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_enroll: all passed")


if __name__ == "__main__":
    main()
