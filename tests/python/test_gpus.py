"""GPUs as devices (issue 27): a governor started with --gpus offers its
devices by name; a task asking for gpus=N gets N devices nobody else holds,
named in its CUDA_VISIBLE_DEVICES and SQUALL_GPUS; gpus=0.5 shares one
device with other fractions, never above one device in all. Execute tasks
and Python tasks (whose executor is started for the task's devices) alike.

The tasks check exclusivity themselves, atomically: each device has two
half-device tokens (directories, made with mkdir, which fails if one
exists); a whole-device task takes both of each of its devices, a half one
either. A token it cannot take is a device held beyond one whole: the task
records it. Tokens go back before the task ends, so before the governor
gives its devices back. The test holds tasks running until it releases
them, one at a time, and checks what they recorded."""
import os
import subprocess
import sys
import tempfile

import pytest

import squall
from squall import tasks
from squall.errors import SquallError

from conftest import TIMEOUT, cluster_options, until

DEVICES = ["0", "1", "2", "3"]

HOLD = r'''
import os, sys, time
d, name, half = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
devs = os.environ.get("CUDA_VISIBLE_DEVICES")
held, bad = [], []
for dev in (devs or "").split(","):
    if not dev:
        continue
    need = 1 if half else 2
    for t in ("a", "b"):
        if need:
            token = os.path.join(d, "dev-%s-%s" % (dev, t))
            try:
                os.mkdir(token)
                held.append(token)
                need -= 1
            except FileExistsError:
                pass
    if need:
        bad.append(dev)
start = os.path.join(d, "start-" + name)
with open(start + ".tmp", "w") as f:
    f.write("%s\n%s\n%s\n" % (devs, os.environ.get("SQUALL_GPUS"), ",".join(bad)))
os.rename(start + ".tmp", start)
# held until the test releases it (bounded, so that a failed test ends)
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(d, "release-" + name)):
    if time.monotonic() > deadline:
        sys.exit(1)
    time.sleep(0.01)
for token in held:
    os.rmdir(token)
open(os.path.join(d, "end-" + name), "w").close()
'''


def py_hold(script, d, name, half):
    import os
    import runpy
    import sys
    sys.argv = [script, d, name, "1" if half else "0"]
    runpy.run_path(script, run_name="__main__")
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def py_env():
    import os
    return os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("SQUALL_GPUS")


@pytest.fixture(scope="module")
def gpu_cluster():
    # no --resource-wait: a request above every offer is refused at once
    c = squall.LocalCluster(governors=1, cpus=16, governor_args=["--gpus", ",".join(DEVICES)],
                            broker_args=["--resource-wait", "0"], **cluster_options())
    with c:
        yield c
    assert c.exit_codes and all(code == 0 for code in c.exit_codes.values()), c.exit_codes


def test_devices_are_never_shared_beyond_one(gpu_cluster, tmp_path):
    d = str(tmp_path)
    script = os.path.join(d, "hold.py")
    with open(script, "w") as f:
        f.write(HOLD)
    client = gpu_cluster.client()
    futures = {}
    path = lambda kind, name: os.path.join(d, "%s-%s" % (kind, name))   # noqa: E731
    halves = ["half-%d" % i for i in range(4)]
    wholes = ["whole-%d" % i for i in range(8)]

    def started(names):
        return [n for n in names if os.path.exists(path("start", n))]

    def record(n):
        with open(path("start", n)) as f:
            devs, squall_gpus, bad = f.read().split("\n")[:3]
        assert bad == "", "%s found device(s) %s held beyond one whole" % (n, bad)
        assert squall_gpus == devs
        assert devs in DEVICES, "%s got %r, not one device" % (n, devs)
        return devs

    def release(n):
        open(path("release", n), "w").close()
        until(lambda: os.path.exists(path("end", n)), n + " to end")

    def add(names, half):
        for i, name in enumerate(names):
            resources = {"gpus": 0.5 if half else 1}
            if i % 2:
                tasks.Execute([sys.executable, script, d, name, "1" if half else "0"],
                              resources=resources)
            else:
                futures[name] = client.submit(py_hold, script, d, name, half,
                                              resources=resources)

    with client.session() as s:
        # Four halves run at once, two to a device: whole devices stay free.
        add(halves, True)
        s.submit()
        until(lambda: len(started(halves)) == 4, "the four halves to run")
        on = {n: record(n) for n in halves}
        assert sorted(on.values()).count(on["half-0"]) == 2 and len(set(on.values())) == 2
        # One half of each device goes: half a device is free on each of
        # two devices, which a count of gpus would give to whole tasks.
        for dev in set(on.values()):
            release([n for n in halves if on[n] == dev][0])
        kept = [n for n in halves if not os.path.exists(path("end", n))]
        add(wholes, False)
        s.submit()
        # Wholes go to the two free devices only, one after the other.
        done = []
        for _ in range(2):
            running = until(lambda: [n for n in started(wholes) if n not in done]
                            if len(started(wholes)) >= len(done) + 2 else None,
                            "two whole tasks running")
            assert len(running) == 2
            devs = [record(n) for n in running]
            assert len(set(devs)) == 2 and not set(devs) & {on[n] for n in kept}
            release(running[0])
            done.append(running[0])
        # The halves go: four wholes run at once, on four devices.
        for n in kept:
            release(n)
        running = until(lambda: [n for n in started(wholes) if n not in done]
                        if len(started(wholes)) >= len(done) + 4 else None,
                        "four whole tasks running")
        assert sorted(record(n) for n in running) == DEVICES
        for n in wholes:
            until(lambda: os.path.exists(path("start", n)), n + " to run")
            record(n)
            release(n)
    for name, fut in futures.items():
        assert fut.result(TIMEOUT) == record(name)


def test_tasks_without_gpus_see_no_device(gpu_cluster):
    client = gpu_cluster.client()
    assert client.submit(py_env).result(TIMEOUT) == ("", "")
    with client.session() as s:
        shown = tasks.Execute("echo \"[$CUDA_VISIBLE_DEVICES][$SQUALL_GPUS]\"", stdout=True)
        shown.output.keep()
        s.submit()
        assert shown.output.fetch(TIMEOUT) == b"[][]\n"
    # two whole devices: distinct, named in both variables
    devs, same = client.submit(py_env, resources={"gpus": 2}).result(TIMEOUT)
    assert devs == same and len(set(devs.split(","))) == 2
    assert set(devs.split(",")) <= set(DEVICES)


def test_gpus_requests_are_checked(gpu_cluster):
    client = gpu_cluster.client()
    for bad in (1.5, 0.0004, -1, True, "1"):
        # checked before anything is added, as every task option
        with pytest.raises(ValueError, match="resource gpus"):
            client.submit(py_env, resources={"gpus": bad}).result(TIMEOUT)
    assert client.submit(py_env, resources={"gpus": 0.125}).result(TIMEOUT)[0] in DEVICES
    # more devices than any governor offers: refused
    with pytest.raises(SquallError):
        client.submit(py_env, resources={"gpus": 5}).result(TIMEOUT)


def test_bad_gpus_options_are_refused():
    import subprocess
    from squall.cluster import find_binary
    base = [find_binary("squall-governor"), "--broker", "tcp://127.0.0.1:1"]
    for args, says in ((["--gpus", "0,0"], "named twice"), (["--gpus", "0,"], "comma"),
                       (["--gpus", "a b"], "device name"),
                       (["--gpus", "0", "--resource", "gpus=1"], "do not go together")):
        out = subprocess.run(base + args, capture_output=True, text=True, timeout=TIMEOUT,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == 2 and says in out.stderr, (args, out.stderr)


def test_auto_takes_cuda_visible_devices():
    # what the governor was started with wins over what nvidia-smi lists
    options = cluster_options()
    options["env"] = dict(options.get("env", {}), CUDA_VISIBLE_DEVICES="5,7")
    with squall.LocalCluster(governors=1, cpus=2, governor_args=["--gpus", "auto"],
                             **options) as c:
        client = c.client()
        [gov] = client.info()["governors"]
        assert gov["resources"]["gpus"] == 2
        devs, _ = client.submit(py_env, resources={"gpus": 1}).result(TIMEOUT)
        assert devs in ("5", "7")
        both, _ = client.submit(py_env, resources={"gpus": 2}).result(TIMEOUT)
        assert sorted(both.split(",")) == ["5", "7"]


def test_local_cluster_and_squall_start_pass_gpus(tmp_path):
    """LocalCluster(gpus=...) and `squall start --gpus` give every governor
    its --gpus: the devices are offered, and a task is given one."""
    with squall.LocalCluster(governors=1, cpus=2, gpus=[0, 3], **cluster_options()) as c:
        client = c.client()
        [gov] = client.info()["governors"]
        assert gov["resources"]["gpus"] == 2
        devs, _ = client.submit(py_env, resources={"gpus": 1}).result(TIMEOUT)
        assert devs in ("0", "3")
    if cluster_options():
        return                  # `squall start` has no sanitizer wrapper
    from test_cli_usability import Start
    with Start(tmp_path, "--gpus", "1,2") as cluster:
        client = cluster.client()
        [gov] = client.info()["governors"]
        assert gov["resources"]["gpus"] == 2
        with client.session() as s:
            t = tasks.Execute("printf %s \"$CUDA_VISIBLE_DEVICES\"", stdout=True,
                              resources={"gpus": 2})
            t.output.keep()
            s.submit()
            assert sorted(t.fetch(TIMEOUT).decode().split(",")) == ["1", "2"]
        client.close()


def test_slurm_jobs_ask_for_gpus_and_offer_them():
    """`squall slurm governors --gpus N`: the job asks Slurm for N GPUs per
    node (--gres gpu:N) and its governors offer those (--gpus auto reads the
    step's CUDA_VISIBLE_DEVICES, not every GPU of the node)."""
    import unittest.mock
    from squall import cli, slurm
    access = {"broker": "tcp://10.0.0.1:7760", "broker_key": "/keys/broker.pub"}
    with unittest.mock.patch.object(slurm, "cli", cli):
        script = slurm.governor_script(access, "/keys", "job", gpus=2)
        assert " --gpus auto" in script
        assert "--gpus" not in slurm.governor_script(access, "/keys", "job")
    seen = {}

    def fake_run(argv, **kwargs):
        seen["argv"] = argv
        return subprocess.CompletedProcess(argv, 0, "42;cluster\n", "")

    with unittest.mock.patch.object(slurm.subprocess, "run", fake_run), \
            unittest.mock.patch.object(slurm, "cli", cli):
        job = slurm._sbatch(access, "/keys", "job", 1, 4, None, None, None,
                            tempfile.mkdtemp(prefix="squall-slurm-"), gpus=2)
    assert job == "42"
    argv = seen["argv"]
    assert argv[argv.index("--gres") + 1] == "gpu:2"


def test_a_whole_device_task_goes_where_devices_are_free(tmp_path):
    """Governor A holds the input of a gpus=2 task, but two half-device
    tasks hold one of its two devices; governor B has both free. The
    broker sends the task to B (it would wait on A behind the halves):
    it finishes while the halves still hold A's device."""
    release = tmp_path / "release"
    with squall.LocalCluster(governors=1, cpus=4, gpus="0,1", **cluster_options()) as c:
        client = c.client()
        with client.session() as s:
            data = tasks.Execute("head -c 2097152 /dev/zero", stdout=True)
            data.output.keep()
            s.submit()
            data.wait(TIMEOUT)
            halves = [tasks.Execute("touch %s/started-%d; while [ ! -e %s ]; do sleep 0.05; done"
                                    % (tmp_path, i, release), resources={"gpus": 0.5})
                      for i in range(2)]
            s.submit()
            until(lambda: all((tmp_path / ("started-%d" % i)).exists() for i in range(2)),
                  "both halves to run on governor A")
            c.add_governor()
            until(lambda: len(client.info()["governors"]) == 2, "governor B to join")
            whole = tasks.Execute("wc -c < x; printf %s \"$CUDA_VISIBLE_DEVICES\"",
                                  inputs=[("x", data.output)], stdout=True,
                                  resources={"gpus": 2})
            whole.output.keep()
            s.submit()
            out = whole.fetch(TIMEOUT).decode().split()
            assert out[0] == "2097152" and sorted(out[1].split(",")) == ["0", "1"]
            assert not release.exists()
            release.write_text("")
            for h in halves:
                h.wait(TIMEOUT)
