#!/usr/bin/env bash
#   docker-base-image.sh: makes the base images the Dockerfile builds FROM
#   (debian:bookworm, debian:bookworm-slim) from Debian's archive, for
#   machines that reach no image registry: debootstrap (minbase) into a
#   temporary directory, then `docker import`. Does nothing when both images
#   are there already. Needs root, debootstrap and a running Docker engine.
#       scripts/docker-base-image.sh [MIRROR]     (default: this machine's apt mirror)
set -euo pipefail
if docker image inspect debian:bookworm >/dev/null 2>&1 \
&& docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
    echo "docker-base-image: debian:bookworm and debian:bookworm-slim are there"
    exit 0
fi
mirror=${1:-}
if [ -z "$mirror" ]; then
    mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}
root=$(mktemp -d /tmp/squall-bookworm.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "docker-base-image: debootstrap bookworm from $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import --change 'CMD ["/bin/bash"]' - debian:bookworm >/dev/null
docker tag debian:bookworm debian:bookworm-slim
echo "docker-base-image: made debian:bookworm (and tagged it bookworm-slim)"
