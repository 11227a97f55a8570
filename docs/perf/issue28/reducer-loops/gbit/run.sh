#!/bin/bash
# One loop per reducer against two at 1 Gbit/s, 4 + 4, 4 and 64 MiB, Gloo and the ring beside,
# ROUNDS interleaved rounds (default 3). As root; writes next to itself; then
# docs/perf/issue28/standing/summary.py on this folder.
cd "$(dirname "$0")"
ROOT=$(cd ../../../../.. && pwd)
for i in $(seq 1 "${ROUNDS:-3}"); do
  order="1 2"; [ $((i % 2)) = 0 ] && order="2 1"
  for t in $order; do
    $ROOT/build/tools/tally bench --reducer-threads $t --emulate 1gbit --workers 4 --reducers 4 \
      --sizes 4M,64M -n 3 -w 1 --algo rs,ring,gloo_ring --json t$t-$i.json > t$t-$i.txt 2>&1
  done
done
echo done
