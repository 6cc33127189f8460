#!/bin/bash
# Object-copy benchmark: starts a broker and two governors on loopback
# (A offers "src", B "dst"), runs squall-bench-transfer (rounds of 16 x 64
# MiB made on A, copied to B, fetched by a client; raw ZeroMQ PUSH/PULL in
# every round), stops them, then runs the same workload on Dask and Ray when
# they are installed, in the same rounds, and prints squall / Dask from
# figures of this run.
# usage: bench/transfer.sh BUILD_DIR [objects [MiB [rounds]]]   (16 64 6)
#        bench/transfer.sh BUILD_DIR inline INLINE_MAX   (the inline threshold)
set -euo pipefail
build=${1:?usage: bench/transfer.sh BUILD_DIR [objects [MiB [rounds]]]}
objects=${2:-16}
mib=${3:-64}
rounds=${4:-6}
inline_max=4096
if [ "$objects" = inline ]; then inline_max=${3:-4096}; fi
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
: > "$tmp/broker.out"
"$build/broker/squall-broker" --listen 'tcp://127.0.0.1:*' --log-level warn \
    --inline-max "$inline_max" > "$tmp/broker.out" &
for _ in $(seq 100); do grep -q LISTENING "$tmp/broker.out" && break; sleep 0.05; done
ep=$(sed -n 's/^LISTENING //p' "$tmp/broker.out")
# PREFAULT=SIZE: the governors pre-fault that much heap at start (--prefault),
# and the rounds begin once B says it is done, as a governor started a while
# before its first copy would be.
prefault=()
level=${GOV_LOG:-warn}
[ -z "${PREFAULT:-}" ] || { prefault=(--prefault "$PREFAULT"); level=${GOV_LOG:-info}; }
for g in A:src B:dst; do  # 1024 of each: the resource only places tasks, it must not serialise them
    "$build/governor/squall-governor" --broker "$ep" --cpus 2 --name "${g%%:*}" \
        --listen-host 127.0.0.1 --advertise 127.0.0.1 --resource "${g##*:}=1024" \
        "${prefault[@]}" --log-level "$level" \
        > "$tmp/${g%%:*}.out" 2> "$tmp/${g%%:*}.err" &
done
for g in A B; do
    for _ in $(seq 100); do grep -q READY "$tmp/$g.out" && break; sleep 0.05; done
done
if [ -n "${PREFAULT:-}" ]; then
    for _ in $(seq 600); do grep -q pre-faulted "$tmp/B.err" && break; sleep 0.05; done
    grep -h pre-faulted "$tmp/B.err" | sed 's/^/B: /'
fi
if [ "$objects" = inline ]; then
    echo "inline_max $inline_max:"
    "$build/bench/squall-bench-transfer-inline" "$ep" 50
    exit 0
fi
"$build/bench/squall-bench-transfer" "$ep" "$objects" "$mib" "$rounds" | tee "$tmp/squall.out"
[ -z "${KEEP_LOGS:-}" ] || cp "$tmp"/*.err /tmp/ 2>/dev/null || true
# The peers get the machine to themselves.
kill $(jobs -p) 2>/dev/null || true
wait 2>/dev/null || true
[ -z "${NO_PEERS:-}" ] || exit 0

# The peers' workload, as fair as squall's: the same object sizes and the
# same bytes' nature (not zeros, which compression would flatter), two
# worker processes of one thread each, the copy timed from submitting the
# consumers to having all their results, rounds as squall's (round 1 cold,
# then the median of the others), every round's objects released before
# the next (the workers' data waited down to nothing).
cat > "$tmp/peers.py" <<'PY'
import os, statistics, sys, time

def make(mib, seed):
    unit = os.urandom(1 << 20)
    return unit * mib

def use(x):
    return len(x)

def report(name, figures):
    warm = statistics.median(figures[1:]) if len(figures) > 1 else figures[0]
    print(f"{name}: " + ", ".join(f"{f:.2f}" for f in figures)
          + f" GiB/s by round; cold {figures[0]:.2f}, warm (median of rounds 2-) {warm:.2f}")
    print(f"RESULT {name.split()[0]}_cold={figures[0]:.3f} {name.split()[0]}_warm={warm:.3f}")

def dask_rounds(objects, mib, rounds):
    from dask.distributed import Client, LocalCluster
    figures = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        a, b = list(c.scheduler_info()["workers"])[:2]
        for r in range(rounds):
            made = [c.submit(make, mib, (r, i), workers=[a], pure=False) for i in range(objects)]
            c.gather([c.submit(len, m, workers=[a], pure=False) for m in made])
            t = time.time()
            used = [c.submit(use, m, workers=[b], pure=False) for m in made]
            c.gather(used)
            figures.append(objects * mib / 1024 / (time.time() - t))
            del made, used
            deadline = time.time() + 60
            while time.time() < deadline and any(c.run(lambda dask_worker: len(dask_worker.data)).values()):
                time.sleep(0.05)
    report("dask worker->worker", figures)

def ray_rounds(objects, mib, rounds):
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    mk = ray.remote(make); us = ray.remote(use)
    figures = []
    for r in range(rounds):
        made = [mk.remote(mib, (r, i)) for i in range(objects)]
        ray.wait(made, num_returns=len(made))
        t = time.time()
        ray.get([us.remote(m) for m in made])
        figures.append(objects * mib / 1024 / (time.time() - t))
        del made
    report("ray (one node, shared memory, not a network copy)", figures)

def main():
    objects, mib, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    try:
        dask_rounds(objects, mib, rounds)
    except ImportError:
        print("dask: not installed (pip install 'dask[distributed]')")
    try:
        ray_rounds(objects, mib, rounds)
    except ImportError:
        print("ray: not installed (pip install ray)")

if __name__ == "__main__":
    main()
PY
python3 "$tmp/peers.py" "$objects" "$mib" "$rounds" 2> "$tmp/peers.err" | tee "$tmp/peers.out" || true
value () { sed -n "s/^RESULT .*\b$2=\([0-9.]*\).*/\1/p" "$1" | head -1; }
dask_cold=$(value "$tmp/peers.out" dask_cold)
dask_warm=$(value "$tmp/peers.out" dask_warm)
if [ -n "$dask_cold" ]; then
    # raw / Dask: what a copy at raw ZeroMQ speed would be worth against
    # this Dask, the ceiling of any PUSH/PULL copy within a few percent.
    awk -v sc="$(value "$tmp/squall.out" copy_cold)" -v sw="$(value "$tmp/squall.out" copy_warm)" \
        -v rw="$(value "$tmp/squall.out" raw_warm)" -v dc="$dask_cold" -v dw="$dask_warm" 'BEGIN {
        printf "squall / Dask, this run: cold %.1fx (%.2f vs %.2f GiB/s), warm %.1fx (%.2f vs %.2f GiB/s); raw ZeroMQ / Dask warm %.1fx\n",
               sc / dc, sc, dc, sw / dw, sw, dw, rw / dw }'
fi
