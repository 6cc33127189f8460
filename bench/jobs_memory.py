#!/usr/bin/env python3
"""Broker memory per array element held, and SESSIONS over many jobs.

    python3 bench/jobs_memory.py BUILD_DIR [--elements N] [--jobs N]

- An array task of N elements (default 1 000 000) submitted to a broker with
  no governor, so that none runs: the broker's resident memory grows by what
  it holds per element not yet run (target: under 100 bytes; elements are
  made tasks only when they are to be placed, 1024 at a time). Beside it, the
  same number of plain tasks (one `true` execute task each, submitted with
  sq_tasks_like) in another session: what the array saves.
- SESSIONS with N jobs (default 1 000) open: the time the listing takes
  (target of the issue: `squall job list` under 0.2 s).

Both from one broker started here (RSS from /proc/PID/status, after the
submit's reply, so the broker has taken all of it in).
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--elements", type=int, default=1_000_000)
    ap.add_argument("--jobs", type=int, default=1000)
    args = ap.parse_args()
    os.environ["SQUALL_BUILD_DIR"] = os.path.abspath(args.build)
    import squall
    from squall._lib import lib as L
    P = ctypes.c_void_p
    L.sq_client_new.restype = P
    L.sq_client_connect.argtypes = [P, ctypes.c_char_p, ctypes.c_int]
    L.sq_client_set_keys.argtypes = [P, ctypes.c_char_p, ctypes.c_char_p]
    L.sq_client_errmsg.argtypes = [P]
    L.sq_client_errmsg.restype = ctypes.c_char_p
    L.sq_session_new_job.argtypes = [P, ctypes.c_char_p, ctypes.c_bool]
    L.sq_session_new_job.restype = P
    L.sq_config_execute.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t, P,
                                    ctypes.c_size_t, ctypes.c_int, P, ctypes.c_size_t,
                                    ctypes.c_int, P, ctypes.POINTER(ctypes.c_size_t)]
    L.sq_config_execute.restype = P
    L.sq_task.argtypes = [P, ctypes.c_char_p, P, ctypes.c_size_t, ctypes.c_uint32, P,
                          ctypes.c_size_t]
    L.sq_task.restype = ctypes.c_uint32
    L.sq_task_set_array.argtypes = [P, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                    ctypes.c_uint32]
    L.sq_tasks_like.argtypes = [P, ctypes.c_uint32, ctypes.c_size_t, P,
                                ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_uint32)]
    L.sq_submit.argtypes = [P]
    L.sq_client_jobs.argtypes = [P, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_char_p,
                                 ctypes.POINTER(P), ctypes.POINTER(ctypes.c_size_t)]
    L.sq_free.argtypes = [P]

    n = args.elements
    with squall.LocalCluster(governors=0) as c:
        client = P(L.sq_client_new())
        L.sq_client_set_keys(client, os.fsencode(c.secret_key), os.fsencode(c.broker_key))
        assert L.sq_client_connect(client, c.address.encode(), 20000) == 0

        def check(rc):
            if rc:
                raise RuntimeError(L.sq_client_errmsg(client).decode())

        argv = (ctypes.c_char_p * 1)(b"true")
        size = ctypes.c_size_t()
        config = L.sq_config_execute(argv, 1, None, 0, -1, None, 0, -1, None, ctypes.byref(size))
        pid = c.broker.pid
        time.sleep(0.5)
        base = rss(pid)

        s = L.sq_session_new_job(client, b"array", True)
        t = L.sq_task(s, b"execute", None, 0, 0, config, size.value)
        check(L.sq_task_set_array(s, t, 0, n - 1, 1))
        check(L.sq_submit(s))
        time.sleep(0.5)             # a settle turn or two after the reply
        after_array = rss(pid)
        per_element = (after_array - base) / n

        s2 = L.sq_session_new_job(client, b"plain", True)
        model = L.sq_task(s2, b"execute", None, 0, 0, config, size.value)
        blob = ctypes.string_at(config, size.value)
        configs = ctypes.create_string_buffer(blob * (n - 1))
        ends = (ctypes.c_size_t * (n - 1))(*[(i + 1) * size.value for i in range(n - 1)])
        first = ctypes.c_uint32()
        check(L.sq_tasks_like(s2, model, n - 1, configs, ends, ctypes.byref(first)))
        check(L.sq_submit(s2))
        time.sleep(0.5)
        after_plain = rss(pid)
        per_task = (after_plain - after_array) / n
        L.sq_free(config)

        # SESSIONS over many jobs
        for i in range(args.jobs - 2):
            L.sq_session_new_job(client, b"job-%d" % i, True)
        out = P()
        count = ctypes.c_size_t()
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            check(L.sq_client_jobs(client, 0, 0, None, ctypes.byref(out), ctypes.byref(count)))
            times.append(time.perf_counter() - t0)
            L.sq_free(out)
        assert count.value >= args.jobs
        print("broker RSS growth, %d elements of one array task not yet run: %.1f bytes per "
              "element (target < 100)" % (n, per_element))
        print("broker RSS growth, %d plain execute tasks not yet run: %.1f bytes per task "
              "(%.0fx the array)" % (n, per_task, per_task / max(per_element, 0.01)))
        print("SESSIONS listing %d jobs: median %.2f ms, max %.2f ms over 20 (target < 200 ms)"
              % (count.value, statistics.median(times) * 1000, max(times) * 1000))


if __name__ == "__main__":
    main()
