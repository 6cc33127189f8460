# squall container image: one image for the broker, the governors and
# clients (`docker compose up`, see docker-compose.yml and README.md).
#
# Stage 1 builds with cmake on Debian bookworm; stage 2 is bookworm-slim with
# only the shared libraries the programs link (libzmq5, libczmq4,
# libmsgpackc2, libmicrohttpd12; libsodium23 comes with libzmq5), Python 3 with cloudpickle for pipeline
# scripts, the programs, libsquall and the Python package.

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

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        libzmq5 libczmq4 libmsgpackc2 libmicrohttpd12 \
        python3 python3-cloudpickle \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
COPY --from=build /stage/usr/local/ /usr/local/
# The Python package (squall.Client, the `squall` CLI); the CLI itself is
# stdlib-only and reaches libsquall through ctypes.
COPY bindings/python/squall /usr/lib/python3/dist-packages/squall
COPY tests/deploy/pipeline.py /opt/squall/examples/pipeline.py
COPY examples/*.py /opt/squall/examples/
RUN ldconfig \
 && printf '#!/bin/sh\nexec python3 /usr/lib/python3/dist-packages/squall/cli.py "$@"\n' \
        > /usr/local/bin/squall \
 && chmod 755 /usr/local/bin/squall \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/squall squall \
 && mkdir -p /var/log/squall /var/lib/squall/journal /keys \
 && chown squall /var/log/squall /var/lib/squall/journal /keys \
 && chmod 700 /var/lib/squall/journal /keys
USER squall
WORKDIR /var/lib/squall
# client port, dashboard
EXPOSE 7760 8080
CMD ["squall", "--help"]
