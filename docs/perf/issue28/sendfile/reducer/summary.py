#!/usr/bin/env python3
"""Medians of run.sh's rounds: algbw, worker and reducer CPU per GiB, by mode."""
import glob
import os
import re
import statistics

here = os.path.dirname(os.path.abspath(__file__))
for mode in ("off", "mem", "on"):
    rows = []
    for path in sorted(glob.glob(os.path.join(here, f"r-{mode}-*.txt"))):
        for line in open(path):
            f = line.split()
            if len(f) >= 10 and f[0] == "67108864" and re.match(r"[\d.]+$", f[5]):
                rows.append((float(f[5]), float(f[8]), float(f[9])))
    if rows:
        med = [statistics.median(r[i] for r in rows) for i in range(3)]
        print(f"{mode:4s} {len(rows)} runs: algbw {med[0]:.3f} GB/s, worker {med[1]:.3f} s/GiB, "
              f"reducer {med[2]:.3f} s/GiB")
