#!/usr/bin/env python3
"""Ratios of run.sh's runs: rs/Gloo and rs/ring algbw, and the reduction server's share of the
link (algbw against the link rate in bytes per second), per file and size.

Usage: summary.py [FOLDER]   (default: this script's folder)"""
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RATES = {"1gbit": 1e9 / 8, "400mbit": 400e6 / 8}


def main():
    folder = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else HERE
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        name = os.path.basename(path)[:-5]
        rate = RATES[re.match(r"(\d+[mg]bit)", name).group(1)]
        with open(path) as f:
            rows = json.load(f)["rows"]
        by = {}
        for r in rows:
            if r.get("present", True):
                by.setdefault(r["bytes"], {})[r["algo"]] = r["algbw_gbs"] * 1e9
        for size in sorted(by):
            a = by[size]
            rs = a.get("rs")
            gloo = a.get("gloo_ring")
            ring = a.get("ring")
            print(f"{name:18s} {size >> 20:3d} MiB  rs {rs / 1e9:.4f} GB/s  "
                  f"rs/gloo {rs / gloo if gloo else float('nan'):.2f}  "
                  f"rs/ring {rs / ring if ring else float('nan'):.2f}  link {rs / rate:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
