#!/usr/bin/env python3
"""The groupby's chunk (bench/data_heavy.py: one partition of 250 000 rows,
_groupby_apply_funcs) in this process, its partition read from a sealed-
size memory file as a squall executor reads it (pickle protocol 5, the
buffers views of a read-only MAP_SHARED mapping), three ways alternated:
a fresh mapping each time (what an executor does in every compute: the
governor hands a new descriptor, mapped anew), the same mapping kept from
the last round, and the bytes copied to the heap once. The difference
between the first two is the page-table cost of mapping the partitions
afresh; no scheduler is involved.

    /tmp/bv/bin/python bench/data_heavy_mapping.py [--repeat 8] [--populate]
"""
import argparse
import mmap
import os
import pickle
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_heavy  # noqa: E402  (stdlib only at import: numpy comes later)
data_heavy.set_blas_threads(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=8)
    ap.add_argument("--populate", action="store_true",
                    help="fresh mappings with MAP_POPULATE (the faults taken in mmap)")
    args = ap.parse_args()
    import dask
    graph = dict(dask.base.collections_to_expr([data_heavy.workloads()["groupby"]()])
                 .optimize().__dask_graph__())
    parts = sorted(k for k in graph if "frompandas" in str(k[0]))
    chunk_of = {}
    for k, node in graph.items():
        deps = list(getattr(node, "dependencies", ()))
        if "apply_funcs" in str(k[0]) and len(deps) == 1:
            chunk_of[deps[0]] = k
    files = {}
    for k in parts:
        found = []
        head = pickle.dumps(graph[k]({}), protocol=5, buffer_callback=found.append)
        fd = os.memfd_create("partition")
        os.write(fd, b"".join(b.raw() for b in found))
        files[k] = (fd, head, [b.raw().nbytes for b in found])
    kept, heap = {}, {}
    flags = mmap.MAP_SHARED | (mmap.MAP_POPULATE if args.populate else 0)

    def value(k, how):
        fd, head, sizes = files[k]
        if how == "fresh mapping" or (how == "kept mapping" and k not in kept):
            kept[k] = memoryview(mmap.mmap(fd, sum(sizes), flags=flags, prot=mmap.PROT_READ))
        if how == "heap" and k not in heap:
            heap[k] = memoryview(bytearray(mmap.mmap(fd, sum(sizes), prot=mmap.PROT_READ)))
        view = kept[k] if how != "heap" else heap[k]
        buffers, at = [], 0
        for size in sizes:
            buffers.append(view[at:at + size])
            at += size
        return pickle.loads(head, buffers=buffers)

    ways = ("fresh mapping", "kept mapping", "heap")
    ms = {w: [] for w in ways}
    faults = {w: [] for w in ways}
    for _ in range(args.repeat):
        for how in ways:
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            for k in parts:
                graph[chunk_of[k]]({k: value(k, how)})
            ms[how].append((time.perf_counter() - t0) * 1e3 / len(parts))
            faults[how].append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
                               / len(parts))
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print("groupby chunk of %d rows, ms per chunk, median of %d rounds of %d (load %s)%s"
          % (len(graph[parts[0]]({})), args.repeat, len(parts), load,
             ", MAP_POPULATE" if args.populate else ""))
    for how in ways:
        print("  %-14s %5.2f  (min %.2f)  minor faults a chunk %d"
              % (how, statistics.median(ms[how]), min(ms[how]), statistics.median(faults[how])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
