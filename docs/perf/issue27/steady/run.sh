#!/bin/bash
# The steady-state cost of reducer failover (issue 27, item 8): interleaved runs of the
# reduction server without faults, a build of the commit before failover (OLD) against this one
# (NEW), on loopback (4 workers, 2 reducers, 64 MiB) and on the emulated cluster at 400 Mbit/s
# (4 + 4, 64 MiB, root), and the small-call latency the commit round trip adds. Writes its JSON
# and tables next to itself, or in OUT; summary.py [OUT] gives the medians and ratios. PARTS
# picks what runs (default "loop small emu"); commit/ is OUT=commit PARTS=small LOOP_ROUNDS=8,
# taken while every call waited for its Commit, and prompt/ the same with small calls done at
# landing again (their slices summed again at once after a loss).
# OLD: git worktree add ../before 9ce778e && cmake -S ../before -B ../before/build -G Ninja &&
#      cmake --build ../before/build --target tally tally-reducer nccl-net-tally
cd "$(dirname "$0")"
ROOT=$(cd ../../../.. && pwd)
OUT=${OUT:-.}
mkdir -p "$OUT" && cd "$OUT"
NEW=${NEW:-$ROOT/build/tools/tally}
OLD=${OLD:-$ROOT/../before/build/tools/tally}
LOOP_ROUNDS=${LOOP_ROUNDS:-5}
EMU_ROUNDS=${EMU_ROUNDS:-3}
PARTS=${PARTS:-loop small emu}
part() { [[ " $PARTS " == *" $1 "* ]]; }
for i in $(seq 1 "$LOOP_ROUNDS"); do
  for side in before after; do
    bin=$OLD; [ $side = after ] && bin=$NEW
    part loop && $bin bench --workers 4 --reducers 2 --sizes 64M -n 5 -w 1 --algo rs \
      --json loop-$side-$i.json > loop-$side-$i.txt 2>&1
    part small && $bin bench --workers 4 --reducers 2 --sizes 4K,1M -n 200 -w 20 --algo rs \
      --json small-$side-$i.json > small-$side-$i.txt 2>&1
  done
done
part emu || { echo done; exit 0; }
for i in $(seq 1 "$EMU_ROUNDS"); do
  for side in before after; do
    bin=$OLD; [ $side = after ] && bin=$NEW
    $bin bench --emulate 400mbit --workers 4 --reducers 4 --sizes 64M -n 3 -w 1 --algo rs \
      --json emu-$side-$i.json > emu-$side-$i.txt 2>&1
  done
done
echo done
