#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Paired after/before ratios of steady_pairs.sh's runs (algbw, worker and reducer CPU per GiB):
the medians of each side, the median of the paired ratios, its quartiles, and a 95% bootstrap
interval for that median (seeded, so a folder always gives the same table).

Usage: pairs.py FOLDER"""
import glob
import json
import os
import random
import re
import statistics
import sys


def rs_row(path):
    with open(path) as f:
        rows = [r for r in json.load(f).get("rows", []) if r.get("algo") == "rs"]
    return rows[0] if rows else None


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = sys.argv[1]
    pairs = []
    for after in glob.glob(os.path.join(folder, "loop-after-*.json")):
        i = int(re.search(r"-(\d+)\.json$", after).group(1))
        before = os.path.join(folder, f"loop-before-{i}.json")
        if not os.path.exists(before):
            continue
        a, b = rs_row(after), rs_row(before)
        if a and b and a.get("wrong", 0) == 0 and b.get("wrong", 0) == 0:
            pairs.append((i, a, b))
    pairs.sort(key=lambda p: p[0])
    print(f"{len(pairs)} pairs")
    if len(pairs) < 2:
        return 1
    rng = random.Random(27)
    for key in ("algbw_gbs", "worker_cpu_s_per_gib", "reducer_cpu_s_per_gib"):
        ratios = [a[key] / b[key] for _, a, b in pairs if b[key] > 0 and a[key] > 0]
        if len(ratios) < 2:
            continue
        q = statistics.quantiles(ratios, n=4)
        boots = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
        before = statistics.median(b[key] for _, _, b in pairs)
        after = statistics.median(a[key] for _, a, _ in pairs)
        print(f"{key:24s} medians before {before:.4f} after {after:.4f} ({after / before:.3f}); "
              f"paired median {statistics.median(ratios):.3f}, quartiles {q[0]:.3f}-{q[2]:.3f}, "
              f"95% interval of the median {boots[50]:.3f}-{boots[1949]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
