#!/bin/bash
# recv_probe in each mode, ROUNDS rounds (default 6) interleaved; results.txt beside it and the
# medians. Needs liburing (apt-get install liburing-dev).
cd "$(dirname "$0")"
g++ -O2 -Wall -o /tmp/recv_probe recv_probe.cc -luring -lpthread || exit 1
for i in $(seq 1 "${ROUNDS:-6}"); do
  for mode in epoll uring fixed; do /tmp/recv_probe $mode; done
done | tee results.txt
python3 - <<'PY'
import collections, re, statistics
vals = collections.defaultdict(list)
for line in open("results.txt"):
    m = re.match(r"(\w+)\s+receiver ([\d.]+) s/GiB\s+senders ([\d.]+) s/GiB\s+([\d.]+) GB/s", line)
    if m:
        vals[m.group(1)].append(tuple(float(m.group(k)) for k in (2, 3, 4)))
for mode, v in vals.items():
    med = [statistics.median(x[k] for x in v) for k in range(3)]
    print(f"{mode:6s} median receiver {med[0]:.3f} s/GiB, senders {med[1]:.3f} s/GiB, "
          f"{med[2]:.2f} GB/s ({len(v)} runs)")
PY
