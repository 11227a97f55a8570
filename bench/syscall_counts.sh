#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Two builds of the reduction server counted instead of timed, on loopback (4 workers +
# 2 reducers, 64 MiB, 5 timed calls and 1 warm-up), PAIRS pairs (default 4). Each side of a pair
# runs twice: under `perf trace -s` (every system call of every thread, counted) with the bytes
# and packets loopback carried, and under `perf record -a -g` for the workers' samples by thread
# (samples_by_thread.py). syscall_counts.py then prints the table. As root (perf).
#
#   OLD, NEW  the two `tally` binaries (see steady_pairs.sh for building an older tree)
#   OLD_ARGS, NEW_ARGS  extra `tally bench` flags for each side
#   OUT       where the counts go (default $TMPDIR/tally-bench/syscall-counts)
set -u
source "$(dirname "$0")/old_new.sh" syscall-counts
ARGS="bench --workers 4 --reducers 2 --sizes 64M -n 5 -w 1 --algo rs"
lo() { awk '/ lo:/{print $2, $3}' /proc/net/dev; }
for i in $(seq 1 "${PAIRS:-4}"); do
  for side in before after; do
    bin=$OLD extra=$OLD_ARGS
    [ "$side" = after ] && bin=$NEW extra=$NEW_ARGS
    read -r b0 p0 < <(lo)
    # shellcheck disable=SC2086  # ARGS is meant to split
    perf trace -s -o "trace-$side-$i.txt" "$bin" $ARGS $extra > "bench-trace-$side-$i.txt" 2>&1
    read -r b1 p1 < <(lo)
    echo "$((b1 - b0)) $((p1 - p0))" > "lo-$side-$i.txt"
    # shellcheck disable=SC2086
    perf record -a -g -o "$side-$i.data" -- "$bin" $ARGS $extra > "bench-record-$side-$i.txt" 2>&1
    "$HERE/samples_by_thread.py" "$side-$i.data" > "threads-$side-$i.txt"
    rm -f "$side-$i.data"
  done
done
echo "counts in $PWD"
"$HERE/syscall_counts.py" "$PWD"
