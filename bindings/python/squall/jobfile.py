"""Jobs described on the command line (`squall submit [options] -- PROGRAM`)
and in job files (`squall submit --file job.toml`), compiled to a JobSpec: a
graph of execute tasks with their input files, standard input and output,
dependencies and options (docs/jobs.md).

Everything here checks its input and raises JobError with a message naming
the place (the option, or the file, task and key), so that a bad job is
refused before anything reaches the cluster. Standard library only: cli.py
loads this file by path, like itself, before the package is importable.
"""
from __future__ import annotations

import os
import re

# Bounds, so that a typo (`--array 1-1e9`) is an error and not a memory blow-up.
MAX_ARRAY = 1000000             # elements of one array
MAX_FILE_TASKS = 100000         # [[task]] tables in one job file
MAX_ARRAY_FILE = 64 << 20       # bytes of an --array-file
MAX_RESOURCES = 16              # resource kinds of a task (docs/protocol.md SUBMIT)
MAX_TIMEOUT = 2 ** 31 / 1000    # seconds, as the client library takes them
# docs/protocol.md, "Array tasks": the broker expands them in an array's
# elements; for a plain task the client expands all but CWD (the governor's).
PLACEHOLDERS = ("JOB_ID", "TASK_ID", "ARRAY_SIZE", "ITEM", "CWD")
# where a task's deps (their first output, or the empty one a dep without
# outputs is given) are written in its directory
DEP_DIR = ".squall-deps"
RESERVED_ENV = ("SQUALL_JOB_ID", "SQUALL_TASK_ID", "SQUALL_ARRAY_SIZE", "SQUALL_ARRAY_ITEM")

_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESOURCE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,63}$")
_PLACEHOLDER = re.compile(r"%%|%\{([^}]*)\}")
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(i?)B?\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|d)?\s*$")


class JobError(ValueError):
    """A job description that cannot run; the message says where and why."""


class Ref:
    """An output of another task of the same job: `stdout` (its captured
    standard output) or one of its output files."""

    def __init__(self, task, output):
        self.task = task
        self.output = output

    def to_dict(self):
        return {"task": self.task, "output": self.output}


class LocalFile:
    """A file on the submitting machine, uploaded with the job."""

    def __init__(self, path):
        self.path = path

    def to_dict(self):
        return {"file": self.path}


class TaskSpec:
    """One execute task, or one array of them (`array` set: one element per
    index, each with SQUALL_TASK_ID its index)."""

    def __init__(self, id, command):
        self.id = id
        self.command = command          # argv, non-empty
        self.env = {}
        self.cwd = None
        self.stdin = None               # Ref, LocalFile or None
        self.inputs = []                # [(path, Ref or LocalFile)]
        self.outputs = []               # file paths read back after it exits
        self.stdout = False             # its standard output is its output "stdout"
        self.stdout_path = None         # or written to this file (the governor's)
        self.stderr_path = None
        self.deps = []                  # ids of tasks it waits for, without data
        # a dep of another task that has no outputs: given one more output,
        # empty, that its governor makes when it exits well (execute's
        # "done"), so that the broker can order the dependent task after it
        self.done = False
        self.resources = {}
        self.max_retries = 0
        self.timeout = None             # seconds
        self.priority = 0
        self.array = None               # a range of indices, or None
        self.array_items = None         # --array-file: the line of each index

    def output_names(self):
        """Its outputs in Execute's order: "stdout" first when captured."""
        return (["stdout"] if self.stdout else []) + list(self.outputs)

    def to_dict(self):
        d = {"id": self.id, "command": list(self.command)}
        for key in ("env", "cwd", "outputs", "stdout", "stdout_path", "stderr_path", "deps",
                    "done", "resources", "max_retries", "timeout", "priority"):
            d[key] = getattr(self, key)
        d["stdin"] = self.stdin.to_dict() if self.stdin else None
        d["inputs"] = [dict(path=p, **src.to_dict()) for p, src in self.inputs]
        d["array"] = _ranges_text(self.array) if self.array is not None else None
        d["array_size"] = len(self.array) if self.array is not None else None
        return d


class JobSpec:
    """A named graph of TaskSpecs, in an order where every task comes after
    those it reads from or depends on; `after`: jobs (ids or names) that
    must have finished before any of its tasks starts."""

    def __init__(self, name, tasks, after=()):
        self.name = name
        self.tasks = tasks
        self.after = list(after)
        self.name_tasks = True          # tasks named by their ids (a job file's)

    def task(self, id):
        for t in self.tasks:
            if t.id == id:
                return t
        return None

    def size(self):
        """Tasks it runs: an array counts its elements."""
        return sum(len(t.array) if t.array is not None else 1 for t in self.tasks)

    def to_dict(self):
        return {"name": self.name, "after": self.after, "size": self.size(),
                "tasks": [t.to_dict() for t in self.tasks]}


# ---------------------------------------------------------------------------
# Values, each from the command line's text or a job file's TOML value.

def parse_array(text, where="--array"):
    """`1-10000`, `1-10000:2` or `7` (docs/protocol.md, "Array tasks": an
    array is one range): the list of its indices."""
    if not isinstance(text, str) or not text.strip():
        raise JobError("%s: give indices like 1-100, 0-99:2 or 7" % where)
    m = re.match(r"^\s*([0-9]+)(?:\s*-\s*([0-9]+)(?:\s*:\s*([0-9]+))?)?\s*$", text)
    if not m:
        raise JobError("%s: %r is not an index or a range A-B[:STEP]" % (where, text))
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) is not None else first
    step = int(m.group(3)) if m.group(3) is not None else 1
    if last < first:
        raise JobError("%s: %r ends before it starts" % (where, text))
    if step < 1:
        raise JobError("%s: %r: the step must be 1 or more" % (where, text))
    if last >= 2 ** 32:
        raise JobError("%s: %r: indices go up to %d" % (where, text, 2 ** 32 - 1))
    if (last - first) // step + 1 > MAX_ARRAY:
        raise JobError("%s: %r has more than %d elements" % (where, text, MAX_ARRAY))
    return range(first, last + 1, step)


def read_array_file(path, where="--array-file"):
    """One element per line (a final empty line is not one): the lines."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_ARRAY_FILE + 1)
    except OSError as exc:
        raise JobError("%s: cannot read %s: %s" % (where, path, exc.strerror or exc))
    if len(data) > MAX_ARRAY_FILE:
        raise JobError("%s: %s is larger than %d bytes" % (where, path, MAX_ARRAY_FILE))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JobError("%s: %s is not UTF-8 text (byte %d)" % (where, path, exc.start))
    if "\0" in text:
        raise JobError("%s: %s holds a NUL byte" % (where, path))
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise JobError("%s: %s has no lines" % (where, path))
    if len(lines) > MAX_ARRAY:
        raise JobError("%s: %s has more than %d lines" % (where, path, MAX_ARRAY))
    return lines


def parse_size(value, where="--memory"):
    """Bytes from 1073741824, "512M" / "4G" (powers of 1000) or "512MiB" /
    "4GiB" (powers of 1024)."""
    if isinstance(value, bool):
        raise JobError("%s: %r is not a size" % (where, value))
    if isinstance(value, int):
        number, unit, binary = value, "", ""
    else:
        m = _SIZE.match(str(value))
        if not m:
            raise JobError("%s: %r is not a size (bytes, or like 512M, 4GiB)" % (where, value))
        number, unit, binary = float(m.group(1)), m.group(2).upper(), m.group(3)
    base = 1024 if binary else 1000
    size = int(number * base ** " KMGT".index(unit or " "))
    if size < 0 or size >= 2 ** 63:
        raise JobError("%s: %r is out of range" % (where, value))
    return size


def parse_duration(value, where="--timeout"):
    """Seconds from a number or "90s", "10m", "2h", "1d"; more than 0."""
    if isinstance(value, bool):
        raise JobError("%s: %r is not a duration" % (where, value))
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        m = _DURATION.match(str(value))
        if not m:
            raise JobError("%s: %r is not a duration (seconds, or like 90s, 10m, 2h)"
                           % (where, value))
        seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2) or "s"]
    if not 0 < seconds < MAX_TIMEOUT:
        raise JobError("%s: %r is out of range (more than 0, less than %d s)"
                       % (where, value, MAX_TIMEOUT))
    return seconds


def parse_count(value, where, least=0, most=2 ** 32 - 1):
    if isinstance(value, bool):
        raise JobError("%s: %r is not a whole number" % (where, value))
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise JobError("%s: %r is not a whole number" % (where, value))
    if not isinstance(value, int):
        raise JobError("%s: %r is not a whole number" % (where, value))
    if not least <= value <= most:
        raise JobError("%s: %d is out of range (%d to %d)" % (where, value, least, most))
    return value


def parse_gpus(value, where="--gpus"):
    """A whole number of devices, or a fraction of one in thousandths
    (0.5, 0.125), as docs/protocol.md SUBMIT takes them."""
    if isinstance(value, bool):
        raise JobError("%s: %r is not a number of GPUs" % (where, value))
    try:
        amount = float(value)
    except (TypeError, ValueError):
        raise JobError("%s: %r is not a number of GPUs" % (where, value))
    if amount != amount or amount < 0 or amount >= 2 ** 32:
        raise JobError("%s: %r is out of range" % (where, value))
    if amount >= 1 and amount != int(amount):
        raise JobError("%s: %r: more than one GPU must be a whole number" % (where, value))
    if amount < 1 and abs(amount * 1000 - round(amount * 1000)) > 1e-9:
        raise JobError("%s: %r: a fraction of a GPU is in thousandths (0.5, 0.125)"
                       % (where, value))
    return int(amount) if amount == int(amount) else amount


def parse_resource(name, value, where):
    """(name, amount) of one resource: cpus and custom names whole numbers,
    memory a size, gpus whole or a fraction."""
    if not isinstance(name, str) or not _RESOURCE_NAME.match(name):
        raise JobError("%s: %r is not a resource name (letters, digits, _ . -)" % (where, name))
    if name == "memory":
        return name, parse_size(value, "%s memory" % where)
    if name == "gpus":
        return name, parse_gpus(value, "%s gpus" % where)
    least = 1 if name == "cpus" else 0
    return name, parse_count(value, "%s %s" % (where, name), least)


def parse_key_value(text, where):
    if "=" not in text:
        raise JobError("%s: %r is not NAME=VALUE" % (where, text))
    return tuple(text.split("=", 1))


def check_env(name, value, where):
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise JobError("%s: %r is not an environment variable name" % (where, name))
    if name in RESERVED_ENV:
        raise JobError("%s: %s is set by squall for each task" % (where, name))
    if not isinstance(value, str):
        raise JobError("%s: the value of %s must be a string" % (where, name))
    if "\0" in value:
        raise JobError("%s: the value of %s holds a NUL byte" % (where, name))
    check_placeholders(value, "%s %s" % (where, name))


def check_placeholders(text, where):
    """Only PLACEHOLDERS expand (and %% is %); any other %{...} is a
    mistake worth an error rather than a literal."""
    for m in _PLACEHOLDER.finditer(text):
        if m.group(0) != "%%" and m.group(1) not in PLACEHOLDERS:
            raise JobError("%s: unknown placeholder %%{%s} (known: %s)"
                           % (where, m.group(1), ", ".join("%%{%s}" % p for p in PLACEHOLDERS)))


def output_path(path, where, base):
    """A --stdout / --stderr / stdout_path / stderr_path value as the
    execute config takes it: an absolute path on the governor, a relative
    one joined to base (the submitting shell's directory, or the job
    file's), or one beginning with %{CWD}: the task's working directory,
    which the governor replaces (docs/protocol.md, execute's stdout_path)."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise JobError("%s: give a non-empty path" % where)
    check_placeholders(path, where)
    if path.startswith("%{CWD}"):
        return path
    if any(m.group(1) == "CWD" for m in _PLACEHOLDER.finditer(path)):
        raise JobError("%s: %%{CWD} may only begin a path (%%{CWD}/out.txt)" % where)
    path = os.path.normpath(os.path.join(base, path))
    if len(os.fsencode(path)) > 4096:
        raise JobError("%s: longer than 4096 bytes" % where)
    return path


def check_cwd(value, where):
    """A working directory: absolute, or relative to the task's own
    directory on its governor (made there), without '..'."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise JobError("%s: give a non-empty path" % where)
    check_placeholders(value, where)
    if any(m.group(1) == "CWD" for m in _PLACEHOLDER.finditer(value)):
        raise JobError("%s: %%{CWD} is what this names" % where)
    if len(os.fsencode(value)) > 4096:
        raise JobError("%s: longer than 4096 bytes" % where)
    if not value.startswith("/"):
        parts = value.split("/")
        if any(part in ("", "..") for part in parts):
            raise JobError("%s: %r: an absolute path, or one relative to the task's own "
                           "directory without '..' or empty parts" % (where, value))
    return value


def expand(text, job_id, task_id):
    """A plain task's text as the broker expands an array element's:
    %{JOB_ID}, %{TASK_ID}, %{ARRAY_SIZE} (1), %{ITEM} ("") and %% replaced,
    %{CWD} left for the governor."""
    values = {"JOB_ID": str(job_id), "TASK_ID": str(task_id), "ARRAY_SIZE": "1", "ITEM": ""}

    def one(m):
        if m.group(0) == "%%":
            return "%"
        return values.get(m.group(1), m.group(0))
    return _PLACEHOLDER.sub(one, text)


def check_task_path(path, where):
    """A file in the task's private directory, by docs/protocol.md's rules
    for execute's in_paths/out_paths: relative, no `..`, no empty parts."""
    if not isinstance(path, str) or not path:
        raise JobError("%s: a path must be a non-empty string" % where)
    if "\0" in path or path.startswith("/") or any(
            part in ("", ".", "..") for part in path.split("/")) or path.split("/")[0] == DEP_DIR:
        raise JobError("%s: %r must be relative to the task's directory, without '..', '.' "
                       "or empty parts" % (where, path))
    return path


def _ranges_text(indices):
    """range(1, 10, 2) -> "1-9:2"."""
    if len(indices) == 1:
        return str(indices[0])
    step = indices[1] - indices[0]
    return "%d-%d%s" % (indices[0], indices[-1], ":%d" % step if step != 1 else "")


# ---------------------------------------------------------------------------
# The command line

def from_command(command, name=None, array=None, array_file=None, cpus=None, memory=None,
                 gpus=None, resources=(), max_retries=None, timeout=None, priority=None,
                 cwd=None, env=(), stdout=None, stderr=None, after=(), stdin=None):
    """The JobSpec of `squall submit [options] -- COMMAND`: one task (id 0),
    or one array. Option values are the command line's strings."""
    if not command:
        raise JobError("give the program to run after --, e.g. squall submit -- ./sim.sh")
    for arg in command:
        if "\0" in arg:
            raise JobError("the command holds a NUL byte")
        check_placeholders(arg, "the command")
    task = TaskSpec("0", list(command))
    if array is not None and array_file is not None:
        raise JobError("--array and --array-file exclude each other")
    if array is not None:
        task.array = parse_array(array)
    if array_file is not None:
        task.array_items = read_array_file(array_file)
        task.array = range(len(task.array_items))
    if cpus is not None:
        task.resources["cpus"] = parse_count(cpus, "--cpus", 1)
    if memory is not None:
        task.resources["memory"] = parse_size(memory)
    if gpus is not None:
        task.resources["gpus"] = parse_gpus(gpus)
    for text in resources:
        key, value = parse_key_value(text, "--resource")
        if key in task.resources:
            raise JobError("--resource %s: given twice" % key)
        k, v = parse_resource(key, value, "--resource")
        task.resources[k] = v
    if len(task.resources) > MAX_RESOURCES:
        raise JobError("at most %d kinds of resources" % MAX_RESOURCES)
    if max_retries is not None:
        task.max_retries = parse_count(max_retries, "--max-retries", 0, 1000)
    if timeout is not None:
        task.timeout = parse_duration(timeout)
    if priority is not None:
        task.priority = parse_count(priority, "--priority", -2 ** 31, 2 ** 31 - 1)
    if cwd is not None:
        task.cwd = check_cwd(cwd, "--cwd")
    for text in env:
        key, value = parse_key_value(text, "--env")
        check_env(key, value, "--env")
        task.env[key] = value
    if stdout is not None:
        task.stdout_path = output_path(stdout, "--stdout", os.getcwd())
    if stderr is not None:
        task.stderr_path = output_path(stderr, "--stderr", os.getcwd())
    if stdin is not None:
        if not os.path.isfile(stdin) or not os.access(stdin, os.R_OK):
            raise JobError("--stdin: %s is not a readable file" % stdin)
        if task.array is not None:
            raise JobError("--stdin: an array takes no input (each element may read a "
                           "file of its own, e.g. %{TASK_ID}.in, from a shared directory)")
        task.stdin = LocalFile(os.path.abspath(stdin))
    if name is not None and not _job_name_ok(name):
        raise JobError("--name: %r: 1 to 64 characters, not only digits, no spaces or /"
                       % name)
    job_name = name or re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(command[0]))[:64]
    if not _job_name_ok(job_name):
        job_name = "job"
    spec = JobSpec(job_name, [task], _check_after(after, "--after"))
    # a single command is a plain task named "0" (`squall task list` shows
    # it so), given the environment and placeholders of an element 0;
    # an array's elements are listed by index
    spec.name_tasks = task.array is None
    return spec


def _job_name_ok(name):
    # all digits would read as a job id in `squall job info J`
    return bool(isinstance(name, str) and _ID.match(name) and not name.isdigit())


def _check_after(after, where):
    refs = []
    for ref in after:
        for one in (ref.split(",") if isinstance(ref, str) else [ref]):
            one = str(one).strip() if not isinstance(one, bool) else ""
            if not one or not (one.isdigit() or _job_name_ok(one)):
                raise JobError("%s: %r is not a job id or name" % (where, ref))
            if one not in refs:
                refs.append(one)
    return refs


# ---------------------------------------------------------------------------
# Job files

JOB_KEYS = ("name", "task", "after")
TASK_KEYS = ("id", "command", "inputs", "outputs", "stdin", "stdout", "stdout_path",
             "stderr_path", "resources", "deps", "max_retries", "timeout", "priority", "env",
             "cwd", "array")


def _unknown(table, known, where):
    import difflib
    for key in table:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, 1)
            raise JobError("%s: unknown key %r (%sknown: %s)" % (
                where, key, "did you mean %r? " % near[0] if near else "", ", ".join(known)))


def _source(value, where, base, path_key=False):
    """A Ref from {task, output}, a LocalFile from {file} (relative to the
    job file's directory)."""
    if not isinstance(value, dict):
        raise JobError("%s: give {task = ..., output = ...} or {file = ...}" % where)
    if "file" in value:
        _unknown(value, ("file", "path") if path_key else ("file",), where)
        path = value["file"]
        if not isinstance(path, str) or not path:
            raise JobError("%s: file must be a non-empty string" % where)
        path = os.path.join(base, path)
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            raise JobError("%s: %s is not a readable file" % (where, path))
        return LocalFile(os.path.abspath(path))
    _unknown(value, ("task", "output", "path") if path_key else ("task", "output"), where)
    for key in ("task", "output"):
        if not isinstance(value.get(key), str) or not value.get(key):
            raise JobError("%s: %s must be a non-empty string" % (where, key))
    return Ref(value["task"], value["output"])


def _string_list(value, where):
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise JobError("%s: give a list of strings" % where)
    return value


def _compile_task(table, where, base):
    id = table.get("id")
    if not isinstance(id, str) or not _ID.match(id):
        _unknown(table, TASK_KEYS, where)
        raise JobError("%s: id must be 1 to 64 letters, digits, _ . or -" % where)
    where = "%s (id %r)" % (where, id)
    _unknown(table, TASK_KEYS, where)
    command = table.get("command")
    if isinstance(command, str):
        command = ["sh", "-c", command]
    if not isinstance(command, list) or not command or not all(
            isinstance(a, str) for a in command) or not command[0]:
        raise JobError("%s: command must be a non-empty list of strings (or a string run "
                       "by sh -c)" % where)
    for arg in command:
        if "\0" in arg:
            raise JobError("%s: command holds a NUL byte" % where)
        check_placeholders(arg, "%s command" % where)
    task = TaskSpec(id, command)
    task.stdout = table.get("stdout", False)
    if not isinstance(task.stdout, bool):
        raise JobError("%s: stdout must be true or false (a file: stdout_path)" % where)
    for path in _string_list(table.get("outputs", []), "%s outputs" % where):
        check_task_path(path, "%s outputs" % where)
        if path in task.outputs:
            raise JobError("%s outputs: %r given twice" % (where, path))
        if path == "stdout" and task.stdout:
            raise JobError("%s outputs: a file named 'stdout' would not be told from the "
                           "captured standard output" % where)
        task.outputs.append(path)
    if "stdin" in table:
        task.stdin = _source(table["stdin"], "%s stdin" % where, base)
    inputs = table.get("inputs", [])
    if not isinstance(inputs, list):
        raise JobError("%s inputs: give a list of {path, task, output} or {path, file}" % where)
    for n, item in enumerate(inputs):
        w = "%s inputs[%d]" % (where, n)
        src = _source(item, w, base, path_key=True)
        path = check_task_path(item.get("path"), "%s path" % w)
        if any(p == path for p, _ in task.inputs):
            raise JobError("%s: path %r given twice" % (w, path))
        task.inputs.append((path, src))
    task.deps = list(_string_list(table.get("deps", []), "%s deps" % where))
    resources = table.get("resources", {})
    if not isinstance(resources, dict):
        raise JobError("%s resources: give a table like {cpus = 2, memory = \"4GiB\"}" % where)
    if len(resources) > MAX_RESOURCES:
        raise JobError("%s resources: at most %d kinds" % (where, MAX_RESOURCES))
    for key, value in resources.items():
        k, v = parse_resource(key, value, "%s resources" % where)
        task.resources[k] = v
    if "max_retries" in table:
        task.max_retries = parse_count(table["max_retries"], "%s max_retries" % where, 0, 1000)
    if "timeout" in table:
        task.timeout = parse_duration(table["timeout"], "%s timeout" % where)
    if "priority" in table:
        task.priority = parse_count(table["priority"], "%s priority" % where,
                                    -2 ** 31, 2 ** 31 - 1)
    env = table.get("env", {})
    if not isinstance(env, dict):
        raise JobError("%s env: give a table like {NAME = \"value\"}" % where)
    for key, value in env.items():
        check_env(key, value, "%s env" % where)
        task.env[key] = value
    if "cwd" in table:
        task.cwd = check_cwd(table["cwd"], "%s cwd" % where)
    for key in ("stdout_path", "stderr_path"):
        if key in table:
            setattr(task, key, output_path(table[key], "%s %s" % (where, key), base))
    if task.stdout and task.stdout_path:
        raise JobError("%s: stdout = true makes standard output an output; stdout_path "
                       "writes it to a file: give one of them" % where)
    if "array" in table:
        task.array = parse_array(table["array"], "%s array" % where)
        _check_array(task, where)
    return task


def _check_array(task, where):
    """The broker's array tasks take no inputs and have no outputs
    (docs/protocol.md, "Array tasks"): refused here with the key named."""
    for key, value in (("stdin", task.stdin), ("inputs", task.inputs),
                       ("outputs", task.outputs), ("stdout", task.stdout),
                       ("deps", task.deps)):
        if value:
            raise JobError("%s: an array takes no %s (an array task has no inputs or "
                           "outputs)" % (where, key))


def _order(tasks, where):
    """tasks sorted so that each comes after what it needs; JobError naming
    a cycle if there is one."""
    by_id = {t.id: t for t in tasks}
    needs = {}
    for t in tasks:
        w = "%s: task %r" % (where, t.id)
        refs = ([("stdin", t.stdin)] if isinstance(t.stdin, Ref) else []) + [
            ("input %r" % p, s) for p, s in t.inputs if isinstance(s, Ref)]
        wanted = []
        for what, ref in refs:
            src = by_id.get(ref.task)
            if src is None:
                raise JobError("%s %s: no task %r in this job" % (w, what, ref.task))
            if ref.output not in src.output_names():
                raise JobError("%s %s: task %r has no output %r (it has: %s)"
                               % (w, what, ref.task, ref.output,
                                  ", ".join(src.output_names()) or "none"))
            if src.array is not None:
                raise JobError("%s %s: task %r is an array, its elements' outputs are not "
                               "one input (use deps to wait for all of them)"
                               % (w, what, ref.task))
            wanted.append(ref.task)
        for dep in t.deps:
            if dep not in by_id:
                raise JobError("%s deps: no task %r in this job" % (w, dep))
            # The broker orders tasks only by the objects they read
            # (docs/protocol.md SUBMIT): a dep reads the task's first
            # output, written under DEP_DIR; a task without outputs is
            # given an empty one (done). An array's elements are made by
            # the broker as they run: no one object ends with all of them.
            if by_id[dep].array is not None:
                raise JobError("%s deps: task %r is an array, there is no one output that "
                               "ends with all its elements (put it in a job of its own and "
                               "use after)" % (w, dep))
            if not by_id[dep].output_names():
                by_id[dep].done = True
            wanted.append(dep)
        if t.id in wanted:
            raise JobError("%s: depends on itself" % w)
        needs[t.id] = wanted
    ordered, state = [], {}

    def visit(id, path):
        # iterative depth-first post-order, so that a 100 000-task chain does
        # not hit Python's recursion limit
        stack = [(id, iter(needs[id]))]
        state[id] = 1
        path.append(id)
        while stack:
            cur, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                path.pop()
                state[cur] = 2
                ordered.append(by_id[cur])
            elif state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                raise JobError("%s: tasks depend on each other in a cycle: %s"
                               % (where, " -> ".join(cycle)))
            elif state.get(nxt) is None:
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(needs[nxt])))

    for t in tasks:
        if t.id not in state:
            visit(t.id, [])
    return ordered


def from_toml(text, where="job file", base="."):
    """The JobSpec of a job file's text; local files it names are relative
    to base (the file's directory)."""
    try:
        import tomllib
    except ImportError:
        raise JobError("job files need Python 3.11 or later (tomllib)")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise JobError("%s: not TOML: %s" % (where, exc))
    return from_dict(doc, where, base)


def from_dict(doc, where="job file", base="."):
    _unknown(doc, JOB_KEYS, where)
    name = doc.get("name", "job")
    if not _job_name_ok(name):
        raise JobError("%s: name %r: 1 to 64 letters, digits, _ . or -, not only digits"
                       % (where, name))
    tables = doc.get("task")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict)
                                                             for t in tables):
        raise JobError("%s: no tasks: give at least one [[task]] table" % where)
    if len(tables) > MAX_FILE_TASKS:
        raise JobError("%s: more than %d tasks" % (where, MAX_FILE_TASKS))
    tasks, seen = [], set()
    for n, table in enumerate(tables):
        task = _compile_task(table, "%s: task %d" % (where, n + 1), base)
        if task.id in seen:
            raise JobError("%s: task id %r given twice" % (where, task.id))
        seen.add(task.id)
        tasks.append(task)
    after = doc.get("after", [])
    if not isinstance(after, list):
        raise JobError("%s after: give a list of job ids or names" % where)
    return JobSpec(name, _order(tasks, where), _check_after(after, "%s after" % where))


def from_file(path):
    try:
        with open(path, "rb") as f:
            data = f.read((64 << 20) + 1)
    except OSError as exc:
        raise JobError("%s: %s" % (path, exc.strerror or exc))
    if len(data) > 64 << 20:
        raise JobError("%s: larger than 64 MiB" % path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise JobError("%s: not UTF-8 text" % path)
    return from_toml(text, path, os.path.dirname(os.path.abspath(path)))
