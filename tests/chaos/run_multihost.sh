#!/bin/sh
# run_multihost.sh DRIVER BROKER_BIN GOVERNOR_BIN [TRIALS] [SEED]
# The multi-host chaos test: makes the namespaces (netns.sh, prefix
# sqc<pid> so that concurrent runs are independent), runs the driver inside
# <prefix>-broker, and always tears everything down (trap), also
# on failure or interruption. Exit 77 (ctest: skipped) when not root or
# without `ip netns`. Logs stay in $SQUALL_CHAOS_KEEP if that is set.
set -u
here=$(cd "$(dirname "$0")" && pwd)
driver=$1 broker=$2 governor=$3
trials=${4:-${SQUALL_CHAOS_TRIALS:-12}}
seed=${5:-${SQUALL_CHAOS_SEED:-}}

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: the multi-host chaos test needs root (network namespaces)"
    exit 77
fi
if ! command -v ip >/dev/null 2>&1 || ! ip netns list >/dev/null 2>&1; then
    echo "SKIP: no 'ip netns' here"
    exit 77
fi
work=$(mktemp -d /tmp/squall-chaos-XXXXXX)
# namespaces of this run only: sqcNNNN-broker, sqcNNNN-g1 ...
prefix=sqc$$
export SQUALL_CHAOS_NS=$prefix
chmod 755 "$work"
cleanup () {
    sh "$here/netns.sh" down "$prefix"
    if [ -n "${SQUALL_CHAOS_KEEP:-}" ]; then
        mkdir -p "$SQUALL_CHAOS_KEEP" && cp "$work"/*.log "$SQUALL_CHAOS_KEEP"/ 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# (one retry: a namespace of an earlier run may still be going away)
if ! sh "$here/netns.sh" up "$prefix" && ! sh "$here/netns.sh" up "$prefix"; then
    echo "SKIP: cannot create network namespaces here"
    exit 77
fi
ip netns exec "$prefix-broker" "$driver" "$broker" "$governor" "$work" "$trials" $seed
rc=$?
if [ $rc != 0 ]; then
    echo "--- broker log (warnings and governor events) ---"
    grep -E "WARN|ERROR|governor .* (joined|lost)" "$work/broker.log" | tail -60
fi
exit $rc
