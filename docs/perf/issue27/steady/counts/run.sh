#!/bin/bash
# Item 8 by counts instead of CPU time: the loopback row (4 workers, 2 reducers, 64 MiB, 5 timed
# calls and 1 warm-up) for the build before failover (OLD) and this one (NEW), interleaved.
# Each pair runs each side twice: under `perf trace -s` (every syscall of every thread, counted)
# with the bytes and packets loopback carried, and under `perf record -a -g` for samples split by
# thread: the bench driver's idle polling (sched_yield, usleep between test() calls), the rest of
# its main thread, and the plugin's own threads. counts.py prints the table. As root.
cd "$(dirname "$0")"
ROOT=$(cd ../../../../.. && pwd)
NEW=${NEW:-$ROOT/build/tools/tally}
OLD=${OLD:-$ROOT/../before/build/tools/tally}
ARGS="bench --workers 4 --reducers 2 --sizes 64M -n 5 -w 1 --algo rs"
lo() { awk '/ lo:/{print $2, $3}' /proc/net/dev; }
for i in $(seq 1 "${PAIRS:-4}"); do
  for side in before after; do
    bin=$OLD; [ $side = after ] && bin=$NEW
    read -r b0 p0 < <(lo)
    perf trace -s -o trace-$side-$i.txt $bin $ARGS > bench-trace-$side-$i.txt 2>&1
    read -r b1 p1 < <(lo)
    echo "$((b1 - b0)) $((p1 - p0))" > lo-$side-$i.txt
    perf record -a -g -o $side-$i.data -- $bin $ARGS > bench-record-$side-$i.txt 2>&1
    ./threads.py $side-$i.data > threads-$side-$i.txt
    rm -f $side-$i.data
  done
done
./counts.py
