#!/usr/bin/env python3
"""Per pair of run.sh: samples outside the harness after/before, per side, and algbw after/before."""
import glob
import os
import re
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def samples(path):
    out = {}
    for line in open(path):
        m = re.match(r"(\w+): \d+ samples; shares of the (\d+) outside", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def algbw(path):
    for line in open(path):
        if line.strip().startswith("67108864"):
            return float(line.split()[5])
    return float("nan")


ratios = {"workers": [], "reducers": [], "algbw": []}
pairs = sorted(int(p.rsplit("-", 1)[1][:-6]) for p in glob.glob(f"{HERE}/after-*.split"))
for i in pairs:
    b, a = samples(f"{HERE}/before-{i}.split"), samples(f"{HERE}/after-{i}.split")
    row = {k: a[k] / b[k] for k in ("workers", "reducers")}
    row["algbw"] = algbw(f"{HERE}/after-{i}.txt") / algbw(f"{HERE}/before-{i}.txt")
    for k, v in row.items():
        ratios[k].append(v)
    print(f"pair {i}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()))
for k, v in ratios.items():
    print(f"median {k} after/before: {statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})")
