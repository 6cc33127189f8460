"""Exceptions raised by squall."""
from __future__ import annotations

import builtins
from typing import Optional

#   Python tasks fail with "Type: message", this separator, then the
#   traceback formatted by the executor (governor/executor.py).
TRACEBACK_SEPARATOR = "\n--- remote traceback ---\n"


class SquallError(Exception):
    """Base class of squall's errors; `code` is the sq_err_t number (or 0)."""

    def __init__(self, message: str, code: int = 0):
        super().__init__(message)
        self.message = message
        self.code = code


class ConnectionError(SquallError, builtins.ConnectionError):  # noqa: A001
    """The broker (or a governor) at `address` cannot be reached or was lost."""

    def __init__(self, address: str, message: str, code: int = 20):
        super().__init__("%s: %s" % (address, message), code)
        self.address = address


class TaskFailed(SquallError):
    """A task failed. `task_id` is the failed task, `message` its failure
    message; for Python tasks `remote_traceback` holds the traceback from the
    executor (also shown in str()). `name` is the task's name (for Dask
    graphs, the key) when known."""

    def __init__(self, task_id: int, message: str, name: Optional[str] = None, code: int = 13):
        head, sep, tb = message.partition(TRACEBACK_SEPARATOR)
        self.task_id = task_id
        self.name = name
        self.remote_traceback = tb if sep else None
        label = "task %d%s" % (task_id, " (%s)" % name if name else "")
        text = "%s failed: %s" % (label, head)
        if sep:
            text += "\n\nRemote traceback:\n" + tb
        super().__init__(text, code)
        self.message = head


class UpstreamFailed(TaskFailed):
    """A task could not run because a task it depends on failed. `root_id`
    (and `root_name`) name the task that failed first; `message` is its
    message."""

    def __init__(self, task_id: int, root_id: int, message: str,
                 name: Optional[str] = None, root_name: Optional[str] = None):
        TaskFailed.__init__(self, root_id, message, root_name, 14)
        self.task_id = task_id
        self.name = name
        self.root_id = root_id
        self.root_name = root_name
        label = "task %d%s" % (task_id, " (%s)" % name if name else "")
        root = "task %d%s" % (root_id, " (%s)" % root_name if root_name else "")
        text = "%s did not run: upstream %s failed: %s" % (label, root, self.message)
        if self.remote_traceback:
            text += "\n\nRemote traceback:\n" + self.remote_traceback
        self.args = (text,)


class TaskCancelled(SquallError):
    """The task was cancelled (by the client or because its session closed)."""


class TimeoutError(SquallError, builtins.TimeoutError):  # noqa: A001
    """A wait or fetch did not complete in time."""
