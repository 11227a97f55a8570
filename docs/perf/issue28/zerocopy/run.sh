#!/bin/bash
# tally-reducer --zerocopy on and always against copying results (off), on loopback (4 workers, 2 reducers, 64 MiB)
# and, as root, on the emulated cluster (400 Mbit/s, 4 + 4), interleaved rounds. The reducers
# get the flag through a wrapper given to `tally bench --reducer`. Writes JSON and tables next
# to itself (or in OUT); summary.py [OUT] gives the medians.
cd "$(dirname "$0")"
ROOT=$(cd ../../../.. && pwd)
OUT=${OUT:-.}
mkdir -p "$OUT" && cd "$OUT"
TALLY=$ROOT/build/tools/tally
ROUNDS=${ROUNDS:-5}
PARTS=${PARTS:-loop}
MODES=${MODES:-off on always}
for mode in $MODES; do
  printf '#!/bin/sh\nexec %s "$@" --zerocopy %s\n' "$ROOT/build/reducer/tally-reducer" $mode > reducer-$mode.sh
  chmod +x reducer-$mode.sh
done
for i in $(seq 1 "$ROUNDS"); do
  for mode in $MODES; do
    [[ " $PARTS " == *" loop "* ]] && $TALLY bench --reducer "$PWD/reducer-$mode.sh" --workers 4 \
      --reducers 2 --sizes 64M -n 5 -w 1 --algo rs --json loop-$mode-$i.json > loop-$mode-$i.txt 2>&1
    [[ " $PARTS " == *" emu "* ]] && $TALLY bench --reducer "$PWD/reducer-$mode.sh" \
      --emulate 400mbit --workers 4 --reducers 4 --sizes 64M -n 3 -w 1 --algo rs \
      --json emu-$mode-$i.json > emu-$mode-$i.txt 2>&1
  done
done
for mode in $MODES; do rm -f reducer-$mode.sh; done
echo done
