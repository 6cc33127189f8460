"""The built-in task kinds as classes (docs/protocol.md, section 7).

Each takes task options as keywords besides its own arguments: name=,
cpus=, resources=, max_retries=, timeout=, priority=. Inputs may be data
objects, tasks with one output, or bytes (uploaded as constants).
"""
from __future__ import annotations

import ctypes
import shlex
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _lib as L
from ._objects import Task
from .errors import SquallError

__all__ = ["Noop", "Concat", "Slice", "Sleep", "Load", "Store", "Execute",
           "Program", "Input", "Output"]


def _config(ptr: Optional[int], size: ctypes.c_size_t, what: str) -> bytes:
    if not ptr:
        raise SquallError("invalid %s configuration" % what)
    return L.take_buffer(ptr, size.value)


class Noop(Task):
    """Outputs its inputs unchanged (output i is input i)."""

    def __init__(self, *inputs: Any, outputs: Optional[int] = None, **options):
        super().__init__("noop", inputs, len(inputs) if outputs is None else outputs,
                         None, **options)


class Concat(Task):
    """One output: its inputs joined."""

    def __init__(self, inputs: Sequence[Any], **options):
        super().__init__("concat", list(inputs), 1, None, **options)


class Slice(Task):
    """Bytes [start, end) of its input (end None: to the end)."""

    def __init__(self, input: Any, start: int, end: Optional[int] = None, **options):
        size = ctypes.c_size_t()
        config = _config(L.sq_config_slice(start, -1 if end is None else end,
                                           ctypes.byref(size)), size, "slice")
        super().__init__("slice", [input], 1, config, **options)


class Sleep(Task):
    """Waits `seconds`, then outputs its input (or nothing without one)."""

    def __init__(self, input: Any = None, seconds: float = 0.0, **options):
        size = ctypes.c_size_t()
        config = _config(L.sq_config_sleep(float(seconds), ctypes.byref(size)), size, "sleep")
        inputs = [] if input is None else [input]
        options.setdefault("cpus", 0)
        super().__init__("sleep", inputs, len(inputs), config, **options)


class Load(Task):
    """Reads a file on the governor that runs it."""

    def __init__(self, path: str, content_type: str = "", **options):
        size = ctypes.c_size_t()
        config = _config(L.sq_config_path(path.encode(), ctypes.byref(size)), size, "load")
        super().__init__("load", [], 1, config, content_types=[content_type], **options)


class Store(Task):
    """Writes its input to a file on the governor that runs it."""

    def __init__(self, input: Any, path: str, **options):
        size = ctypes.c_size_t()
        config = _config(L.sq_config_path(path.encode(), ctypes.byref(size)), size, "store")
        super().__init__("store", [input], 0, config, **options)


class Input:
    """An input file of Execute: `Input(path, data_object)`."""

    def __init__(self, path: str, data: Any):
        self.path = path
        self.data = data


class Output:
    """An output file of Execute: `Output(path, content_type="")`."""

    def __init__(self, path: str, content_type: str = ""):
        self.path = path
        self.content_type = content_type


InputSpec = Union[Input, Tuple[str, Any]]
OutputSpec = Union[Output, str]


class Execute(Task):
    """Runs a program in a private working directory on a governor.

    args: a list of arguments, or a string run by `sh -c`. stdin: a data
    object given as standard input. inputs: Input(path, obj) or (path, obj)
    pairs written as files before the program starts. outputs: paths (or
    Output(path, content_type)) read back as outputs after it exits. stdout:
    True (or a content type) to make standard output an output. Outputs are
    in this order: stdout first (if captured), then the files. A non-zero
    exit status fails the task.

    stream=True makes standard output a stream (docs/protocol.md,
    "Streams"): the tasks reading it as their stdin, submitted with this
    one, start when it starts and read its bytes as they are written, over
    a window of 4 chunks of 1 MiB each; nothing is stored, so a stream
    cannot be kept or fetched (have a task read it into an output).
    """

    def __init__(self, args: Union[str, Sequence[str]], stdin: Any = None,
                 inputs: Sequence[InputSpec] = (), outputs: Sequence[OutputSpec] = (),
                 stdout: Union[bool, str, None] = None, env: Optional[Dict[str, str]] = None,
                 stream: bool = False, **options):
        if stream and not stdout:
            raise SquallError("Execute(stream=True) streams its stdout: give stdout=True")
        argv = ["sh", "-c", args] if isinstance(args, str) else [str(a) for a in args]
        if not argv:
            raise SquallError("Execute needs a program")
        objs: List[Any] = []
        in_paths: List[str] = []
        stdin_index = -1
        if stdin is not None:
            stdin_index = 0
            objs.append(stdin)
            in_paths.append("")
        for spec in inputs:
            path, data = (spec.path, spec.data) if isinstance(spec, Input) else spec
            objs.append(data)
            in_paths.append(path)
        out_paths: List[str] = []
        types: List[str] = []
        stdout_index = -1
        if stdout:
            stdout_index = 0
            out_paths.append("")
            types.append(stdout if isinstance(stdout, str) else "")
        for spec in outputs:
            out = spec if isinstance(spec, Output) else Output(spec)
            out_paths.append(out.path)
            types.append(out.content_type)
        env_list = ["%s=%s" % kv for kv in (env or {}).items()]
        size = ctypes.c_size_t()
        ptr = L.sq_config_execute(
            L.cstrs(argv), len(argv), L.cstrs(in_paths), len(in_paths), stdin_index,
            L.cstrs(out_paths), len(out_paths), stdout_index,
            L.cstrs(env_list) if env_list else None, ctypes.byref(size))
        config = _config(ptr, size, "execute")
        options.setdefault("name", argv[2][:60] if isinstance(args, str) else argv[0])
        super().__init__("execute", objs, len(out_paths), config, content_types=types,
                         **options)
        self.args = argv
        if stream:
            self.session._check(L.sq_object_set_stream(self.session._h, self.outputs[0].id))


class Program:
    """A reusable Execute template.

    `Program(args, stdin=False, inputs=("a.txt",), outputs=("b.txt",),
    stdout=True)` then `program(data_for_stdin, data_for_a)` (positional:
    stdin first if stdin=True, then the input files in order; or by file
    name as keywords with `inputs={"a.txt": obj}`) makes an Execute task in
    the current session. Task options given here apply to every call and can
    be overridden per call.
    """

    def __init__(self, args: Union[str, Sequence[str]], stdin: bool = False,
                 inputs: Sequence[str] = (), outputs: Sequence[OutputSpec] = (),
                 stdout: Union[bool, str, None] = None, env: Optional[Dict[str, str]] = None,
                 **options):
        self.args = args
        self.stdin = stdin
        self.input_paths = list(inputs)
        self.outputs = list(outputs)
        self.stdout = stdout
        self.env = env
        self.options = options

    def __call__(self, *objects: Any, inputs: Optional[Dict[str, Any]] = None,
                 **options) -> Execute:
        objects_ = list(objects)
        stdin = objects_.pop(0) if self.stdin and objects_ else None
        if self.stdin and stdin is None:
            raise SquallError("this program reads standard input: give it as first argument")
        named = dict(inputs or {})
        if len(objects_) > len(self.input_paths):
            raise SquallError("too many inputs: the program takes %d file(s)"
                              % len(self.input_paths))
        specs = []
        for i, path in enumerate(self.input_paths):
            if i < len(objects_):
                specs.append(Input(path, objects_[i]))
            elif path in named:
                specs.append(Input(path, named.pop(path)))
            else:
                raise SquallError("input file %r not given" % path)
        if named:
            raise SquallError("unknown input file(s) %s" % ", ".join(named))
        merged = dict(self.options)
        merged.update(options)
        return Execute(self.args, stdin=stdin, inputs=specs, outputs=self.outputs,
                       stdout=self.stdout, env=self.env, **merged)

    def __repr__(self) -> str:
        args = self.args if isinstance(self.args, str) else shlex.join(self.args)
        return "<squall.Program %s>" % args
