"""A pytest plugin that runs Dask's own tests with squall as the scheduler.

One LocalCluster for the whole run; every compute that would use one of
Dask's local schedulers (none named, "sync", "threads", "processes", ...)
uses its client's get instead. Dask's test helpers (assert_eq and the like)
name scheduler="sync" explicitly, so setting dask.config alone would leave
most computes on Dask's own scheduler: dask.base.get_scheduler is wrapped
too. A scheduler given as a function (a test of custom schedulers) is left
alone.

Known failures are listed in tests/dask/xfail.py, each with its reason, and
marked strict xfail: a listed test that starts passing fails the run.
"""
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_PKG = os.path.normpath(os.path.join(_HERE, "..", "..", "bindings", "python"))
if _PKG not in sys.path:
    sys.path.insert(0, _PKG)
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(_HERE, "..", "python"))

_LOCAL_NAMES = {"sync", "synchronous", "single-threaded", "threads", "threading",
                "processes", "multiprocessing"}
_state = {}


def _patched(original, squall_get):
    def get_scheduler(get=None, scheduler=None, collections=None, cls=None):
        if get is None and (scheduler is None or
                             (isinstance(scheduler, str) and scheduler in _LOCAL_NAMES)):
            chosen = original(get=None, scheduler=scheduler, collections=collections, cls=cls)
            from dask import local, threaded, multiprocessing
            if chosen in (local.get_sync, threaded.get, multiprocessing.get, None):
                return squall_get
            return chosen
        return original(get=get, scheduler=scheduler, collections=collections, cls=cls)
    get_scheduler.__wrapped__ = original
    return get_scheduler


def pytest_configure(config):
    import dask
    import dask.base
    import squall
    from conftest import cluster_options
    cluster = squall.LocalCluster(governors=2, cpus=1, log_level="error",
                                  preload=["dask.array", "dask.bag"], **cluster_options())
    client = cluster.client()
    _state.update(cluster=cluster, client=client)
    original = dask.base.get_scheduler
    patched = _patched(original, client.get)
    for name, module in list(sys.modules.items()):
        if name.startswith("dask") and getattr(module, "get_scheduler", None) is original:
            module.get_scheduler = patched
    _state["restore"] = (original, patched)
    _state["config"] = dask.config.set(scheduler=client.get)
    _state["config"].__enter__()
    _client_fixture_is_squall(client)


def _client_fixture_is_squall(client):
    """dask/tests/test_distributed.py takes its `c` fixture from
    distributed.utils_test (`from ... import client as c`): that fixture,
    replaced before the module is imported, yields the squall client."""
    try:
        import distributed.utils_test as utils_test
    except ImportError:
        return

    @pytest.fixture
    def squall_client():
        yield client
    utils_test.client = squall_client


def pytest_collection_modifyitems(config, items):
    from xfail import XFAIL
    for item in items:
        reason = XFAIL.get(_short(item.nodeid)) or XFAIL.get(_from_path(item))
        if reason:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))


def _short(nodeid):
    """dask/bag/tests/test_bag.py::test_x[param] from any absolute path."""
    i = nodeid.find("dask/")
    return nodeid[i:] if i >= 0 else nodeid


def _from_path(item):
    """The same from the test's file: node ids are relative to pytest's
    rootdir, which need not be above the dask package (a virtual
    environment elsewhere)."""
    import dask
    root = os.path.dirname(os.path.dirname(os.path.abspath(dask.__file__)))
    rest = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else ""
    return os.path.relpath(str(item.path), root).replace(os.sep, "/") + "::" + rest


def pytest_unconfigure(config):
    if "config" in _state:
        _state["config"].__exit__(None, None, None)
    cluster = _state.get("cluster")
    if cluster is not None:
        cluster.close()
