"""Files of client.upload_file, installed in the executor that runs a task.

A client's uploaded files travel as one data object, an input of each of
its Python tasks (each governor receives it once, governors that join
later too); before the task's function runs, the executor writes each file
it has not installed yet into a directory of its user's own (0700, under
the temporary directory: the tenant's uid on a governor that runs tenants
under uids of their own) and puts it (a .py's directory, or the .zip /
.egg itself) first on sys.path. The files are the client's own: at the
end of the task its entries leave sys.path and the modules imported from
them leave sys.modules (kept aside, and put back for the next task that
carries the same files), so that another client of the same tenant, whose
task runs in the same executor next, never imports them: whether it could
would otherwise depend on which executor ran which task before. The files
are installed as the data object is unpickled, before the task's function
and its other arguments are, so that these may refer to the uploaded
modules by reference. This module is pickled by value
(cloudpickle.register_pickle_by_value): executors need no squall for it.
Keep it free of imports from squall.
"""
import importlib
import os
import stat
import sys
import tempfile



def _installed():
    """digest -> the sys.path entry installed for it, in this process. Kept
    in sys.modules, not in this module's globals: pickled by value, this
    module's functions get fresh globals with each function unpickled."""
    state = sys.modules.get("_squall_uploaded")
    if state is None:
        import types
        state = sys.modules["_squall_uploaded"] = types.ModuleType("_squall_uploaded")
        state.installed = {}
    return state.installed


def _private_dir(path):
    """Makes `path` a directory only this user can use, or refuses one
    that someone else could have prepared (another owner, a link, open
    permissions)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError("%s is not a private directory of this user (uid %d): uploaded "
                              "files are not installed there" % (path, os.getuid()))
    return path


def _state():
    _installed()
    return sys.modules["_squall_uploaded"]


def _under(module, entries):
    where = getattr(module, "__file__", None) or ""
    return any(where.startswith(entry + os.sep) for entry in entries)


def _uninstall():
    """At the end of a task: its files leave sys.path, and the modules
    imported from them sys.modules (kept aside by digest)."""
    state = _state()
    active = getattr(state, "active", None) or {}
    state.active = {}
    if not active:
        return
    kept = state.__dict__.setdefault("kept", {})
    for entry in active.values():
        while entry in sys.path:
            sys.path.remove(entry)
    for name, module in list(sys.modules.items()):
        for digest, entry in active.items():
            if module is not None and _under(module, (entry,)):
                kept.setdefault(digest, {})[name] = sys.modules.pop(name)
                break
    importlib.invalidate_caches()


def install(files):
    """files: [(name, digest, bytes)], oldest first. In an executor, for
    the running task only (its end takes them away again); elsewhere for
    good."""
    state = _state()
    active = state.__dict__.setdefault("active", {})
    if files and [f[1] for f in files] == list(active):
        return                      # already, for this task
    if active:
        _uninstall()
        active = state.active
    executor = sys.modules.get("_squall_executor")
    if executor is not None and getattr(executor, "in_task", lambda: False)() \
            and hasattr(executor, "at_task_end"):
        executor.at_task_end(_uninstall)
        scoped = True
    else:
        scoped = False
    base = None
    installed = _installed()
    kept = state.__dict__.setdefault("kept", {})
    for name, digest, data in files:
        if digest in installed:
            entry = installed[digest]
            if entry in sys.path:
                sys.path.remove(entry)
            sys.path.insert(0, entry)
            if scoped:
                active[digest] = entry
            for module_name, module in kept.pop(digest, {}).items():
                sys.modules.setdefault(module_name, module)
            continue
        if base is None:
            base = _private_dir(os.path.join(tempfile.gettempdir(),
                                             "squall-uploads-%d" % os.getuid()))
        where = _private_dir(os.path.join(base, digest))
        path = os.path.join(where, name)
        if not os.path.exists(path):
            fd, tmp = tempfile.mkstemp(dir=where)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        entry = path if name.endswith((".zip", ".egg")) else where
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
        importlib.invalidate_caches()
        installed[digest] = entry
        if scoped:
            active[digest] = entry
        if name.endswith(".py"):
            module = sys.modules.get(name[:-3])
            if module is not None:
                importlib.reload(module)


class Files:
    """The client's files as a task input: installed as it is unpickled."""

    def __init__(self, files):
        self.files = files

    def __reduce__(self):
        return _installed_files, (self.files,)


def _installed_files(files):
    install(files)
    return files


class WithFiles:
    """A task's function, run after the client's uploaded files are
    installed (its first argument is the files' data object)."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, files, *args, **kwargs):
        install(files)
        return self.fn(*args, **kwargs)


def load(module):
    """Imports a module just uploaded (client.upload_file(load=True)): an
    error in it is raised to the client."""
    importlib.import_module(module)
