#!/bin/sh
# A governor of docker-compose.yml (see deploy/compose/broker-enroll.py).
# Starts as root, only to enroll: one governor, one identity
# (docs/security.md). At its container's first start it makes a key pair
# of its own in /var/lib/squall/identity (the container's own file system:
# no other container sees it), puts the public key in /enroll (root's
# alone to write; the broker lets every key there in as a governor), then
# becomes the squall user for good (no new privileges) and runs the
# governor with that key and the broker's public key, the only keys this
# container holds. Its tasks, run as squall, can read neither the broker's
# key, a client key nor the dashboard token, and cannot enroll a key.
#
#   governor-start.sh [squall-governor options...]
# Environment: SQUALL_BROKER, SQUALL_CPUS (optional), SQUALL_PREFAULT.
set -eu
export HOME=/var/lib/squall USER=squall
name=$(hostname)
dir=/var/lib/squall/identity
if [ ! -f "$dir/$name.key" ]; then
    mkdir -p "$dir"
    chown squall:squall "$dir"
    chmod 700 "$dir"
    setpriv --reuid=squall --regid=squall --init-groups \
        squall keygen "$name" --dir "$dir" --role governor >/dev/null
fi
cp "$dir/$name.pub" "/enroll/.$name.tmp"
mv -f "/enroll/.$name.tmp" "/enroll/$name.pub"
exec setpriv --reuid=squall --regid=squall --init-groups --no-new-privs \
    squall-governor --broker "$SQUALL_BROKER" ${SQUALL_CPUS:+--cpus "$SQUALL_CPUS"} \
    --name "$name" --workdir /tmp --prefault "${SQUALL_PREFAULT:-auto}" \
    --secret-key "$dir/$name.key" --broker-key /broker/broker.pub "$@"
