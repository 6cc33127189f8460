"""Moved to _common, _futures, _objects, _session and _client; this re-export goes
once the importers take the names from there."""
from ._common import (TASK_OPTIONS, _LOG_OPTIONS, _MAX_TASK_GOVERNORS, _SLICE_MS, _local, _FairLock, TaskConfigTooLarge, _locked, _count, _gpus, _with_log_options, _with_key, _check_options, _workers, _ms, _JOB_STATES, _TASK_STATES, _jobs_call, _state, _job_dict, _session_stack, current_session)  # noqa: F401
from ._futures import (_GATHER_CHUNK, _UNSET, _Waiters, _CONDITION_LOCK, _CANCELLED_STATES, Future, _LogForwarder, _Watcher, wait, _collect, _rebuild, _failed, _left, _raise_first, _gather_values, _gather_few, _gather_joined, as_completed)  # noqa: F401
from ._objects import (DataObject, Task, PyTask, blob, pickled, RemoteFunction, remote)  # noqa: F401
from ._session import (_NO_GOVERNOR_WARNING, _CONFIG_MAX, _PLAIN_TYPES, Session, _LARGE_ARG, _LARGE_WARN, _cheap_size, _warn_large, _ref_id, _object_id)  # noqa: F401
from ._client import (DEFAULT_ADDRESS, _SUBMIT_DELAY, _SUBMIT_BUFFER, _log, _PREFIX, Client)  # noqa: F401
from .errors import SquallError  # noqa: F401
