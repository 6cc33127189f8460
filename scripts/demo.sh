#!/usr/bin/env bash
#   demo.sh: builds squall, starts a local cluster (one broker on an
#   ephemeral loopback port, two governors), runs the example pipeline
#   against it and stops everything. Exits with the example's status.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
BUILD=${BUILD:-$ROOT/build}
JOBS=${JOBS:-2}

RUN=$(mktemp -d "${TMPDIR:-/tmp}/squall-demo.XXXXXX")
PIDS=()
cleanup () {
    local pid
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        #   give each process two seconds to leave, then insist
        for _ in $(seq 20); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "demo: building into $BUILD"
if ! { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       && cmake --build "$BUILD" -j "$JOBS"; } >"$RUN/build.out" 2>&1; then
    tail -n 40 "$RUN/build.out" >&2
    echo "demo: the build failed" >&2
    exit 1
fi

BROKER=$BUILD/broker/squall-broker
GOVERNOR=$BUILD/governor/squall-governor
EXAMPLE=$BUILD/examples/squall-example-pipeline
for binary in "$BROKER" "$GOVERNOR" "$EXAMPLE"; do
    if [ ! -x "$binary" ]; then
        echo "demo: $binary was not built" >&2
        exit 1
    fi
done

#   wait_line FILE PATTERN PID: waits up to 10 s for a line starting with
#   PATTERN in FILE, printing it; fails if PID exits first.
wait_line () {
    local file=$1 pattern=$2 pid=$3 line
    for _ in $(seq 100); do
        line=$(grep -m1 "^$pattern" "$file" 2>/dev/null || true)
        if [ -n "$line" ]; then
            echo "$line"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "demo: process $pid exited before printing $pattern" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "demo: timed out waiting for $pattern in $file" >&2
    return 1
}

dump_logs () {
    local log
    for log in "$RUN"/*.log; do
        echo "--- $log"
        tail -n 20 "$log"
    done >&2
}

"$BROKER" --listen 'tcp://127.0.0.1:*' >"$RUN/broker.out" 2>"$RUN/broker.log" &
PIDS+=($!)
if ! line=$(wait_line "$RUN/broker.out" LISTENING "${PIDS[0]}"); then
    dump_logs; exit 1
fi
ENDPOINT=${line#LISTENING }
echo "demo: broker listening on $ENDPOINT"

for i in 1 2; do
    mkdir -p "$RUN/gov$i"
    "$GOVERNOR" --broker "$ENDPOINT" --name "gov$i" --cpus 2 \
        --workdir "$RUN/gov$i" >"$RUN/gov$i.out" 2>"$RUN/gov$i.log" &
    pid=$!
    PIDS+=("$pid")
    if ! wait_line "$RUN/gov$i.out" READY "$pid" >/dev/null; then
        dump_logs; exit 1
    fi
    echo "demo: governor gov$i ready"
done

echo "demo: running $(basename "$EXAMPLE")"
status=0
"$EXAMPLE" "$ENDPOINT" || status=$?
if [ "$status" -ne 0 ]; then
    echo "demo: the example failed (status $status)" >&2
    dump_logs
fi
exit "$status"
