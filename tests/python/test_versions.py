"""A client and an executor whose Python or cloudpickle differ: the first
task fails with an error naming both sides' versions, not with whatever
unpickling the function happens to raise ("Can't get attribute
'_function_setstate'"); matching versions run as before."""
import struct
import sys

import pytest

import squall
from squall import _pickling

cloudpickle = pytest.importorskip("cloudpickle")


def _trailer(text):
    data = text.encode()
    return data + struct.pack("<I", len(data)) + _pickling._VERSIONS_MAGIC


def test_function_carries_the_clients_versions():
    data = _pickling.function_bytes(lambda x: x + 1)
    here = "python=%d.%d.%d cloudpickle=%s" % (sys.version_info[:3] + (cloudpickle.__version__,))
    assert data.endswith(_trailer(here))
    # what follows the pickle is ignored by whoever loads it
    import pickle
    assert pickle.loads(data)(1) == 2
    # a function pickled by reference loads wherever its module is: no
    # versions, no check
    import operator
    assert not _pickling.function_bytes(operator.add).endswith(_pickling._VERSIONS_MAGIC)


@pytest.mark.parametrize("versions, named", [
    ("python=%d.%d.0 cloudpickle=0.0.1" % sys.version_info[:2], "cloudpickle 0.0.1"),
    ("python=2.7.18 cloudpickle=%s" % cloudpickle.__version__, "Python 2.7.18"),
])
def test_a_version_mismatch_fails_the_first_task_naming_both(client, monkeypatch, versions,
                                                            named):
    monkeypatch.setattr(_pickling, "_versions_trailer", lambda cloud: _trailer(versions))
    offset = 3 if "0.0.1" in versions else 4          # a new function: no cached pickle
    future = client.submit(lambda x: x + offset, 1)
    with pytest.raises(Exception) as info:
        future.result(timeout=60)
    message = str(info.value)
    assert named in message, message
    assert "executor Python %d.%d.%d" % sys.version_info[:3] in message, message
    assert "cloudpickle %s" % cloudpickle.__version__ in message, message


def test_a_patch_release_of_python_alone_is_no_mismatch(client, monkeypatch):
    versions = "python=%d.%d.999 cloudpickle=%s" % (sys.version_info[:2] +
                                                    (cloudpickle.__version__,))
    monkeypatch.setattr(_pickling, "_versions_trailer", lambda cloud: _trailer(versions))
    assert client.submit(lambda x: x * 5, 2).result(timeout=60) == 10
