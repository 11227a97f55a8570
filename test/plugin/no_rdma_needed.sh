#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The plugin and tally-reducer must load on hosts without libfabric and libibverbs: those are
# dlopen'ed when TALLY_TRANSPORT asks for them, so no binary may name them as a dependency.
#   no_rdma_needed.sh BINARY...
set -euo pipefail
status=0
for bin in "$@"; do
  needed=$(readelf -d "$bin" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $5); print $5 }')
  [ -n "$needed" ] || { echo "FAIL $bin: readelf listed no NEEDED entry at all"; status=1; continue; }
  bad=$(grep -E '^lib(fabric|ibverbs|rdmacm|efa|mlx[45])\.' <<<"$needed" || true)
  if [ -n "$bad" ]; then
    echo "FAIL $bin needs $(tr '\n' ' ' <<<"$bad")"
    status=1
  else
    echo "ok   $bin needs only: $(tr '\n' ' ' <<<"$needed")"
  fi
done
exit $status
