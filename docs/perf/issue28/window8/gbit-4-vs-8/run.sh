#!/bin/bash
# TALLY_COLL_WINDOW 4 against 8 (the default) at 1 Gbit/s, 4 + 4, 4 and 64 MiB, Gloo's ring
# beside, ROUNDS interleaved rounds (default 4). As root; writes next to itself.
cd "$(dirname "$0")"
ROOT=$(cd ../../../../.. && pwd)
for i in $(seq 1 "${ROUNDS:-4}"); do
  order="4 8"; [ $((i % 2)) = 0 ] && order="8 4"
  for w in $order; do
    TALLY_COLL_WINDOW=$w $ROOT/build/tools/tally bench --emulate 1gbit --workers 4 --reducers 4 \
      --sizes 4M,64M -n 3 -w 1 --algo rs,gloo_ring --json w$w-$i.json > w$w-$i.txt 2>&1
  done
done
echo done
