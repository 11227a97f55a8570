#!/bin/bash
# The emulated 400 Mbit/s row, 4 + 4, 4 MiB, before and after the benches' back-to-back timing:
# ROUNDS interleaved rounds (default 4), Gloo's ring and Tally's ring beside. OLD: the tree
# before's tools/tally, in a build folder's layout; as root. Writes next to itself.
cd "$(dirname "$0")"
ROOT=$(cd ../../../../.. && pwd)
NEW=$ROOT/build/tools/tally
OLD=${OLD:?OLD=path to the tree-before build\'s tools/tally}
for i in $(seq 1 "${ROUNDS:-4}"); do
  order="old new"; [ $((i % 2)) = 0 ] && order="new old"
  for side in $order; do
    bin=$NEW; [ $side = old ] && bin=$OLD
    $bin bench --emulate 400mbit --workers 4 --reducers 4 --sizes 4M -n 3 -w 1 \
      --algo rs,ring,gloo_ring --json $side-$i.json > $side-$i.txt 2>&1
  done
done
for f in old-*.json new-*.json; do
  python3 -c "
import json, sys
rows = {r['algo']: r for r in json.load(open('$f'))['rows']}
print('$f', 'rs/Gloo %.2f rs/ring %.2f' % (rows['rs']['algbw_gbs'] / rows['gloo_ring']['algbw_gbs'],
                                   rows['rs']['algbw_gbs'] / rows['ring']['algbw_gbs']))"
done
