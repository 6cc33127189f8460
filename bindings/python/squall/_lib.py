"""ctypes binding of libsquall (client/squall.h).

The library is looked up, in order: bundled in the package (``squall/_bin``,
put there by ``pip install``), ``$SQUALL_LIBRARY`` (a path to the .so),
``$SQUALL_BUILD_DIR/client``, then the system linker path.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
BIN_DIR = os.path.join(_HERE, "_bin")

# Error codes of squall.h
SQ_E_INVALID = 4
SQ_E_UNKNOWN_ID = 6
SQ_E_NOT_KEPT = 12
SQ_E_TASK_FAILED = 13
SQ_E_UPSTREAM_FAILED = 14
SQ_E_CANCELLED = 15
SQ_E_TIMEOUT = 16
SQ_E_CONNECTION = 20
SQ_E_LOST = 23
SQ_E_ACTOR_LOST = 25
SQ_E_DELETED = 26
SQ_PLACE_MOVE = 1
SQ_PLACE_MAX = 1024


def _candidates():
    yield from sorted(glob.glob(os.path.join(BIN_DIR, "libsquall.so*")))
    if os.environ.get("SQUALL_LIBRARY"):
        yield os.environ["SQUALL_LIBRARY"]
    build = os.environ.get("SQUALL_BUILD_DIR")
    if build:
        yield os.path.join(build, "client", "libsquall.so")
    found = ctypes.util.find_library("squall")
    if found:
        yield found


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as exc:
            errors.append("%s: %s" % (path, exc))
    raise ImportError(
        "cannot find libsquall: install the package with pip (which builds it), "
        "or set SQUALL_BUILD_DIR to a cmake build directory of squall"
        + ("; tried " + "; ".join(errors) if errors else ""))


from . import _logs  # noqa: E402 - its declare() needs the library
from ._records import Job, TaskRecord  # noqa: E402,F401 (the job calls' structs)
lib, LIBRARY_PATH = _load()

_c = ctypes
_p = _c.c_void_p
_u32 = _c.c_uint32
_u32p = _c.POINTER(_c.c_uint32)
_size = _c.c_size_t


def _sig(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


sq_strerror = _sig("sq_strerror", _c.c_char_p, _c.c_int)
sq_client_new = _sig("sq_client_new", _p)
sq_client_destroy = _sig("sq_client_destroy", None, _c.POINTER(_p))
sq_client_connect = _sig("sq_client_connect", _c.c_int, _p, _c.c_char_p, _c.c_int)
sq_client_errmsg = _sig("sq_client_errmsg", _c.c_char_p, _p)
sq_client_errcode = _sig("sq_client_errcode", _c.c_int, _p)
sq_client_errid = _sig("sq_client_errid", _u32, _p)
sq_client_errroot = _sig("sq_client_errroot", _u32, _p)
sq_client_info = _sig("sq_client_info", _c.c_int, _p, _c.POINTER(_p))
sq_client_retire = _sig("sq_client_retire", _c.c_int, _p, _c.c_uint32)
sq_client_log = lib.sq_client_log
_logs.declare(lib)
sq_client_close_session = _sig("sq_client_close_session", _c.c_int, _p, _c.c_uint32)
sq_client_set_keys = _sig("sq_client_set_keys", _c.c_int, _p, _c.c_char_p, _c.c_char_p)
sq_client_set_local_dir = _sig("sq_client_set_local_dir", _c.c_int, _p, _c.c_char_p)
sq_client_set_resume = _sig("sq_client_set_resume", None, _p, _c.c_int)


class ConstantCacheStats(_c.Structure):
    """sq_constant_cache_stats_t (client/squall.h)."""
    _fields_ = [(name, _c.c_uint64) for name in (
        "hits", "misses", "collisions", "bytes_reused", "bytes_written", "entries", "bytes",
        "limit")]


sq_client_set_constant_cache = _sig("sq_client_set_constant_cache", None, _p, _c.c_uint64)
sq_client_constant_cache_stats = _sig("sq_client_constant_cache_stats", _c.c_int, _p,
                                      _c.POINTER(ConstantCacheStats))
sq_keygen = _sig("sq_keygen", _c.c_int, _c.c_char_p, _c.c_char_p, _c.c_char_p, _c.c_char_p,
                 _c.c_char_p, _size)
sq_free = _sig("sq_free", None, _p)

sq_session_new = _sig("sq_session_new", _p, _p)
sq_session_destroy = _sig("sq_session_destroy", None, _c.POINTER(_p))
sq_session_id = _sig("sq_session_id", _u32, _p)
sq_blob = _sig("sq_blob", _u32, _p, _c.c_char_p, _size, _c.c_char_p)
sq_blob_gather = _sig("sq_blob_gather", _u32, _p, _c.POINTER(_p), _c.POINTER(_size), _size,
                      _c.c_char_p)
sq_task = _sig("sq_task", _u32, _p, _c.c_char_p, _u32p, _size, _u32, _c.c_char_p, _size)
sq_tasks_like = _sig("sq_tasks_like", _c.c_int, _p, _u32, _size, _c.c_char_p,
                     _c.POINTER(_size), _c.POINTER(_u32))
sq_task_set_name = _sig("sq_task_set_name", _c.c_int, _p, _u32, _c.c_char_p)
sq_task_set_resource = _sig("sq_task_set_resource", _c.c_int, _p, _u32, _c.c_char_p, _c.c_uint64)
sq_task_set_gpus = _sig("sq_task_set_gpus", _c.c_int, _p, _u32, _c.c_double)
sq_task_set_priority = _sig("sq_task_set_priority", _c.c_int, _p, _u32, _c.c_int32)
sq_task_set_max_retries = _sig("sq_task_set_max_retries", _c.c_int, _p, _u32, _u32)
sq_task_set_timeout = _sig("sq_task_set_timeout", _c.c_int, _p, _u32, _c.c_double)
sq_client_restart = _sig("sq_client_restart", _c.c_int, _p)
sq_task_set_governors = _sig("sq_task_set_governors", _c.c_int, _p, _u32, _c.POINTER(_u32),
                             _c.c_size_t, _c.c_bool)
sq_object_set_content_type = _sig("sq_object_set_content_type", _c.c_int, _p, _u32, _c.c_char_p)
sq_keep = _sig("sq_keep", _c.c_int, _p, _u32)
sq_unkeep = _sig("sq_unkeep", _c.c_int, _p, _u32)
sq_unkeep_many = _sig("sq_unkeep_many", _c.c_int, _p, _u32p, _size)
sq_submit = _sig("sq_submit", _c.c_int, _p)
sq_wait = _sig("sq_wait", _c.c_int, _p, _u32p, _size, _c.c_int)
sq_wait_all = _sig("sq_wait_all", _c.c_int, _p, _c.c_int)
sq_wait_some = _sig("sq_wait_some", _c.c_int, _p, _u32p, _size, _c.c_int, _u32p,
                    _c.POINTER(_size))
sq_fetch = _sig("sq_fetch", _c.c_int, _p, _u32, _c.c_int, _c.POINTER(_p),
                _c.POINTER(_size), _c.POINTER(_p))
sq_cancel = _sig("sq_cancel", _c.c_int, _p, _u32p, _size)
sq_delete = _sig("sq_delete", _c.c_int, _p, _u32p, _size)
sq_place = _sig("sq_place", _c.c_int, _p, _u32, _u32p, _size, _u32, _u32, _c.c_int,
                _u32p, _size, _c.POINTER(_size))


def _optional(name, restype, *argtypes):
    """A call of a newer libsquall: None when this one lacks it (the caller
    says what is missing rather than the whole package failing to load)."""
    return _sig(name, restype, *argtypes) if hasattr(lib, name) else None


sq_session_new_job = _optional("sq_session_new_job", _p, _p, _c.c_char_p, _c.c_bool)
sq_session_attach = _optional("sq_session_attach", _p, _p, _u32, _c.c_char_p)
sq_session_replay = _optional("sq_session_replay", _c.c_int, _p)
sq_client_restart_wait = _optional("sq_client_restart_wait", _c.c_int, _p, _c.c_int)
sq_client_run = _optional("sq_client_run", _c.c_int, _p, _c.c_int, _c.c_char_p, _size,
                          _c.POINTER(_p), _c.POINTER(_size))
sq_adopt = _optional("sq_adopt", _c.c_int, _p, _u32p, _size, _u32p, _u32p)
sq_session_detach = _optional("sq_session_detach", None, _c.POINTER(_p))
sq_client_jobs = _optional("sq_client_jobs", _c.c_int, _p, _u32, _u32, _c.c_char_p,
                           _c.POINTER(_c.POINTER(Job)), _c.POINTER(_size))
sq_client_tasks = _optional("sq_client_tasks", _c.c_int, _p, _u32, _u32, _c.c_uint64, _u32,
                            _c.POINTER(_c.POINTER(TaskRecord)), _c.POINTER(_size),
                            _c.POINTER(_c.c_uint64))
sq_client_job_wait = _optional("sq_client_job_wait", _c.c_int, _p, _u32, _c.c_int,
                               _c.POINTER(Job))
sq_client_forget = _optional("sq_client_forget", _c.c_int, _p, _u32)
sq_object_set_governor = _sig("sq_object_set_governor", _c.c_int, _p, _u32, _u32)
sq_object_prefer_governor = _sig("sq_object_prefer_governor", _c.c_int, _p, _u32, _u32)
sq_object_set_stream = _sig("sq_object_set_stream", _c.c_int, _p, _u32)

sq_config_sleep = _sig("sq_config_sleep", _p, _c.c_double, _c.POINTER(_size))
sq_config_slice = _sig("sq_config_slice", _p, _c.c_uint64, _c.c_int64, _c.POINTER(_size))
sq_config_path = _sig("sq_config_path", _p, _c.c_char_p, _c.POINTER(_size))
_charpp = _c.POINTER(_c.c_char_p)
sq_config_execute = _sig("sq_config_execute", _p, _charpp, _size, _charpp, _size, _c.c_int,
                         _charpp, _size, _c.c_int, _charpp, _c.POINTER(_size))


def take_buffer(ptr, size):
    """Copies a buffer the library returned into bytes and frees it."""
    try:
        return _c.string_at(ptr, size) if size else b""
    finally:
        sq_free(ptr)


class _PyBuffer(_c.Structure):
    """CPython's Py_buffer, to read the address of a read-only buffer (a
    numpy array's memory pickle hands out of band), which ctypes'
    from_buffer refuses."""
    _fields_ = [("buf", _p), ("obj", _p), ("len", _c.c_ssize_t), ("itemsize", _c.c_ssize_t),
                ("readonly", _c.c_int), ("ndim", _c.c_int), ("format", _c.c_char_p),
                ("shape", _p), ("strides", _p), ("suboffsets", _p), ("internal", _p)]


_get_buffer = _c.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [_c.py_object, _c.POINTER(_PyBuffer), _c.c_int]
_get_buffer.restype = _c.c_int
_release_buffer = _c.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [_c.POINTER(_PyBuffer)]
_release_buffer.restype = None


def blob_gather(session, parts, content_type):
    """sq_blob_gather over Python buffers (bytes, memoryviews: contiguous),
    read in place: the C side copies them once, while they are held here."""
    n = len(parts)
    views = (_PyBuffer * n)()
    ptrs = (_p * n)()
    sizes = (_size * n)()
    got = 0
    try:
        for i, part in enumerate(parts):
            if _get_buffer(part, _c.byref(views[i]), 0):    # PyBUF_SIMPLE: contiguous bytes
                raise BufferError("not a contiguous buffer")
            got += 1
            ptrs[i] = views[i].buf
            sizes[i] = views[i].len
        return sq_blob_gather(session, ptrs, sizes, n, content_type)
    finally:
        for i in range(got):
            _release_buffer(_c.byref(views[i]))


def ids(values):
    """A uint32 array of ids, for the calls taking (ids, n)."""
    return (_c.c_uint32 * len(values))(*values)


def cstrs(values):
    """A char* array of encoded strings."""
    arr = (_c.c_char_p * (len(values) + 1))()
    for i, v in enumerate(values):
        arr[i] = v.encode() if isinstance(v, str) else v
    return arr
