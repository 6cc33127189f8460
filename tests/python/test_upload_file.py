"""client.upload_file: modules and archives importable by the client's
tasks wherever they run, governors that join later included, installed in
a directory private to the tasks' user."""
import os
import sys
import uuid
import zipfile

import pytest

import squall


def import_and_call(module, attr="value"):
    import importlib
    return getattr(importlib.import_module(module), attr)()


def where_installed(module):
    import importlib
    import os
    import stat
    m = importlib.import_module(module)
    d = os.path.dirname(m.__file__)
    return (stat.S_IMODE(os.stat(d).st_mode), os.stat(d).st_uid, os.getuid(),
            stat.S_IMODE(os.stat(m.__file__).st_mode))


def test_upload_module_and_archive(tmp_path):
    from conftest import cluster_options
    name = "squall_upl_%s" % uuid.uuid4().hex[:8]
    mod = tmp_path / (name + ".py")
    mod.write_text("def value():\n    return 1\n")
    with squall.LocalCluster(governors=1, dashboard=False, **cluster_options()) as cluster:
        client = cluster.client()
        # not importable before (the module is nowhere on the executors' path)
        with pytest.raises(ModuleNotFoundError):
            client.submit(import_and_call, name).result(60)
        client.upload_file(str(mod))
        assert client.submit(import_and_call, name).result(60) == 1
        assert client.gather(client.map(import_and_call, [name] * 5)) == [1] * 5
        dmode, duid, uid, fmode = client.submit(where_installed, name).result(60)
        assert dmode == 0o700 and duid == uid and fmode == 0o600
        # a new version replaces the old one in executors that imported it
        mod.write_text("def value():\n    return 2\n")
        client.upload_file(str(mod))
        assert client.submit(import_and_call, name).result(60) == 2
        # through Dask too
        dask = pytest.importorskip("dask")
        assert dask.compute(dask.delayed(import_and_call)(name), scheduler=client.get)[0] == 2
        # an archive of a package
        pkg = "squall_uplpkg_%s" % uuid.uuid4().hex[:8]
        archive = tmp_path / (pkg + ".zip")
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr(pkg + "/__init__.py", "def value():\n    return 'zipped'\n")
        client.upload_file(str(archive))
        assert client.submit(import_and_call, pkg).result(60) == "zipped"
        # a governor that joins later: tasks that can only run there import them
        cluster.add_governor(args=["--resource", "late=1"])
        late = client.submit(import_and_call, name, resources={"late": 1})
        assert late.result(60) == 2
        assert client.submit(import_and_call, pkg, resources={"late": 1}).result(60) == "zipped"
        # another client (its own uploads: none) does not carry them
        other = cluster.client()
        assert other._uploads == []


def test_upload_file_refuses_bad_files(client, tmp_path):
    bad = tmp_path / "broken_mod_x.py"
    bad.write_text("def f(:\n")
    with pytest.raises(SyntaxError):
        client.upload_file(str(bad))
    with pytest.raises(ValueError, match=r"\.py module"):
        client.upload_file(str(tmp_path / "notes.txt"))
    fake = tmp_path / "fake.zip"
    fake.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a zip"):
        client.upload_file(str(fake))
    assert client._uploads == []
    # a module that raises on import: the error comes back from the load
    raising = tmp_path / ("raising_%s.py" % uuid.uuid4().hex[:8])
    raising.write_text("raise RuntimeError('import-time failure')\n")
    with pytest.raises(RuntimeError, match="import-time failure"):
        client.upload_file(str(raising))


def test_install_refuses_a_directory_prepared_by_someone_else(tmp_path, monkeypatch):
    """The executor's side: an upload directory that is a link, or open to
    others, is refused rather than used."""
    from squall import _uploads
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path))
    monkeypatch.setitem(sys.modules, "_squall_uploaded", None)
    sys.modules.pop("_squall_uploaded")
    base = tmp_path / ("squall-uploads-%d" % os.getuid())
    base.mkdir(mode=0o777)
    os.chmod(base, 0o777)
    with pytest.raises(PermissionError, match="not a private directory"):
        _uploads.install([("m_x.py", "d1", b"x = 1\n")])
    os.rmdir(base)
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    base.symlink_to(target)
    with pytest.raises(PermissionError, match="not a private directory"):
        _uploads.install([("m_x.py", "d1", b"x = 1\n")])
    base.unlink()
    _uploads.install([("m_x.py", "d1", b"x = 1\n")])
    assert (base / "d1" / "m_x.py").read_bytes() == b"x = 1\n"
    sys.path.remove(str(base / "d1"))


def import_or_not(module):
    import importlib
    import os
    try:
        importlib.import_module(module)
        return os.getpid(), True
    except ModuleNotFoundError:
        return os.getpid(), False


def test_uploads_are_the_clients_own_in_every_executor(tmp_path):
    """Another client of the same tenant never imports a client's uploads,
    whichever executor ran the uploader's tasks before; the uploader's
    module stays imported (its state kept) between its own tasks in an
    executor; its functions and arguments may refer to the module by
    reference."""
    from conftest import cluster_options
    name = "squall_own_%s" % uuid.uuid4().hex[:8]
    mod = tmp_path / (name + ".py")
    mod.write_text("import os\ncount = 0\n"
                   "class Box:\n    def __init__(self, v):\n        self.v = v\n"
                   "def bump(box=None):\n    global count\n    count += 1\n"
                   "    return os.getpid(), count, box.v if box else None\n")
    try:
        with squall.LocalCluster(governors=1, cpus=1, dashboard=False,
                                 **cluster_options()) as cluster:
            uploader, other = cluster.client(), cluster.client()
            uploader.upload_file(str(mod))
            #   Importable here once the cluster runs (its executors do not
            #   take this path): pickled by reference from here on.
            sys.path.insert(0, str(tmp_path))
            module = __import__(name)
            counts = {}
            other_pids = set()
            for i in range(4):
                pid, count, v = uploader.submit(module.bump, module.Box(i),
                                                key="bump-%d" % i).result(60)
                assert v == i
                counts.setdefault(pid, []).append(count)
                opid, imported = other.submit(import_or_not, name,
                                              key="other-%d" % i).result(60)
                assert not imported
                other_pids.add(opid)
            # the module was imported once per executor and kept between
            # the uploader's tasks, with the other client's in between
            for seq in counts.values():
                assert seq == list(range(1, len(seq) + 1))
            assert max(len(s) for s in counts.values()) > 1
            # one cpu: the two clients' tasks shared an executor
            assert other_pids & set(counts)
    finally:
        if str(tmp_path) in sys.path:
            sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)
