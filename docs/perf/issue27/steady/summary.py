#!/usr/bin/env python3
"""Medians of run.sh's runs: algbw and CPU per GiB, before and after, and their ratios.

Usage: summary.py [FOLDER]   (default: this script's folder)"""
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def rows(path):
    with open(path) as f:
        doc = json.load(f)
    return [r for r in doc.get("rows", []) if r.get("algo") == "rs" and r.get("present", True)]


def medians(folder, group, side):
    by_size = {}
    for path in sorted(glob.glob(os.path.join(folder, f"{group}-{side}-*.json"))):
        for r in rows(path):
            by_size.setdefault(r["bytes"], []).append(r)
    out = {}
    for size, rs in by_size.items():
        def med(key):
            vals = [r[key] for r in rs if r.get(key, -1) is not None and r.get(key, -1) >= 0]
            return statistics.median(vals) if vals else float("nan")
        out[size] = {
            "runs": len(rs),
            "time_us": med("time_us"),
            "algbw_gbs": med("algbw_gbs"),
            "worker_cpu_s_per_gib": med("worker_cpu_s_per_gib"),
            "reducer_cpu_s_per_gib": med("reducer_cpu_s_per_gib"),
        }
    return out


def main():
    folder = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else HERE
    for group in ("loop", "small", "emu"):
        before, after = medians(folder, group, "before"), medians(folder, group, "after")
        for size in sorted(set(before) & set(after)):
            b, a = before[size], after[size]
            print(f"{group} {size} bytes ({b['runs']} + {a['runs']} runs)")
            for key in ("time_us", "algbw_gbs", "worker_cpu_s_per_gib", "reducer_cpu_s_per_gib"):
                ratio = a[key] / b[key] if b[key] else float("nan")
                print(f"  {key:20s} before {b[key]:10.4f}  after {a[key]:10.4f}  after/before {ratio:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
