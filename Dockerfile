# squall container image: one image for the broker, the governors and
# clients (`docker compose up`, see docker-compose.yml and README.md).
#
# Stage 1 builds with cmake on Debian bookworm; stage 2 installs the Python
# packages of tasks from PyPI; stage 3 is bookworm-slim with only the shared
# libraries the programs link (libzmq5, libczmq4, libmsgpackc2,
# libmicrohttpd12; libsodium23 comes with libzmq5), Python 3 with those
# packages, the programs, libsquall and the Python package.
#
# Python packages: a function a client pickled with cloudpickle loads only
# where the same cloudpickle (and Python) reads it, so the image carries
# cloudpickle from PyPI, as clients installed with pip have it, not
# Debian's older one, and numpy, pandas and dask, which tasks commonly use.
# Build arguments (docker compose build reads them from SQUALL_EXTRA_PIP
# and SQUALL_BUILD_CA_CERTS):
#   SQUALL_PIP     the packages (default below; pin versions to match your
#                  clients', e.g. "cloudpickle==3.1.1 numpy==2.2.6")
#   SQUALL_EXTRA_PIP  more packages for tasks (default none)
#   EXTRA_CA_CERTS PEM text of CAs to trust for the downloads (a proxy that
#                  inspects TLS); not kept in the final image

FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        build-essential cmake pkg-config \
        libzmq3-dev libczmq-dev libmsgpack-dev libsodium-dev libmicrohttpd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The C sources only: an edit of the docs or the Python package does not
# rebuild the programs.
COPY CMakeLists.txt ./
COPY common common
COPY client client
COPY broker broker
COPY governor governor
COPY examples examples
COPY bench bench
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
 && cmake --build /build -j"$(nproc)" \
 && DESTDIR=/stage cmake --install /build --prefix /usr/local

FROM debian:bookworm-slim AS python
ARG SQUALL_PIP="cloudpickle numpy pandas dask"
ARG SQUALL_EXTRA_PIP=""
ARG EXTRA_CA_CERTS=""
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-pip ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN if [ -n "$EXTRA_CA_CERTS" ]; then \
        printf '%s\n' "$EXTRA_CA_CERTS" > /usr/local/share/ca-certificates/extra.crt \
        && update-ca-certificates >/dev/null; \
    fi \
 && PIP_CERT=/etc/ssl/certs/ca-certificates.crt pip install --no-cache-dir --root /pystage \
        --break-system-packages --no-warn-script-location $SQUALL_PIP $SQUALL_EXTRA_PIP

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        libzmq5 libczmq4 libmsgpackc2 libmicrohttpd12 python3 \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
COPY --from=build /stage/usr/local/ /usr/local/
COPY --from=python /pystage/usr/local/ /usr/local/
# The Python package (squall.Client, the `squall` CLI); the CLI itself is
# stdlib-only and reaches libsquall through ctypes.
COPY bindings/python/squall /usr/lib/python3/dist-packages/squall
COPY tests/deploy/pipeline.py /opt/squall/examples/pipeline.py
COPY examples/*.py /opt/squall/examples/
# docker-compose.yml's broker and governors (keys of their own, enrolled)
COPY deploy/compose/broker-enroll.py deploy/compose/governor-start.sh /usr/local/lib/squall/
RUN ldconfig \
 && printf '#!/bin/sh\nexec python3 /usr/lib/python3/dist-packages/squall/cli.py "$@"\n' \
        > /usr/local/bin/squall \
 && chmod 755 /usr/local/bin/squall \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/squall squall \
 && mkdir -p /var/log/squall /var/lib/squall/journal /keys /broker /enroll \
 && chown squall /var/log/squall /var/lib/squall/journal /keys /broker \
 && chmod 700 /var/lib/squall/journal /keys \
 && chmod 755 /broker /enroll \
 && python3 -c "import cloudpickle"
USER squall
WORKDIR /var/lib/squall
# client port, dashboard
EXPOSE 7760 8080
CMD ["squall", "--help"]
