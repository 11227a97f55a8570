#!/usr/bin/env python3
"""run.sh's runs: per run and size, the reduction server's share of the 1 Gbit/s link and its
algbw against Gloo's ring.

Usage: summary.py [FOLDER]"""
import glob
import json
import os
import sys

folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for path in sorted(glob.glob(os.path.join(folder, "w*.json"))):
    with open(path) as f:
        rows = json.load(f)["rows"]
    rs = {r["bytes"]: r["algbw_gbs"] for r in rows if r["algo"] == "rs"}
    gloo = {r["bytes"]: r["algbw_gbs"] for r in rows if r["algo"] == "gloo_ring"}
    print(os.path.basename(path)[:-5] + "  " + "  ".join(
        f"{b >> 20} MiB link {100 * rs[b] * 8:.1f}% rs/Gloo {rs[b] / gloo[b]:.2f}" for b in sorted(rs)))
