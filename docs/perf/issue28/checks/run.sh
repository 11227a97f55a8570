#!/bin/bash
# The benches' timed calls back to back (tools/bench/checked_calls.h) against the tree before,
# which checked every call between the timed ones: ROUNDS interleaved rounds (default 3) of the
# emulated cluster at 1 Gbit/s, 4 + 4, 4 and 64 MiB, and of loopback, 4 + 2, 64 MiB, Gloo's ring
# and Tally's ring beside the reduction server in every run. OLD is a build of the tree before
# (tools/tally with its plugin/, reducer/ and tools/tally-gloo-bench beside, as in a build
# folder); as root. Writes into OUT (default: next to this script); summary.py OUT compares.
cd "$(dirname "$0")"
ROOT=$(cd ../../../.. && pwd)
NEW=$ROOT/build/tools/tally
OLD=${OLD:?OLD=path to the tree-before build\'s tools/tally}
OUT=${OUT:-.}
mkdir -p "$OUT" && cd "$OUT"
ALGOS=rs,ring,gloo_ring
for i in $(seq 1 "${ROUNDS:-3}"); do
  order="old new"; [ $((i % 2)) = 0 ] && order="new old"
  for side in $order; do
    bin=$NEW; [ $side = old ] && bin=$OLD
    $bin bench --emulate 1gbit --workers 4 --reducers 4 --sizes 4M,64M -n 3 -w 1 --algo $ALGOS \
      --json 1gbit-$side-$i.json > 1gbit-$side-$i.txt 2>&1
    $bin bench --workers 4 --reducers 2 --sizes 64M -n 5 -w 1 --algo $ALGOS \
      --json loop-$side-$i.json > loop-$side-$i.txt 2>&1
  done
done
echo done
