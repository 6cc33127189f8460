"""The squall command and the programs as users met them (issue 26): the
interpreter of `squall start`, option validation, --version, `squall
cancel`, `python3 -m squall`."""
import os
import signal
import subprocess
import sys

import pytest

import squall

from conftest import TIMEOUT, until

SOURCE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SQUALL = [sys.executable, os.path.join(SOURCE, "bin", "squall")]
BUILD = os.environ.get("SQUALL_BUILD_DIR", "")


def run(argv, env=None, timeout=TIMEOUT):
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


class Start:
    """`squall start` in the background (loopback, free ports)."""

    def __init__(self, tmp_path, *extra, env=None, governors=1):
        self.out = tmp_path / "start.out"
        argv = SQUALL + ["start", "--governors", str(governors), "--cpus", "1", "--port", "0",
                         "--http", "-1", "--log-dir", str(tmp_path / "logs")] + list(extra)
        self.proc = subprocess.Popen(argv, stdout=open(self.out, "w"), stderr=subprocess.STDOUT,
                                     env=env)

    def __enter__(self):
        def ready():
            assert self.proc.poll() is None, self.out.read_text()
            values = dict(line.split("=", 1) for line in self.out.read_text().splitlines()
                          if line.startswith("SQUALL_") and "=" in line)
            return values if "SQUALL_SECRET_KEY" in values else None
        self.values = until(ready, "squall start to report the cluster")
        self.broker = self.values["SQUALL_BROKER"]
        return self

    def env(self):
        return dict(os.environ, **{k: v for k, v in self.values.items()
                                   if k in ("SQUALL_BROKER", "SQUALL_SECRET_KEY",
                                            "SQUALL_BROKER_KEY")})

    def client(self):
        return squall.Client(self.broker, secret_key=self.values["SQUALL_SECRET_KEY"],
                             broker_key=self.values["SQUALL_BROKER_KEY"])

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _interpreter():
    """A function pickled by value: the tests' directory is not on the
    path of `squall start`'s tasks."""
    def interpreter():
        import sys
        return sys.executable
    return interpreter


def test_start_runs_python_tasks_with_its_own_interpreter(tmp_path):
    #   No python3 on PATH: the governors' default would not be found.
    nobin = tmp_path / "nobin"
    nobin.mkdir()
    env = dict(os.environ, PATH=str(nobin))
    env.pop("SQUALL_PYTHON", None)
    with Start(tmp_path, env=env) as cluster:
        client = cluster.client()
        assert os.path.realpath(client.submit(_interpreter()).result(TIMEOUT)) == \
            os.path.realpath(sys.executable)
        client.close()


def test_start_prints_the_local_directory_its_clients_upload_through(tmp_path):
    """SQUALL_LOCAL_DIR (docs/security.md, "Uploads on one host"): a
    client of this host given it hands large constants over as memory
    files, from the environment as from Client(local_dir=)."""
    with Start(tmp_path) as cluster:
        local_dir = cluster.values["SQUALL_LOCAL_DIR"]
        assert os.stat(local_dir).st_mode & 0o777 == 0o700
        env = dict(os.environ, SQUALL_LOCAL_DIR=local_dir)
        for client in (squall.Client(cluster.broker, secret_key=cluster.values["SQUALL_SECRET_KEY"],
                                     broker_key=cluster.values["SQUALL_BROKER_KEY"],
                                     local_dir=local_dir),
                       None):
            if client is None:
                # the C library reads $SQUALL_LOCAL_DIR itself
                script = ("import os, squall\n"
                          "c = squall.Client(os.environ['SQUALL_BROKER'])\n"
                          "before = c.info()['uploads_local']\n"
                          "f = c.scatter(b'v' * (2 << 20))\n"
                          "assert c.submit(len, f).result(60) == 2 << 20\n"
                          "print(c.info()['uploads_local'] - before)\n")
                env.update(cluster.env())
                out = run([sys.executable, "-c", script], env=env)
                assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr
                continue
            before = client.info()["uploads_local"]
            assert client.submit(len, client.scatter(b"v" * (2 << 20))).result(TIMEOUT) == 2 << 20
            assert client.info()["uploads_local"] == before + 1
            client.close()
        status = run(SQUALL + ["status"], env=cluster.env())
        assert "constants handed over as memory files" in status.stdout, status.stdout


def test_start_python_chooses_the_interpreter(tmp_path):
    marker = tmp_path / "used"
    wrapper = tmp_path / "python"
    wrapper.write_text("#!/bin/sh\necho \"$$\" >> '%s'\nexec '%s' \"$@\"\n" % (marker, sys.executable))
    wrapper.chmod(0o755)
    with Start(tmp_path, "--python", str(wrapper)) as cluster:
        client = cluster.client()
        assert os.path.realpath(client.submit(_interpreter()).result(TIMEOUT)) == \
            os.path.realpath(sys.executable)
        client.close()
    assert marker.exists()


def _program(name):
    path = os.path.join(BUILD, {"squall-broker": "broker",
                                "squall-governor": "governor"}[name], name)
    if not os.access(path, os.X_OK):
        pytest.skip("%s is not built (SQUALL_BUILD_DIR)" % name)
    return path


def test_version_everywhere():
    assert run(SQUALL + ["--version"]).stdout.startswith("squall %s" % squall.__version__)
    for name in ("squall-broker", "squall-governor"):
        out = run([_program(name), "--version"])
        assert out.returncode == 0 and out.stdout.startswith("%s %s" % (name, squall.__version__))
    out = run([sys.executable, "-m", "squall", "--version"], env=dict(os.environ))
    assert out.returncode == 0 and out.stdout.startswith("squall ")


def test_command_line_values_are_checked():
    #   Each of these hung or ran with another value than the one given.
    for argv, says in ((["status", "--timeout", "-5"], "--timeout: -5 is out of range"),
                       (["retire", "x", "--timeout", "-1"], "out of range"),
                       (["start", "--port", "70000"], "--port/-p: 70000 is out of range"),
                       (["start", "--http", "99999"], "--http: 99999 is out of range"),
                       (["status", "--broker", "localhost:99999"], "port must be 0 to 65535")):
        out = run(SQUALL + argv, timeout=30)
        assert out.returncode == 2 and says in out.stderr, (argv, out.stderr)
    broker = _program("squall-broker")
    for argv, says in ((["--bogus"], "unknown option --bogus"),
                       (["--bogus", "1"], "unknown option --bogus"),
                       (["--listen"], "--listen needs a value"),
                       (["--listen", "tcp://127.0.0.1:99999"], "port must be 0 to 65535"),
                       (["--listen", "ftp://127.0.0.1:1"], "only tcp://")):
        out = run([broker] + argv, timeout=30)
        assert out.returncode == 2 and says in out.stderr, (argv, out.stderr)
    governor = _program("squall-governor")
    for argv, says in ((["--bogus"], "unknown option: --bogus"),
                       (["--broker"], "needs a value: --broker"),
                       (["--broker", "127.0.0.1:70000"], "port must be 0 to 65535")):
        out = run([governor] + argv, timeout=30)
        assert out.returncode == 2 and says in out.stderr, (argv, out.stderr)


def test_a_clean_stop_is_no_loss(tmp_path):
    import json
    events = tmp_path / "events.jsonl"
    with Start(tmp_path, "--event-log", str(events), governors=2) as cluster:
        client = cluster.client()
        assert client.submit(_interpreter()).result(TIMEOUT)
        client.close()
    assert cluster.proc.returncode == 0
    log = (tmp_path / "logs" / "broker.log").read_text()
    goodbyes = [line for line in log.splitlines() if "said goodbye" in line]
    assert len(goodbyes) == 2 and all(" INFO " in line and "left: said goodbye" in line
                                      for line in goodbyes), log
    out = run(SQUALL + ["replay", str(events), "--json"])
    summary = json.loads(out.stdout)
    assert out.returncode == 0 and summary["failures"] == [], summary["failures"]
    assert all(g["left"] for g in summary["governors"])


#   Ctrl-C at 200 random moments of `squall start`'s wait for it (a wait
#   that returns at once, in a loop, as a busy start would): each must end
#   the wait. Python runs a handler between two bytecodes of the main
#   thread, wherever it is: one that set a threading.Event deadlocked on the
#   Event's lock, held by the wait it interrupted, nearly every time here
#   (CI: `squall start` ignored SIGINT until killed).
SIGNAL_AT_ANY_MOMENT = r"""
import os, random, signal, threading
from squall import cli
start = cli._part("clistart")
for n in range(200):
    stop = start._Stop().install()
    timer = threading.Timer(random.uniform(0, 0.002), os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    while not stop.wait(0):
        pass
    timer.join()
    stop.close()
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
print("stopped", n + 1)
"""


def test_start_stops_on_a_signal_at_any_moment():
    try:
        r = run([sys.executable, "-c", SIGNAL_AT_ANY_MOMENT], timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("a signal did not end squall start's wait (deadlocked in its handler?)")
    assert r.returncode == 0 and r.stdout.strip() == "stopped 200", r.stdout + r.stderr


KILLED_CLIENT = r"""
import os, sys, time
import squall

def hold(marker):
    open(marker, "w").close()
    while True:                 # until cancelled
        time.sleep(0.05)

client = squall.Client()
future = client.submit(hold, sys.argv[1])
future._session.submit()
print(future._session.id, flush=True)
while True:
    time.sleep(1)
"""


def test_cancel_ends_what_a_killed_client_left_running(tmp_path):
    import json
    marker = str(tmp_path / "running")
    with Start(tmp_path) as cluster:
        env = cluster.env()
        env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.join(SOURCE, "bindings", "python"),
                                                        env.get("PYTHONPATH")] if p)
        starter = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, marker], env=env,
                                   stdout=subprocess.PIPE, text=True)
        try:
            session = int(starter.stdout.readline())
            until(lambda: os.path.exists(marker), "the task to start")
        finally:
            starter.kill()
            starter.wait()
            starter.stdout.close()

        def status():
            return json.loads(run(SQUALL + ["status", "--json"], env=env).stdout)
        #   Its session waits for it (--session-grace): the task runs on.
        assert status()["tasks"].get("running", 0) == 1
        out = run(SQUALL + ["cancel", str(session)], env=env)
        assert out.returncode == 0 and "session %d closed" % session in out.stdout, out.stderr
        until(lambda: status()["tasks"].get("running", 0) == 0 and status()["sessions"] == 0,
              "the session to be gone")
        out = run(SQUALL + ["cancel", str(session)], env=env)
        assert out.returncode == 1 and "session %d" % session in out.stderr
        #   Without keys: said at once, not "no broker answers" at the timeout.
        keyless = {k: v for k, v in env.items()
                   if k not in ("SQUALL_SECRET_KEY", "SQUALL_BROKER_KEY")}
        out = run(SQUALL + ["status", "--timeout", "60"], env=keyless)
        assert out.returncode == 3 and "requires keys" in out.stderr, out.stderr


def test_setup_installs_for_the_demo_or_for_the_tests():
    setup = os.path.join(SOURCE, "scripts", "setup.sh")
    demo = run(["bash", setup, "--list"]).stdout
    tests = run(["bash", setup, "--tests", "--list"]).stdout
    assert "libczmq-dev" in demo and "libczmq-dev" in tests
    for heavy in ("chromium", "docker.io", "slurm-wlm", "helm", "pip"):
        assert heavy not in demo and heavy in tests, heavy
    assert "distributed" in tests
    out = run(["bash", setup, "--bogus"])
    assert out.returncode == 2 and "unknown option --bogus" in out.stderr


def test_readme_first_commands_are_what_ci_runs():
    with open(os.path.join(SOURCE, "README.md")) as f:
        readme = f.read()
    block = readme.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert commands[:2] == ["bash scripts/setup.sh && bash scripts/demo.sh",
                            "bash scripts/setup.sh --tests && bash scripts/test.sh"]
    with open(os.path.join(SOURCE, ".ci", "run")) as f:
        ci = [line for line in f.read().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == commands[1]
