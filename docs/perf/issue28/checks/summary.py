#!/usr/bin/env python3
"""run.sh's rounds, old (checks between the timed calls) against new (back to back): per case,
each algorithm's time against the link's payload ceiling (emulated; tbf counts whole frames, so
TCP's payload tops out at 1448/1514 of the rate) or its algbw (loopback), rs/Gloo, and the
reducers' and workers' CPU per GiB.

Usage: summary.py [FOLDER]   (default: this script's folder)"""
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CEILING = 1e9 / 8 * 1448 / 1514  # bytes/s of TCP payload under a 1 Gbit/s tbf
ALGOS = ("rs", "ring", "gloo_ring")


def load(path):
    with open(path) as f:
        return {(r["algo"], r["bytes"]): r for r in json.load(f)["rows"] if r.get("present", True)}


def main():
    folder = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else HERE
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        m = re.match(r"(1gbit|loop)-(old|new)-(\d+)\.json$", os.path.basename(path))
        if m:
            runs.setdefault((m.group(1), m.group(2)), []).append(load(path))
    for (case, side), rounds in sorted(runs.items()):
        sizes = sorted({b for rows in rounds for (_, b) in rows})
        for size in sizes:
            cols = []
            for algo in ALGOS:
                vals = []
                for rows in rounds:
                    r = rows.get((algo, size))
                    if not r:
                        continue
                    if case == "1gbit":
                        ideal = size / CEILING * (1.5 if algo != "rs" else 1.0)
                        vals.append(f"{ideal * 1e6 / r['time_us']:.3f}")
                    else:
                        vals.append(f"{r['algbw_gbs']:.3f}")
                cols.append(f"{algo} {','.join(vals)}")
            ratio = [rows[("rs", size)]["algbw_gbs"] / rows[("gloo_ring", size)]["algbw_gbs"]
                     for rows in rounds if ("rs", size) in rows and ("gloo_ring", size) in rows]
            red = [rows[("rs", size)]["reducer_cpu_s_per_gib"] for rows in rounds if ("rs", size) in rows]
            wrk = [rows[("rs", size)]["worker_cpu_s_per_socket_gib"] for rows in rounds if ("rs", size) in rows]
            what = "of ceiling" if case == "1gbit" else "algbw GB/s"
            print(f"{case:5s} {side} {size >> 20:2d} MiB  {what}: {'  '.join(cols)}")
            print(f"{'':15s}rs/Gloo {','.join(f'{x:.2f}' for x in ratio)}"
                  f"  rs reducer s/GiB {','.join(f'{x:.3f}' for x in red)}"
                  f"  rs worker s/sGiB {','.join(f'{x:.3f}' for x in wrk)}")


if __name__ == "__main__":
    main()
