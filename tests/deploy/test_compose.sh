#!/bin/sh
#   docker-compose.yml is accepted by Debian's docker-compose (`config`,
#   which validates without a Docker engine) and has the topology README.md
#   promises. Skips (77) when docker-compose is not installed.
set -eu
SOURCE=${SQUALL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if ! command -v docker-compose >/dev/null 2>&1; then
    echo "SKIP: docker-compose is not installed (apt-get install docker-compose)"
    exit 77
fi
cd "$SOURCE"
docker-compose -f docker-compose.yml config -q
echo "ok: docker-compose config accepts docker-compose.yml"
out=$(docker-compose -f docker-compose.yml --profile example config)
echo "ok: the example profile validates"
services=$(docker-compose -f docker-compose.yml --profile example config --services | sort | tr '\n' ' ')
[ "$services" = "broker example governor keys " ] || { echo "FAIL: services are: $services"; exit 1; }
echo "ok: services keys, broker, governor, example"
fail () { echo "FAIL: $1"; exit 1; }
echo "$out" | grep -q 'SQUALL_BROKER: tcp://broker:7760' || fail "governors find the broker by name"
echo "$out" | grep -q '127.0.0.1:7760:7760' || fail "client port published on 127.0.0.1 by default"
echo "$out" | grep -q '127.0.0.1:8080:8080' || fail "dashboard port published on 127.0.0.1 by default"
SQUALL_BIND=0.0.0.0 docker-compose -f docker-compose.yml config | grep -q '0.0.0.0:7760:7760' \
    || fail "SQUALL_BIND opens the ports"
# secure by default: keys made once into a volume, used by every service
broker=$(echo "$out" | awk '/^  broker:/{on=1; next} /^  [a-z]/{on=0} on')
echo "$broker" | grep -q -- '--secret-key' && echo "$broker" | grep -q 'broker-enroll.py' \
    || fail "the broker runs with keys (broker-enroll.py adds --authorized-keys)"
echo "$broker" | grep -q -- '--http-token' || fail "the dashboard asks for a token"
echo "$broker" | grep -q -- '--journal' && echo "$broker" | grep -q 'journal:/var/lib/squall/journal' \
    || fail "the broker keeps its journal in a volume"
echo "$broker" | grep -q -- '--insecure' && fail "no --insecure in the compose file"
echo "$broker" | grep -q 'condition: service_completed_successfully' || fail "the broker waits for the keys"
keys=$(echo "$out" | awk '/^  keys:/{on=1; next} /^  [a-z]/{on=0} on')
echo "$keys" | grep -q 'squall keygen broker' && echo "$keys" | grep -q '\[ -f broker.key \]' \
    || fail "the keys service makes the keys once"
echo "$out" | grep -q 'SQUALL_SECRET_KEY: /keys/clients/client.key' || fail "clients use the client key"
echo "ok: keys made once, token, journal in a volume, loopback ports"
# one governor, one identity: a governor container mounts the broker's
# public key and the enroll volume, never the keys volume (broker.key, the
# admin key, the token), and is given no client key
gov=$(echo "$out" | awk '/^  governor:/{on=1; next} /^  [a-z]/{on=0} on')
echo "$gov" | grep -q 'keys:/keys' && fail "a governor mounts the keys volume"
echo "$gov" | grep -Eq 'SQUALL_SECRET_KEY|client.key|broker.key|http-token' \
    && fail "a governor is given a client key, the broker's key or the token"
echo "$gov" | grep -q 'broker-pub:/broker:ro' && echo "$gov" | grep -q 'enroll:/enroll' \
    && echo "$gov" | grep -q 'governor-start.sh' || fail "a governor makes and enrolls its own key"
echo "$gov" | grep -q 'streams:/var/lib/squall/streams' \
    && grep -q -- '--stream-dir /var/lib/squall/streams/' deploy/compose/governor-start.sh \
    || fail "the governors of a host share a stream directory"
echo "ok: the governors of a host share a stream directory (volume streams)"
# the example client, on their host, uploads through their sockets: the
# governors' user (root) with no capability, the volume read-only
ex=$(echo "$out" | awk '/^  example:/{on=1; next} /^  [a-z]/{on=0} on')
echo "$ex" | grep -q 'streams:/var/lib/squall/streams:ro' \
    && echo "$ex" | grep -q 'SQUALL_LOCAL_DIR: /var/lib/squall/streams/governors' \
    && echo "$ex" | grep -q 'no-new-privileges:true' \
    && echo "$ex" | awk '/cap_drop:/{on=1; next} on && /^    [a-z]/{on=0} on' | grep -q ALL \
    && [ "$(echo "$ex" | awk '/cap_add:/{on=1; next} on && /^    [a-z]/{on=0} on' | tr -d ' -')" = DAC_READ_SEARCH ] \
    || fail "the example client uploads through the stream volume, read-only, one capability"
echo "ok: the example client hands uploads to the governors of its host"
echo "$keys" | grep -q 'keygen governor' && fail "the keys service makes a shared governor key"
echo "ok: governors hold their own key and the broker's public key only"
# a task never sees a key: the governor runs as root, tasks under the
# user ids of SQUALL_TASK_UIDS (given explicitly, so a range it cannot use
# stops it), no new privileges, capabilities limited to what it needs
echo "$gov" | grep -q 'SQUALL_TASK_UIDS: 2000000000-2000065535' || fail "governors get task user ids"
grep -q -- '--task-uids "${SQUALL_TASK_UIDS' deploy/compose/governor-start.sh \
    || fail "governor-start.sh passes --task-uids explicitly"
grep -q 'setpriv --reuid' deploy/compose/governor-start.sh && fail "the governor drops to the squall user (its tasks would read its key)"
echo "$gov" | grep -q 'no-new-privileges:true' || fail "governors: no new privileges"
echo "$gov" | awk '/cap_drop:/{on=1; next} on && /^    [a-z]/{on=0} on' | grep -q ALL \
    || fail "governors drop every capability they do not need"
caps=$(echo "$gov" | awk '/cap_add:/{on=1; next} on && /^    [a-z]/{on=0} on' | tr -d ' -' | sort | tr '\n' ' ')
[ "$caps" = "CHOWN DAC_OVERRIDE FOWNER KILL SETGID SETUID " ] || fail "governors' capabilities: $caps"
echo "ok: governors run tasks under user ids of their own, with six capabilities"
# health checks that log nothing at the broker: /metrics, never a client
echo "$out" | grep -q 'squall status' && fail "a health check connects as a client (logged)"
echo "$gov" | grep -q '/metrics' || fail "the governor's health check reads /metrics"
echo "$out" | grep -q 'container_name' && fail "governor must be scalable (no container_name)"
echo "$out" | grep -q 'healthcheck' || fail "health checks"
# scaling: a governor has no host port, so --scale cannot collide
echo "$gov" | grep -q 'ports:' && fail "the governor publishes ports (it could not scale)"
# resources from the environment
SQUALL_MEMORY=1073741824 docker-compose -f docker-compose.yml config \
    | grep -q "mem_limit: '1073741824'" || fail "SQUALL_MEMORY sets the memory limit"
echo "$gov" | grep -q -- '--memory' && fail "a governor's --memory comes from its container's limit"
docker-compose -f docker-compose.yml config | grep -q "cpus: 0" \
    || fail "no CPU limit by default (a limit above the host's CPUs is refused)"
SQUALL_CPU_LIMIT=1.5 docker-compose -f docker-compose.yml config | grep -q "cpus: 1.5" \
    || fail "SQUALL_CPU_LIMIT sets the container's CPU limit"
SQUALL_CPUS=3 docker-compose -f docker-compose.yml config | grep -q "SQUALL_CPUS: '3'" \
    || fail "SQUALL_CPUS reaches the governor"
echo "ok: ports, names, scaling, health checks, resources from the environment"
echo "test_compose: all passed"
