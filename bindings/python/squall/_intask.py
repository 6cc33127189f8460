"""Whether code runs inside a squall task, and the task giving its cpu back
while it waits (secede(), rejoin(), waiting()): what the client, its
futures and _worker.py share of the executor (governor/executor.py
registers itself as the module `_squall_executor`)."""
import contextlib
import sys
import threading

#   Nesting of waits of the running task: it secedes on the first and
#   rejoins after the last.
_waits = 0
_waits_lock = threading.Lock()


def _executor():
    return sys.modules.get("_squall_executor")


def in_task() -> bool:
    """Whether this code runs inside a squall task (an executor)."""
    ex = _executor()
    return ex is not None and ex.in_task()


def secede() -> None:
    """The running task gives its cpu back to the governor: it waits (on
    futures, a lock, I/O) and other tasks may run meanwhile. Done for you
    when a task waits on a future. Nothing outside a task."""
    ex = _executor()
    if ex is not None:
        ex.secede()


def rejoin() -> None:
    """The task takes its cpu again (after secede()), at once: for a while
    the governor may run more tasks than it has cpus."""
    ex = _executor()
    if ex is not None:
        ex.rejoin()


@contextlib.contextmanager
def waiting():
    """Secedes for the block when inside a task (nested: once)."""
    global _waits
    if not in_task():
        yield
        return
    with _waits_lock:
        _waits += 1
        first = _waits == 1
    if first:
        secede()
    try:
        yield
    finally:
        with _waits_lock:
            _waits -= 1
            last = _waits == 0
        if last:
            rejoin()


#   How a Future is pickled: set by _worker when it is loaded (inside a
#   task, whose own client may adopt its children's futures into its
#   caller's session); elsewhere a future cannot leave its client.
reduce_hook = None


def reduce_future(future):
    """Future.__reduce__."""
    hook = reduce_hook
    if hook is None:
        raise TypeError("a squall Future cannot be pickled: it belongs to the client that made it "
                        "(a future made inside a task can be returned by that task, or passed "
                        "to its other children); pass the future itself to client.submit, or "
                        "its result")
    return hook(future)
