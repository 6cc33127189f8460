#!/bin/bash
# Object-copy benchmark: starts a broker and two governors on loopback
# (A offers "src", B "dst"), runs squall-bench-transfer (16 x 64 MiB made on
# A, copied to B, fetched by a client; raw ZeroMQ PUSH/PULL in the same
# run), then the same workload on Dask and Ray when they are installed.
# usage: bench/transfer.sh BUILD_DIR [objects [MiB]]
set -euo pipefail
#        bench/transfer.sh BUILD_DIR inline INLINE_MAX   (the inline threshold)
build=${1:?usage: bench/transfer.sh BUILD_DIR [objects [MiB]]}
objects=${2:-16}
mib=${3:-64}
inline_max=4096
if [ "$objects" = inline ]; then inline_max=${3:-4096}; fi
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
"$build/broker/squall-broker" --listen 'tcp://127.0.0.1:*' --log-level warn \
    --inline-max "$inline_max" > "$tmp/broker.out" &
for _ in $(seq 100); do grep -q LISTENING "$tmp/broker.out" && break; sleep 0.05; done
ep=$(sed -n 's/^LISTENING //p' "$tmp/broker.out")
for g in A:src B:dst; do  # 1024 of each: the resource only places tasks, it must not serialise them
    "$build/governor/squall-governor" --broker "$ep" --cpus 2 --name "${g%%:*}" \
        --listen-host 127.0.0.1 --advertise 127.0.0.1 --resource "${g##*:}=1024" \
        --log-level ${GOV_LOG:-warn} > "$tmp/${g%%:*}.out" 2> "$tmp/${g%%:*}.err" &
done
for g in A B; do
    for _ in $(seq 100); do grep -q READY "$tmp/$g.out" && break; sleep 0.05; done
done
if [ "$objects" = inline ]; then
    echo "inline_max $inline_max:"
    "$build/bench/squall-bench-transfer-inline" "$ep" 50
    exit 0
fi
"$build/bench/squall-bench-transfer" "$ep" "$objects" "$mib"

cat > "$tmp/peers.py" <<'PY'
import sys, time

def make(mib):
    return bytes(mib << 20)

def use(x):
    return len(x)

def main():
    objects, mib = int(sys.argv[1]), int(sys.argv[2])
    try:
        from dask.distributed import Client, LocalCluster
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as c:
            a, b = list(c.scheduler_info()["workers"])[:2]
            made = [c.submit(make, mib, workers=[a], pure=False) for i in range(objects)]
            c.gather([c.submit(len, m, workers=[a]) for m in made])
            t = time.time()
            c.gather([c.submit(use, m, workers=[b]) for m in made])
            dt = time.time() - t
            print(f"dask worker->worker: {objects * mib / 1024 / dt:.2f} GiB/s")
    except ImportError:
        print("dask: not installed (pip install 'dask[distributed]')")
    try:
        import ray
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        mk = ray.remote(make); us = ray.remote(use)
        made = [mk.remote(mib) for i in range(objects)]
        ray.wait(made, num_returns=len(made))
        t = time.time()
        ray.get([us.remote(m) for m in made])
        dt = time.time() - t
        print(f"ray (one node, shared memory): {objects * mib / 1024 / dt:.2f} GiB/s")
    except ImportError:
        print("ray: not installed (pip install ray)")

if __name__ == "__main__":
    main()
PY
[ -z "${KEEP_LOGS:-}" ] || cp "$tmp"/*.err /tmp/ 2>/dev/null || true
[ -n "${NO_PEERS:-}" ] || python3 "$tmp/peers.py" "$objects" "$mib" || true
