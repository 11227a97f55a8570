#!/usr/bin/env python3
"""Issue 28's targets from run.sh's runs: per file and size, rs/Gloo and rs/ring algbw, the share
of the link (emulated), the workers' CPU per socket GiB against Gloo's ranks and the reducers'
CPU per GiB received (loopback).

Usage: summary.py [FOLDER]   (default: this script's folder)"""
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RATES = {"1gbit": 1e9 / 8, "400mbit": 400e6 / 8, "200mbit": 200e6 / 8}


def main():
    folder = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else HERE
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        name = os.path.basename(path)[:-5]
        with open(path) as f:
            rows = [r for r in json.load(f)["rows"] if r.get("present", True)]
        by = {}
        for r in rows:
            by.setdefault(r["bytes"], {})[r["algo"]] = r
        for size in sorted(by):
            a = by[size]
            if not all(k in a for k in ("rs", "ring", "gloo_ring")):
                continue
            rs, ring, gloo = a["rs"], a["ring"], a["gloo_ring"]
            line = (f"{name:16s} {size >> 20:3d} MiB  rs/Gloo {rs['algbw_gbs'] / gloo['algbw_gbs']:.2f}"
                    f"  rs/ring {rs['algbw_gbs'] / ring['algbw_gbs']:.2f}")
            rate = RATES.get(name.split("-")[0])
            if rate:
                line += f"  link {100 * rs['algbw_gbs'] * 1e9 / rate:.1f}%"
            else:
                w, g = rs["worker_cpu_s_per_socket_gib"], gloo["worker_cpu_s_per_socket_gib"]
                line += (f"  worker s/sGiB rs {w:.3f} Gloo {g:.3f} ({w / g:.2f})"
                         f"  reducer s/GiB {rs['reducer_cpu_s_per_gib']:.3f}")
            print(line)


if __name__ == "__main__":
    main()
