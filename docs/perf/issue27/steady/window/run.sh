#!/bin/bash
# TALLY_COLL_WINDOW against the steady-state cost (issue 27, item 8): interleaved loopback runs
# (4 workers, 2 reducers, 64 MiB) of the commit before failover (OLD, its default window of 16)
# and of this tree with each window in WINDOWS. JSON into OUT (default: set1); median.py OUT
# prints the medians. set1: WINDOWS="16 8" ROUNDS=12; set2: WINDOWS="12 8" ROUNDS=10.
cd "$(dirname "$0")"
ROOT=$(cd ../../../../.. && pwd)
NEW=${NEW:-$ROOT/build/tools/tally}
OLD=${OLD:-$ROOT/../before/build/tools/tally}
OUT=${OUT:-set1}
ROUNDS=${ROUNDS:-12}
WINDOWS=${WINDOWS:-16 8}
mkdir -p "$OUT"
for i in $(seq 1 "$ROUNDS"); do
  $OLD bench --workers 4 --reducers 2 --sizes 64M -n 5 -w 1 --algo rs --json "$OUT/old-$i.json" > /dev/null 2>&1
  for w in $WINDOWS; do
    TALLY_COLL_WINDOW=$w $NEW bench --workers 4 --reducers 2 --sizes 64M -n 5 -w 1 --algo rs \
      --json "$OUT/$w-$i.json" > /dev/null 2>&1
  done
done
