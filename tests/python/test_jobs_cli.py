"""Jobs from the command line against a real cluster (docs/jobs.md): a job
outlives the process that submitted it, a new shell lists it, waits for
it, reads its tasks; arrays run each element once; a job file's diamond
passes files and stdin/stdout; a failing element is resubmitted after the
program was fixed; tenants do not see each other's jobs; --json shapes;
attach from Python."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import squall
from squall import _lib as L
from squall.tasks import Execute

from conftest import TIMEOUT, cluster_options, until

pytestmark = pytest.mark.skipif(L.sq_client_jobs is None,
                                reason="this libsquall has no job calls")

SOURCE = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SQUALL = [sys.executable, os.path.join(SOURCE, "bin", "squall")]
TASK_KEYS = {"id", "task", "state", "exit_code", "governor", "attempts", "started", "ended",
             "error", "element_task"}
JOB_KEYS = {"id", "name", "state", "detached", "attached", "tasks", "created", "ended"}


@pytest.fixture(scope="module")
def jobs_cluster():
    c = squall.LocalCluster(governors=2, cpus=2, **cluster_options())
    with c:
        yield c


@pytest.fixture(scope="module")
def arrays(jobs_cluster):
    """Skips a test of arrays on a broker that refuses array tasks (a
    branch where the broker's side of arrays has not landed): what it
    says then is the one refusal accepted."""
    out = sq(jobs_cluster, "submit", "--name", "array-probe", "--array", "0-0", "--", "true",
             check=False)
    if out.returncode == 2 and "array tasks are not taken by this broker" in out.stderr:
        pytest.skip("this broker refuses array tasks")
    assert out.returncode == 0, out.stderr
    sq(jobs_cluster, "job", "wait", "array-probe")
    sq(jobs_cluster, "job", "forget", "array-probe")


def env_of(cluster, key=None):
    return dict(os.environ, SQUALL_BROKER=cluster.address,
                SQUALL_SECRET_KEY=key or cluster.secret_key, SQUALL_BROKER_KEY=cluster.broker_key)


def sq(cluster, *argv, key=None, check=True, timeout=TIMEOUT * 4, cwd=None):
    """`squall ARGV` as a new shell would run it: a process of its own."""
    out = subprocess.run(SQUALL + [str(a) for a in argv], env=env_of(cluster, key),
                         capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if check:
        assert out.returncode == 0, (argv, out.returncode, out.stdout, out.stderr)
    return out


def submit(cluster, *argv, key=None):
    out = sq(cluster, "submit", *argv, key=key)
    return int(out.stdout.strip())


def test_an_array_outlives_its_submitter_and_runs_each_element_once(jobs_cluster, arrays,
                                                                    tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    # each element leaves a file of its own (O_EXCL: a second run fails it)
    job = submit(jobs_cluster, "--name", "thousand", "--array", "0-999", "--",
                 "sh", "-c", "set -C; echo $SQUALL_JOB_ID:$SQUALL_ARRAY_SIZE > %s/$SQUALL_TASK_ID;"
                 " echo $SQUALL_TASK_ID; echo err$SQUALL_TASK_ID >&2" % marks)
    # the submitting process has exited; a new shell finds the job by name
    listed = json.loads(sq(jobs_cluster, "job", "list", "--json").stdout)
    mine = [j for j in listed if j["id"] == job]
    assert mine and mine[0]["name"] == "thousand" and set(mine[0]) >= JOB_KEYS
    assert sum(mine[0]["tasks"].values()) == 1000
    out = sq(jobs_cluster, "job", "wait", "thousand")
    assert "finished" in out.stdout
    names = sorted(int(n) for n in os.listdir(marks))
    assert names == list(range(1000))
    assert {(marks / str(i)).read_text() for i in range(1000)} == {"%d:1000\n" % job}
    tasks = json.loads(sq(jobs_cluster, "task", "list", job, "--json").stdout)
    assert len(tasks) == 1000 and sorted(t["id"] for t in tasks) == list(range(1000))
    for t in tasks:
        assert set(t) >= TASK_KEYS
        assert t["state"] == "finished" and t["exit_code"] == 0 and t["attempts"] == 1
        assert t["governor"] and t["started"] and t["ended"] >= t["started"]
    # each element's own task, by which its output is read
    assert len({t["element_task"] for t in tasks}) == 1000
    assert all(t["element_task"] >= 0xC0000000 for t in tasks)
    assert sq(jobs_cluster, "log", "thousand", "517").stdout == "517\n"
    assert sq(jobs_cluster, "log", job, "517", "--stderr").stdout == "err517\n"
    assert sq(jobs_cluster, "log", "thousand", "0").stdout == "0\n"
    info = json.loads(sq(jobs_cluster, "job", "info", job, "--json").stdout)
    assert info["state"] == "finished" and info["tasks"]["finished"] == 1000
    assert "thousand" in sq(jobs_cluster, "job", "list").stdout
    sq(jobs_cluster, "job", "forget", "thousand")
    out = sq(jobs_cluster, "job", "info", "thousand", check=False)
    assert out.returncode == 4 and "no job named thousand" in out.stderr


def test_a_diamond_job_file_passes_files_and_standard_streams(jobs_cluster, tmp_path):
    job = json.loads(sq(jobs_cluster, "submit", "--file",
                        os.path.join(SOURCE, "examples", "jobs", "diamond.toml"),
                        "--name", "diamond-test", "--wait", "--json").stdout)
    tasks = {t["id"]: t for t in
             json.loads(sq(jobs_cluster, "task", "list", job["id"], "--json").stdout)}
    assert set(tasks) == {"a", "b", "c", "d"}
    assert all(t["state"] == "finished" for t in tasks.values())
    # d's standard output is kept (nothing reads it): 200 lines of c.txt
    client = jobs_cluster.client()
    s = client.attach("diamond-test")
    outputs = {f._tid: f for f in s.tasks}
    d = [t for t in tasks.values() if t["id"] == "d"][0]
    assert outputs[d["task"]].result(TIMEOUT) in (b"200\n",)
    s.detach()
    sq(jobs_cluster, "job", "forget", job["id"])


def test_a_failing_element_is_resubmitted_after_the_fix(jobs_cluster, arrays, tmp_path):
    program = tmp_path / "work.sh"
    program.write_text("#!/bin/sh\n[ \"$SQUALL_TASK_ID\" != 7 ] || exit 3\n"
                       "echo $SQUALL_TASK_ID >> %s/ran\n" % tmp_path)
    program.chmod(0o755)
    out = sq(jobs_cluster, "submit", "--array", "1-10", "--wait", "--", str(program), check=False)
    assert out.returncode == 1
    job = int(out.stdout.strip())
    failed = json.loads(sq(jobs_cluster, "task", "list", job, "--state", "failed",
                           "--json").stdout)
    assert [t["id"] for t in failed] == [7] and failed[0]["exit_code"] == 3
    assert "failed" in sq(jobs_cluster, "task", "list", job).stdout
    out = sq(jobs_cluster, "job", "wait", job, check=False)
    assert out.returncode == 1
    program.write_text("#!/bin/sh\necho $SQUALL_TASK_ID >> %s/ran\n" % tmp_path)
    out = sq(jobs_cluster, "job", "resubmit", job, "--failed")
    assert "1 task(s)" in out.stdout
    sq(jobs_cluster, "job", "wait", job)
    # the nine that finished did not run again
    assert sorted(int(x) for x in (tmp_path / "ran").read_text().split()) == list(range(1, 11))
    sq(jobs_cluster, "job", "forget", job)


def test_cancel_and_wait_timeout(jobs_cluster, tmp_path):
    gate = tmp_path / "gate"
    job = submit(jobs_cluster, "--",
                 "sh", "-c", "while [ ! -e %s ]; do sleep 0.05; done" % gate)
    out = sq(jobs_cluster, "job", "wait", job, "--timeout", "0.2", check=False)
    assert out.returncode == 5 and "timeout" in out.stdout
    sq(jobs_cluster, "job", "cancel", job)
    out = sq(jobs_cluster, "job", "wait", job, "--json", check=False)
    assert out.returncode == 1 and json.loads(out.stdout)[0]["state"] == "cancelled"
    gate.write_text("")
    sq(jobs_cluster, "job", "forget", job)


def tenant_key(cluster, name, tenant):
    key = squall.keygen(name, cluster._keys["authorized"], "client", tenant)
    cluster.broker.send_signal(signal.SIGHUP)
    # the broker reads the directory again on its own time: a deadline
    until(lambda: sq(cluster, "job", "list", key=key, check=False).returncode == 0,
          "the broker to accept %s's key" % name)
    return key


def test_tenants_do_not_see_each_others_jobs(jobs_cluster, tmp_path):
    a = tenant_key(jobs_cluster, "tenant-a", "a")
    b = tenant_key(jobs_cluster, "tenant-b", "b")
    gate = tmp_path / "gate"
    job = submit(jobs_cluster, "--name", "secret", "--", "sh", "-c",
                 "while [ ! -e %s ]; do sleep 0.05; done" % gate, key=a)
    assert [j["id"] for j in json.loads(sq(jobs_cluster, "job", "list", "--json",
                                           key=a).stdout)] == [job]
    assert json.loads(sq(jobs_cluster, "job", "list", "--json", key=b).stdout) == []
    for argv in (["job", "info", job], ["job", "info", "secret"], ["job", "wait", job],
                 ["job", "cancel", job], ["task", "list", job], ["job", "forget", job],
                 ["job", "resubmit", job, "--failed"]):
        out = sq(jobs_cluster, *argv, key=b, check=False)
        assert out.returncode == 4, (argv, out.returncode, out.stderr)
    # B's cancel did nothing: A's task still runs
    info = json.loads(sq(jobs_cluster, "job", "info", job, "--json", key=a).stdout)
    assert info["state"] == "running"
    # the admin key sees it
    assert job in [j["id"] for j in json.loads(sq(jobs_cluster, "job", "list",
                                                  "--json").stdout)]
    gate.write_text("")
    sq(jobs_cluster, "job", "wait", job, key=a)
    sq(jobs_cluster, "job", "forget", job, key=a)


def test_a_name_in_use_and_an_unknown_job(jobs_cluster):
    job = submit(jobs_cluster, "--name", "twice", "--", "true")
    out = sq(jobs_cluster, "submit", "--name", "twice", "--", "true", check=False)
    assert out.returncode == 2 and "a job named twice exists" in out.stderr
    for argv in (["job", "info", "999999"], ["job", "wait", "nosuchjob"]):
        out = sq(jobs_cluster, *argv, check=False)
        assert out.returncode == 4 and "no job" in out.stderr
    sq(jobs_cluster, "job", "wait", job)
    sq(jobs_cluster, "job", "forget", "twice")


def test_attach_from_python(jobs_cluster):
    client = jobs_cluster.client()
    with client.session(name="py-job", detached=True) as s:
        t = Execute(["sh", "-c", "echo kept"], stdout=True)
        t.output.keep()
        s.submit()
    job = s.id
    client.close()          # the job goes on without its client
    other = jobs_cluster.client()
    assert [j["name"] for j in other.jobs() if j["id"] == job] == ["py-job"]
    s2 = other.attach("py-job")
    assert s2.id == job and s2.wait_job(TIMEOUT)["state"] == "finished"
    assert s2.objects[0].fetch(TIMEOUT) == b"kept\n"
    # a kept object of the job is an input of a new task in it
    with s2:
        pass
    s2 = other.attach(job)
    again = Execute(["tr", "a-z", "A-Z"], stdin=s2.objects[0], stdout=True,
                           session=s2)
    again.output.keep()
    s2.submit()
    assert again.output.fetch(TIMEOUT) == b"KEPT\n"
    assert [r["state"] for r in s2.task_records()] == ["finished", "finished"]
    s2.forget()
    with pytest.raises(squall.SquallError):
        other.attach("py-job")
    other.close()


def test_stdin_env_and_placeholders_of_a_single_command(jobs_cluster, tmp_path):
    data = tmp_path / "in.txt"
    data.write_text("from stdin\n")
    out = tmp_path / "out.txt"
    job = json.loads(sq(jobs_cluster, "submit", "--json", "--wait", "--stdin", data,
                        "--env", "GREETING=hello %{TASK_ID}", "--max-retries", "2",
                        "--timeout", "5m", "--cpus", "1", "--",
                        "sh", "-c", "cat >> {0}; echo $GREETING $SQUALL_JOB_ID $SQUALL_TASK_ID "
                        "%{{JOB_ID}} 100%% >> {0}".format(out)).stdout)
    assert job["size"] == 1
    assert out.read_text() == "from stdin\nhello 0 %d 0 %d 100%%\n" % (job["id"], job["id"])
    tasks = json.loads(sq(jobs_cluster, "task", "list", job["id"], "--json").stdout)
    assert [(t["id"], t["state"], t["exit_code"]) for t in tasks] == [("0", "finished", 0)]
    sq(jobs_cluster, "job", "forget", job["id"])


def test_stdout_and_stderr_paths_of_an_array_a_command_and_a_job_file(jobs_cluster, arrays,
                                                                      tmp_path):
    outs = tmp_path / "outs"
    outs.mkdir()
    # an array: one file per element, named by the broker's expansion
    job = submit(jobs_cluster, "--name", "to-files", "--array", "1-3",
                 "--stdout", str(outs / "%{JOB_ID}-%{TASK_ID}.out"),
                 "--stderr", str(outs / "%{TASK_ID}.err"), "--",
                 "sh", "-c", "echo out $SQUALL_TASK_ID; echo err $SQUALL_TASK_ID >&2")
    sq(jobs_cluster, "job", "wait", job)
    for i in (1, 2, 3):
        assert (outs / ("%d-%d.out" % (job, i))).read_text() == "out %d\n" % i
        assert (outs / ("%d.err" % i)).read_text() == "err %d\n" % i
    sq(jobs_cluster, "job", "forget", job)
    # one command, a path relative to the submitting shell's directory, the
    # same file for both streams: interleaved in order
    out = sq(jobs_cluster, "submit", "--name", "to-one-file", "--stdout", "both-%{TASK_ID}.txt",
             "--stderr", "both-%{TASK_ID}.txt", "--wait", "--",
             "sh", "-c", "echo one; echo two >&2; echo three", cwd=str(tmp_path))
    assert (tmp_path / "both-0.txt").read_text() == "one\ntwo\nthree\n"
    sq(jobs_cluster, "job", "forget", int(out.stdout.strip()))
    # a job file: relative to the file's directory
    jobfile = tmp_path / "paths.toml"
    jobfile.write_text('[[task]]\nid = "w"\ncommand = ["sh", "-c", "echo w; echo e >&2"]\n'
                       'stdout_path = "w-%{JOB_ID}.out"\nstderr_path = "w.err"\n')
    job = json.loads(sq(jobs_cluster, "submit", "--file", jobfile, "--name", "paths-file",
                        "--wait", "--json", cwd="/").stdout)
    assert (tmp_path / ("w-%d.out" % job["id"])).read_text() == "w\n"
    assert (tmp_path / "w.err").read_text() == "e\n"
    sq(jobs_cluster, "job", "forget", job["id"])


def test_cwd_runs_the_program_there_and_cwd_expands_on_the_governor(jobs_cluster, arrays,
                                                                     tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    # an absolute --cwd: the program runs there; %{CWD} in its arguments,
    # environment and --stdout is that directory, replaced by the governor
    job = submit(jobs_cluster, "--name", "in-cwd", "--cwd", str(work), "--env", "HERE=%{CWD}",
                 "--stdout", "%{CWD}/out-%{TASK_ID}.txt", "--wait", "--",
                 "sh", "-c", 'pwd; echo "$HERE" "$1"; echo made > made.txt', "sh", "%{CWD}")
    assert (work / "out-0.txt").read_text() == "%s\n%s %s\n" % (work, work, work)
    assert (work / "made.txt").read_text() == "made\n"
    sq(jobs_cluster, "job", "forget", job)
    # an array: each element in the same directory, its own file
    job = submit(jobs_cluster, "--name", "cwd-array", "--array", "1-3", "--cwd", str(work),
                 "--stdout", "%{CWD}/el-%{TASK_ID}.txt", "--wait", "--",
                 "sh", "-c", "pwd; echo $SQUALL_TASK_ID")
    for i in (1, 2, 3):
        assert (work / ("el-%d.txt" % i)).read_text() == "%s\n%d\n" % (work, i)
    sq(jobs_cluster, "job", "forget", job)
    # no --cwd: %{CWD} is the task's own private directory, where it runs
    out = sq(jobs_cluster, "submit", "--name", "own-dir", "--wait", "--",
             "sh", "-c", 'test "$(pwd)" = "$1" && echo same', "sh", "%{CWD}")
    assert sq(jobs_cluster, "log", "own-dir").stdout == "same\n"
    sq(jobs_cluster, "job", "forget", int(out.stdout.strip()))
    # a relative cwd: made beneath the task's own directory; a job file's
    # outputs and inputs are files of its working directory
    jobfile = tmp_path / "cwd.toml"
    jobfile.write_text(
        '[[task]]\nid = "a"\ncwd = "sub/dir"\noutputs = ["a.txt"]\n'
        'command = ["sh", "-c", "case $(pwd) in */sub/dir) echo ok > a.txt;; esac"]\n'
        '[[task]]\nid = "b"\ncwd = "%s"\n'
        'inputs = [ { path = "in.txt", task = "a", output = "a.txt" } ]\n'
        'command = ["cat", "in.txt"]\n' % work)
    job = json.loads(sq(jobs_cluster, "submit", "--file", jobfile, "--name", "cwd-file",
                        "--wait", "--json").stdout)
    assert sq(jobs_cluster, "log", "cwd-file", "b").stdout == "ok\n"
    assert (work / "in.txt").read_text() == "ok\n"
    sq(jobs_cluster, "job", "forget", job["id"])
    # a directory that is not there, or not a directory: the task fails
    # with the reason, the governor goes on
    (tmp_path / "plain-file").write_text("x")
    for where, why in ((tmp_path / "missing", "No such file or directory"),
                       (tmp_path / "plain-file", "Not a directory")):
        out = sq(jobs_cluster, "submit", "--name", "bad-cwd", "--cwd", where, "--wait", "--",
                 "true", check=False)
        assert out.returncode == 1, out.stderr
        tasks = json.loads(sq(jobs_cluster, "task", "list", "bad-cwd", "--json").stdout)
        assert tasks[0]["state"] == "failed"
        assert "working directory '%s': %s" % (where, why) in tasks[0]["error"], tasks
        sq(jobs_cluster, "job", "forget", "bad-cwd")
    assert sq(jobs_cluster, "submit", "--name", "after-bad-cwd", "--wait", "--", "true")
    sq(jobs_cluster, "job", "forget", "after-bad-cwd")


def test_unopenable_output_paths_are_refused_before_submitting(jobs_cluster, tmp_path):
    before = json.loads(sq(jobs_cluster, "job", "list", "--json").stdout)
    out = sq(jobs_cluster, "submit", "--stdout", "out/%{CWD}", "--", "true", check=False)
    assert out.returncode == 2 and "--stdout: %{CWD} may only begin a path" in out.stderr
    out = sq(jobs_cluster, "submit", "--cwd", "../x", "--", "true", check=False)
    assert out.returncode == 2 and "--cwd: '../x'" in out.stderr
    out = sq(jobs_cluster, "submit", "--stderr", "%{TASKID}.err", "--", "true", check=False)
    assert out.returncode == 2 and "unknown placeholder %{TASKID}" in out.stderr
    jobfile = tmp_path / "both.toml"
    jobfile.write_text('[[task]]\nid = "w"\ncommand = "echo w"\nstdout = true\n'
                       'stdout_path = "/tmp/x"\n')
    out = sq(jobs_cluster, "submit", "--file", jobfile, check=False)
    assert out.returncode == 2 and "task 1" in out.stderr and "give one of them" in out.stderr
    assert json.loads(sq(jobs_cluster, "job", "list", "--json").stdout) == before


def test_squall_log_reads_a_jobs_tasks_by_job_name_and_task_name(jobs_cluster, arrays, tmp_path):
    jobfile = tmp_path / "talk.toml"
    jobfile.write_text('[[task]]\nid = "say"\ncommand = ["sh", "-c", "echo said; echo moaned >&2"]\n'
                       '[[task]]\nid = "quiet"\ncommand = "true"\n')
    job = json.loads(sq(jobs_cluster, "submit", "--file", jobfile, "--name", "talk", "--wait",
                        "--json").stdout)
    # a new shell: the job by name or id, the task by its id in the file
    assert sq(jobs_cluster, "log", "talk", "say").stdout == "said\n"
    assert sq(jobs_cluster, "log", job["id"], "say", "--stderr").stdout == "moaned\n"
    assert sq(jobs_cluster, "log", "talk", "quiet").stdout == ""
    # ... or by its id in the session, as `squall task list --json` gives it
    tasks = {t["id"]: t for t in
             json.loads(sq(jobs_cluster, "task", "list", "talk", "--json").stdout)}
    assert sq(jobs_cluster, "log", "talk", tasks["say"]["task"]).stdout == "said\n"
    out = sq(jobs_cluster, "log", "talk", check=False)
    assert out.returncode == 2 and "job talk has 2 tasks: name one" in out.stderr
    out = sq(jobs_cluster, "log", "talk", "nosuch", check=False)
    assert out.returncode == 4 and "job talk has no task nosuch" in out.stderr
    out = sq(jobs_cluster, "log", "no-such-job", "say", check=False)
    assert out.returncode == 4 and "no job named no-such-job" in out.stderr
    sq(jobs_cluster, "job", "forget", "talk")
    # a command's one task is the default
    sq(jobs_cluster, "submit", "--name", "one-cmd", "--wait", "--", "sh", "-c", "echo only")
    assert sq(jobs_cluster, "log", "one-cmd").stdout == "only\n"
    assert sq(jobs_cluster, "log", "one-cmd", "0").stdout == "only\n"
    sq(jobs_cluster, "job", "forget", "one-cmd")
    # an array element by its index
    sq(jobs_cluster, "submit", "--name", "elems", "--array", "1-2", "--wait", "--",
       "sh", "-c", "echo x$SQUALL_TASK_ID")
    assert sq(jobs_cluster, "log", "elems", "2").stdout == "x2\n"
    out = sq(jobs_cluster, "log", "elems", "3", check=False)
    assert out.returncode == 4 and "job elems has no task 3" in out.stderr
    sq(jobs_cluster, "job", "forget", "elems")


def test_squall_log_of_an_element_not_made_yet_says_so_and_follow_waits(jobs_cluster, arrays,
                                                                       tmp_path):
    gate = tmp_path / "gate"
    # an array makes at most 1024 of its elements tasks at a time: while
    # the first ones wait for the gate, element 1100 is not a task yet
    sq(jobs_cluster, "submit", "--name", "gated", "--array", "0-1100", "--", "sh", "-c",
       "while [ ! -e %s ]; do sleep 0.05; done; echo late$SQUALL_TASK_ID" % gate)
    tasks = json.loads(sq(jobs_cluster, "task", "list", "gated", "--json").stdout)
    assert tasks[1100]["id"] == 1100 and tasks[1100]["element_task"] is None
    out = sq(jobs_cluster, "log", "gated", "1100")
    assert out.stdout == "" and "element 1100 of job gated has not started yet" in out.stderr
    follow = subprocess.Popen(SQUALL + ["log", "gated", "1100", "--follow"],
                              env=env_of(jobs_cluster), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        # it says it waits, then reads the element once it ran
        assert "element 1100 of job gated has not started yet; waiting" in \
            follow.stderr.readline()
        gate.touch()
        stdout, stderr = follow.communicate(timeout=TIMEOUT * 4)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 0, stderr
    assert stdout == "late1100\n"
    sq(jobs_cluster, "job", "wait", "gated")
    sq(jobs_cluster, "job", "forget", "gated")


def test_resubmit_runs_a_job_files_failed_tasks_again_keeping_what_finished(jobs_cluster,
                                                                              arrays, tmp_path):
    ran, needed = tmp_path / "ran", tmp_path / "needed.txt"
    # a diamond: b needs a file that is missing, so b fails and d, which
    # reads b's and c's outputs, is cancelled; a and c finish
    jobfile = tmp_path / "breaks.toml"
    jobfile.write_text(
        '[[task]]\nid = "a"\ncommand = "echo a >> {r}; seq 3 > a.txt"\noutputs = ["a.txt"]\n'
        '[[task]]\nid = "b"\ncommand = "echo b >> {r}; cat a.txt {n} > b.txt"\n'
        'inputs = [ {{ path = "a.txt", task = "a", output = "a.txt" }} ]\noutputs = ["b.txt"]\n'
        '[[task]]\nid = "c"\ncommand = "echo c >> {r}; wc -l < a.txt"\nstdout = true\n'
        'inputs = [ {{ path = "a.txt", task = "a", output = "a.txt" }} ]\n'
        '[[task]]\nid = "d"\ncommand = "echo d >> {r}; cat b.txt c.txt"\n'
        'inputs = [ {{ path = "b.txt", task = "b", output = "b.txt" }},\n'
        '           {{ path = "c.txt", task = "c", output = "stdout" }} ]\n'
        '[[task]]\nid = "elems"\ncommand = ["sh", "-c", "test -e {n} || exit $SQUALL_TASK_ID"]\n'
        'array = "0-1"\n'.format(r=ran, n=needed))
    out = sq(jobs_cluster, "submit", "--file", jobfile, "--name", "breaks", "--wait",
             check=False)
    assert out.returncode == 1
    tasks = {t["id"]: t for t in
             json.loads(sq(jobs_cluster, "task", "list", "breaks", "--json").stdout)}
    assert tasks["b"]["state"] == "failed" and "needed.txt" in tasks["b"]["error"]
    # d fails with b (the failure it shares names b), never having run
    assert tasks["d"]["state"] == "failed" and tasks["d"]["attempts"] == 0
    assert tasks[1]["state"] == "failed"
    assert sorted(ran.read_text().split()) == ["a", "b", "c"]
    needed.write_text("fixed\n")        # the missing file, there now
    out = sq(jobs_cluster, "job", "resubmit", "breaks", "--failed")
    # b, d and element 1
    assert "3 task(s) submitted again" in out.stdout
    out = sq(jobs_cluster, "job", "wait", "breaks")
    assert "finished" in out.stdout
    # a and c did not run again; b and d ran with a's and c's outputs
    assert sorted(ran.read_text().split()) == ["a", "b", "b", "c", "d"]
    assert sq(jobs_cluster, "log", "breaks", "d").stdout == "1\n2\n3\nfixed\n3\n"
    tasks = {t["id"]: t for t in
             json.loads(sq(jobs_cluster, "task", "list", "breaks", "--json").stdout)}
    assert all(t["state"] == "finished" for t in tasks.values()), tasks
    assert tasks["a"]["attempts"] == 1 and tasks["c"]["attempts"] == 1
    assert tasks["b"]["attempts"] == 2 and tasks["d"]["attempts"] == 1
    # nothing failed is left: a second resubmit runs nothing
    assert "0 task(s)" in sq(jobs_cluster, "job", "resubmit", "breaks", "--failed").stdout
    sq(jobs_cluster, "job", "forget", "breaks")


def test_after_holds_a_jobs_tasks_in_the_broker_until_the_jobs_it_waits_for_end(
        jobs_cluster, arrays, tmp_path):
    order, gate = tmp_path / "order", tmp_path / "gate"
    first = submit(jobs_cluster, "--name", "first", "--", "sh", "-c",
                   "while [ ! -e %s ]; do sleep 0.05; done; echo first >> %s" % (gate, order))
    # returns at once with the new job's id, its tasks held while first runs
    later = submit(jobs_cluster, "--name", "later", "--after", "first", "--array", "1-3", "--",
                   "sh", "-c", "echo later$SQUALL_TASK_ID >> %s" % order)
    info = json.loads(sq(jobs_cluster, "job", "info", "later", "--json").stdout)
    assert info["id"] == later and info["state"] == "running"
    assert info["tasks"]["waiting"] == 3 and info["tasks"]["running"] == 0
    assert json.loads(sq(jobs_cluster, "job", "info", first, "--json").stdout)["state"] == \
        "running"
    assert not order.exists()
    gate.write_text("")
    sq(jobs_cluster, "job", "wait", "later")
    lines = order.read_text().split()
    assert lines[0] == "first" and sorted(lines[1:]) == ["later1", "later2", "later3"]
    # a job it waits for fails: its tasks are cancelled, the reason names it
    gate2 = tmp_path / "gate2"
    broken = submit(jobs_cluster, "--name", "broken", "--", "sh", "-c",
                    "while [ ! -e %s ]; do sleep 0.05; done; exit 3" % gate2)
    submit(jobs_cluster, "--name", "never", "--after", "%d,first" % broken, "--",
           "sh", "-c", "echo never >> %s" % order)
    gate2.write_text("")
    out = sq(jobs_cluster, "job", "wait", "never", "--json", check=False)
    assert out.returncode == 1 and json.loads(out.stdout)[0]["state"] == "cancelled"
    tasks = json.loads(sq(jobs_cluster, "task", "list", "never", "--json").stdout)
    assert [t["state"] for t in tasks] == ["cancelled"] and tasks[0]["attempts"] == 0
    assert "job %d it waits for (--after) failed" % broken in tasks[0]["error"], tasks
    assert "never" not in order.read_text()
    # one that failed already: refused, nothing submitted; an unknown one too
    out = sq(jobs_cluster, "submit", "--name", "too-late", "--after", "broken", "--", "true",
             check=False)
    assert out.returncode == 1 and "job %d it waits for (--after) failed" % broken in out.stderr
    out = sq(jobs_cluster, "submit", "--after", "999999", "--", "true", check=False)
    assert out.returncode == 4 and "no job 999999" in out.stderr
    assert "too-late" not in sq(jobs_cluster, "job", "list").stdout
    for job in ("first", "later", "broken", "never"):
        sq(jobs_cluster, "job", "forget", job)


def test_deps_order_a_task_after_one_without_outputs_and_its_failure_stops_it(jobs_cluster,
                                                                             tmp_path):
    # a writes nothing squall reads: b waits for it through the empty output
    # a's governor makes when a exits well (docs/jobs.md, deps). They share
    # a working directory: b runs only if a's file is there.
    gate, ran = tmp_path / "gate", tmp_path / "ran"
    jobfile = tmp_path / "deps.toml"
    jobfile.write_text(
        '[[task]]\nid = "b"\ncwd = {w}\ndeps = ["a"]\n'
        'command = "test -e a.done && echo b >> ran"\n'
        '[[task]]\nid = "a"\ncwd = {w}\n'
        'command = "while [ ! -e gate ]; do sleep 0.05; done; echo a > a.done"\n'
        .format(w=json.dumps(str(tmp_path))))
    job = submit(jobs_cluster, "--file", jobfile, "--name", "deps-order")

    def states():
        return {t["id"]: t for t in
                json.loads(sq(jobs_cluster, "task", "list", job, "--json").stdout)}
    until(lambda: states()["a"]["state"] == "running", "a to run")
    gate.write_text("")
    sq(jobs_cluster, "job", "wait", job)
    tasks = states()
    assert all(t["state"] == "finished" for t in tasks.values()), tasks
    assert ran.read_text() == "b\n"
    assert tasks["b"]["started"] >= tasks["a"]["ended"], tasks
    # what b read of a: an empty file under .squall-deps
    assert (tmp_path / ".squall-deps" / "a").read_bytes() == b""
    sq(jobs_cluster, "job", "forget", job)

    # a fails: b never runs, and says why
    jobfile.write_text(
        '[[task]]\nid = "a"\ncommand = "exit 3"\n'
        '[[task]]\nid = "b"\ncwd = {w}\ndeps = ["a"]\ncommand = "echo b >> ran"\n'
        .format(w=json.dumps(str(tmp_path))))
    ran.unlink()
    out = sq(jobs_cluster, "submit", "--file", jobfile, "--name", "deps-fail", "--wait",
             check=False)
    assert out.returncode == 1, out.stderr
    tasks = {t["id"]: t for t in
             json.loads(sq(jobs_cluster, "task", "list", "deps-fail", "--json").stdout)}
    assert tasks["a"]["state"] == "failed" and tasks["a"]["exit_code"] == 3, tasks
    assert tasks["b"]["state"] in ("failed", "cancelled") and tasks["b"]["attempts"] == 0, tasks
    assert not ran.exists()
    sq(jobs_cluster, "job", "forget", "deps-fail")
