#!/bin/bash
# The reducers' event loops in `tally bench`: --reducer-threads 1 against 2 on loopback (4
# workers, 2 reducers, 64 MiB, 10 timed calls), PAIRS interleaved pairs (default 20), and with
# EMU=1 (as root) two rounds each on the emulated cluster at 1 Gbit/s, 4 + 4, 4 and 64 MiB.
# On 2 cores, 2 loops per reducer is what each reducer's own default (a loop per core) gives.
# Writes next to itself; summary.py prints the paired ratios.
cd "$(dirname "$0")"
ROOT=$(cd ../../../.. && pwd)
TALLY=$ROOT/build/tools/tally
for i in $(seq 1 "${PAIRS:-20}"); do
  order="1 2"; [ $((i % 2)) = 0 ] && order="2 1"
  for t in $order; do
    $TALLY bench --reducer-threads $t --workers 4 --reducers 2 --sizes 64M -n 10 -w 1 --algo rs \
      --json t$t-$i.json > t$t-$i.txt 2>&1
  done
done
[ "${EMU:-0}" = 1 ] || exit 0
for i in 1 2; do
  order="1 2"; [ $((i % 2)) = 0 ] && order="2 1"
  for t in $order; do
    $TALLY bench --reducer-threads $t --emulate 1gbit --workers 4 --reducers 4 --sizes 4M,64M \
      -n 3 -w 1 --algo rs --json e$t-$i.json > e$t-$i.txt 2>&1
  done
done
