#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Ratios of `tally bench --json` files, one line per file and size: rs/Gloo and rs/ring algbw
where those algorithms ran, and
  - on the emulated cluster, the reduction server's algbw as a share of the link rate (tbf counts
    whole frames, so TCP's payload tops out near 95.6% of it, docs/emulation.md);
  - on loopback, the workers' CPU per socket GiB against Gloo's ranks' and the reducers' CPU per
    GiB received.

Usage: ratios.py FOLDER|FILE.json..."""
import glob
import json
import os
import re
import sys

UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}


def link_bytes_per_s(rate):
    """tc's rate grammar as `tally bench --emulate` takes it (1gbit, 400mbit, 1500kbit), or None."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", (rate or "").lower())
    return float(m.group(1)) * UNITS[m.group(2)] / 8 if m else None


def lines(path):
    with open(path) as f:
        doc = json.load(f)
    rate = link_bytes_per_s(doc.get("options", {}).get("emulate"))
    by_size = {}
    for r in doc.get("rows", []):
        if r.get("present", True) and not r.get("skipped", False):
            by_size.setdefault(r["bytes"], {})[r["algo"]] = r
    name = os.path.basename(path)[:-5]
    for size in sorted(by_size):
        algos = by_size[size]
        rs = algos.get("rs")
        if rs is None:
            continue
        text = f"{name:20s} {size / 2**20:7.3f} MiB  rs {rs['algbw_gbs']:.4f} GB/s"
        gloo, ring = algos.get("gloo_ring"), algos.get("ring")
        if gloo:
            text += f"  rs/Gloo {rs['algbw_gbs'] / gloo['algbw_gbs']:.2f}"
        if ring:
            text += f"  rs/ring {rs['algbw_gbs'] / ring['algbw_gbs']:.2f}"
        if rate:
            text += f"  link {100 * rs['algbw_gbs'] * 1e9 / rate:.1f}%"
        else:
            w = rs.get("worker_cpu_s_per_socket_gib")
            g = gloo.get("worker_cpu_s_per_socket_gib") if gloo else None
            if w is not None and g:
                text += f"  worker s/sGiB rs {w:.3f} Gloo {g:.3f} ({w / g:.2f})"
            if rs.get("reducer_cpu_s_per_gib") is not None:
                text += f"  reducer s/GiB {rs['reducer_cpu_s_per_gib']:.3f}"
        yield text


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    paths = []
    for arg in sys.argv[1:]:
        paths += sorted(glob.glob(os.path.join(arg, "*.json"))) if os.path.isdir(arg) else [arg]
    for path in paths:
        for text in lines(path):
            print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
