#!/bin/bash
# The default path (TALLY_ZEROCOPY=off) before and after the workers' zero-copy change, on the
# emulated 400 Mbit/s cluster, 4 + 4, 4 and 64 MiB, Gloo and the ring beside, interleaved
# (OLD: the tree before it, 14951e7; NEW: this one). As root; JSON and tables beside this script.
cd "$(dirname "$0")"
ROOT=$(cd ../../../../../.. && pwd)
NEW=${NEW:-$ROOT/build/tools/tally}
OLD=${OLD:-$ROOT/../prev/build/tools/tally}
for i in $(seq 1 "${ROUNDS:-2}"); do
  order="before after"; [ $((i % 2)) = 0 ] && order="after before"
  for side in $order; do
    bin=$OLD; [ $side = after ] && bin=$NEW
    $bin bench --emulate 400mbit --workers 4 --reducers 4 --sizes 4M,64M -n 3 -w 1 \
      --algo rs,ring,gloo_ring --json $side-$i.json > $side-$i.txt 2>&1
  done
done
echo done
