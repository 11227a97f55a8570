#!/bin/bash
# Transparent huge pages for everything (always) against the default (madvise), loopback
# 4 workers + 2 reducers, 64 MiB, interleaved rounds; thp-MODE-ROUND.txt beside this. As root:
# it writes /sys/kernel/mm/transparent_hugepage/enabled and sets it back to madvise.
cd "$(dirname "$0")"
ROOT=$(cd ../../../.. && pwd)
for i in $(seq 1 "${ROUNDS:-3}"); do
  for thp in madvise always; do
    echo $thp > /sys/kernel/mm/transparent_hugepage/enabled
    "$ROOT/build/tools/tally" bench --workers 4 --reducers 2 --sizes 64M -n 5 -w 1 --algo rs \
      > thp-$thp-$i.txt 2>&1
  done
done
echo madvise > /sys/kernel/mm/transparent_hugepage/enabled
grep -H -E '^ +67108864' thp-*.txt
