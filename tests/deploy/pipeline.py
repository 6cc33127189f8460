"""A small pipeline for `squall run` (and the compose `example` service):
N parts, each through a `sleep` task (so a dashboard sees tasks run) and an
`execute` task (tr a-z A-Z), joined by `concat`, fetched and checked against
the same computation done locally. Exits 0 when the result matches.

Uses libsquall through ctypes only, so it runs with the standard library and
a built libsquall (SQUALL_BUILD_DIR, SQUALL_LIBRARY, or installed). With keys,
$SQUALL_SECRET_KEY and $SQUALL_BROKER_KEY name the client's and the broker's.
    python3 pipeline.py [--parts N] [--sleep S] [--rounds R]
"""
import argparse
import ctypes
import ctypes.util
import glob
import os
import sys


def load():
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("SQUALL_LIBRARY")]
    candidates += sorted(glob.glob(os.path.join(here, "..", "..", "bindings", "python",
                                                "squall", "_bin", "libsquall.so*")))
    if os.environ.get("SQUALL_BUILD_DIR"):
        candidates.append(os.path.join(os.environ["SQUALL_BUILD_DIR"], "client", "libsquall.so"))
    candidates.append(ctypes.util.find_library("squall"))
    for path in filter(None, candidates):
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError:
            continue
    else:
        sys.exit("pipeline: cannot find libsquall")
    p, u32, size = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t
    sigs = {
        "sq_client_new": (p, []), "sq_client_connect": (ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_int]),
        "sq_client_errmsg": (ctypes.c_char_p, [p]), "sq_session_new": (p, [p]),
        "sq_blob": (u32, [p, ctypes.c_char_p, size, ctypes.c_char_p]),
        "sq_task": (u32, [p, ctypes.c_char_p, ctypes.POINTER(u32), size, u32, p, size]),
        "sq_task_set_name": (ctypes.c_int, [p, u32, ctypes.c_char_p]),
        "sq_output": (u32, [u32, u32]), "sq_keep": (ctypes.c_int, [p, u32]),
        "sq_submit": (ctypes.c_int, [p]),
        "sq_fetch": (ctypes.c_int, [p, u32, ctypes.c_int, ctypes.POINTER(p), ctypes.POINTER(size), p]),
        "sq_free": (None, [p]), "sq_config_sleep": (p, [ctypes.c_double, ctypes.POINTER(size)]),
        "sq_config_execute": (p, [ctypes.POINTER(ctypes.c_char_p), size, ctypes.POINTER(ctypes.c_char_p),
                                  size, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), size,
                                  ctypes.c_int, p, ctypes.POINTER(size)]),
        "sq_session_destroy": (None, [ctypes.POINTER(p)]), "sq_client_destroy": (None, [ctypes.POINTER(p)]),
        "sq_client_set_keys": (ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_char_p]),
    }
    for name, (restype, argtypes) in sigs.items():
        getattr(lib, name).restype = restype
        getattr(lib, name).argtypes = argtypes
    return lib


def cstrs(values):
    return (ctypes.c_char_p * len(values))(*[v.encode() for v in values])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    endpoint = os.environ.get("SQUALL_BROKER", "tcp://127.0.0.1:7760")
    lib = load()
    client = ctypes.c_void_p(lib.sq_client_new())
    # With keys (docs/security.md): this client's and the broker's public key.
    secret, broker = os.environ.get("SQUALL_SECRET_KEY"), os.environ.get("SQUALL_BROKER_KEY")
    if secret and broker and lib.sq_client_set_keys(client, secret.encode(), broker.encode()):
        sys.exit("pipeline: keys: %s" % lib.sq_client_errmsg(client).decode())
    if lib.sq_client_connect(client, endpoint.encode(), 10000):
        sys.exit("pipeline: %s" % lib.sq_client_errmsg(client).decode())
    session = ctypes.c_void_p(lib.sq_session_new(client))
    if not session:
        sys.exit("pipeline: %s" % lib.sq_client_errmsg(client).decode())
    size = ctypes.c_size_t()
    sleep_cfg = lib.sq_config_sleep(args.sleep, ctypes.byref(size))
    sleep_size = size.value
    exe_cfg = lib.sq_config_execute(cstrs(["tr", "a-z", "A-Z"]), 3, cstrs([""]), 1, 0,
                                    cstrs([""]), 1, 0, None, ctypes.byref(size))
    exe_size = size.value
    for r in range(args.rounds):
        texts = ["round %d part %d of the squall pipeline\n" % (r, i) for i in range(args.parts)]
        parts = []
        for i, text in enumerate(texts):
            data = text.encode()
            blob = lib.sq_blob(session, data, len(data), b"text/plain")
            t = lib.sq_task(session, b"sleep", (ctypes.c_uint32 * 1)(blob), 1, 1,
                            ctypes.c_void_p(sleep_cfg), sleep_size)
            lib.sq_task_set_name(session, t, ("wait-%d" % i).encode())
            u = lib.sq_task(session, b"execute", (ctypes.c_uint32 * 1)(lib.sq_output(t, 0)), 1, 1,
                            ctypes.c_void_p(exe_cfg), exe_size)
            lib.sq_task_set_name(session, u, ("upper-%d" % i).encode())
            parts.append(lib.sq_output(u, 0))
        joined = lib.sq_task(session, b"concat", (ctypes.c_uint32 * len(parts))(*parts), len(parts), 1,
                             None, 0)
        lib.sq_task_set_name(session, joined, b"join")
        result = lib.sq_output(joined, 0)
        lib.sq_keep(session, result)
        if lib.sq_submit(session):
            sys.exit("pipeline: submit: %s" % lib.sq_client_errmsg(client).decode())
        data, n = ctypes.c_void_p(), ctypes.c_size_t()
        if lib.sq_fetch(session, result, 120000, ctypes.byref(data), ctypes.byref(n), None):
            sys.exit("pipeline: fetch: %s" % lib.sq_client_errmsg(client).decode())
        got = ctypes.string_at(data, n.value).decode()
        lib.sq_free(data)
        expected = "".join(texts).upper()
        if got != expected:
            sys.exit("pipeline: round %d: result differs from the local computation" % r)
        print("pipeline: round %d OK, %d bytes in %d parts" % (r, len(got), args.parts))
    lib.sq_free(ctypes.c_void_p(sleep_cfg))
    lib.sq_free(ctypes.c_void_p(exe_cfg))
    lib.sq_session_destroy(ctypes.byref(session))
    lib.sq_client_destroy(ctypes.byref(client))
    print("pipeline: OK")


if __name__ == "__main__":
    main()
