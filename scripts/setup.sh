#!/usr/bin/env bash
#   setup.sh: installs squall's build dependencies (Debian 12 / apt).
#   Idempotent: when every package is already installed it only checks and
#   exits, without touching the network.
set -euo pipefail

#   Build: the compiler, CMake, and the libraries squall links (libzmq,
#   CZMQ, msgpack-c; libmicrohttpd for the broker's dashboard; libsodium,
#   already under libzmq, for the HMAC of capabilities).
#   Tests: clang for the fuzz target, iproute2 for the network-namespace
#   tests, chromium for the dashboard test, docker-compose, docker.io and
#   debootstrap to run the compose file for real (the test starts dockerd
#   and makes its base image from Debian's archive), slurm-wlm and munge for
#   a one-node Slurm cluster the Slurm test starts on this machine.
PACKAGES=(build-essential cmake pkg-config libzmq3-dev libczmq-dev libmsgpack-dev libsodium-dev
          libmicrohttpd-dev python3 python3-pip python3-venv
          clang libclang-rt-14-dev iproute2 chromium docker-compose docker.io debootstrap
          slurm-wlm munge)

missing=()
for package in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
    if [ "$status" != "install ok installed" ]; then
        missing+=("$package")
    fi
done

#   Python packages for the tests, in a virtual environment of the checkout
#   (.venv): Debian's own python3 refuses system-wide pip installs. The
#   bindings need only cloudpickle at run time; pytest and dask are for the
#   test suite (dask's adapter is tested against real dask graphs; pyzmq
#   and msgpack run the client sketch of docs/protocol.md; kubernetes-validate
#   checks the Helm chart against Kubernetes' schemas).
PIP_PACKAGES=(pytest cloudpickle "dask[array,bag]" pyzmq msgpack kubernetes-validate)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

setup_python () {
    local venv="$ROOT/.venv"
    if [ ! -x "$venv/bin/python3" ]; then
        python3 -m venv "$venv"
    fi
    if "$venv/bin/python3" -c 'import pytest, cloudpickle, dask.array, dask.bag, zmq, msgpack, kubernetes_validate' 2>/dev/null; then
        echo "setup: Python test packages are installed in .venv"
        return
    fi
    echo "setup: installing ${PIP_PACKAGES[*]} into .venv"
    "$venv/bin/python3" -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}"
}

#   helm, for the chart's test (tests/deploy/test_helm.py): built from the Go
#   module proxy when a Go toolchain is there; the test skips without it.
setup_helm () {
    local go
    go=$(command -v go || true)
    [ -n "$go" ] || [ ! -x /usr/local/go/bin/go ] || go=/usr/local/go/bin/go
    if command -v helm >/dev/null 2>&1 || [ -x "$HOME/go/bin/helm" ]; then
        echo "setup: helm is installed"
    elif [ -n "$go" ]; then
        echo "setup: building helm v3.22.0 (go install, from the Go module proxy)"
        "$go" install helm.sh/helm/v3/cmd/helm@v3.22.0 \
            || echo "setup: helm could not be built; the chart's test will be skipped"
    else
        echo "setup: no Go toolchain: helm not built; the chart's test will be skipped"
    fi
}

if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all build dependencies are installed"
    setup_python
    setup_helm
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: apt-get not found; install by hand: ${missing[*]}" >&2
    exit 1
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        echo "setup: not root and sudo is not available; install by hand: ${missing[*]}" >&2
        exit 1
    fi
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
setup_python
setup_helm
echo "setup: done"
