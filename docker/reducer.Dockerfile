# syntax=docker/dockerfile:1
# SPDX-License-Identifier: Apache-2.0
# Tally's reducer image: tally-reducer, the tally command and the plugin, installed from the
# Debian packages on debian:bookworm-slim. It is the reducer pool's image (CLUSTER_SPEC
# workerpool2, TF_CONFIG ps); the other pools run the training image (pytorch.Dockerfile), which
# has no tally-reducer. The entrypoint is `tally launch --`, as there, so every pool has the same
# command: here launch runs tally-reducer on the replica's own address from the spec.
#
#   docker build -f docker/reducer.Dockerfile -t tally-reducer .      (from the repository root)
#
# docs/packaging.md has the details.

# ---- build: compile, then package with CPack (Depends computed by dpkg-shlibdeps) ----
FROM debian:bookworm AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=OFF \
          -DCMAKE_INSTALL_PREFIX=/usr \
 && cmake --build /build \
 && cd /build && cpack -G DEB \
 && mkdir /out && cp /build/tally-nccl-plugin_*.deb /build/tally-reducer_*.deb \
    /build/tally-tools_*.deb /out/

# ---- runtime: the packages (tally-reducer, and tally-tools for `tally launch`, which brings
# tally-nccl-plugin), their dependencies, ISA-L (TALLY_CHECKSUM=1) and libcrypto (the job
# token's HMAC, --token-file), nothing else; the last two are loaded at run time ----
FROM debian:bookworm-slim AS reducer
COPY --from=build /out/ /tmp/tally/
RUN cd /tmp/tally && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    ./tally-nccl-plugin_*.deb ./tally-reducer_*.deb ./tally-tools_*.deb libisal2 libssl3 \
 && cd / && rm -rf /var/lib/apt/lists/* /tmp/tally \
 && tally --help >/dev/null && tally-reducer --help >/dev/null
RUN useradd --system --uid 10001 --create-home --home-dir /home/tally tally
USER tally
WORKDIR /home/tally
# The port Vertex AI gives every replica in CLUSTER_SPEC; the reducer listens on every address
# at the port of its own entry there (its host name may not resolve yet when it starts).
EXPOSE 2222
# No CMD: in the reducer pool launch runs tally-reducer itself (a CMD would only be reported as
# ignored). Without a spec, name the program: docker run IMAGE tally-reducer --listen 0.0.0.0:2222
ENTRYPOINT ["tally", "launch", "--"]
