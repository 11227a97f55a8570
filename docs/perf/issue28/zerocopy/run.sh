#!/bin/bash
# Zero-copy sends against copying (off), on loopback (4 workers, 2 reducers, 64 MiB) and, as
# root, on the emulated cluster (400 Mbit/s, 4 + 4), interleaved rounds. SIDE=reducer (the
# default): tally-reducer --zerocopy MODE, through a wrapper given to `tally bench --reducer`.
# SIDE=worker: the workers' TALLY_ZEROCOPY=MODE, with --verbose so that each rank's count of
# zero-copy sends (and how many the kernel copied anyway) is in the tables. Writes JSON and
# tables next to itself (or in OUT); summary.py [OUT] gives the medians.
cd "$(dirname "$0")"
ROOT=$(cd ../../../.. && pwd)
OUT=${OUT:-.}
mkdir -p "$OUT" && cd "$OUT"
TALLY=$ROOT/build/tools/tally
ROUNDS=${ROUNDS:-5}
PARTS=${PARTS:-loop}
MODES=${MODES:-off on always}
SIDE=${SIDE:-reducer}
for mode in $MODES; do
  printf '#!/bin/sh\nexec %s "$@" --zerocopy %s\n' "$ROOT/build/reducer/tally-reducer" $mode > reducer-$mode.sh
  chmod +x reducer-$mode.sh
done
bench() {  # mode, then bench arguments
  local mode=$1
  shift
  if [ "$SIDE" = worker ]; then
    TALLY_ZEROCOPY=$mode $TALLY bench --verbose "$@"
  else
    $TALLY bench --reducer "$PWD/reducer-$mode.sh" "$@"
  fi
}
for i in $(seq 1 "$ROUNDS"); do
  for mode in $MODES; do
    [[ " $PARTS " == *" loop "* ]] && bench $mode --workers 4 --reducers 2 --sizes 64M -n 5 -w 1 \
      --algo rs --json loop-$mode-$i.json > loop-$mode-$i.txt 2>&1
    [[ " $PARTS " == *" emu "* ]] && bench $mode --emulate 400mbit --workers 4 --reducers 4 \
      --sizes 64M -n 3 -w 1 --algo rs --json emu-$mode-$i.json > emu-$mode-$i.txt 2>&1
  done
done
for mode in $MODES; do rm -f reducer-$mode.sh; done
echo done
