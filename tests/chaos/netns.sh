#!/bin/sh
# netns.sh up|down: the network of the multi-host chaos test.
#
# Five namespaces: sqc-br holds a bridge (br0); sqc-broker, sqc-g1, sqc-g2 and
# sqc-g3 each have one veth "eth0" whose peer is a port of that bridge, and
# an address in 10.213.0.0/24 that exists only inside these namespaces:
#   sqc-broker 10.213.0.10   sqc-g1 10.213.0.11   sqc-g2 .12   sqc-g3 .13
# Nothing is routed anywhere else (no default route, no host-side link).
# "down" kills every process left in these namespaces and deletes them; it
# is safe to run any number of times.
set -u
HOSTS="broker g1 g2 g3"

addr () {
    case "$1" in
        broker) echo 10.213.0.10 ;;
        g1) echo 10.213.0.11 ;;
        g2) echo 10.213.0.12 ;;
        g3) echo 10.213.0.13 ;;
    esac
}

down () {
    for ns in sqc-broker sqc-g1 sqc-g2 sqc-g3 sqc-br; do
        if ip netns list 2>/dev/null | grep -qw "$ns"; then
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
    ip netns add sqc-br
    ip -n sqc-br link add br0 type bridge
    ip -n sqc-br link set br0 up
    ip -n sqc-br link set lo up
    for h in $HOSTS; do
        ns="sqc-$h"
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        # veth created inside the host namespace, peer moved to the bridge's
        ip -n "$ns" link add eth0 type veth peer name "p-$h" netns sqc-br
        ip -n "$ns" addr add "$(addr "$h")/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n sqc-br link set "p-$h" master br0
        ip -n sqc-br link set "p-$h" up
    done
    set +e
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    *) echo "usage: netns.sh up|down" >&2; exit 2 ;;
esac
