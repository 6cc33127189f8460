"""squall: Python bindings of the squall task-pipeline framework.

    import squall

    with squall.LocalCluster(governors=2) as cluster:
        client = cluster.client()
        futures = client.map(lambda x: x * x, range(10))
        print(client.gather(futures))

Graphs (Rain-style): `with client.session() as s:` then constants
(`squall.blob`, `squall.pickled`), built-in tasks (`squall.tasks`), Python
tasks (`@squall.remote`); futures (Dask/Ray-style): `client.submit`,
`client.map`, `client.gather`, `squall.as_completed`; Dask graphs:
`dask.compute(x, scheduler=client.get)`.
"""
from . import tasks
from ._client import Client
from ._common import TaskConfigTooLarge, current_session
from ._futures import Future, as_completed, wait
from ._objects import DataObject, PyTask, RemoteFunction, Task, blob, pickled, remote
from ._session import Session
from ._pickling import PICKLE as PICKLE_CONTENT_TYPE
from .actors import ActorClass, ActorHandle, actor
from .cluster import LocalCluster
from .keys import keygen
from ._intask import rejoin, secede
from ._worker import get_client
from .errors import (ActorLost, ConnectionError, ObjectDeleted, ObjectLost, RemoteTraceback, SquallError,
                     TaskCancelled, TaskFailed, TimeoutError, UpstreamFailed)
from .tasks import Program

from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, FIRST_EXCEPTION  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Client", "LocalCluster", "Session", "DataObject", "Task", "PyTask", "Future",
    "RemoteFunction", "remote", "actor", "ActorClass", "ActorHandle", "ActorLost", "blob", "pickled", "tasks", "Program", "as_completed",
    "current_session", "wait", "get_client", "secede", "rejoin", "FIRST_COMPLETED", "FIRST_EXCEPTION", "ALL_COMPLETED",
    "SquallError", "ConnectionError", "TaskFailed", "UpstreamFailed",
    "TaskCancelled", "TimeoutError", "RemoteTraceback", "ObjectLost", "ObjectDeleted", "TaskConfigTooLarge", "PICKLE_CONTENT_TYPE", "keygen",
]
