#!/bin/bash
# Where issue 28's targets stand, one sitting, Gloo's ring and Tally's ring beside the reduction
# server in every run: loopback 4 workers + 2 reducers, 64 MiB (LOOP runs); as root, the
# emulated cluster at 1 Gbit/s, 4 + 4, 4 and 64 MiB (GBIT runs), 8 + 8 at 400 Mbit/s, 64 MiB
# (EIGHT runs), and the rows that must not regress: 4 + 4 at 400 and 200 Mbit/s, 4 and 64 MiB.
# JSON and tables beside this script (or in OUT); summary.py [OUT] prints the targets.
cd "$(dirname "$0")"
ROOT=$(cd ../../../.. && pwd)
BIN=${BIN:-$ROOT/build/tools/tally}
OUT=${OUT:-.}
mkdir -p "$OUT" && cd "$OUT"
ALGOS=rs,ring,gloo_ring
for i in $(seq 1 "${LOOP:-3}"); do
  $BIN bench --workers 4 --reducers 2 --sizes 64M -n 5 -w 1 --algo $ALGOS \
    --json loop-$i.json > loop-$i.txt 2>&1
done
[ "$(id -u)" = 0 ] || { echo "not root: no emulated runs"; exit 0; }
for i in $(seq 1 "${GBIT:-3}"); do
  $BIN bench --emulate 1gbit --workers 4 --reducers 4 --sizes 4M,64M -n 3 -w 1 --algo $ALGOS \
    --json 1gbit-4x4-$i.json > 1gbit-4x4-$i.txt 2>&1
done
for i in $(seq 1 "${EIGHT:-2}"); do
  $BIN bench --emulate 400mbit --workers 8 --reducers 8 --sizes 64M -n 3 -w 1 --algo $ALGOS \
    --json 400mbit-8x8-$i.json > 400mbit-8x8-$i.txt 2>&1
done
for rate in 400mbit 200mbit; do
  $BIN bench --emulate $rate --workers 4 --reducers 4 --sizes 4M,64M -n 3 -w 1 --algo $ALGOS \
    --json $rate-4x4-1.json > $rate-4x4-1.txt 2>&1
done
echo done
