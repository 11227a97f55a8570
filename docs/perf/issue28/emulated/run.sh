#!/bin/bash
# Issue 28's emulated targets, with Gloo's ring and Tally's ring beside the reduction server in
# every run (root; docs/emulation.md): 4 workers + 4 reducers at 1 Gbit/s, 4 MiB and 64 MiB,
# ROUNDS runs of each TALLY_COLL_WINDOW in WINDOWS, interleaved; and 8 + 8 at 400 Mbit/s, 64 MiB
# (EIGHT runs, the default window). JSON and tables beside this script; summary.py prints the
# ratios and the share of the link.
cd "$(dirname "$0")"
ROOT=$(cd ../../../.. && pwd)
BIN=${BIN:-$ROOT/build/tools/tally}
ROUNDS=${ROUNDS:-3}
WINDOWS=${WINDOWS:-16 8}
EIGHT=${EIGHT:-1}
for i in $(seq 1 "$ROUNDS"); do
  for w in $WINDOWS; do
    TALLY_COLL_WINDOW=$w $BIN bench --emulate 1gbit --workers 4 --reducers 4 --sizes 4M,64M -n 3 -w 1 \
      --algo rs,ring,gloo_ring --json 1gbit-w$w-$i.json > 1gbit-w$w-$i.txt 2>&1
  done
done
for i in $(seq 1 "$EIGHT"); do
  $BIN bench --emulate 400mbit --workers 8 --reducers 8 --sizes 64M -n 3 -w 1 \
    --algo rs,ring,gloo_ring --json 400mbit-8x8-$i.json > 400mbit-8x8-$i.txt 2>&1
done
echo done
