#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Two builds (or two settings) of the reduction server against each other on loopback, in
# interleaved pairs: 4 workers + 2 reducers, 64 MiB, 10 timed calls a run, PAIRS pairs (default
# 50) in the order A-B, B-A, A-B, ... so that a drift of the machine falls on both sides alike.
# On a shared 2-core machine one pair's ratio falls anywhere between 0.85 and 1.25, so showing a
# 3% difference takes about 50 pairs (about 12 minutes).
#
#   OLD, NEW            the two `tally` binaries ("before" and "after"; NEW defaults to this
#                       tree's build/tools/tally, OLD to ../before/build/tools/tally)
#   OLD_ARGS, NEW_ARGS  extra `tally bench` flags for each side, e.g. to compare two settings of
#                       one build: OLD_ARGS="--reducer-threads 2" NEW_ARGS="--reducer-threads 1"
#   OUT                 where the runs go (default $TMPDIR/tally-bench/steady-pairs)
#
# A build of an older tree to compare against:
#   git worktree add ../before <commit> && cmake -S ../before -B ../before/build -G Ninja &&
#   cmake --build ../before/build --target tally tally-reducer nccl-net-tally
# Then pairs.py prints the paired after/before ratios with a bootstrap interval.
set -u
source "$(dirname "$0")/old_new.sh" steady-pairs
for i in $(seq 1 "${PAIRS:-50}"); do
  order="before after"; [ $((i % 2)) = 0 ] && order="after before"
  for side in $order; do
    bin=$OLD args=$OLD_ARGS
    [ "$side" = after ] && bin=$NEW args=$NEW_ARGS
    # shellcheck disable=SC2086  # the extra flags are meant to split
    "$bin" bench $args --workers 4 --reducers 2 --sizes 64M -n 10 -w 1 --algo rs \
      --json "loop-$side-$i.json" > "loop-$side-$i.txt" 2>&1
  done
done
echo "runs in $PWD"
"$HERE/pairs.py" "$PWD"
