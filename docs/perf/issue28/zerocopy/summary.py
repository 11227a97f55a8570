#!/usr/bin/env python3
"""Medians of run.sh's runs, --zerocopy on and always against off, and the paired ratios.

Usage: summary.py [FOLDER]   (default: this script's folder)"""
import glob
import json
import os
import statistics
import sys

folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
KEYS = ["algbw_gbs", "worker_cpu_s_per_gib", "reducer_cpu_s_per_gib"]


def row(path):
    with open(path) as f:
        return [r for r in json.load(f)["rows"] if r.get("algo") == "rs"][0]


for part in ["loop", "emu"]:
    rounds = sorted(int(p.rsplit("-", 1)[1][:-5]) for p in glob.glob(f"{folder}/{part}-off-*.json"))
    rounds = [i for i in rounds if os.path.exists(f"{folder}/{part}-always-{i}.json")]
    if not rounds:
        continue
    print(f"{part}: {len(rounds)} rounds")
    for key in KEYS:
        off = [row(f"{folder}/{part}-off-{i}.json")[key] for i in rounds]
        line = f"  {key:24s} off {statistics.median(off):.3f}"
        for mode in ["on", "always"]:
            paths = [f"{folder}/{part}-{mode}-{i}.json" for i in rounds]
            if not all(os.path.exists(p) for p in paths):
                continue
            vals = [row(p)[key] for p in paths]
            ratios = [b / a for a, b in zip(off, vals)]
            line += (f" | {mode} {statistics.median(vals):.3f}, paired {mode}/off median"
                     f" {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
        print(line)
