#!/bin/bash
# Item 8 by CPU samples: `perf record -a -g` of the loopback row (4 workers, 2 reducers, 64 MiB)
# for the build before failover (OLD) and this one (NEW), interleaved, and scripts/perf_split.py
# of each: the samples each side spent outside the bench's own input fill and checks, which
# the wall clock of a shared VM does not blur. pairs.py prints the ratios.
cd "$(dirname "$0")"
ROOT=$(cd ../../../../.. && pwd)
NEW=${NEW:-$ROOT/build/tools/tally}
OLD=${OLD:-$ROOT/../before/build/tools/tally}
for i in $(seq 1 "${PAIRS:-6}"); do
  for side in before after; do
    bin=$OLD; [ $side = after ] && bin=$NEW
    perf record -a -g -o $side-$i.data -- $bin bench --workers 4 --reducers 2 --sizes 64M -n 5 \
      -w 1 --algo rs > $side-$i.txt 2>&1
    "$ROOT/scripts/perf_split.py" $side-$i.data > $side-$i.split 2>&1
    rm -f $side-$i.data
  done
done
