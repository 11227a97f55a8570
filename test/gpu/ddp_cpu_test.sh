#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest gpu.ddp_compare_cpu: ddp_compare.py's training path on the CPU (Gloo), where a Python
# with PyTorch exists: two 4-rank runs of the same training must learn and agree step by step.
# Exit 77 (skipped) when no Python here imports torch.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=""
for candidate in "$@" python3 /usr/bin/python3; do
  if timeout 60 "$candidate" -c "import torch" 2>/dev/null; then python=$candidate; break; fi
done
[[ -n "$python" ]] || { echo "SKIP: no Python with PyTorch"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tally-ddp-cpu.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for run in a b; do
  port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  pids=()
  for rank in 0 1 2 3; do
    RANK=$rank WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 240 "$python" \
      "$here/ddp_compare.py" --train --cpu --steps 40 --out "$tmp/$run.json" \
      >"$tmp/$run.$rank.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || { cat "$tmp/$run".*.log; echo "FAIL: run $run, a rank failed"; exit 1; }
  done
done
"$python" "$here/ddp_compare.py" --compare "$tmp/a.json" "$tmp/b.json"
