#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Medians of zerocopy.sh's runs per part, and `on` and `always` against `off` paired by round
(the median of the ratios and their range).

Usage: zerocopy_summary.py FOLDER"""
import glob
import json
import os
import statistics
import sys

KEYS = ["algbw_gbs", "worker_cpu_s_per_gib", "reducer_cpu_s_per_gib"]


def rs_row(path):
    with open(path) as f:
        return [r for r in json.load(f)["rows"] if r.get("algo") == "rs"][0]


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = sys.argv[1]
    for part in ["loop", "emu"]:
        rounds = sorted(int(p.rsplit("-", 1)[1][:-5])
                        for p in glob.glob(f"{folder}/{part}-off-*.json"))
        if not rounds:
            continue
        print(f"{part}: {len(rounds)} rounds")
        for key in KEYS:
            off = [rs_row(f"{folder}/{part}-off-{i}.json")[key] for i in rounds]
            line = f"  {key:24s} off {statistics.median(off):.3f}"
            for mode in ["on", "always"]:
                paths = [f"{folder}/{part}-{mode}-{i}.json" for i in rounds]
                if not all(os.path.exists(p) for p in paths):
                    continue
                vals = [rs_row(p)[key] for p in paths]
                ratios = [b / a for a, b in zip(off, vals)]
                line += (f" | {mode} {statistics.median(vals):.3f}, paired {mode}/off median"
                         f" {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
