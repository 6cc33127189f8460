#!/usr/bin/env bash
#   setup.sh: installs what squall needs (Debian 12 / apt).
#
#     bash scripts/setup.sh            what the build and the demo need
#                                      (scripts/demo.sh): the compiler, CMake
#                                      and the libraries squall links
#     bash scripts/setup.sh --tests    also everything the tests use
#                                      (scripts/test.sh, .ci/run)
#     bash scripts/setup.sh --list     print the packages it would install
#
#   Idempotent: when every package is already installed it only checks and
#   exits, without touching the network.
set -euo pipefail

usage () {
    echo "usage: bash scripts/setup.sh [--tests] [--list]" >&2
    exit 2
}
TESTS=0
LIST=0
for arg in "$@"; do
    case "$arg" in
        --tests) TESTS=1 ;;
        --list) LIST=1 ;;
        -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^#//'; exit 0 ;;
        *) echo "setup: unknown option $arg" >&2; usage ;;
    esac
done

#   Build (and the demo): the compiler, CMake, and the libraries squall
#   links (libzmq, CZMQ, msgpack-c; libmicrohttpd for the broker's
#   dashboard; libsodium, already under libzmq, for the HMAC of
#   capabilities).
PACKAGES=(build-essential cmake pkg-config libzmq3-dev libczmq-dev libmsgpack-dev libsodium-dev
          libmicrohttpd-dev)
#   Tests: Python for the bindings' tests, clang for the fuzz target,
#   iproute2 for the network-namespace tests, chromium for the dashboard
#   test, docker-compose, docker.io and debootstrap to run the compose file
#   for real (the test starts dockerd and makes its base image from
#   Debian's archive), slurm-wlm and munge for a one-node Slurm cluster the
#   Slurm test starts on this machine.
TEST_PACKAGES=(python3 python3-pip python3-venv
               clang libclang-rt-14-dev iproute2 chromium docker-compose docker.io debootstrap
               slurm-wlm munge)
if [ "$TESTS" -eq 1 ]; then
    PACKAGES+=("${TEST_PACKAGES[@]}")
fi

#   Python packages for the tests, in a virtual environment of the checkout
#   (.venv): Debian's own python3 refuses system-wide pip installs. The
#   bindings need only cloudpickle at run time; pytest and dask are for the
#   test suite (dask's adapter is tested against real dask graphs; pyzmq
#   and msgpack run the client sketch of docs/protocol.md; kubernetes-validate
#   checks the Helm chart against Kubernetes' schemas). .venv-distributed
#   holds the same with Dask's distributed, whose import installs tblib's
#   reducers for every exception: ctest's python_tests_distributed runs the
#   exception and Dask tests there.
PIP_PACKAGES=(pytest cloudpickle "dask[array,bag]" pyzmq msgpack kubernetes-validate)
DISTRIBUTED_PIP_PACKAGES=(pytest cloudpickle "dask[array,bag]" distributed)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [ "$LIST" -eq 1 ]; then
    echo "apt: ${PACKAGES[*]}"
    if [ "$TESTS" -eq 1 ]; then
        echo "pip (.venv): ${PIP_PACKAGES[*]}"
        echo "pip (.venv-distributed): ${DISTRIBUTED_PIP_PACKAGES[*]}"
        echo "helm (go install, when a Go toolchain is there)"
    fi
    exit 0
fi

missing=()
for package in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
    if [ "$status" != "install ok installed" ]; then
        missing+=("$package")
    fi
done

#   setup_venv DIR IMPORTS PACKAGES...: a virtual environment at DIR with
#   PACKAGES, unless IMPORTS (a Python import line) already works there.
setup_venv () {
    local venv=$1 imports=$2
    shift 2
    if [ ! -x "$venv/bin/python3" ]; then
        python3 -m venv "$venv"
    fi
    if "$venv/bin/python3" -c "$imports" 2>/dev/null; then
        echo "setup: Python test packages are installed in $(basename "$venv")"
        return
    fi
    echo "setup: installing $* into $(basename "$venv")"
    "$venv/bin/python3" -m pip install -q --disable-pip-version-check "$@"
}

setup_python () {
    setup_venv "$ROOT/.venv" 'import pytest, cloudpickle, dask.array, dask.bag, zmq, msgpack, kubernetes_validate' \
        "${PIP_PACKAGES[@]}"
    setup_venv "$ROOT/.venv-distributed" 'import pytest, cloudpickle, dask.array, dask.bag, distributed' \
        "${DISTRIBUTED_PIP_PACKAGES[@]}"
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

setup_tests () {
    if [ "$TESTS" -eq 1 ]; then
        setup_python
        setup_helm
    fi
}

if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all $([ "$TESTS" -eq 1 ] && echo "build and test" || echo "build") dependencies are installed"
    setup_tests
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
setup_tests
echo "setup: done"
