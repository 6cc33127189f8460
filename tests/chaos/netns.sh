#!/bin/sh
# netns.sh up|down [PREFIX]: the network of the multi-host chaos test.
#
# Five namespaces (PREFIX defaults to "sqc"; run_multihost.sh uses one per
# run, so that concurrent runs never touch each other's): PREFIX-br holds a
# bridge (br0); PREFIX-broker, PREFIX-g1, -g2 and -g3 each have one veth
# "eth0" whose peer is a port of that bridge, and an address in
# 10.213.0.0/24 that exists only inside these namespaces:
#   broker 10.213.0.10   g1 10.213.0.11   g2 .12   g3 .13
# Nothing is routed anywhere else (no default route, no host-side link).
# "down" kills every process left in these namespaces and deletes them; it
# is safe to run any number of times.
set -u
HOSTS="broker g1 g2 g3"
P=${2:-sqc}

addr () {
    case "$1" in
        broker) echo 10.213.0.10 ;;
        g1) echo 10.213.0.11 ;;
        g2) echo 10.213.0.12 ;;
        g3) echo 10.213.0.13 ;;
    esac
}

down () {
    for ns in "$P-broker" "$P-g1" "$P-g2" "$P-g3" "$P-br"; do
        if ip netns list 2>/dev/null | grep -q "^$ns\( \|$\)"; then
            for pid in $(ip netns pids "$ns" 2>/dev/null); do
                kill -9 "$pid" 2>/dev/null
            done
            ip netns del "$ns" 2>/dev/null
        fi
    done
    return 0
}

up () {
    down
    set -e
    ip netns add "$P-br"
    ip -n "$P-br" link add br0 type bridge
    ip -n "$P-br" link set br0 up
    ip -n "$P-br" link set lo up
    for h in $HOSTS; do
        ns="$P-$h"
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        # veth created inside the host namespace, peer moved to the bridge's
        ip -n "$ns" link add eth0 type veth peer name "p-$h" netns "$P-br"
        ip -n "$ns" addr add "$(addr "$h")/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$P-br" link set "p-$h" master br0
        ip -n "$P-br" link set "p-$h" up
    done
    set +e
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    *) echo "usage: netns.sh up|down [PREFIX]" >&2; exit 2 ;;
esac
