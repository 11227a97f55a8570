#!/usr/bin/env python3
"""Medians of window/run.sh's runs, by build and window: algbw and CPU per GiB.
Usage: median.py FOLDER"""
import collections, glob, json, os, statistics, sys

runs = collections.defaultdict(list)
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    runs[os.path.basename(path).split("-")[0]].append(json.load(open(path))["rows"][0])
for name in sorted(runs, key=lambda n: (n != "old", n)):
    rows = runs[name]
    med = lambda k: statistics.median(r[k] for r in rows)
    print(f"{name:4s} {len(rows):3d} runs  algbw {med('algbw_gbs'):.4f}  "
          f"wcpu {med('worker_cpu_s_per_gib'):.4f}  rcpu {med('reducer_cpu_s_per_gib'):.4f}")
