"""squall Python executor: runs "py" tasks for a governor.

Over 800 lines: the governor embeds this one file and runs it from its
workdir, where it has no package to import siblings from.

The governor (governor/pyexec.c) embeds this file, writes it into its working
directory and starts it as `python executor.py FD GOVERNOR_PID`; FD is one
end of a Unix socketpair. The executor is persistent: it runs one task at a
time (in the order they came), for as many tasks as the governor gives it, and exits when the socket
closes, or is killed (SIGKILL) when the governor dies, even mid-task.

Framing (docs/protocol.md, "py"): every message is a little-endian u64 body
length followed by the body, so that both sides need nothing but `struct`.

  governor -> executor: u8 op (1 = run, 2 = make the actor: run, and keep
      the result; 3 = call a method of the actor: fn is its name; 4 = run
      a task with streams), u32 n_in, u32 n_out, u32 fn_len,
      u32 args_len, [op 4: u32 stream_in, u32 stream_out (0xffffffff:
      none)], fn, args, then per input u32 type_len, u64 size, type,
      data (an input with type_len 0xffffffff has no type and no data:
      its u64 is the run number and, shifted by 32, the output index of
      an output of the task run before, kept here: see _kept), then per
      output u32 type_len, type
      Op 4's first byte carries (SCM_RIGHTS) the executor's ends of the
      stream pipes, the input's first: the stream input (empty in the
      message) is given to the function as an iterator of bytes chunks
      read from its pipe; the stream output must be an iterable of bytes
      (or str) chunks, written to its pipe as they come (a full pipe
      blocks the function: that is the stream's flow control), and is
      empty in the reply.
      A run frame's op may have bit 0x80 set (a task piped behind
      another): the executor says when it starts it. Bit 0x40: the first
      byte also carries, after any stream pipes, the task's two log
      descriptors, which are its fds 1 and 2 while it runs (tasklog.c).
      Bit 0x20 (shared segments): a u32 count of segments follows the
      head (after op 4's stream fields), and that many memory files
      come with the first byte (SCM_RIGHTS, after the stream pipes and log descriptors),
      one per input whose type_len has bit 31 set: such an input is
      u32 type_len | 0x80000000, u64 size, type, u64 segment id, and
      its value is the first size bytes of its memory file, which the
      executor maps read-only in place of receiving them (see _Segment).
      Input cache (see _cache): an input whose type_len has bit 30 set
      is followed, after its bytes, by a u64 token to keep its value
      under; an input with type_len 0xfffffffe is the value kept under
      its u64 (no type, no bytes); after the outputs, optionally u32 n
      and n u64 tokens to forget (n 0xffffffff: all).
      or u8 0x14 (forget), u32 n, n u64 tokens (or n 0xffffffff: all)
      or u8 5 (cancel), u32 number: the run frame (ops 1 to 4, numbered
      from 1 in the order they came) not to run, if not run yet
  executor -> governor, one reply per run frame, in their order:
                     u8 0, u32 n, then per output u64 size, data
                     (an output whose size has bit 63 set is not there:
                     it is in the next memory file sent with the reply,
                     SCM_RIGHTS, of that size less the bit, which the
                     governor seals and keeps)
                     or u8 1, the failure message (UTF-8)
                     or u8 2: not run (cancelled, or an input it
                     should find here is not: the governor runs it again)
                     preceded, for a run frame with op bit 0x80 that
                     runs, by u8 3, u64 time.monotonic_ns() (the
                     governor's CLOCK_MONOTONIC) when it started
      and, before all, once: u8 4, u64 its resident bytes when ready
      and, while a task runs (not replies): u8 6 when it waits on tasks it
      submitted (squall.secede: its cpus may go to others), u8 7 when it
      goes on (squall.rejoin), u8 8 to ask for the key pair of its
      client (squall.get_client()), answered by the governor's frame u8 6
      and, as text, "k", the Z85 public key, secret key and broker public
      key, separated by spaces ("-" without keys; "!" and why when refused),
      and, for each RUN frame (u8 0x10, the pickled (fn, args, kwargs)),
      read when idle or between tasks: u8 10, u8 ok, the pickled result
      (or exception); not a reply
      and, whenever segments it mapped are unmapped: u8 9, u32 n, then
      per segment u64 id, u32 how many times it was handed over for that
      mapping (the governor keeps one handed again meanwhile)
      and, after the reply of a task that seceded: u8 11 (sync), answered
      by the governor's frame u8 7 once it has read all sent before; no
      task starts meanwhile (the governor cancels the tasks piped behind
      one that secedes when it reads so, which may be after it returned)

The executor runs one task at a time, but the governor may write small
tasks to it while it runs one (pipelining, governor/pyexec.c): they wait
here, in order, and run next without a round trip through the governor.
The replies of an actor's quick calls run so may go several in one write
(_REPLIES_HELD, _HOLD_S): each is still one reply, in order, within 2 ms.

Two things ride inside these fields without changing the framing (the
client, bindings/python/squall/errors.py, reads them back):
  - a failure message ends with EXC_SEPARATOR and the base64 of the pickled
    exception when it pickles (and unpickles) in at most _EXC_B64_MAX bytes,
    so the client can raise the task's own exception; the whole message stays
    under the governor's cap on failure messages (_MESSAGE_MAX);
  - warnings the task raised, and those its inputs carried (so a warning of
    an intermediate task reaches the client with the final result), follow
    the first output's pickle as WARN_MAGIC, u32 length, pickle of
    [(module, qualname, message, filename, lineno)], u32 length, WARN_MAGIC,
    at most _WARN_MAX of them: pickle.loads stops at the pickle's STOP
    opcode, so every reader of the value ignores them; the framing at both
    ends lets a reader find them after a pickle (a stream of values) or at
    the end of a value (an input here), and the client re-emits them
    through its own warning filters.

Inputs of content type "py/pickle" are unpickled before the call, others
are passed as bytes. A pickled value may carry its buffers out of band
(pickle protocol 5, docs/protocol.md "py"): OOB_MAGIC, u64 total size,
u32 number of buffers, u32 0, u64 size of the head, then per buffer u64
offset (from the value's start, a multiple of 64), u64 size; the head (the
pickle and its warnings) follows the table. Read from a segment, such
buffers are read-only views of the governor's memory: numpy arrays and
pandas blocks come out without a copy, and cannot be written to. Outputs of type "py/pickle" are pickled results, others
must be bytes (or str, encoded as UTF-8). The arguments template `args` is
a pickle of (args, kwargs) whose persistent ids are input indexes; when it
is empty the function is called with the inputs as positional arguments.

Only the standard library and cloudpickle (needed to load functions that
the client pickled by value) are used.
"""
import base64
import collections
import collections.abc
import contextlib
import io
import mmap
import os
import pickle
import select
import signal
import _signal
import socket
import struct
import sys
import threading
import time
import traceback
import types
import warnings
import weakref

PICKLE = "py/pickle"
_FN_CACHE_MAX = 512
#   The governor keeps 8 KiB of a failure message (governor/compute.c,
#   S_ERR_SIZE); what is cut off there would break the pickled exception.
_MESSAGE_MAX = 8000
_EXC_B64_MAX = 6000
EXC_SEPARATOR = "\n--- pickled exception ---\n"
WARN_MAGIC = b"\0SQWARN"
#   A task warning in a loop must not make its output grow without bound.
_WARN_MAX = 100

_HEAD = struct.Struct("<BIIII")
_STREAMS = struct.Struct("<II")
_NO_STREAM = 0xFFFFFFFF
_READ_MAX = 1 << 20
_INPUT = struct.Struct("<IQ")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
#   Frames are read up to this much at a time; a bigger one is read on
#   into a buffer of its own.
_RECV_MAX = 1 << 16
#   Shared segments (see the module doc): at most _SEGS_MAX per frame or
#   reply; an output of at least _SHARE_MIN bytes goes into a memory file.
_SEGS_MAX = 64
_SHARE_MIN = 1 << 20
_OP_SEGMENTS = 0x20
_SEG_INPUT = 0x80000000
#   Input cache (governor/pyexec.c, "Input cache"; see _cache).
_CACHE_OFFER = 0x40000000
_CACHED_INPUT = 0xFFFFFFFE
_FORGET_ALL = 0xFFFFFFFF
_OP_FORGET = 0x14
_SEG_OUTPUT = 1 << 63
_RELEASED = b"\x09"
_SEG = struct.Struct("<IQ")
#   two stream pipes, two log descriptors and the segments
_ANC_SPACE = socket.CMSG_SPACE((4 + _SEGS_MAX) * 4)
_OP_CANCEL = 5
#   A run frame's op with this bit: a piped task, whose start the governor
#   must be told of (it counts from then): u8 3, u64 CLOCK_MONOTONIC ns.
_OP_TELL = 0x80
_OP_LOGS = 0x40     # the frame's first byte also carries the task's log fds (1, 2)
_STARTED = b"\3"
#   The first message, once preloaded: u8 4, u64 resident bytes now (a
#   task's memory limit counts from there on a new executor).
_READY = b"\4"
_SKIPPED = b"\2"
_SECEDED = b"\6"
_REJOINED = b"\7"
_CREDENTIAL = b"\x08"
_OP_CREDENTIAL = 6
#   After a task that seceded: asked (u8 11), answered (op 7) once the
#   governor has read all sent before, the secede among them.
_SYNC = b"\x0b"
_OP_SYNCED = 7
#   RUN (client.run): u8 0x10 and the pickled (fn, args, kwargs), read when
#   idle or between tasks (in the order frames came); answered u8 10, u8 ok,
#   then the pickled result, or the pickled exception if not ok. Not a reply.
_OP_RUN = 0x10
_RAN = b"\x0a"
#   An actor's calls (op 3) written ahead run back to back: their replies
#   go together, up to this many per write, or when nothing more is queued
#   to run. One write and one wakeup of the governor for several calls is
#   most of a call's cost here (the governor writes up to 32 ahead,
#   governor/pyexec.c S_CALLS_AHEAD: half of that keeps it writing while
#   these run).
_REPLIES_HELD = 16
#   A held reply goes at the latest this long after it was held, even when
#   the call behind it runs for longer (SIGALRM, _on_alarm): a result must
#   never wait for a later call, which may wait for the client to have it.
#   Only replies of calls that ran shorter than that are held: a call that
#   ends the executor (os._exit, a crash) loses with it at most the replies
#   of the quick calls of the last _HOLD_S, which then fail as ActorLost.
_HOLD_S = 0.002
_HOLD_NS = int(_HOLD_S * 1e9)
#   What _on_alarm sends: main's (sock, out, out_fds); how many replies
#   out holds, whether the timer is set, whether _send is under way.
_pending = None
_held = 0
_armed = False
_sending = False

#   Unpickled functions by their pickled bytes: a bytes key is its own hash,
#   and the same function sent for 20 000 tasks is loaded once.
_functions = {}

try:
    import cloudpickle as _cloudpickle
except ImportError:             # plain pickles still work
    _cloudpickle = None


class _TemplateUnpickler(pickle.Unpickler):
    """Loads an arguments template, putting input values where the client
    pickled data objects (their persistent ids are input indexes)."""

    def __init__(self, data, inputs):
        super().__init__(io.BytesIO(data))
        self._inputs = inputs

    def persistent_load(self, pid):
        return self._inputs[pid]


#   The client's versions follow a pickled function (bindings/python/squall/
#   _pickling.py, pickle.loads ignores them): b"python=X.Y.Z cloudpickle=V",
#   u32 length, _VERSIONS_MAGIC. A function cloudpickle wrote loads only
#   where the same cloudpickle and Python read it; elsewhere it fails with
#   an error that names neither ("Can't get attribute '_function_setstate'").
_VERSIONS_MAGIC = b"SQVERS01"


def _versions_mismatch(fn_bytes):
    """Why fn_bytes cannot be loaded here, naming both sides' versions, or
    None when the client's versions fit this executor's (or are absent)."""
    if not fn_bytes.endswith(_VERSIONS_MAGIC) or len(fn_bytes) < 12:
        return None
    (n,) = struct.unpack_from("<I", fn_bytes, len(fn_bytes) - 12)
    if n > len(fn_bytes) - 12:
        return None
    theirs = dict(item.partition("=")[::2] for item in
                  fn_bytes[len(fn_bytes) - 12 - n:len(fn_bytes) - 12].decode(
                      errors="replace").split())
    python = "%d.%d.%d" % sys.version_info[:3]
    cloud = getattr(_cloudpickle, "__version__", None) if _cloudpickle else None
    client_python = theirs.get("python", "?")
    bad = client_python.split(".")[:2] != python.split(".")[:2]
    if theirs.get("cloudpickle"):
        bad = bad or theirs["cloudpickle"] != cloud
    if not bad:
        return None
    return ("the client and this governor's executor differ: the client has Python %s and "
            "cloudpickle %s, the executor Python %s and cloudpickle %s; a function pickled "
            "by one cloudpickle loads only with the same cloudpickle and Python version: "
            "install the same versions on both (README.md, \"Docker Compose\")"
            % (client_python, theirs.get("cloudpickle") or "(not used)", python,
               cloud or "(not installed)"))


def _function(fn_bytes):
    fn = _functions.get(fn_bytes)
    if fn is None:
        mismatch = _versions_mismatch(fn_bytes)
        if mismatch:
            raise RuntimeError(mismatch)
        fn = pickle.loads(fn_bytes)
        if len(_functions) >= _FN_CACHE_MAX:
            _functions.clear()
        _functions[fn_bytes] = fn
    return fn


def _encode(value, content_type):
    if content_type == PICKLE:
        try:
            return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            if _cloudpickle is None:
                raise
            return _cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError("output of content type %r must be bytes or str, not %s"
                    % (content_type, type(value).__name__))


#   Chains: the outputs of the last task run, by (run number, output index),
#   as sent to the governor (pickles, with the warnings they carry), when it
#   was a plain task (op 1) and the output at most _KEEP_MAX bytes. The
#   governor may write the next task of a chain before this one's reply
#   reached it: that task's input is then a reference to an output here
#   (_KEPT_INPUT), unpickled as if it had come back from the governor (a
#   copy, like every input: what a task does to its inputs never shows
#   elsewhere). A reference to something not kept (too big, or its task
#   failed or was cancelled) hands the task back unrun (_NotKept): the
#   governor runs it again when it has the output itself.
_kept = {}
_KEEP_MAX = 1 << 20
_KEPT_INPUT = 0xFFFFFFFF


class _NotKept(Exception):
    pass


#   Input cache: values of inputs unpickled once and kept by token for
#   later tasks, which the governor decides and knows exactly: it offers a
#   task's input (type_len with _CACHE_OFFER, a u64 token after its bytes)
#   only to a task that does not change its inputs (a Dask node: the task
#   config's share_inputs), names a kept one by its token alone
#   (_CACHED_INPUT), and says which tokens to forget after a run frame's
#   outputs (u32 n, n u64 tokens; n _FORGET_ALL: all), or, to an idle
#   executor, in a frame of their own (_OP_FORGET, the same list). A run
#   frame's forgets apply once its references are resolved and before its
#   offers are kept. A reference to a token not here (its value failed to
#   unpickle) hands the task back unrun (_NotKept), as a chain's does.
#   Such a task gets the kept value itself, not a copy: what the threaded
#   scheduler does too.
_cache = {}                         # token -> (value, its warnings)
_CACHED = object()                  # a field's content type: a kept value


def cached_inputs():
    """How many input values this executor keeps (tests look)."""
    return len(_cache)


def _forget_from(body, pos):
    """Forgets the tokens listed at pos in body, if anything is there."""
    if pos + _U32.size > len(body):
        return
    (n,) = _U32.unpack_from(body, pos)
    if n == _FORGET_ALL:
        _cache.clear()
        return
    for k in range(n):
        _cache.pop(_U64.unpack_from(body, pos + _U32.size + k * _U64.size)[0], None)


def _trailer_pos(body):
    """Where the forgets of a run frame start (after its outputs)."""
    op, n_in, n_out, fn_len, args_len = _HEAD.unpack_from(body, 0)
    pos = _HEAD.size
    if op & 0x0F == 4:
        pos += _STREAMS.size
    if op & _OP_SEGMENTS:
        pos += _U32.size
    pos += fn_len + args_len
    for _ in range(n_in):
        type_len, size = _INPUT.unpack_from(body, pos)
        pos += _INPUT.size
        if type_len in (_KEPT_INPUT, _CACHED_INPUT):
            continue
        if type_len & _SEG_INPUT:
            pos += (type_len & ~_SEG_INPUT) + _U64.size
        elif type_len & _CACHE_OFFER:
            pos += (type_len & ~_CACHE_OFFER) + size + _U64.size
        else:
            pos += type_len + size
    for _ in range(n_out):
        (type_len,) = _U32.unpack_from(body, pos)
        pos += _U32.size + type_len
    return pos


def _add_warnings(items, out):
    for item in items:
        if len(out) >= _WARN_MAX:
            break
        if item not in out:
            out.append(item)


# ----------------------------------------------------------------------------
# Shared segments: the governor's objects mapped here, read-only.

class _Segment(mmap.mmap):
    """A mapped memory file of the governor's. It stays mapped while any
    value read from it lives (arrays hold views of it), whatever the task:
    the governor keeps the file until told it is unmapped (_released)."""


#   Live mappings by segment id: a segment handed again while mapped is
#   not mapped twice.
_segments = weakref.WeakValueDictionary()
#   (id, times handed) of segments unmapped since the last reply.
_released = []


def _unmapped(seg_id, handed):
    _released.append((seg_id, handed[0]))


def _map_segment(seg_id, fd, size):
    """A read-only view of the segment's first size bytes; takes over fd."""
    try:
        seg = _segments.get(seg_id)
        if seg is not None:
            seg.handed[0] += 1
        else:
            try:
                seg = _Segment(fd, size, access=mmap.ACCESS_READ)
            except BaseException:
                _released.append((seg_id, 1))
                raise
            seg.handed = [1]
            _segments[seg_id] = seg
            #   The count is read when the mapping goes, not now: it holds
            #   the handovers of later tasks that used it.
            weakref.finalize(seg, _unmapped, seg_id, seg.handed)
    finally:
        os.close(fd)
    return memoryview(seg)[:size]


# ----------------------------------------------------------------------------
# Values with out-of-band buffers (see the module doc)

OOB_MAGIC = b"\0SQOOB1\0"
_OOB = struct.Struct("<8sQIIQ")
_OOB_ENTRY = struct.Struct("<QQ")
_ALIGN = 64


def _split_value(data):
    """(head, buffers) of a value's bytes: buffers None for a plain pickle
    (head is data then), else views of data."""
    if len(data) < _OOB.size or bytes(data[:len(OOB_MAGIC)]) != OOB_MAGIC:
        return data, None
    _, total, n, _, head_size = _OOB.unpack_from(data, 0)
    table = _OOB.size + n * _OOB_ENTRY.size
    if total > len(data) or table + head_size > total:
        raise ValueError("a value with out-of-band buffers is damaged")
    view = memoryview(data)
    buffers = []
    for i in range(n):
        offset, size = _OOB_ENTRY.unpack_from(data, _OOB.size + i * _OOB_ENTRY.size)
        if offset < table + head_size or offset + size > total:
            raise ValueError("a value with out-of-band buffers is damaged")
        buffers.append(view[offset:offset + size])
    return view[table:table + head_size], buffers


def _load_value(data):
    """The unpickled value and its head (where its warnings are)."""
    head, buffers = _split_value(data)
    return pickle.loads(head, buffers=buffers), head


def _dumps(value, buffers=None):
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL, buffer_callback=buffers)
    except Exception:
        if _cloudpickle is None:
            raise
        return _cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL,
                                  buffer_callback=buffers)


def _pickled_parts(value, trailer):
    """The value's bytes as a list of parts: a plain pickle (and the
    warnings trailer) when it is small or has no buffers that pickle can
    leave out of band, else the OOB_MAGIC layout, whose buffers are the
    value's own memory (not copied here)."""
    found = []
    data = _dumps(value, found.append)
    raws = []
    try:
        raws = [b.raw() for b in found]
    except BufferError:             # not contiguous: pickled in band
        raws = None
    if raws is None or (found and len(data) + sum(r.nbytes for r in raws) < _SHARE_MIN):
        found = []
        data = _dumps(value)
    if not found:
        return [data + trailer] if trailer else [data]
    head = data + trailer
    n = len(raws)
    table = _OOB.size + n * _OOB_ENTRY.size
    pos = table + len(head)
    entries = []
    parts = [None, None, head]
    for raw in raws:
        pad = -pos % _ALIGN
        if pad:
            parts.append(bytes(pad))
            pos += pad
        entries.append(_OOB_ENTRY.pack(pos, raw.nbytes))
        parts.append(raw)
        pos += raw.nbytes
    parts[0] = _OOB.pack(OOB_MAGIC, pos, n, 0, len(head))
    parts[1] = b"".join(entries)
    return parts


def _segment_of(parts):
    """A sealable memory file holding the parts, or None when one cannot be
    made (the output then goes in the reply)."""
    try:
        fd = os.memfd_create("squall-output", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except (OSError, AttributeError):
        return None
    try:
        for part in parts:
            view = memoryview(part).cast("B")
            while view:
                view = view[os.write(fd, view):]
    except OSError:
        os.close(fd)
        return None
    return fd


#   The actor this executor holds (op 2 made it; op 3 calls its methods).
#   The governor sends it nothing else while it lives.
_actor = None


class StreamReader:
    """A stream input: iterate it for its chunks (bytes) as its writer
    writes them, or read() it whole. Closing it (or returning without
    reading it all) tells the writer this reader wants no more."""

    def __init__(self, fd):
        self._fd = fd

    def __iter__(self):
        while self._fd is not None:
            chunk = os.read(self._fd, _READ_MAX)
            if not chunk:
                self.close()
                return
            yield chunk

    def read(self):
        return b"".join(self)

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _write_stream(fd, chunks):
    """Writes a stream output's chunks to its pipe as they come."""
    if isinstance(chunks, (bytes, bytearray, memoryview, str)):
        chunks = (chunks,)
    try:
        iterator = iter(chunks)
    except TypeError:
        raise TypeError("a stream output must be an iterable of bytes chunks (a generator), "
                        "not %s" % type(chunks).__name__) from None
    for chunk in iterator:
        if isinstance(chunk, str):
            chunk = chunk.encode()
        elif not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise TypeError("a stream's chunks must be bytes or str, not %s"
                            % type(chunk).__name__)
        view = memoryview(chunk)
        while view:
            try:
                n = os.write(fd, view)
            except BrokenPipeError:
                return          # every reader left: they want no more
            view = view[n:]


_capturing = False
_saved_fds = None


def _log_warnings(caught):
    """Warnings are recorded for the client; the task's log shows them too,
    as Python would have printed them."""
    if not _capturing:
        return
    for w in caught:
        try:
            sys.stderr.write(warnings.formatwarning(w.message, w.category, w.filename,
                                                    w.lineno, w.line))
        except Exception:   # noqa: BLE001 - a log line must not fail the task
            pass


def _flush_std():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:   # noqa: BLE001 - a closed or replaced stream
            pass


@contextlib.contextmanager
def _captured(log_fds):
    """The task's fds 1 and 2 are its log files (the governor's tasklog) for
    its duration: print, logging, warnings and C code writing to fd 1 or 2
    all land there, at the descriptor level."""
    global _capturing, _saved_fds
    if not log_fds:
        yield
        return
    _flush_std()
    if _saved_fds is None:
        #   The executor's own fds 1 and 2 (the governor's log), kept once.
        _saved_fds = (os.dup(1), os.dup(2))
    try:
        os.dup2(log_fds[0], 1)
        os.dup2(log_fds[1], 2)
        _capturing = True
        yield
    finally:
        _capturing = False
        _flush_std()
        os.dup2(_saved_fds[0], 1)
        os.dup2(_saved_fds[1], 2)
        for fd in log_fds:
            os.close(fd)


def _frame_fds(body):
    """How many descriptors come with the run frame: its stream pipes and
    its segments."""
    op = body[0] & ~_OP_TELL
    pos = _HEAD.size
    count = 0
    if op & ~_OP_SEGMENTS == 4:
        stream_in, stream_out = _STREAMS.unpack_from(body, pos)
        pos += _STREAMS.size
        count += (stream_in != _NO_STREAM) + (stream_out != _NO_STREAM)
    if op & _OP_SEGMENTS:
        count += _U32.unpack_from(body, pos)[0]
    return count


def _run(body, fds=(), number=0, out_fds=None):
    """Runs a frame; the parts of its reply, and in out_fds the memory
    files of its outputs (to send with it). Takes over fds."""
    fds = list(fds)
    try:
        view = memoryview(body)
        op, n_in, n_out, fn_len, args_len = _HEAD.unpack_from(view, 0)
        segments = op & _OP_SEGMENTS
        op &= ~_OP_SEGMENTS
        if op not in (1, 2, 3, 4):
            raise ValueError("unknown executor operation %d" % op)
        pos = _HEAD.size
        stream_in = stream_out = _NO_STREAM
        if op == 4:
            stream_in, stream_out = _STREAMS.unpack_from(view, pos)
            pos += _STREAMS.size
        if segments:
            pos += _U32.size
        if len(fds) != _frame_fds(body):
            raise RuntimeError("the governor sent %d descriptor(s) for this task, not %d"
                               % (len(fds), _frame_fds(body)))
        reader = StreamReader(fds.pop(0)) if stream_in != _NO_STREAM else None
        out_fd = fds.pop(0) if stream_out != _NO_STREAM else None
        try:
            return _call(op, view, pos, n_in, n_out, fn_len, args_len, stream_in, reader,
                         stream_out, out_fd, number, fds, out_fds)
        finally:
            if reader is not None:
                reader.close()
            if out_fd is not None:
                os.close(out_fd)
    finally:
        for fd in fds:              # segments _call did not get to
            os.close(fd)


def _call(op, view, pos, n_in, n_out, fn_len, args_len, stream_in, reader, stream_out, out_fd,
          number, seg_fds, out_fds):
    global _actor, _kept
    fn_bytes = bytes(view[pos:pos + fn_len])
    pos += fn_len
    args_bytes = view[pos:pos + args_len]
    pos += args_len
    #   Every segment is mapped (or its failure noted) before anything can
    #   fail, so that the governor hears of each one it handed over.
    fields = []
    offers = cached = None          # by input index: a token to keep its value
                                    # under; the value kept here it names
    for i in range(n_in):
        type_len, size = _INPUT.unpack_from(view, pos)
        pos += _INPUT.size
        if type_len < _CACHE_OFFER:     # bytes in the frame, the common case
            content_type = bytes(view[pos:pos + type_len]).decode()
            pos += type_len
            fields.append((content_type, view[pos:pos + size]))
            pos += size
            continue
        if type_len == _KEPT_INPUT:
            fields.append((None, size))
            continue
        if type_len == _CACHED_INPUT:
            if cached is None:
                cached = {}
            cached[i] = _cache.get(size)
            fields.append((_CACHED, size))
            continue
        offer = type_len & _CACHE_OFFER
        segment = type_len & _SEG_INPUT
        type_len &= ~(_SEG_INPUT | _CACHE_OFFER)
        content_type = bytes(view[pos:pos + type_len]).decode()
        pos += type_len
        if segment:
            (seg_id,) = _U64.unpack_from(view, pos)
            pos += _U64.size
            try:
                data = _map_segment(seg_id, seg_fds.pop(0), size) if size else b""
            except (OSError, ValueError, IndexError) as exc:
                data = exc
        else:
            data = view[pos:pos + size]
            pos += size
            if offer:
                if offers is None:
                    offers = {}
                offers[i] = _U64.unpack_from(view, pos)[0]
                pos += _U64.size
        fields.append((content_type, data))
    out_types = []
    for _ in range(n_out):
        (type_len,) = _U32.unpack_from(view, pos)
        pos += _U32.size
        out_types.append(bytes(view[pos:pos + type_len]).decode())
        pos += type_len
    if pos < len(view):
        _forget_from(view, pos)
    if cached and None in cached.values():
        raise _NotKept()
    inputs = []
    upstream = []                   # warnings the inputs carry
    for i, (content_type, data) in enumerate(fields):
        if isinstance(data, Exception):
            raise RuntimeError("cannot map input %d from the governor's memory: %s"
                               % (i, data))
        if content_type is _CACHED:
            value, warned = cached[i]
            inputs.append(value)
            _add_warnings(warned, upstream)
        elif content_type is None:
            #   An output of the task run before, still here (a chain).
            kept = _kept.get((data & 0xFFFFFFFF, data >> 32))
            if kept is None:
                raise _NotKept()
            value, head = _load_value(kept)
            inputs.append(value)
            _input_warnings(head, upstream)
        elif i == stream_in:
            inputs.append(reader)
        elif content_type == PICKLE:
            value, head = _load_value(data)
            inputs.append(value)
            if offers and i in offers and head is data:   # (out of band: views of the frame)
                warned = []
                _input_warnings(head, warned)
                _cache[offers[i]] = (value, warned)
                _add_warnings(warned, upstream)
            else:
                _input_warnings(head, upstream)
        else:
            inputs.append(bytes(data))
    fields = data = value = head = cached = None    # the inputs hold what they need
    #   What this task returns replaces what the one before kept (failing,
    #   it keeps nothing).
    _kept = {}

    if op == 3:
        if _actor is None:
            raise RuntimeError("this executor holds no actor")
        fn = getattr(_actor, fn_bytes.decode())
    else:
        fn = _function(fn_bytes)
    with warnings.catch_warnings(record=True) as caught:
        #   Record every warning: the client's filters decide which to show.
        warnings.simplefilter("always")
        try:
            if args_len and not inputs:
                #   Nothing to put in: a plain load (an actor's call with
                #   plain arguments) saves making an unpickler per call.
                args, kwargs = pickle.loads(args_bytes)
                result = fn(*args, **kwargs)
            elif args_len:
                args, kwargs = _TemplateUnpickler(args_bytes, inputs).load()
                result = fn(*args, **kwargs)
            else:
                result = fn(*inputs)
        finally:
            _log_warnings(caught)

    if op == 2:
        _actor = result
    if n_out == 0:
        values = ()
    elif n_out == 1:
        values = (result,)
    else:
        values = tuple(result) if result is not None else ()
        if len(values) != n_out:
            raise ValueError("the function returned %d value(s) for %d outputs"
                             % (len(values), n_out))
    if out_fd is not None:
        #   The stream goes out now, chunk by chunk; the reply carries
        #   nothing for it.
        with warnings.catch_warnings(record=True) as more:
            warnings.simplefilter("always")
            _write_stream(out_fd, values[stream_out])
        caught.extend(more)
        values = values[:stream_out] + (b"",) + values[stream_out + 1:]
        out_types[stream_out] = ""
    trailer = _warnings_trailer(upstream, caught)
    parts, _kept = _output_parts(op, values, out_types, trailer, number, out_fds)
    return parts


def _output_parts(op, values, out_types, trailer, number, out_fds, hooks=True):
    """The reply's parts for the task's values, and what it keeps of them
    (a plain run's small pickled outputs, for the task chained behind);
    hooks: whether the before_pickling hooks are still to be called."""
    parts = [b"\0", _U32.pack(len(values))]
    kept = {}
    for j, (value, content_type) in enumerate(zip(values, out_types)):
        try:
            if content_type == PICKLE:
                if hooks:
                    for fn in _before_pickling:
                        fn(value)
                pieces = _pickled_parts(value, trailer)
                trailer = b""
            else:
                pieces = [_encode(value, content_type)]
            size = sum(memoryview(p).nbytes for p in pieces)
            fd = None
            if size >= _SHARE_MIN and out_fds is not None and len(out_fds) < _SEGS_MAX:
                fd = _segment_of(pieces)
            if fd is not None:
                #   Written once, into memory the governor keeps.
                out_fds.append(fd)
                parts.append(_U64.pack(_SEG_OUTPUT | size))
                continue
            data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        except Exception as exc:
            if content_type != PICKLE:
                raise
            raise TypeError(
                "output %d of this task, a %s, cannot be pickled (%s: %s); it must be, "
                "because a task's outputs leave its executor: another task reads them "
                "(maybe on another governor) or the client fetches them. Return a "
                "picklable value, or do the work that needs this object in the same "
                "task (the Dask adapter fuses linear chains for this)"
                % (j, type(value).__qualname__, type(exc).__name__, exc)) from None
        if op == 1 and content_type == PICKLE and len(data) <= _KEEP_MAX:
            kept[(number, j)] = data
        parts.append(_U64.pack(len(data)))
        parts.append(data)
    return parts, kept


class _Recording:
    """warnings.catch_warnings(record=True) with simplefilter("always"), as
    _call wraps each task in, kept on across an actor's quick calls run
    back to back (_call_quick): entering and leaving it per call was a
    quarter of such a call's cost here. A call that changed the filters
    or the hooks finds them put back before the next one (as leaving
    would); the main loop leaves it before anything else runs and before
    it waits. One difference remains: a warning that a thread of the
    instance raises between two such calls is recorded with the next
    call's, where it would have gone to the executor's stderr (one raised
    during a call is recorded with it either way: the filters are the
    process's)."""

    def __init__(self):
        self._cm = None
        self._log = None

    def start(self):
        """The log list, empty, with recording on."""
        if self._cm is not None:
            filters = self._filters
            if warnings.filters is filters and len(filters) == self._n \
                    and filters[0] is self._head and warnings.showwarning is self._show \
                    and warnings._showwarnmsg_impl is self._impl:
                return self._log
            self.stop()
        cm = warnings.catch_warnings(record=True)
        self._log = cm.__enter__()
        self._cm = cm
        warnings.simplefilter("always")
        self._filters = warnings.filters
        self._n = len(self._filters)
        self._head = self._filters[0]
        self._show = warnings.showwarning
        self._impl = warnings._showwarnmsg_impl
        return self._log

    def stop(self):
        if self._cm is not None:
            cm, self._cm = self._cm, None
            self._log = None
            cm.__exit__(None, None, None)


_recording = _Recording()
_PICKLE_OUT = _U32.pack(len(PICKLE)) + PICKLE.encode()
_ONE = _U32.pack(1)


def _call_quick(body, out_fds):
    """The reply to an actor's call (op 3, no flags) that takes no inputs
    and returns one pickled value, made with what such a call needs only;
    None for any other frame (_run then). Same results, failures and
    warnings as _call."""
    global _kept
    op, n_in, n_out, fn_len, args_len = _HEAD.unpack_from(body, 0)
    if n_in or n_out != 1:
        return None
    pos = _HEAD.size + fn_len
    end = pos + args_len
    if len(body) != end + len(_PICKLE_OUT) or body[end:] != _PICKLE_OUT:
        return None
    if _actor is None:
        raise RuntimeError("this executor holds no actor")
    fn = getattr(_actor, body[_HEAD.size:pos].decode())
    if _kept:
        _kept = {}
    log = _recording.start()
    try:
        if args_len:
            args, kwargs = pickle.loads(memoryview(body)[pos:end])
            result = fn(*args, **kwargs)
        else:
            result = fn()
    finally:
        caught = ()
        if log:
            caught = log[:]
            del log[:]
            _log_warnings(caught)
    trailer = _warnings_trailer((), caught)
    for hook in _before_pickling:
        hook(result)
    found = []
    try:
        data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL,
                            buffer_callback=found.append)
    except Exception:
        data = None
    if data is None or found or len(data) + len(trailer) >= _SHARE_MIN:
        #   cloudpickle, buffers out of band, a memory file, or the error
        #   _call gives: as _call does.
        return _output_parts(3, (result,), (PICKLE,), trailer, 0, out_fds, hooks=False)[0]
    if trailer:
        data += trailer
    return [b"\0", _ONE, _U64.pack(len(data)), data]


def _input_warnings(data, out):
    """Appends the warnings that end the value `data` (see the module
    doc), if any, to out (at most _WARN_MAX in all)."""
    tail = len(WARN_MAGIC) + _U32.size
    if len(data) < 2 * tail or bytes(data[-len(WARN_MAGIC):]) != WARN_MAGIC:
        return
    (size,) = _U32.unpack_from(data, len(data) - tail)
    start = len(data) - 2 * tail - size
    if start < 0 or bytes(data[start:start + len(WARN_MAGIC)]) != WARN_MAGIC \
            or _U32.unpack_from(data, start + len(WARN_MAGIC))[0] != size:
        return                      # a value that merely ends like one
    try:
        items = pickle.loads(data[start + tail:start + tail + size])
    except Exception:
        return
    for item in items:
        if len(out) >= _WARN_MAX:
            break
        if item not in out:
            out.append(item)


def _warnings_trailer(upstream, caught):
    """The trailer of the inputs' warnings and the caught ones (b"" if
    none). Categories travel by name: a class the client cannot import
    becomes a UserWarning there rather than a failed result."""
    if not caught and not upstream:
        return b""
    seen = list(upstream)
    for w in caught:
        if len(seen) >= _WARN_MAX:
            break
        cat = w.category
        item = (cat.__module__, cat.__qualname__, str(w.message),
                str(w.filename), int(w.lineno or 0))
        if item not in seen:
            seen.append(item)
    data = pickle.dumps(seen, protocol=pickle.HIGHEST_PROTOCOL)
    size = _U32.pack(len(data))
    return WARN_MAGIC + size + data + size + WARN_MAGIC


def _pickled_exception(exc):
    """base64 of the pickled exception, or None if it does not survive a
    round trip here (then the client raises TaskFailed with the text)."""
    tb, exc.__traceback__ = exc.__traceback__, None
    try:
        for pickler in (pickle.Pickler, getattr(_cloudpickle, "Pickler", None)):
            if pickler is None:
                continue
            try:
                data = _dumps_exception(pickler, exc)
                pickle.loads(data)      # exceptions with odd __init__s fail here
            except Exception:
                continue
            text = base64.b64encode(data).decode("ascii")
            return text if len(text) <= _EXC_B64_MAX else None
        return None
    finally:
        exc.__traceback__ = tb


def _dumps_exception(pickler, exc):
    """exc pickled by pickler, with the reducers the process registered
    for exceptions and tracebacks left out: tblib's pickling support (Dask's
    distributed installs it on import) would lose SystemExit's code and
    carry the __cause__ chain, so that an exception caused by an
    unpicklable one could not travel at all. What every exception reduces
    to by itself is what the client gets, whatever the task imported."""
    import copyreg
    table = getattr(pickler, "dispatch_table", None)
    if not isinstance(table, collections.abc.Mapping):  # the C pickler's: copyreg's
        table = copyreg.dispatch_table

    class _Pickler(pickler):
        #   A class attribute: the C pickler reads it when it is made.
        dispatch_table = {
            cls: reduce for cls, reduce in table.items()
            if not (isinstance(cls, type)
                    and (issubclass(cls, BaseException) or cls is types.TracebackType))}

    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(exc)
    return out.getvalue()


def _run_call(body):
    """RUN's answer to the frame body, as parts to send."""
    try:
        fn, args, kwargs = pickle.loads(bytes(body[1:]))
        answer = _RAN + b"\1" + _dumps(fn(*args, **kwargs))
    except BaseException as exc:    # noqa: B902 - SystemExit is answered too
        tb, exc.__traceback__ = exc.__traceback__, None
        data = None
        for pickler in (pickle.Pickler, getattr(_cloudpickle, "Pickler", None)):
            if pickler is None:
                continue
            try:
                data = _dumps_exception(pickler, exc)
                pickle.loads(data)
                break
            except Exception:       # noqa: BLE001 - try the next, or the text
                data = None
        exc.__traceback__ = tb
        if data is None:
            data = pickle.dumps(RuntimeError("".join(traceback.format_exception_only(type(exc), exc)).strip()))
        answer = _RAN + b"\0" + data
    return [_U64.pack(len(answer)), answer]


def _failure(exc):
    """The task's failure message: the exception, then the traceback
    without this file's frames, then the pickled exception if it fits."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb)
    text = "%s: %s\n--- remote traceback ---\n%s" % (
        type(exc).__name__, exc, "".join(lines))
    try:
        pickled = _pickled_exception(exc)
    except BaseException:           # noqa: B902 - a broken __reduce__ must not kill us
        pickled = None
    tail = (EXC_SEPARATOR + pickled).encode("ascii") if pickled else b""
    room = _MESSAGE_MAX - len(tail)
    data = text.encode("utf-8", "replace")
    if len(data) > room:
        data = data[:room // 2 - 3] + b"\n...\n" + data[-(room // 2 - 3):]
        data = data.decode("utf-8", "ignore").encode("utf-8")
    return [b"\1", data + tail]


class _Frames:
    """The governor's frames as they come. Everything there is to read is
    read at once (several small tasks may wait here, piped behind the one
    that runs, and the cancels of some of them); a big frame is read on
    straight into a buffer of its own. Pipes passed with a frame (op 4's,
    SCM_RIGHTS) wait in `fds` in the order they came."""

    def __init__(self, sock):
        self._sock = sock
        self._buf = bytearray()
        self.fds = collections.deque()
        self._eof = False
        #   A look without a read: most looks between calls find nothing,
        #   and a read that finds nothing costs an exception.
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)

    def _recv(self, block):
        """One read; True if it got bytes."""
        if not block and not self._poll.poll(0):
            return False
        try:
            data, anc, _, _ = self._sock.recvmsg(
                _RECV_MAX, _ANC_SPACE, 0 if block else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except ConnectionResetError:
            #   The governor closed its end with messages of ours unread
            #   (segments we let go): it is gone all the same.
            self._eof = True
            return False
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                count = len(payload) // 4
                self.fds.extend(struct.unpack("%di" % count, payload[:4 * count]))
        if data:
            self._buf += data
            return True
        self._eof = True
        return False

    def _recv_all(self, block):
        """What there is: a read stops where descriptors came with the next
        bytes (every task's frame brings its log's), so read on until none
        is left (up to a read's worth), or the cancels behind piped tasks
        would be seen late."""
        if self._recv(block):
            #   A big frame's rest is read straight into its own buffer
            #   (read), not gathered here.
            while len(self._buf) < _RECV_MAX and self._recv(False):
                pass

    def read(self, block):
        """The whole frames there are now, waiting for one if block and
        there is none; None at the end of the file (the governor is gone)."""
        frames = []
        self._recv_all(block)
        while True:
            buf = self._buf
            while len(buf) >= 8:
                (size,) = _U64.unpack_from(buf)
                have = len(buf) - 8
                if have >= size:
                    frames.append(buf[8:8 + size])
                    del buf[:8 + size]
                elif size > _RECV_MAX:
                    body = bytearray(size)
                    body[:have] = buf[8:]
                    buf.clear()
                    view = memoryview(body)
                    while have < size:
                        got = self._sock.recv_into(view[have:], size - have)
                        if got == 0:
                            return None
                        have += got
                    frames.append(body)
                else:
                    break
            if frames or not block:
                return frames
            if self._eof:
                return None
            self._recv_all(True)


def _die_with_governor(governor_pid):
    """Asks Linux for SIGKILL when the governor dies (PR_SET_PDEATHSIG): a
    task in a long computation would otherwise run on with nobody to hear
    of it (the socket's end of file is only read between tasks). If the
    governor died before this call, the parent is already someone else."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)      # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):   # not Linux: the socket's EOF still ends us
        return
    if governor_pid and os.getppid() != governor_pid:
        os._exit(1)


def _preload():
    """Imports the governor's --python-preload modules now, while no task
    waits (a module that fails is reported, not fatal: the task that needs
    it will fail with the real error)."""
    import importlib
    for name in os.environ.get("SQUALL_PYTHON_PRELOAD", "").split(","):
        name = name.strip()
        if name:
            try:
                importlib.import_module(name)
            except BaseException as exc:    # noqa: B902 - SystemExit in a module too
                print("squall executor: cannot preload %s: %s: %s"
                      % (name, type(exc).__name__, exc), file=sys.stderr, flush=True)


#   glibc's malloc: arrays up to _MMAP_MAX come from the heap, and up to
#   _TRIM_KEEP of it stays when freed. By default a block over 128 KiB (a
#   few MiB once its dynamic threshold moved) is a mapping of its own that
#   free unmaps, and the heap's free top over twice that is given back: a
#   task making 2 MB numpy blocks, or a pandas groupby's hash tables (about
#   7 000 pages a partition of bench/data_heavy.py), then faults every page
#   in and zeroes it again (on a virtual machine ~2 s a GiB; 20 % of
#   `mean`'s executor cpu, a quarter of the groupby's). glibc moves its
#   threshold there itself as large blocks are freed, as Dask's threaded
#   scheduler's process soon does; an executor starts there. At most 64 MiB
#   freed stays resident, and a task's memory limit counts what its RSS
#   grows by, which kept pages do not add to. The governor's own heap is set
#   the same way (governor/heap.c).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_MAX = 32 << 20
_TRIM_KEEP = 64 << 20


def _heap_configure():
    """Sets the thresholds above, unless the user set malloc's own
    (MALLOC_*_ or GLIBC_TUNABLES) or this is not glibc."""
    if "malloc" in os.environ.get("GLIBC_TUNABLES", "") \
            or any(k.startswith("MALLOC_") and k.endswith("_") for k in os.environ):
        return
    try:
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, ValueError, ImportError):
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_KEEP)


def _resident():
    """Resident bytes less shared memory (the segments mapped here are the
    governor's: governor/pyexec.c, s_rss, counts the same way)."""
    fields = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "RssShmem"):
                    fields[name] = int(value.split()[0]) << 10
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, fields.get("VmRSS", 0) - fields.get("RssShmem", 0))


#   Tasks that submit tasks (bindings/python/squall/_worker.py finds these
#   functions through sys.modules["_squall_executor"]): while a task runs,
#   it may say it waits (secede) and goes on (rejoin); only then, so that
#   a thread a task left behind cannot speak for the next task.
_sock = None
_frames = None
_running = False
_tell_lock = threading.Lock()
#   Whether the running task said it seceded (the governor then hands
#   back the tasks piped behind it).
_seceded = False
#   Frames read while a task waited for its credential: the main loop
#   takes them first, in order.
_early = []
_credential_lock = threading.Lock()
#   Called once, in the main thread, when the task that registered them
#   returns (squall closes the task's client there).
_at_end = []
#   Called, in the main thread, with each value the task that registered
#   them returns, before it is pickled (squall's _worker adopts the
#   children's futures the value holds there, many per ADOPT).
_before_pickling = []
_number = 0
_task_key = None


def in_task():
    return _running


def task_number():
    """The run number of the task running now (unique in this executor)."""
    return _number


def at_task_end(fn):
    _at_end.append(fn)


def before_pickling(fn):
    _before_pickling.append(fn)


def credential():
    """The key pair of the running task's client: (public, secret, broker
    public key) in Z85, or None on a cluster without keys. Asked of the
    governor, which registers the public half with the broker for this task
    attempt only (docs/security.md)."""
    with _credential_lock:
        if not _running:
            raise RuntimeError("squall.get_client(): no task runs in this executor")
        _tell(_CREDENTIAL)
        while True:
            got = _frames.read(block=True)
            if got is None:
                raise RuntimeError("squall.get_client(): the governor is gone")
            for i, body in enumerate(got):
                if body[0] != _OP_CREDENTIAL:
                    _early.append(body)
                    continue
                _early.extend(got[i + 1:])
                text = bytes(body[1:]).decode()
                if text.startswith("!"):
                    raise RuntimeError("squall.get_client(): the governor refused: " + text[1:])
                words = text.split()
                global _task_key
                #   the task's session and id end the answer
                _task_key = (int(words[-2]), int(words[-1])) if len(words) >= 3 else None
                if words[0] == "k":
                    return tuple(words[1:4])
                return None


def task_key():
    """(session, id) of the running task, as the governor said with its
    credential (None before credential() in this task)."""
    return _task_key if _running else None


def _task_ended():
    _before_pickling.clear()
    while _at_end:
        fn = _at_end.pop()
        try:
            fn()
        except BaseException as exc:    # noqa: B902 - the reply must still go
            print("squall executor: at the end of a task: %s: %s"
                  % (type(exc).__name__, exc), file=sys.stderr, flush=True)


def _tell(what):
    global _seceded
    with _tell_lock:
        if _running and _sock is not None:
            _sock.sendall(_U64.pack(1) + what)
            _seceded = _seceded or what == _SECEDED


def secede():
    _tell(_SECEDED)


def rejoin():
    _tell(_REJOINED)


def _set_running(running):
    """True when the task that ends (running False) seceded."""
    global _running, _seceded
    with _tell_lock:
        _running = running
        seceded, _seceded = _seceded, False
        return seceded


def main():
    global _sock, _frames, _number, _task_key
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.modules.setdefault("_squall_executor", sys.modules[__name__])
    _die_with_governor(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    _heap_configure()
    if "" not in sys.path:
        sys.path.insert(0, "")
    _preload()
    #   A task's prints reach its log (and `squall log --follow`) as lines.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except Exception:   # noqa: BLE001 - not a TextIOWrapper
            pass
    sock = _sock = socket.socket(fileno=int(sys.argv[1]))
    sock.sendall(_U64.pack(9) + _READY + _U64.pack(_resident()))
    frames = _frames = _Frames(sock)
    queue = collections.deque()     # (number, frame) of tasks to run, in order
    cancelled = set()
    received = done = 0
    #   A task that seceded ended: the tasks piped behind it may be on
    #   their way back to the governor, which cancels them here. Nothing
    #   starts until its answer to our u8 11 says those cancels came.
    syncing = False
    #   The last reply, sent once it is known whether a piped task starts
    #   next: then with that task's start (one write, one wakeup of the
    #   governor for both); out_fds, the memory files of its outputs.
    global _pending, _held, _armed
    out = []
    out_fds = []
    _pending = (sock, out, out_fds)
    slow = True                     # the last call ran _HOLD_S or more
    while True:
        #   Wait only when there is nothing to run or send; else take in
        #   what came meanwhile (cancels must be seen before the task they
        #   name runs).
        block = (not queue or syncing) and not out and not _early
        if block:
            _recording.stop()
        got = frames.read(block=block)
        if got is None:
            return
        if _early:
            got = _early + got
            _early.clear()
        for body in got:
            if body[0] == _OP_CANCEL:
                (number,) = _U32.unpack_from(body, 1)
                if number > done:
                    cancelled.add(number)
                continue
            if body[0] == _OP_SYNCED:
                syncing = False
                continue
            if body[0] == _OP_RUN:
                _recording.stop()
                out += _run_call(body)
                continue
            if body[0] == _OP_FORGET:
                _forget_from(body, 1)
                continue
            received += 1
            queue.append((received, body))
        if not queue or syncing:
            _send(sock, out, out_fds)
            _held = 0
            continue
        done, body = queue.popleft()
        log_fds = ()
        if body[0] & _OP_LOGS:
            #   Its log descriptors came after its stream pipes.
            body[0] &= ~_OP_LOGS
            op = body[0] & ~_OP_TELL
            if op & ~_OP_SEGMENTS == 4:
                stream_in, stream_out = _STREAMS.unpack_from(body, _HEAD.size)
                skip = (stream_in != _NO_STREAM) + (stream_out != _NO_STREAM)
            else:
                skip = 0
            if len(frames.fds) >= skip + 2:
                log_fds = (frames.fds[skip], frames.fds[skip + 1])
                del frames.fds[skip]
                del frames.fds[skip]
        try:
            wanted = 0 if body[0] == 3 else _frame_fds(body)
        except struct.error:        # too short: _run says so
            wanted = 0
        fds = [frames.fds.popleft() for _ in range(min(wanted, len(frames.fds)))]
        seceded = False
        if done in cancelled:
            cancelled.discard(done)
            for fd in fds:
                os.close(fd)
            try:                        # what it says to forget holds all the same
                _forget_from(body, _trailer_pos(body))
            except struct.error:
                pass
            parts = [_SKIPPED]
            for fd in log_fds:
                os.close(fd)
        else:
            if body[0] & _OP_TELL:
                body[0] &= ~_OP_TELL
                out += [_U64.pack(9), _STARTED, _U64.pack(time.monotonic_ns())]
            #   Replies wait for the next ones only behind a plain call
            #   (no descriptors either way): a task's start and memory
            #   files, and every task's reply, go as before.
            if _held >= _REPLIES_HELD or out_fds or body[0] != 3 or wanted or slow \
                    or (_held and not _armed and not _holding()):
                _send(sock, out, out_fds)
                _held = 0
            elif _held and not _armed:
                _armed = True
                signal.setitimer(signal.ITIMER_REAL, _HOLD_S)
            try:
                _number = done
                _task_key = None
                _set_running(True)
                began = time.monotonic_ns()
                try:
                    parts = None
                    if body[0] == 3 and len(body) >= _HEAD.size:
                        parts = _call_quick(body, out_fds)
                    if parts is not None:
                        pass
                    elif log_fds:
                        _recording.stop()
                        with _captured(log_fds):
                            parts = _run(body, fds, done, out_fds)
                    else:               # an actor's call: its log is the actor's
                        _recording.stop()
                        parts = _run(body, fds, done, out_fds)
                finally:
                    slow = time.monotonic_ns() - began >= _HOLD_NS
                    seceded = _set_running(False)
                    if _at_end:
                        _recording.stop()
                    _task_ended()
            except _NotKept:
                parts = [_SKIPPED]          # the governor runs it again later
            except BaseException as exc:    # noqa: B902 - SystemExit fails the task too
                parts = _failure(exc)
            if parts[0] != b"\0":
                for fd in out_fds:          # a failure sends no outputs
                    os.close(fd)
                out_fds.clear()
        del body
        out.append(_U64.pack(sum(len(p) for p in parts)))
        out += parts
        _held += 1
        if seceded:
            out += [_U64.pack(1), _SYNC]
            syncing = True


def _holding():
    """Whether replies may be held: the timer that bounds it is ours,
    taken when first needed if nobody has (an actor that took SIGALRM for
    itself gets each reply at once; a plain task's executor never takes
    it, so a task's alarm() ends it as it would anywhere)."""
    #   _signal's: signal.getsignal makes an enum of the handler, a cost
    #   paid here for every call held.
    handler = _signal.getsignal(signal.SIGALRM)
    if handler is _on_alarm:
        return True
    if handler != signal.SIG_DFL:
        return False
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.siginterrupt(signal.SIGALRM, False)
    return True


def _on_alarm(signum, frame):
    """Held replies waited _HOLD_S: they go now, between two bytecodes of
    whatever runs (a call), unless a send is under way here or in a
    thread of the call (_tell), which then goes first; then soon after."""
    global _armed, _held
    _armed = False
    if not _held or _pending is None:
        return
    sock, out, out_fds = _pending
    if not _sending and not out_fds and _tell_lock.acquire(blocking=False):
        try:
            _send(sock, out, out_fds)
            _held = 0
        finally:
            _tell_lock.release()
        return
    _armed = True
    signal.setitimer(signal.ITIMER_REAL, _HOLD_S / 2)


def _send(sock, parts, fds):
    """Sends the messages in parts (emptied), the memory files in fds
    with them (closed here), and first, when segments were unmapped since
    the last time, the message that says so."""
    global _sending, _armed
    if _armed:
        _armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
    _sending = True
    try:
        _send_now(sock, parts, fds)
    finally:
        _sending = False


def _send_now(sock, parts, fds):
    if _released:
        items = _released[:]
        del _released[:len(items)]
        body = [_RELEASED, _U32.pack(len(items))]
        body += [_U64.pack(seg_id) + _U32.pack(handed) for seg_id, handed in items]
        parts[:0] = [_U64.pack(sum(len(p) for p in body))] + body
    if not parts:
        return
    size = sum(len(p) for p in parts)
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))] \
        if fds else []
    try:
        sent = sock.sendmsg(parts, anc)
    finally:
        for fd in fds:
            os.close(fd)
        fds.clear()
    if sent < size:                 # a large reply: send the rest
        sock.sendall(b"".join(parts)[sent:])
    parts.clear()

if __name__ == "__main__":
    sys.exit(main())
