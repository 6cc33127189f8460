"""Pickling of Python tasks: functions (cloudpickle, cached) and argument
templates in which data objects become input indexes (persistent ids, read
back by governor/executor.py)."""
from __future__ import annotations

import io
import pickle
import struct
import weakref
from typing import Any, Callable, List, Tuple

try:
    import cloudpickle
except ImportError:                 # pragma: no cover - a declared dependency
    cloudpickle = None

PICKLE = "py/pickle"
#   Content type of a pickled function that "py" tasks take as input 0.
PY_FUNCTION = "py/function"
_PROTOCOL = pickle.HIGHEST_PROTOCOL

if cloudpickle is not None:
    import types
    from collections import ChainMap

    _cloud_code_reduce = cloudpickle.Pickler.dispatch_table.get(types.CodeType)

    def _code_reduce(code):
        #   cloudpickle 3.1.3 names every code object "<dynamic-code>", so a
        #   remote traceback would lose its file names and source lines;
        #   the real file name is given back (pickles of one function stay
        #   the same from one call to the next).
        reduced = _cloud_code_reduce(code)
        args = tuple(code.co_filename if isinstance(a, str) and a == "<dynamic-code>" else a
                     for a in reduced[1])
        return (reduced[0], args) + tuple(reduced[2:])

    class _Pickler(cloudpickle.Pickler):
        if _cloud_code_reduce is not None:
            dispatch_table = ChainMap({types.CodeType: _code_reduce},
                                      cloudpickle.Pickler.dispatch_table)

    def _cloud_dumps(obj: Any) -> bytes:
        with io.BytesIO() as file:
            _Pickler(file, protocol=_PROTOCOL).dump(obj)
            return file.getvalue()

#   Pickled functions by function object: a function used for 20 000 tasks is
#   pickled once. (A closure is pickled with the values its cells hold when
#   first used.)
_fn_cache: "weakref.WeakKeyDictionary[Any, bytes]" = weakref.WeakKeyDictionary()


def dumps(obj: Any) -> bytes:
    """Pickles a value: plain pickle when it can, else cloudpickle (lambdas,
    closures, classes defined in __main__)."""
    try:
        data = pickle.dumps(obj, protocol=_PROTOCOL)
        #   Things of __main__ pickled by reference would not load remotely.
        if b"__main__" not in data or cloudpickle is None:
            return data
    except Exception:
        if cloudpickle is None:
            raise
    return _cloud_dumps(obj)


def loads(data: bytes) -> Any:
    return pickle.loads(data)


#   A data value whose buffers total this much or more is laid out with them
#   out of band (OOB_MAGIC, below): the same bound as an executor's results
#   (governor/executor.py, _SHARE_MIN), from which a governor hands values
#   to executors as shared segments, so that a task reads the client's
#   arrays and frames in place instead of unpickling a copy of them.
_OOB_MIN = 1 << 20


class _OutOfBand:
    """A large bytes or bytearray value, pickled as its type called on its
    buffer out of band: the pickle (whose head a reader searches, and that
    an in-band copy would make 1 MiB long) holds only the call, and the
    bytes are copied once, into the layout. It loads as the value itself,
    of its own type: nothing of this class is in the pickle."""
    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __reduce_ex__(self, protocol: int):
        return type(self.value), (pickle.PickleBuffer(self.value),)


def dumps_value(obj: Any) -> bytes:
    """A data object's bytes (content type "py/pickle"): dumps(obj), or for
    a value with large buffers (numpy arrays, pandas blocks, bytes pickled
    by protocol 5) the out-of-band layout, its buffers 64-byte aligned."""
    parts = dumps_value_parts(obj)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def dumps_value_parts(obj: Any) -> List[Any]:
    """dumps_value's bytes as a list of parts to be joined: the out-of-band
    layout's buffers are the value's own memory (contiguous memoryviews),
    not copies, so that the one who stores them copies them once."""
    if type(obj) in (bytes, bytearray) and len(obj) >= _OOB_MIN:
        obj = _OutOfBand(obj)
    found: List[Any] = []

    def pickled(cls: Any) -> bytes:
        with io.BytesIO() as file:
            cls(file, protocol=_PROTOCOL, buffer_callback=found.append).dump(obj)
            return file.getvalue()
    try:
        head = pickled(pickle.Pickler)
        if b"__main__" in head and cloudpickle is not None:
            raise pickle.PicklingError("__main__")
    except Exception:
        if cloudpickle is None:
            raise
        found.clear()
        head = pickled(_Pickler)
    if not found:
        return [head]               # nothing out of band: the plain pickle
    try:
        raws = [b.raw() for b in found]
    except BufferError:             # not contiguous: pickled in band
        return [dumps(obj)]
    if sum(r.nbytes for r in raws) < _OOB_MIN:
        return [dumps(obj)]
    table = 32 + 16 * len(raws)
    pos = table + len(head)
    entries = []
    body: List[Any] = [head]
    for raw in raws:
        pad = -pos % 64
        if pad:
            body.append(bytes(pad))
        pos += pad
        entries.append(struct.pack("<QQ", pos, raw.nbytes))
        body.append(raw)
        pos += raw.nbytes
    return [struct.pack("<8sQIIQ", OOB_MAGIC, pos, len(raws), 0, len(head))] + entries + body


#   The versions a pickled function needs where it is loaded, after its
#   pickle (pickle.loads ignores what follows; docs/protocol.md, "py"):
#   governor/executor.py compares them with its own and fails the task
#   naming both, where cloudpickle would fail with an error that names
#   neither. Only a pickle that cloudpickle wrote by value (it names
#   cloudpickle) needs them: a function pickled by reference loads
#   anywhere its module is.
_VERSIONS_MAGIC = b"SQVERS01"


def _versions_trailer(cloud: bool) -> bytes:
    import struct
    import sys
    text = "python=%d.%d.%d" % sys.version_info[:3]
    if cloud:
        text += " cloudpickle=%s" % getattr(cloudpickle, "__version__", "?")
    data = text.encode()
    return data + struct.pack("<I", len(data)) + _VERSIONS_MAGIC


def function_bytes(fn: Callable) -> bytes:
    try:
        data = _fn_cache.get(fn)
    except TypeError:               # not weakly referenceable
        data = None
    if data is None:
        data = _cloud_dumps(fn) if cloudpickle else \
            pickle.dumps(fn, protocol=_PROTOCOL)
        if b"cloudpickle" in data:
            data += _versions_trailer(True)
        try:
            _fn_cache[fn] = data
        except TypeError:
            pass
    return data


def _make_picklers(is_ref: Callable[[Any], bool], ref_id: Callable[[Any], int]):
    class _Plain(pickle.Pickler):
        def __init__(self, file, inputs):
            super().__init__(file, protocol=_PROTOCOL)
            self.inputs = inputs
            self.index = {}

        def persistent_id(self, obj):
            if is_ref(obj):
                oid = ref_id(obj)
                i = self.index.get(oid)
                if i is None:
                    i = self.index[oid] = len(self.inputs)
                    self.inputs.append(oid)
                return i
            return None

    if cloudpickle is None:
        return _Plain, None

    class _Cloud(_Pickler):
        def __init__(self, file, inputs):
            super().__init__(file, protocol=_PROTOCOL)
            self.inputs = inputs
            self.index = {}

        persistent_id = _Plain.persistent_id

    return _Plain, _Cloud


class TemplatePickler:
    """Pickles (args, kwargs) with references (data objects, task outputs,
    futures) replaced by input indexes."""

    def __init__(self, is_ref: Callable[[Any], bool], ref_id: Callable[[Any], int]):
        self._plain, self._cloud = _make_picklers(is_ref, ref_id)

    def dumps(self, args: tuple, kwargs: dict) -> Tuple[bytes, List[int]]:
        """The template and the object ids of its inputs, in index order."""
        for cls in (self._plain, self._cloud):
            if cls is None:
                continue
            buf = io.BytesIO()
            inputs: List[int] = []
            try:
                cls(buf, inputs).dump((args, kwargs))
            except Exception:
                if cls is self._cloud or self._cloud is None:
                    raise
                continue
            data = buf.getvalue()
            #   Things of __main__ pickled by reference would not load remotely.
            if cls is self._plain and self._cloud is not None and b"__main__" in data:
                continue
            return data, inputs
        raise AssertionError("unreachable")


def _bin(data: bytes) -> bytes:
    n = len(data)
    if n < 256:
        return b"\xc4" + bytes((n,)) + data
    if n < 65536:
        return b"\xc5" + n.to_bytes(2, "big") + data
    return b"\xc6" + n.to_bytes(4, "big") + data


def py_config(fn_bytes: bytes, args_bytes: bytes) -> bytes:
    """msgpack of the "py" task config {"fn": bin, "args": bin}."""
    if args_bytes:
        return b"\x82\xa2fn" + _bin(fn_bytes) + b"\xa4args" + _bin(args_bytes)
    return b"\x81\xa2fn" + _bin(fn_bytes)


#   {"fn_in": true}: the function is the task's input 0 (docs/protocol.md,
#   the "py" kind), one data object per function and session.
_FN_IN = b"\x81\xa5fn_in\xc3"
_FN_IN_ARGS = b"\x82\xa5fn_in\xc3\xa4args"


def py_config_fn_in(args_bytes: bytes) -> bytes:
    """msgpack of {"fn_in": true, "args": bin}."""
    if args_bytes:
        return _FN_IN_ARGS + _bin(args_bytes)
    return _FN_IN


def _str(text: str) -> bytes:
    data = text.encode()
    n = len(data)
    if n < 32:
        return bytes((0xa0 | n,)) + data
    if n < 256:
        return b"\xd9" + bytes((n,)) + data
    return b"\xda" + n.to_bytes(2, "big") + data


def py_config_actor(args_bytes: bytes) -> bytes:
    """msgpack of {"fn_in": true, "actor": true, "args": bin}: the task
    that makes an actor (its class is input 0)."""
    head = b"\x83" if args_bytes else b"\x82"
    config = head + b"\xa5fn_in\xc3\xa5actor\xc3"
    return config + (b"\xa4args" + _bin(args_bytes) if args_bytes else b"")


def py_config_call(host: int, method: str, args_bytes: bytes) -> bytes:
    """msgpack of {"call": host, "method": name, "args": bin}."""
    head = b"\x83" if args_bytes else b"\x82"
    config = head + b"\xa4call\xce" + host.to_bytes(4, "big") + b"\xa6method" + _str(method)
    return config + (b"\xa4args" + _bin(args_bytes) if args_bytes else b"")


def py_config_call_head(host: int, method: str) -> bytes:
    """py_config_call(host, method, args_bytes) up to args_bytes' bin, when
    args_bytes is not empty: head + _bin(args_bytes) is that config."""
    return b"\x83\xa4call\xce" + host.to_bytes(4, "big") + b"\xa6method" + _str(method) \
        + b"\xa4args"


# ----------------------------------------------------------------------------
# Results: a pickle, maybe followed by the warnings the task raised
# (governor/executor.py: WARN_MAGIC, u32 length, pickle of a list of
# (module, qualname, message, filename, lineno), u32 length, WARN_MAGIC).

WARN_MAGIC = b"\0SQWARN"


def _warning_category(module: str, qualname: str) -> type:
    """The category by name, only from modules this process already has (a
    remote name must not make the client import anything); UserWarning if
    it is not there."""
    import sys
    obj: Any = sys.modules.get(module)
    try:
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        return UserWarning
    if isinstance(obj, type) and issubclass(obj, Warning):
        return obj
    return UserWarning


def _emit_warnings(data: bytes) -> None:
    import warnings
    try:
        items = pickle.loads(data)
    except Exception:               # a damaged trailer loses the warnings, not the value
        return
    for module, qualname, message, filename, lineno in items:
        #   warn_explicit goes through this process's filters and
        #   showwarning, as if the task had run here.
        warnings.warn_explicit(message, _warning_category(module, qualname),
                               filename, lineno)


#   A value whose buffers a Python task's executor left out of band
#   (pickle protocol 5; governor/executor.py, docs/protocol.md "py"):
#   OOB_MAGIC, u64 total size, u32 number of buffers, u32 0, u64 size of
#   the head, per buffer u64 offset from the value's start and u64 size;
#   then the head: the pickle and its warnings.
OOB_MAGIC = b"\0SQOOB1\0"


def _read_oob(stream: "io.BytesIO") -> Any:
    """The value with out-of-band buffers at the stream's position (its
    warnings re-emitted); the stream is left after it. Its arrays are views
    of the stream's (writable) buffer: no copy."""
    import struct
    start = stream.tell()
    data = stream.getbuffer()
    try:
        _, total, n, _, head_size = struct.unpack_from("<8sQIIQ", data, start)
        table = 32 + 16 * n
        if start + total > len(data) or table + head_size > total:
            raise pickle.UnpicklingError("a value with out-of-band buffers is damaged")
        buffers = []
        for i in range(n):
            offset, size = struct.unpack_from("<QQ", data, start + 32 + 16 * i)
            if offset < table + head_size or offset + size > total:
                raise pickle.UnpicklingError("a value with out-of-band buffers is damaged")
            buffers.append(data[start + offset:start + offset + size])
        head = io.BytesIO(data[start + table:start + table + head_size])
    finally:
        data.release()
    value = read_value(head, buffers)
    stream.seek(start + total)
    return value


def read_value(stream: "io.BytesIO", buffers: Any = None) -> Any:
    """Loads one value from the stream and re-emits the warnings that follow
    it, if any (the stream may hold more values after them)."""
    if buffers is None:
        pos = stream.tell()
        if stream.read(len(OOB_MAGIC)) == OOB_MAGIC:
            stream.seek(pos)
            return _read_oob(stream)
        stream.seek(pos)
    value = pickle.Unpickler(stream, buffers=buffers).load()
    pos = stream.tell()
    if stream.read(len(WARN_MAGIC)) == WARN_MAGIC:
        size = int.from_bytes(stream.read(4), "little")
        payload = stream.read(size)
        stream.read(4 + len(WARN_MAGIC))        # the closing length and magic
        _emit_warnings(payload)
    else:
        stream.seek(pos)
    return value


def read_values(data: bytes, n: int) -> list:
    """The n values one after the other in data (a gather's concat), each
    as read_value reads it: the magics looked for in data in place, not read
    out of the stream and sought back over per value."""
    stream = io.BytesIO(data)
    values = []
    for _ in range(n):
        if data.startswith(OOB_MAGIC, stream.tell()):
            values.append(_read_oob(stream))
            continue
        values.append(pickle.load(stream))
        pos = stream.tell()
        if data.startswith(WARN_MAGIC, pos):
            stream.seek(pos + len(WARN_MAGIC))
            size = int.from_bytes(stream.read(4), "little")
            payload = stream.read(size)
            stream.read(4 + len(WARN_MAGIC))        # the closing length and magic
            _emit_warnings(payload)
    return values


def loads_result(data: bytes) -> Any:
    """A task's pickled result (warnings re-emitted)."""
    return read_value(io.BytesIO(data))
