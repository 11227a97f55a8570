#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The standard set of runs behind docs/performance.md's "Where the figures stand", Gloo's ring
# and Tally's ring beside the reduction server in every run:
#   - loopback, 4 workers + 2 reducers, 64 MiB (LOOP runs, default 3);
#   - as root, the emulated cluster (docs/emulation.md): 4 + 4 at 1 Gbit/s, 4 and 64 MiB (GBIT
#     runs, default 3); 8 + 8 at 400 Mbit/s, 64 MiB (EIGHT runs, default 2); and one run each of
#     4 + 4 at 400 and at 200 Mbit/s, 4 and 64 MiB.
# Arguments are added to every run (`--calls 1M` for the bench's 1 MiB calls instead of NCCL's).
# BIN: the `tally` binary (default this tree's build); OUT: where the runs go (default
# $TMPDIR/tally-bench/suite). ratios.py prints the figures at the end.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BIN=${BIN:-$ROOT/build/tools/tally}
OUT=${OUT:-${TMPDIR:-/tmp}/tally-bench/suite}
# A relative path given for a binary is taken from where the script was started.
absolute() { case $1 in /*|"") echo "$1" ;; */*) echo "$PWD/$1" ;; *) echo "$1" ;; esac; }
BIN=$(absolute "$BIN")
mkdir -p "$OUT" && cd "$OUT" || exit 1
ALGOS=rs,ring,gloo_ring
EXTRA=("$@")
run() {  # name, then bench arguments
  local name=$1
  shift
  "$BIN" bench "${EXTRA[@]}" "$@" --algo $ALGOS --json "$name.json" > "$name.txt" 2>&1
}
for i in $(seq 1 "${LOOP:-3}"); do
  run "loop-$i" --workers 4 --reducers 2 --sizes 64M -n 5 -w 1
done
if [ "$(id -u)" = 0 ]; then
  for i in $(seq 1 "${GBIT:-3}"); do
    run "1gbit-4x4-$i" --emulate 1gbit --workers 4 --reducers 4 --sizes 4M,64M -n 3 -w 1
  done
  for i in $(seq 1 "${EIGHT:-2}"); do
    run "400mbit-8x8-$i" --emulate 400mbit --workers 8 --reducers 8 --sizes 64M -n 3 -w 1
  done
  for rate in 400mbit 200mbit; do
    run "$rate-4x4-1" --emulate $rate --workers 4 --reducers 4 --sizes 4M,64M -n 3 -w 1
  done
else
  echo "not root: no emulated runs"
fi
echo "runs in $PWD"
"$HERE/ratios.py" "$PWD"
