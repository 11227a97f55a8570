#!/bin/bash
# The profiles behind performance.md's note on the workers' TALLY_ZEROCOPY: one loopback run
# (4 workers, 2 reducers, 64 MiB) per mode under `perf record -a -g`, each side's split
# (scripts/perf_split.py) and the samples whose leaf is a copy or the pinning, by process.
# As root; writes next to itself.
cd "$(dirname "$0")"
ROOT=$(cd ../../../../.. && pwd)
for m in off always; do
  TALLY_ZEROCOPY=$m perf record -a -g -o zc-$m.data -- $ROOT/build/tools/tally bench --workers 4 \
    --reducers 2 --sizes 64M -n 5 -w 1 --algo rs > zc-$m.txt 2>&1
  python3 $ROOT/scripts/perf_split.py zc-$m.data > perf-split-$m.txt
done
for m in off always; do
  echo "== TALLY_ZEROCOPY=$m: samples whose leaf is a copy or pinning, by process"
  perf script -i zc-$m.data -F comm,ip,sym 2>/dev/null | awk 'BEGIN{RS=""} {
      split($0, a, "\n"); split(a[1], h, " "); s = a[2]
      sub(/^[ \t]*[0-9a-f]+ /, "", s); sub(/\+0x.*/, "", s)
      if (s ~ /_copy_from_iter|_copy_to_iter|__pi_memcpy|gup_fast|skb_copy_ubufs/) n[h[1] " " s]++
    } END { for (k in n) print n[k], k }' | sort -rn | head -8
done > copy-symbols.txt
rm -f zc-*.data zc-*.txt
