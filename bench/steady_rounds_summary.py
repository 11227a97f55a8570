#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Medians of steady_rounds.sh's runs: per part and size, time, algbw and CPU per GiB before and
after, and their after/before ratios.

Usage: steady_rounds_summary.py FOLDER"""
import glob
import json
import os
import statistics
import sys

KEYS = ("time_us", "algbw_gbs", "worker_cpu_s_per_gib", "reducer_cpu_s_per_gib")


def rs_rows(path):
    with open(path) as f:
        doc = json.load(f)
    return [r for r in doc.get("rows", []) if r.get("algo") == "rs" and r.get("present", True)]


def medians(folder, part, side):
    """{bytes: {"runs": n, key: median}} over the part's runs of one side."""
    by_size = {}
    for path in sorted(glob.glob(os.path.join(folder, f"{part}-{side}-*.json"))):
        for r in rs_rows(path):
            by_size.setdefault(r["bytes"], []).append(r)
    out = {}
    for size, rows in by_size.items():
        entry = {"runs": len(rows)}
        for key in KEYS:
            vals = [r[key] for r in rows if r.get(key) is not None and r[key] >= 0]
            entry[key] = statistics.median(vals) if vals else float("nan")
        out[size] = entry
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = os.path.abspath(sys.argv[1])
    for part in ("loop", "small", "emu"):
        before, after = medians(folder, part, "before"), medians(folder, part, "after")
        for size in sorted(set(before) & set(after)):
            b, a = before[size], after[size]
            print(f"{part} {size} bytes ({b['runs']} + {a['runs']} runs)")
            for key in KEYS:
                ratio = a[key] / b[key] if b[key] else float("nan")
                print(f"  {key:22s} before {b[key]:10.4f}  after {a[key]:10.4f}  "
                      f"after/before {ratio:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
