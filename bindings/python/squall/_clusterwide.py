"""What a client asks of every governor at once (client.run, client.restart)
and ships to every task (client.upload_file): Client's methods of those
names say what they do; here is how."""
from __future__ import annotations

import ctypes
import os
import pickle
from typing import Any, Callable, Dict

from . import _lib as L
from . import _pickling, _uploads
from .errors import SquallError


def upload_file(client: Any, path: str, load: bool) -> None:
    import hashlib
    import zipfile
    name = os.path.basename(path)
    if not name.endswith((".py", ".zip", ".egg")) or name.startswith("."):
        raise ValueError("upload_file takes a .py module, or a .zip or .egg of modules, "
                         "not %r" % name)
    with open(path, "rb") as f:
        data = f.read()
    if name.endswith(".py"):
        compile(data, path, "exec")         # a SyntaxError is the caller's, here
    elif not zipfile.is_zipfile(path):
        raise ValueError("%s is not a zip archive" % path)
    digest = hashlib.sha256(name.encode() + b"\0" + data).hexdigest()[:32]
    with client._lock:
        client._uploads = [u for u in client._uploads if u[0] != name] + [(name, digest, data)]
        client._uploads_version += 1
    if load and name.endswith(".py"):
        client.submit(_uploads.load, name[:-3], key="upload_file").result()


def restart(client: Any, keep_results: bool, timeout: float = 30.0) -> None:
    with client._lock:
        if not keep_results and client._fs is not None:
            #   Closing the session cancels its tasks and frees its
            #   results; its futures are cancelled (a value fetched
            #   before too, as Dask's).
            client._fs._dropped = True
            client._fs.close()
            client._fs = None
            client._released.clear()
        if L.sq_client_restart_wait is None:
            client._check(L.sq_client_restart(client._h))
        else:
            client._check(L.sq_client_restart_wait(client._h, max(0, int(timeout * 1000))))


def run(client: Any, function: Callable, args: tuple, kwargs: dict, workers: Any,
        on_error: str, timeout: float = 30.0) -> Dict[Any, Dict[int, Any]]:
    import struct
    if L.sq_client_run is None:
        raise SquallError("client.run needs a newer libsquall (sq_client_run)", L.SQ_E_INVALID)
    governors = client.governors()
    names = {int(g["id"]): g.get("name") for g in governors}
    counts = list(names.values())
    wanted = set(client._governor_ids(workers)) if workers is not None else None
    call = (function, args, kwargs)
    fn = _pickling._cloud_dumps(call) if _pickling.cloudpickle else _pickling.dumps(call)
    out_p = ctypes.c_void_p()
    size = ctypes.c_size_t()
    with client._lock:
        client._check(L.sq_client_run(client._h, max(0, int(timeout * 1000)), fn, len(fn),
                                    ctypes.byref(out_p), ctypes.byref(size)))
    try:
        data = ctypes.string_at(out_p.value, size.value) if size.value else b""
    finally:
        L.sq_free(out_p)
    out: Dict[Any, Dict[int, Any]] = {}
    first_error = None
    pos = 0
    head = struct.Struct("<IQBI")
    while pos < len(data):
        gov, pid, ok, length = head.unpack_from(data, pos)
        pos += head.size
        raw = data[pos:pos + length]
        pos += length
        if wanted is not None and gov not in wanted:
            continue
        name = names.get(gov)
        key = name if name and counts.count(name) == 1 else gov
        results = out.setdefault(key, {})
        try:
            value = pickle.loads(raw)
        except Exception:               # noqa: BLE001 - the governor's own words
            value = SquallError("run on executor %d: %s"
                                % (pid, raw.decode("utf-8", "replace")), 0)
            ok = 0
        if ok:
            results[pid] = value
        elif on_error == "raise":
            first_error = first_error or value
        elif on_error == "return":
            results[pid] = value
    for gov in names:
        name = names[gov]
        key = name if name and counts.count(name) == 1 else gov
        if wanted is None or gov in wanted:
            out.setdefault(key, {})
    if first_error is not None:
        raise first_error
    return out
