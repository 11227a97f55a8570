#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Two builds of the reduction server without faults, in interleaved rounds, for the medians of
# each: loopback (4 workers + 2 reducers, 64 MiB; part "loop"), lone small calls on loopback
# (4 KiB and 1 MiB, 200 timed calls; part "small") and, as root, the emulated cluster at
# 400 Mbit/s (4 + 4, 64 MiB; part "emu", docs/emulation.md). steady_rounds_summary.py prints the
# medians and the after/before ratios.
#
#   OLD, NEW     the two `tally` binaries (see steady_pairs.sh for building an older tree)
#   OLD_ARGS, NEW_ARGS  extra `tally bench` flags for each side (NEW_ARGS="--calls 1M" against
#                a build older than the bench's NCCL-shaped calls)
#   PARTS        what runs, default "loop small emu"
#   LOOP_ROUNDS  rounds of loop and small (default 5); EMU_ROUNDS rounds of emu (default 3)
#   OUT          where the runs go (default $TMPDIR/tally-bench/steady-rounds)
set -u
source "$(dirname "$0")/old_new.sh" steady-rounds
LOOP_ROUNDS=${LOOP_ROUNDS:-5}
EMU_ROUNDS=${EMU_ROUNDS:-3}
PARTS=${PARTS:-loop small emu}
part() { [[ " $PARTS " == *" $1 "* ]]; }
binary() { if [ "$1" = after ]; then echo "$NEW"; else echo "$OLD"; fi; }
flags() { if [ "$1" = after ]; then echo "$NEW_ARGS"; else echo "$OLD_ARGS"; fi; }
if part loop || part small; then
  for i in $(seq 1 "$LOOP_ROUNDS"); do
    for side in before after; do
      bin=$(binary $side) args=$(flags $side)
      # shellcheck disable=SC2086  # the extra flags are meant to split
      part loop && "$bin" bench $args --workers 4 --reducers 2 --sizes 64M -n 5 -w 1 --algo rs \
        --json "loop-$side-$i.json" > "loop-$side-$i.txt" 2>&1
      # shellcheck disable=SC2086
      part small && "$bin" bench $args --workers 4 --reducers 2 --sizes 4K,1M -n 200 -w 20 \
        --algo rs --json "small-$side-$i.json" > "small-$side-$i.txt" 2>&1
    done
  done
fi
if part emu; then
  for i in $(seq 1 "$EMU_ROUNDS"); do
    for side in before after; do
      bin=$(binary $side) args=$(flags $side)
      # shellcheck disable=SC2086
      "$bin" bench $args --emulate 400mbit --workers 4 --reducers 4 --sizes 64M -n 3 -w 1 \
        --algo rs --json "emu-$side-$i.json" > "emu-$side-$i.txt" 2>&1
    done
  done
fi
echo "runs in $PWD"
"$HERE/steady_rounds_summary.py" "$PWD"
