#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages Tally's build and tests need. Skips apt when all are present.
set -euo pipefail
pkgs=(cmake ninja-build g++ libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libyaml-cpp-dev
      prometheus-cpp-dev dpkg-dev file libgloo-dev gnuplot-nox iproute2 libssl-dev libisal-dev
      clang libclang-rt-14-dev libfabric-dev libibverbs-dev
      help2man lintian  # the Debian packages: man pages, and the check in test/system/packaging
      python3-kubernetes python3-jsonschema)  # tally plan's JobSet against Kubernetes's schemas
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
