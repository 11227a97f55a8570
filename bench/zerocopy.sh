#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Zero-copy sends against copying, in interleaved rounds: loopback (4 workers + 2 reducers,
# 64 MiB; part "loop") and, as root, the emulated cluster at 400 Mbit/s (4 + 4, 64 MiB; part
# "emu"). zerocopy_summary.py prints the medians and each mode against off in the same round.
#
#   SIDE    reducer (default): tally-reducer --zerocopy MODE, through a wrapper given to
#           `tally bench --reducer`; worker: the workers' TALLY_ZEROCOPY=MODE, with --verbose so
#           that each rank's count of zero-copy sends (and of those the kernel copied) is logged
#   MODES   default "off on always"; ROUNDS default 5; PARTS default "loop"
#   OUT     where the runs go (default $TMPDIR/tally-bench/zerocopy-SIDE)
# Arguments are added to every run (`--calls 1M` for the bench's 1 MiB calls instead of NCCL's).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
TALLY=${BIN:-$ROOT/build/tools/tally}
REDUCER=${REDUCER:-$ROOT/build/reducer/tally-reducer}
ROUNDS=${ROUNDS:-5}
PARTS=${PARTS:-loop}
MODES=${MODES:-off on always}
SIDE=${SIDE:-reducer}
OUT=${OUT:-${TMPDIR:-/tmp}/tally-bench/zerocopy-$SIDE}
# A relative path given for a binary is taken from where the script was started.
absolute() { case $1 in /*|"") echo "$1" ;; */*) echo "$PWD/$1" ;; *) echo "$1" ;; esac; }
TALLY=$(absolute "$TALLY")
REDUCER=$(absolute "$REDUCER")
mkdir -p "$OUT" && cd "$OUT" || exit 1
for mode in $MODES; do
  printf '#!/bin/sh\nexec %s "$@" --zerocopy %s\n' "$REDUCER" "$mode" > "reducer-$mode.sh"
  chmod +x "reducer-$mode.sh"
done
EXTRA=("$@")
bench() {  # mode, then bench arguments
  local mode=$1
  shift
  if [ "$SIDE" = worker ]; then
    TALLY_ZEROCOPY=$mode "$TALLY" bench --verbose "${EXTRA[@]}" "$@"
  else
    "$TALLY" bench --reducer "$PWD/reducer-$mode.sh" "${EXTRA[@]}" "$@"
  fi
}
for i in $(seq 1 "$ROUNDS"); do
  for mode in $MODES; do
    if [[ " $PARTS " == *" loop "* ]]; then
      bench "$mode" --workers 4 --reducers 2 --sizes 64M -n 5 -w 1 --algo rs \
        --json "loop-$mode-$i.json" > "loop-$mode-$i.txt" 2>&1
    fi
    if [[ " $PARTS " == *" emu "* ]]; then
      bench "$mode" --emulate 400mbit --workers 4 --reducers 4 --sizes 64M -n 3 -w 1 --algo rs \
        --json "emu-$mode-$i.json" > "emu-$mode-$i.txt" 2>&1
    fi
  done
done
for mode in $MODES; do rm -f "reducer-$mode.sh"; done
echo "runs in $PWD"
"$HERE/zerocopy_summary.py" "$PWD"
