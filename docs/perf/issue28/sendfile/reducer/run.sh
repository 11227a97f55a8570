#!/bin/bash
# The reducer with ../reducer-sendfile.patch (results by sendfile from memfd-backed buffers, each
# held until its rank's next slices show it was read) against copying, on loopback (4 workers,
# 2 reducers, 64 MiB, 10 timed calls), interleaved rounds: on (the patch), off (--sendfile off:
# heap buffers, copied as in main), mem (memfd buffers, copied: LoopPeer's by_file_ set false,
# which the recorded run's build read from TALLY_HACK_NOSF; the patch does not have that line, so
# add it, or mem runs as on). Run from a tree with the patch
# applied and built (the patch is against 8eeb877: git worktree add /tmp/sf 8eeb877, then git -C
# /tmp/sf apply this folder's ../reducer-sendfile.patch, and build): TREE=/tmp/sf ./run.sh;
# summary.py prints the medians.
cd "$(dirname "$0")"
TREE=${TREE:?the tree with the patch applied and built}
for m in on off; do
  printf '#!/bin/sh\nexec %s "$@" --sendfile %s\n' "$TREE/build/reducer/tally-reducer" $m > red-$m.sh
done
printf '#!/bin/sh\nTALLY_HACK_NOSF=1 exec %s "$@" --sendfile on\n' "$TREE/build/reducer/tally-reducer" > red-mem.sh
chmod +x red-*.sh
for i in $(seq 1 "${ROUNDS:-6}"); do
  for m in on off mem; do
    "$TREE/build/tools/tally" bench --reducer "$PWD/red-$m.sh" --workers 4 --reducers 2 --sizes 64M \
      -n 10 -w 1 --algo rs > r-$m-$i.txt 2>&1
  done
done
rm -f red-*.sh
./summary.py
