#!/bin/bash
# Item 8 on loopback with enough pairs to see 3%: the build before failover (OLD) and this one
# (NEW), 4 workers + 2 reducers, 64 MiB, 10 timed calls a run, PAIRS pairs (default 50) in the
# order before-after, after-before, ... so that a drift of the VM falls on both sides alike.
# pairs.py [OUT] prints the paired ratios and a bootstrap interval for their median. OUT: where
# the runs go (default: next to this script); OLD and NEW: the two `tally` binaries.
cd "$(dirname "$0")"
HERE=$PWD
ROOT=$(cd ../../../../.. && pwd)
NEW=${NEW:-$ROOT/build/tools/tally}
OLD=${OLD:-$ROOT/../before/build/tools/tally}
OUT=${OUT:-.}
mkdir -p "$OUT" && cd "$OUT"
for i in $(seq 1 "${PAIRS:-50}"); do
  order="before after"; [ $((i % 2)) = 0 ] && order="after before"
  for side in $order; do
    bin=$OLD; [ $side = after ] && bin=$NEW
    $bin bench --workers 4 --reducers 2 --sizes 64M -n 10 -w 1 --algo rs \
      --json loop-$side-$i.json > loop-$side-$i.txt 2>&1
  done
done
"$HERE/pairs.py" "$PWD"
