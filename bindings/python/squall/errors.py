"""Exceptions raised by squall."""
from __future__ import annotations

import base64
import builtins
import pickle
from typing import Optional

#   Python tasks fail with "Type: message", this separator, then the
#   traceback formatted by the executor (governor/executor.py), then, when
#   the exception pickles in a few KiB, EXCEPTION_SEPARATOR and its pickle in
#   base64.
TRACEBACK_SEPARATOR = "\n--- remote traceback ---\n"
EXCEPTION_SEPARATOR = "\n--- pickled exception ---\n"


class RemoteTraceback(Exception):
    """The `__cause__` of an exception raised by a Python task and re-raised
    in the client: its str() names the task and holds the traceback from the
    executor, so an uncaught error shows where it happened remotely."""

    def __init__(self, label: str, tb: str):
        super().__init__(label, tb)
        self.task = label
        self.traceback = tb

    def __str__(self) -> str:
        return "in %s\n\"\"\"\n%s\"\"\"" % (self.task, self.traceback.rstrip("\n") + "\n")


def _split_failure(message: str):
    """(head, traceback or None, the unpickled exception or None)."""
    message, sep, b64 = message.partition(EXCEPTION_SEPARATOR)
    original = None
    if sep:
        try:
            original = pickle.loads(base64.b64decode(b64.strip(), validate=True))
        except Exception:           # a class the client cannot import, a bad pickle
            original = None
        if not isinstance(original, BaseException):
            original = None
    head, sep, tb = message.partition(TRACEBACK_SEPARATOR)
    return head, (tb if sep else None), original


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
    executor (also shown in str()) and `exception` the task's own exception
    when it could be brought back. `name` is the task's name (for Dask
    graphs, the key) when known.

    Results and fetches raise a Python task's own exception instead (see
    `raised()`); TaskFailed is what is raised for failures that are not a
    Python exception (a program's exit status, a killed executor, a lost
    governor), for SystemExit and the like, and for exceptions that could
    not be pickled or unpickled."""

    def __init__(self, task_id: int, message: str, name: Optional[str] = None, code: int = 13):
        head, tb, original = _split_failure(message)
        self.task_id = task_id
        self.name = name
        self.remote_traceback = tb
        self.exception = original
        self._raised: Optional[BaseException] = None
        label = "task %d%s" % (task_id, " (%s)" % name if name else "")
        self._root = label              # the task that raised (kept by UpstreamFailed)
        text = "%s failed: %s" % (label, head)
        if tb is not None:
            text += "\n\nRemote traceback:\n" + tb
        super().__init__(text, code)
        self.message = head

    def raised(self) -> BaseException:
        """What the client raises for this failure: the task's own exception
        (an Exception, not SystemExit and the like) with a RemoteTraceback as
        its __cause__, else this TaskFailed. The same object every time."""
        if self._raised is None:
            original = self.exception
            if isinstance(original, Exception):
                original.__cause__ = RemoteTraceback(self._root,
                                                     self.remote_traceback or self.message)
                if hasattr(original, "add_note"):   # shown with the error itself
                    original.add_note("raised by %s on the cluster" % self._root)
                self._raised = original
            else:
                self._raised = self
        return self._raised


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
        root = self._root
        text = "%s did not run: upstream %s failed: %s" % (label, root, self.message)
        if self.remote_traceback:
            text += "\n\nRemote traceback:\n" + self.remote_traceback
        self.args = (text,)


class ObjectLost(SquallError):
    """A data object was lost and cannot be recomputed: a constant put on
    a governor by hand (scatter(governor=...)) whose every copy went."""


class ActorLost(SquallError):
    """A call of an actor did not run, or did not finish, on its instance:
    the actor's governor or executor died, it was stopped, or it failed to
    start (its constructor raised). The message names the actor. With
    max_restarts left, calls made after the loss go to the new instance."""


class ObjectDeleted(SquallError):
    """A data object was deleted by hand (Future.delete, DELETE)."""


class TaskCancelled(SquallError):
    """The task was cancelled (by the client or because its session closed)."""


class TimeoutError(SquallError, builtins.TimeoutError):  # noqa: A001
    """A wait or fetch did not complete in time."""
