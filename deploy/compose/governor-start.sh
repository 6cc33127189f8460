#!/bin/sh
# A governor of docker-compose.yml (see deploy/compose/broker-enroll.py).
# One governor, one identity, and a task never sees a key
# (docs/security.md): at its container's first start it makes a key pair
# of its own in /var/lib/squall/identity (the container's own file system:
# no other container sees it; root's, mode 0700), puts the public key in
# /enroll (root's alone to write; the broker lets every key there in as a
# governor), and runs the governor as root with that key and the broker's
# public key, the only keys this container holds. Root, so that the
# governor runs each tenant's tasks under a user id of the tenant's own
# (--task-uids, given explicitly: a range it cannot use stops it rather
# than leave tasks as root), which can read neither its key nor its
# /proc entries, and cannot write /enroll. no-new-privs (setpriv here,
# no-new-privileges in docker-compose.yml) is inherited by every task; the
# container keeps only the capabilities the governor needs to switch tasks'
# ids and manage their directories (docker-compose.yml, cap_add). The
# governors of one host share the `streams` volume: each makes (umask 077)
# or checks its directory there, root's alone, and hands streams to the
# others as pipes.
#
#   governor-start.sh [squall-governor options...]
# Environment: SQUALL_BROKER, SQUALL_CPUS (optional), SQUALL_PREFAULT,
# SQUALL_TASK_UIDS (FIRST-LAST, default 2000000000-2000065535).
set -eu
umask 077
name=$(hostname)
dir=/var/lib/squall/identity
mkdir -p "$dir"
# a container of an older version made it the squall user's
chown -R root:root "$dir"
chmod 700 "$dir"
[ -f "$dir/$name.key" ] || squall keygen "$name" --dir "$dir" --role governor >/dev/null
chmod 600 "$dir/$name.key"
cp "$dir/$name.pub" "/enroll/.$name.tmp"
chmod 644 "/enroll/.$name.tmp"
mv -f "/enroll/.$name.tmp" "/enroll/$name.pub"
exec setpriv --no-new-privs \
    squall-governor --broker "$SQUALL_BROKER" ${SQUALL_CPUS:+--cpus "$SQUALL_CPUS"} \
    --name "$name" --workdir /tmp --prefault "${SQUALL_PREFAULT:-auto}" \
    --task-uids "${SQUALL_TASK_UIDS:-2000000000-2000065535}" --python /usr/bin/python3 \
    --secret-key "$dir/$name.key" --broker-key /broker/broker.pub \
    --stream-dir /var/lib/squall/streams/governors "$@"
