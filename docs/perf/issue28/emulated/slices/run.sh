#!/bin/bash
# The smallest slice at 1 Gbit/s (4 + 4, 4 MiB and 64 MiB, Gloo's ring and Tally's ring beside):
# ROUNDS interleaved runs of each TALLY_MIN_SLICE_BYTES in SIZES (root). ../summary.py . prints
# the ratios.
cd "$(dirname "$0")"
BIN=${BIN:-$(cd ../../../../.. && pwd)/build/tools/tally}
ROUNDS=${ROUNDS:-3}
SIZES=${SIZES:-128K 32K}
for i in $(seq 1 "$ROUNDS"); do
  for s in $SIZES; do
    TALLY_MIN_SLICE_BYTES=$s $BIN bench --emulate 1gbit --workers 4 --reducers 4 --sizes 4M,64M \
      -n 3 -w 1 --algo rs,ring,gloo_ring --json 1gbit-min$s-$i.json > 1gbit-min$s-$i.txt 2>&1
  done
done
echo done
