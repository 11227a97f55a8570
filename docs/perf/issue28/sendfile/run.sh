#!/bin/bash
# sendfile_probe in each mode, ROUNDS rounds (default 6) interleaved; results.txt beside it.
cd "$(dirname "$0")"
g++ -O2 -Wall -o /tmp/sendfile_probe sendfile_probe.cc -lpthread || exit 1
for i in $(seq 1 "${ROUNDS:-6}"); do
  for mode in send sendfile punch; do /tmp/sendfile_probe $mode; done
done | tee results.txt
python3 - <<'PY'
import re, statistics, collections
vals = collections.defaultdict(list)
for line in open("results.txt"):
    m = re.match(r"(\w+)\s+sender ([\d.]+) s/GiB\s+readers ([\d.]+)", line)
    if m:
        vals[m.group(1)].append((float(m.group(2)), float(m.group(3))))
for mode, v in vals.items():
    print(f"{mode:8s} median sender {statistics.median(x for x, _ in v):.3f} s/GiB, "
          f"readers {statistics.median(y for _, y in v):.3f} s/GiB ({len(v)} runs)")
PY
