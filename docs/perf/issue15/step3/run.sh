#!/bin/bash
# Interleaved before/after runs on the emulated cluster (issue 15: slices per link speed, the
# nodes' TCP pinned). As root, from anywhere; writes its JSON and tables next to itself.
# OLD: a build of the commit before (git worktree add ../before15 fcb8f39, built the same way).
cd "$(dirname "$0")"
ROOT=$(cd ../../../.. && pwd)
NEW=${NEW:-$ROOT/build/tools/tally}
OLD=${OLD:-$ROOT/../before15/build/tools/tally}
run() { # name rate round binary [env...] -- [bench flags...]
  local name=$1 rate=$2 i=$3 bin=$4; shift 4
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" $bin bench --emulate $rate --workers 4 --reducers 4 --sizes 4M,64M -n 3 -w 1 --algo rs,ring,gloo_ring --json $name-$rate-$i.json "$@" > $name-$rate-$i.txt 2>&1
}
for rate in 1gbit 400mbit; do
  rounds=3; [ $rate = 400mbit ] && rounds=2
  for i in $(seq 1 $rounds); do
    run before $rate $i $OLD --
    run after-bbr $rate $i $NEW -- --emulate-cc host
    run after-32k $rate $i $NEW TALLY_MIN_SLICE_BYTES=32K --
    run after $rate $i $NEW --
  done
done
for i in 1; do
  $OLD bench --emulate 200mbit --workers 8 --reducers 8 --sizes 4M,64M -n 2 -w 1 --algo rs,ring,gloo_ring --json before-8x200-$i.json > before-8x200-$i.txt 2>&1
  $NEW bench --emulate 200mbit --workers 8 --reducers 8 --sizes 4M,64M -n 2 -w 1 --algo rs,ring,gloo_ring --json after-8x200-$i.json > after-8x200-$i.txt 2>&1
done
echo done
