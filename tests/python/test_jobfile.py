"""Job descriptions (docs/jobs.md): the job-file compiler, the command-line
options of `squall submit`, and their errors. No cluster: everything here is
checked before anything reaches one (`--dry-run` prints what would be
submitted)."""
import json
import os
import subprocess
import sys

import pytest

from squall import jobfile
from squall.jobfile import JobError

SOURCE = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SQUALL = [sys.executable, os.path.join(SOURCE, "bin", "squall")]
DIAMOND = os.path.join(SOURCE, "examples", "jobs", "diamond.toml")


def run(argv):
    # a broker nobody runs: a command that got past its checks fails with 3
    env = dict(os.environ, SQUALL_BROKER="tcp://127.0.0.1:1")
    return subprocess.run(SQUALL + argv, capture_output=True, text=True, timeout=60, env=env)


def compile_text(text, base="."):
    return jobfile.from_toml(text, "job.toml", base)


def refused(text, *fragments, base="."):
    with pytest.raises(JobError) as info:
        compile_text(text, base)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return str(info.value)


# ---------------------------------------------------------------------------
# The compiler

def test_the_example_diamond_compiles_to_its_graph():
    spec = jobfile.from_file(DIAMOND)
    assert spec.name == "diamond"
    order = [t.id for t in spec.tasks]
    # every task after what it reads or depends on
    for before, after in [("a", "b"), ("a", "c"), ("b", "c"), ("c", "d"), ("b", "d")]:
        assert order.index(before) < order.index(after)
    a, b, c, d = (spec.task(i) for i in "abcd")
    assert a.outputs == ["a.txt"] and a.output_names() == ["a.txt"]
    assert a.resources == {"cpus": 1}
    assert b.stdin.task == "a" and b.stdin.output == "a.txt"
    assert b.stdout and b.output_names() == ["stdout"]
    assert [(p, s.task, s.output) for p, s in c.inputs] == [("b.txt", "b", "stdout"),
                                                            ("in.txt", "a", "a.txt")]
    assert c.max_retries == 1 and c.timeout == 600.0
    assert d.deps == ["b"] and d.env == {"LC_ALL": "C"}
    assert spec.size() == 4


def test_a_dep_without_outputs_is_given_an_empty_done_output():
    # b waits for a, which writes nothing squall reads: a gets the empty
    # output its governor makes when it exits well (execute's "done"), and
    # only a; c, which has an output, is read through it as before
    spec = compile_text('''
[[task]]
id = "b"
command = ["true"]
deps = ["a", "c"]
[[task]]
id = "a"
command = ["touch", "/tmp/x"]
[[task]]
id = "c"
command = ["true"]
stdout = true
[[task]]
id = "lone"
command = ["true"]
''')
    order = [t.id for t in spec.tasks]
    assert order.index("a") < order.index("b") and order.index("c") < order.index("b")
    a, b, c, lone = (spec.task(i) for i in ("a", "b", "c", "lone"))
    assert a.done and not b.done and not c.done and not lone.done
    assert a.output_names() == [] and c.output_names() == ["stdout"]
    assert [t["done"] for t in spec.to_dict()["tasks"] if t["id"] == "a"] == [True]
    # the done output is no output of a job file: reading it is refused
    refused('[[task]]\nid = "a"\ncommand = ["true"]\n'
            '[[task]]\nid = "b"\ncommand = ["cat"]\ndeps = ["a"]\n'
            'stdin = { task = "a", output = "done" }\n', "has no output 'done'", "none")


def test_a_task_given_before_what_it_reads_is_ordered_after_it():
    spec = compile_text('''
[[task]]
id = "late"
command = ["cat"]
stdin = { task = "early", output = "stdout" }
[[task]]
id = "early"
command = "echo hi"
stdout = true
''')
    assert [t.id for t in spec.tasks] == ["early", "late"]
    assert spec.task("early").command == ["sh", "-c", "echo hi"]


def test_options_per_task():
    spec = compile_text('''
name = "opts"
after = ["12", "prep"]
[[task]]
id = "x"
command = ["./sim", "%{TASK_ID}"]
array = "1-100:3"
resources = { cpus = 2, memory = "4GiB", gpus = 0.5, licences = 3 }
priority = -4
timeout = 90
cwd = "/scratch/%{JOB_ID}"
stdout_path = "out/%{TASK_ID}.txt"
env = { SEED = "%{TASK_ID}" }
''')
    x = spec.task("x")
    assert list(x.array) == list(range(1, 101, 3)) and spec.size() == 34
    assert x.resources == {"cpus": 2, "memory": 4 << 30, "gpus": 0.5, "licences": 3}
    assert x.priority == -4 and x.timeout == 90.0
    assert x.cwd == "/scratch/%{JOB_ID}" and x.stdout_path == "out/%{TASK_ID}.txt"
    assert spec.after == ["12", "prep"]
    d = spec.to_dict()
    assert d["tasks"][0]["array"] == "1-100:3" and d["tasks"][0]["array_size"] == 34
    json.dumps(d)       # JSON as it is


def test_local_files_are_relative_to_the_job_file(tmp_path):
    (tmp_path / "in.csv").write_text("1,2\n")
    spec = compile_text('''
[[task]]
id = "t"
command = ["wc"]
stdin = { file = "in.csv" }
inputs = [ { path = "data/copy.csv", file = "in.csv" } ]
''', base=str(tmp_path))
    t = spec.task("t")
    assert t.stdin.path == str(tmp_path / "in.csv")
    assert t.inputs[0][0] == "data/copy.csv"
    refused('[[task]]\nid = "t"\ncommand = ["wc"]\nstdin = { file = "nope.csv" }\n',
            "nope.csv", "not a readable file", base=str(tmp_path))


@pytest.mark.parametrize("text, fragments", [
    ('nmae = "x"\n[[task]]\nid = "a"\ncommand = ["true"]\n', ["unknown key 'nmae'"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\noutput = ["x"]\n',
     ["task 1 (id 'a')", "unknown key 'output'", "did you mean 'outputs'?"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\n[[task]]\nid = "a"\ncommand = ["true"]\n',
     ["task id 'a' given twice"]),
    ('[[task]]\nid = "a"\ncommand = ["cat"]\nstdin = { task = "zz", output = "stdout" }\n',
     ["task 'a' stdin", "no task 'zz'"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\noutputs = ["o"]\n'
     '[[task]]\nid = "b"\ncommand = ["cat"]\nstdin = { task = "a", output = "p" }\n',
     ["task 'a' has no output 'p'", "it has: o"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\n'
     '[[task]]\nid = "b"\ncommand = ["cat"]\nstdin = { task = "a", output = "stdout" }\n',
     ["has no output 'stdout'", "none"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\ndeps = ["nobody"]\n', ["no task 'nobody'"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\nstdout = true\ndeps = ["a"]\n',
     ["depends on itself"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\noutputs = ["../x"]\n', ["'../x'", "relative"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\noutputs = ["/etc/x"]\n', ["relative"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\noutputs = ["x", "x"]\n', ["'x' given twice"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\ninputs = [ { task = "a", output = "o" } ]\n',
     ["inputs[0] path", "non-empty"]),
    ('[[task]]\nid = "a"\ncommand = []\n', ["command must be a non-empty list"]),
    ('[[task]]\nid = "a"\ncommand = ["x", 3]\n', ["command must be"]),
    ('[[task]]\nid = "a b"\ncommand = ["true"]\n', ["id must be"]),
    ('name = "x"\n', ["no tasks"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\nresources = { cpus = 0 }\n',
     ["resources cpus", "out of range"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\nresources = { gpus = 1.5 }\n',
     ["more than one GPU must be a whole number"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\nresources = { memory = "lots" }\n',
     ["'lots' is not a size"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\ntimeout = -1\n', ["timeout", "out of range"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\ntimeout = "soon"\n', ["not a duration"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\nmax_retries = "x"\n', ["max_retries"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\narray = "9-1"\n', ["ends before it starts"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\narray = "0-99999999"\n', ["more than 1000000"]),
    ('[[task]]\nid = "a"\ncommand = ["echo", "%{TASKID}"]\n', ["unknown placeholder %{TASKID}"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\nenv = { SQUALL_TASK_ID = "1" }\n',
     ["SQUALL_TASK_ID is set by squall"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\nenv = { "1X" = "1" }\n',
     ["not an environment variable name"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\nstdout = "yes"\n', ["stdout must be true or false"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\narray = "1-3"\n'
     '[[task]]\nid = "b"\ncommand = ["cat"]\nstdin = { task = "a", output = "stdout" }\n',
     ["has no output"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\narray = "1-3"\n'
     '[[task]]\nid = "b"\ncommand = ["true"]\ndeps = ["a"]\n', ["task 'a' is an array",
                                                              "after"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\nstdout = true\n'
     '[[task]]\nid = "b"\ncommand = ["cat"]\narray = "1-3"\n'
     'stdin = { task = "a", output = "stdout" }\n', ["an array takes no stdin"]),
    ('[[task]]\nid = "a"\ncommand = ["true"]\narray = "1-3"\noutputs = ["x"]\n',
     ["an array takes no outputs"]),
    ('this is = not toml', ["not TOML"]),
    ('name = "123"\n[[task]]\nid = "a"\ncommand = ["true"]\n', ["not only digits"]),
])
def test_bad_job_files_are_refused_with_the_place_named(text, fragments):
    refused(text, *fragments)


def test_a_cycle_is_named():
    message = refused('''
[[task]]
id = "a"
command = ["cat"]
stdout = true
stdin = { task = "c", output = "stdout" }
[[task]]
id = "b"
command = ["cat"]
stdout = true
stdin = { task = "a", output = "stdout" }
[[task]]
id = "c"
command = ["cat"]
stdout = true
deps = ["b"]
''', "cycle")
    cycle = message.split("cycle: ", 1)[1].split(" -> ")
    assert cycle[0] == cycle[-1] and sorted(set(cycle)) == ["a", "b", "c"]


def test_a_long_chain_compiles_without_recursion():
    n = 5000
    parts = ['[[task]]\nid = "t0"\ncommand = ["true"]\nstdout = true\n']
    for i in range(1, n):
        parts.append('[[task]]\nid = "t%d"\ncommand = ["cat"]\nstdout = true\n'
                     'stdin = { task = "t%d", output = "stdout" }\n' % (i, i - 1))
    spec = compile_text("".join(reversed(parts)))
    assert [t.id for t in spec.tasks] == ["t%d" % i for i in range(n)]


# ---------------------------------------------------------------------------
# Values

def test_values():
    assert list(jobfile.parse_array("1-10")) == list(range(1, 11))
    assert list(jobfile.parse_array("0-9:4")) == [0, 4, 8]
    assert list(jobfile.parse_array("7")) == [7]
    for bad in ("", "a-b", "1-10:0", "10-1", "1,2", "-3", "0-4294967296"):
        with pytest.raises(JobError):
            jobfile.parse_array(bad)
    assert jobfile.parse_size("512M") == 512 * 10 ** 6
    assert jobfile.parse_size("4GiB") == 4 << 30
    assert jobfile.parse_size("1.5KiB") == 1536
    assert jobfile.parse_size(1000) == 1000
    for bad in ("4 apples", "-1", "", True):
        with pytest.raises(JobError):
            jobfile.parse_size(bad)
    assert jobfile.parse_duration("90") == 90.0
    assert jobfile.parse_duration("10m") == 600.0 and jobfile.parse_duration("2h") == 7200.0
    for bad in ("0", "1y", "", -5, 10 ** 9):
        with pytest.raises(JobError):
            jobfile.parse_duration(bad)
    assert jobfile.parse_gpus("0.125") == 0.125 and jobfile.parse_gpus("2") == 2
    for bad in ("0.0005", "1.5", "x", "-1"):
        with pytest.raises(JobError):
            jobfile.parse_gpus(bad)
    assert jobfile.expand("%{JOB_ID}/%{TASK_ID}/%{CWD}/100%%", 7, "a") == "7/a/%{CWD}/100%"


def test_command_line_job():
    spec = jobfile.from_command(["./sim.sh", "--seed", "%{TASK_ID}"], array="1-1000",
                                cpus="2", memory="1G", resources=["licences=1"],
                                env=["A=b=c"], max_retries="3", timeout="1h", priority="5",
                                after=["3,prep", "4"])
    t = spec.tasks[0]
    assert spec.name == "sim.sh" and spec.size() == 1000 and list(t.array)[:2] == [1, 2]
    assert t.resources == {"cpus": 2, "memory": 10 ** 9, "licences": 1}
    assert t.env == {"A": "b=c"} and t.max_retries == 3 and t.timeout == 3600.0
    assert spec.after == ["3", "prep", "4"]
    # a single command is a plain task "0"
    single = jobfile.from_command(["true"])
    assert single.tasks[0].array is None and single.tasks[0].id == "0" and single.size() == 1


def test_array_file(tmp_path):
    f = tmp_path / "items"
    f.write_text("alpha\nbeta gamma\n\ndelta\n")
    t = jobfile.from_command(["echo"], array_file=str(f)).tasks[0]
    assert t.array_items == ["alpha", "beta gamma", "", "delta"] and list(t.array) == [0, 1, 2, 3]
    f.write_bytes(b"\xff\n")
    with pytest.raises(JobError, match="not UTF-8"):
        jobfile.from_command(["echo"], array_file=str(f))
    with pytest.raises(JobError, match="cannot read"):
        jobfile.from_command(["echo"], array_file=str(tmp_path / "missing"))
    with pytest.raises(JobError, match="exclude each other"):
        jobfile.from_command(["echo"], array="1-2", array_file=str(f))


# ---------------------------------------------------------------------------
# The command line (no broker is asked: these fail or print before)

def test_submit_of_a_script_says_to_use_run(tmp_path):
    out = run(["submit", "pipeline.py", "--parts", "3"])
    assert out.returncode == 2
    assert "squall run pipeline.py --parts 3" in out.stderr


@pytest.mark.parametrize("argv, fragment", [
    (["submit"], "give the program after --"),
    (["submit", "sim.sh"], "put the program after --: squall submit [OPTIONS] -- sim.sh"),
    (["submit", "--"], "give the program to run after --"),
    (["submit", "--array", "1-0", "--", "true"], "--array: '1-0' ends before it starts"),
    (["submit", "--array", "x", "--", "true"], "not an index or a range"),
    (["submit", "--cpus", "0", "--", "true"], "--cpus: 0 is out of range"),
    (["submit", "--memory", "much", "--", "true"], "--memory: 'much' is not a size"),
    (["submit", "--gpus", "0.3333", "--", "true"], "thousandths"),
    (["submit", "--resource", "licences", "--", "true"], "is not NAME=VALUE"),
    (["submit", "--max-retries", "-1", "--", "true"], "--max-retries"),
    (["submit", "--timeout", "forever", "--", "true"], "--timeout: 'forever' is not a duration"),
    (["submit", "--priority", "high", "--", "true"], "--priority: 'high' is not a whole number"),
    (["submit", "--env", "NOVALUE", "--", "true"], "--env: 'NOVALUE' is not NAME=VALUE"),
    (["submit", "--stdin", "/nonexistent", "--", "true"], "--stdin: /nonexistent is not a "
                                                          "readable file"),
    (["submit", "--array-file", "/nonexistent", "--", "true"], "cannot read /nonexistent"),
    (["submit", "--name", "has space", "--", "true"], "--name"),
    (["submit", "--after", "no way", "--", "true"], "--after"),
    (["submit", "--", "echo", "%{JOBID}"], "unknown placeholder %{JOBID}"),
    (["submit", "--file", DIAMOND, "--cpus", "2"], "with --file, tasks take their options"),
    (["submit", "--file", DIAMOND, "--", "true"], "either --file or a program"),
    (["submit", "--file", "/nonexistent.toml"], "/nonexistent.toml"),
    (["submit", "--stdin", __file__, "--array", "1-2", "--", "cat"],
     "--stdin: an array takes no input"),
    (["submit", "--stdout", "out/%{CWD}", "--", "true"], "%{CWD} may only begin a path"),
    (["submit", "--cwd", "../up", "--", "true"], "--cwd: '../up': an absolute path, or one "
                                                 "relative"),
    (["submit", "--cwd", "a//b", "--", "true"], "without '..' or empty parts"),
    (["submit", "--cwd", "%{CWD}/x", "--", "true"], "--cwd: %{CWD} is what this names"),
    (["job", "list", "--state", "sleeping"], "'sleeping' is not a state"),
    (["task", "list", "1", "--state", "done"], "'done' is not a state"),
])
def test_bad_options_are_usage_errors(argv, fragment):
    out = run(argv)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert fragment in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_cwd_and_cwd_paths_compile():
    spec = compile_text('[[task]]\nid = "x"\ncommand = ["ls", "%{CWD}"]\ncwd = "sub/dir"\n'
                        'stdout_path = "%{CWD}/ls.txt"\nenv = { HERE = "%{CWD}" }\n')
    x = spec.task("x")
    assert x.cwd == "sub/dir" and x.stdout_path == "%{CWD}/ls.txt"
    assert x.command == ["ls", "%{CWD}"] and x.env == {"HERE": "%{CWD}"}
    with pytest.raises(jobfile.JobError, match="cwd: 'a/../b': an absolute path"):
        compile_text('[[task]]\nid = "x"\ncommand = "true"\ncwd = "a/../b"\n')
    with pytest.raises(jobfile.JobError, match="cwd: give a non-empty path"):
        compile_text('[[task]]\nid = "x"\ncommand = "true"\ncwd = 3\n')


def test_bad_job_file_from_the_command_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[task]]\nid = "a"\ncommand = ["true"]\nstdin = { task = "b", '
                   'output = "stdout" }\n')
    out = run(["submit", "--file", str(bad)])
    assert out.returncode == 2 and "%s: task 'a' stdin: no task 'b'" % bad in out.stderr


def test_dry_run_prints_the_job():
    out = run(["submit", "--dry-run", "--array", "0-9", "--cpus", "2", "--env", "K=V",
               "--name", "sweep", "--", "sh", "-c", "echo $SQUALL_TASK_ID", "--not-ours"])
    assert out.returncode == 0, out.stderr
    job = json.loads(out.stdout)
    assert job["name"] == "sweep" and job["size"] == 10
    task = job["tasks"][0]
    # what follows -- is the program's, its own options included
    assert task["command"] == ["sh", "-c", "echo $SQUALL_TASK_ID", "--not-ours"]
    assert task["array"] == "0-9" and task["resources"] == {"cpus": 2}
    assert task["env"] == {"K": "V"}
    out = run(["submit", "--dry-run", "--file", DIAMOND, "--name", "d2", "--after", "5"])
    job = json.loads(out.stdout)
    assert job["name"] == "d2" and job["after"] == ["5"]
    assert [t["id"] for t in job["tasks"]][0] == "a"


def test_help_documents_exit_codes():
    for argv in (["submit"], ["job"], ["job", "wait"], ["task", "list"], ["run"]):
        out = run(argv + ["--help"])
        assert out.returncode == 0 and "exit codes" in out.stdout, argv
    assert "4 no such job" in run(["job", "wait", "--help"]).stdout


def test_tables_and_state_filters():
    from squall import cli
    jobcli = cli._jobs()
    job = {"id": 17, "name": "sweep", "state": "running", "detached": True, "attached": False,
           "tasks": {"waiting": 5, "running": 2, "finished": 3, "failed": 1, "cancelled": 0},
           "created": 1795252410.0, "ended": None}
    table = jobcli.jobs_table([job]).splitlines()
    assert table[0].split()[:4] == ["id", "name", "state", "tasks"]
    assert table[1].split()[:4] == ["17", "sweep", "running", "11"]
    assert "5 waiting, 2 running, 3 finished, 1 failed" in table[1]
    task = {"id": 517, "task": 1, "state": "failed", "exit_code": 3, "governor": 2,
            "attempts": 1, "started": 1795252411.0, "ended": 1795252412.5,
            "error": "exited with status 3\nmore"}
    row = jobcli.tasks_table([task]).splitlines()[1]
    assert row.split()[:5] == ["517", "failed", "3", "2", "1"]
    assert "1.5s" in row and row.endswith("exited with status 3")
    assert jobcli._states(["running,failed", "finished"], jobcli.JOB_STATES, "--state") == 7
    assert jobcli._states(None, jobcli.TASK_STATES, "--state") == 0
    assert jobcli._wait_code([dict(job, state="finished")]) == 0
    assert jobcli._wait_code([dict(job, state="failed")]) == 1
    assert jobcli._wait_code([None]) == 5
