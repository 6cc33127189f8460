"""The job calls' structs of client/squall.h ("Jobs"), sq_job_t and
sq_task_record_t, for ctypes: defined once, here, with the standard library
only, so that jobcli.py (loaded by path, before the package may be
importable) shares them with _lib.py."""
import ctypes as _c


class Job(_c.Structure):
    """sq_job_t (client/squall.h, "Jobs")."""
    _fields_ = [("id", _c.c_uint32), ("name", _c.c_char * 129), ("state", _c.c_uint32),
                ("detached", _c.c_bool), ("attached", _c.c_bool),
                ("tasks", _c.c_uint64 * 5), ("created_ms", _c.c_int64),
                ("ended_ms", _c.c_int64)]


class TaskRecord(_c.Structure):
    """sq_task_record_t (client/squall.h, "Jobs")."""
    _fields_ = [("id", _c.c_uint32), ("index", _c.c_int64), ("state", _c.c_uint32),
                ("has_exit_code", _c.c_bool), ("exit_code", _c.c_int32),
                ("governor", _c.c_uint32), ("attempts", _c.c_uint32),
                ("started_ms", _c.c_int64), ("ended_ms", _c.c_int64),
                ("error", _c.c_char * 512), ("name", _c.c_char * 128),
                ("task", _c.c_uint32)]
