# syntax=docker/dockerfile:1
# SPDX-License-Identifier: Apache-2.0
# Adds Tally to a PyTorch training image. Two targets, one for each way NCCL can find the plugin:
#
#   docker build -f docker/pytorch.Dockerfile --target plugin-path -t pytorch-tally .
#       NCCL_NET_PLUGIN=/usr/lib/libnccl-net-tally.so: NCCL dlopens the library by its path.
#       The default target.
#   docker build -f docker/pytorch.Dockerfile --target preload -t pytorch-tally .
#       LD_PRELOAD=/usr/lib/libnccl-net-tally.so with NCCL_NET_PLUGIN=STATIC_PLUGIN: NCCL looks
#       the tables up in the process's global scope, where the preloaded library already is.
#
# --build-arg BASE=IMAGE picks the training image (any Debian or Ubuntu based one with apt).
# The entrypoint is `tally launch --`, as in the reducer image: the CustomJob's args are the
# training command, and launch sets the plugin, CollNet and rendezvous variables for its pool.
# For pools 0, 1 and 3 only: there is no tally-reducer here, and the reducer pool (2) runs
# reducer.Dockerfile's image.
# docs/packaging.md has the details.
ARG BASE=pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime

# ---- build: on BASE itself, so the binaries need no newer glibc than the image has ----
# glibc is only forward compatible: a plugin built on Debian 12 needs glibc 2.36 symbols, which
# e.g. Ubuntu 22.04 (2.35) lacks. The plugin's own build links libstdc++ and libgcc statically
# (plugin/CMakeLists.txt), so nothing special is needed here: it is dlopened into a Python process
# that may already hold an older libstdc++ (a conda one) than the one it was built against.
FROM ${BASE} AS build
USER root
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# Extra CMake arguments, e.g. -DCMAKE_CXX_COMPILER=g++-12 on a base whose default is older.
ARG CMAKE_ARGS=""
# Plain lib under /usr: the same plugin path on every architecture, on the loader's path.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=OFF \
          -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib ${CMAKE_ARGS} \
 && cmake --build /build \
 && cd /build && cpack -G DEB \
 && mkdir /out && cp /build/tally-nccl-plugin_*.deb /build/tally-tools_*.deb /out/

# ---- tally: BASE with the plugin and tools packages (apt installs what their Depends name; not
# the reducer's, so no prometheus-cpp) and the libraries the plugin loads at run time when asked:
# ISA-L (TALLY_CHECKSUM=1), libcrypto (a job token) ----
# The packages ship no libnccl-net.so link, so NCCL loads Tally only when NCCL_NET_PLUGIN or
# LD_PRELOAD (below) ask for it, and `tally launch` can run evaluators (pool 3) without it.
FROM ${BASE} AS tally
USER root
COPY --from=build /out/ /tmp/tally/
RUN cd /tmp/tally && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    ./tally-nccl-plugin_*.deb ./tally-tools_*.deb libisal2 libssl3 \
 && cd / && rm -rf /var/lib/apt/lists/* /tmp/tally \
 && tally --help >/dev/null && test -f /usr/lib/libnccl-net-tally.so \
 && test ! -e /usr/lib/libnccl-net.so
# NCCL 2.27 to 2.29 unload the plugin when a process's last communicator is destroyed and forget
# its name; a count of 1 keeps it loaded, so a process group made again still finds Tally.
ENV NCCL_NET_PLUGIN_REF_COUNT=1
ENTRYPOINT ["tally", "launch", "--"]

# ---- (b) LD_PRELOAD: the plugin is in every process; NCCL finds it in the global scope ----
FROM tally AS preload
ENV LD_PRELOAD=/usr/lib/libnccl-net-tally.so NCCL_NET_PLUGIN=STATIC_PLUGIN

# ---- (a) NCCL_NET_PLUGIN with the full path (the last stage: the default target) ----
FROM tally AS plugin-path
ENV NCCL_NET_PLUGIN=/usr/lib/libnccl-net-tally.so
