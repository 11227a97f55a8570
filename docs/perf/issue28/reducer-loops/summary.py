#!/usr/bin/env python3
"""run.sh's pairs: medians of one loop and two loops per reducer, the paired ratio one/two and
a 95% bootstrap interval for its median (seeded); then the emulated runs, if any.

Usage: summary.py [FOLDER]"""
import glob
import json
import os
import random
import statistics
import sys

folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def rows(path):
    with open(path) as f:
        return [r for r in json.load(f)["rows"] if r["algo"] == "rs"]


pairs = sorted(int(p.rsplit("-", 1)[1][:-5]) for p in glob.glob(f"{folder}/t1-*.json"))
pairs = [i for i in pairs if os.path.exists(f"{folder}/t2-{i}.json")]
print(f"loopback: {len(pairs)} pairs")
random.seed(1)
for key in ["algbw_gbs", "worker_cpu_s_per_gib", "reducer_cpu_s_per_gib"]:
    one = [rows(f"{folder}/t1-{i}.json")[0][key] for i in pairs]
    two = [rows(f"{folder}/t2-{i}.json")[0][key] for i in pairs]
    ratios = [a / b for a, b in zip(one, two)]
    boots = sorted(statistics.median(random.choices(ratios, k=len(ratios))) for _ in range(2000))
    print(f"  {key:24s} one loop {statistics.median(one):.3f}  two {statistics.median(two):.3f}"
          f"  paired one/two {statistics.median(ratios):.3f}"
          f" (95% {boots[50]:.3f}-{boots[1949]:.3f})")
for path in sorted(glob.glob(f"{folder}/e*.json")):
    name = os.path.basename(path)[:-5]
    print(f"{name}: " + "  ".join(
        f"{r['bytes'] >> 20} MiB {r['algbw_gbs']:.4f} GB/s, reducer {r['reducer_cpu_s_per_gib']:.3f}"
        f" s/GiB" for r in rows(path)))
