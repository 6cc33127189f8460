"""Reading tasks' output (stdout, stderr) through libsquall's sq_client_log.

Shared by the Client (Future.logs, Task.logs, forward_logs) and the command
line (`squall log`). The broker says where a task ran; the bytes come from
that governor (docs/protocol.md, LOG and LOGREAD). A reader keeps its offset,
so a follower goes on from where it was; a new attempt of the task (a retry
elsewhere) starts again at 0.
"""

import contextlib
import ctypes

STDOUT = 1
STDERR = 2
WAITING, RUNNING, DONE, NONE = 0, 1, 2, 3
_p = ctypes.c_void_p


def declare(lib):
    """Sets sq_client_log's signature on a loaded libsquall."""
    lib.sq_client_log.restype = ctypes.c_int
    lib.sq_client_log.argtypes = [
        _p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int, ctypes.c_uint64,
        ctypes.c_size_t, ctypes.POINTER(_p), ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32),
        ctypes.POINTER(ctypes.c_int)]
    lib.sq_client_errcode.restype = ctypes.c_int
    lib.sq_client_errcode.argtypes = [_p]


def stream_number(stream):
    if stream in ("stdout", STDOUT):
        return STDOUT
    if stream in ("stderr", STDERR):
        return STDERR
    raise ValueError("stream must be 'stdout' or 'stderr', not %r" % (stream,))


def read(lib, handle, session, task, attempt, stream, offset):
    """One read: (rc, bytes, next offset, attempt, state). rc != 0: the
    client's error (sq_client_errmsg) says why."""
    if not getattr(handle, "value", handle):
        return 20, b"", offset, 0, NONE        # SQ_E_CONNECTION: the client was closed
    data = _p()
    size = ctypes.c_size_t()
    nxt = ctypes.c_uint64()
    att = ctypes.c_uint32()
    state = ctypes.c_int()
    rc = lib.sq_client_log(handle, session, task, -1 if attempt is None else attempt, stream,
                           offset, 0, ctypes.byref(data), ctypes.byref(size), ctypes.byref(nxt),
                           ctypes.byref(att), ctypes.byref(state))
    chunk = b""
    if data.value:
        chunk = ctypes.string_at(data, size.value)
        lib.sq_free(data)
    if rc:
        return lib.sq_client_errcode(handle) or rc, b"", offset, 0, NONE
    return 0, chunk, nxt.value, att.value, state.value


class Reader:
    """Follows one stream of one task: poll() returns the bytes that came
    since the last call (a marker line first when a new attempt starts)."""

    def __init__(self, lib, handle, session, task, stream="stdout", attempt=None, lock=None):
        self.lib, self.handle = lib, handle
        self.lock = lock or contextlib.nullcontext()
        self.session, self.task = session, task
        self.stream = stream_number(stream)
        self.attempt = attempt          # None: the latest, followed across retries
        self.offset = 0
        self.seen_attempt = None
        self.state = WAITING
        self.error = None               # (rc, message) once reading failed

    def poll(self):
        out = []
        while True:
            with self.lock:
                rc, chunk, nxt, att, state = read(self.lib, self.handle, self.session, self.task,
                                                  self.attempt, self.stream, self.offset)
                msg = self.lib.sq_client_errmsg(self.handle) if rc else None
            if rc:
                self.error = (rc, msg.decode("utf-8", "replace") if msg else "")
                self.state = NONE
                break
            if state != WAITING and self.seen_attempt is not None and att != self.seen_attempt:
                #   A retry: its output starts afresh.
                out.append(b"[squall: attempt %d]\n" % att)
                self.offset = 0
                self.seen_attempt = att
                continue
            if state != WAITING:
                self.seen_attempt = att
            self.state = state
            out.append(chunk)
            self.offset = nxt
            if not chunk or state != RUNNING:
                break
        return b"".join(out)

    @property
    def finished(self):
        return self.state in (DONE, NONE)
