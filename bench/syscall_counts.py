#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""syscall_counts.sh's counts as a table: system calls per run by kind and side (from
`perf trace -s`), the bytes and packets loopback carried, and the workers' CPU samples by
thread (samples_by_thread.py); means over the pairs, and after/before.

Usage: syscall_counts.py FOLDER"""
import collections
import glob
import re
import statistics
import sys

KINDS = {
    "socket receives": {"recvfrom", "recvmsg"},
    "socket sends": {"sendmsg", "sendto"},
    "epoll_wait": {"epoll_wait"},
    "futex": {"futex"},
    "driver polling (sched_yield, clock_nanosleep)": {"sched_yield", "clock_nanosleep"},
}
WORKER_SAMPLES = ["driver polling", "driver other", "plugin threads"]


def syscalls(path):
    """{(side, kind): calls} of one `perf trace -s` summary; side: workers or reducers."""
    out = collections.Counter()
    comm = None
    with open(path) as f:
        for line in f:
            m = re.match(r"^ (\S+) \((\d+)\), (\d+) events", line)
            if m:
                comm = {"tally": "workers", "tally-reducer": "reducers"}.get(m.group(1))
                continue
            m = re.match(r"^\s+(\w+)\s+(\d+)\s+(\d+)\s", line)
            if not m or comm is None or m.group(1) == "syscall":
                continue
            out[(comm, "all")] += int(m.group(2))
            for kind, names in KINDS.items():
                if m.group(1) in names:
                    out[(comm, kind)] += int(m.group(2))
    return out


def samples(path):
    with open(path) as f:
        return {k: int(v) for k, v in (line.rstrip("\n").split("\t") for line in f if "\t" in line)}


def row(label, before, after):
    ratio = after / before if before else float("nan")
    print(f"| {label} | {before:,.0f} | {after:,.0f} | {ratio:.3f} |")


def mean_over(folder, pattern, fn):
    files = sorted(glob.glob(f"{folder}/{pattern}"))
    return statistics.mean(fn(f) for f in files) if files else float("nan")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = sys.argv[1]
    print("| per run (means of the pairs) | before | after | after/before |")
    print("|---|---|---|---|")
    for side in ["workers", "reducers"]:
        for kind in ["all"] + list(KINDS):
            if side == "reducers" and kind.startswith("driver"):
                continue
            vals = [mean_over(folder, f"trace-{build}-*.txt", lambda f: syscalls(f)[(side, kind)])
                    for build in ("before", "after")]
            row(f"{side}: syscalls, {kind}", *vals)
    for i, label in enumerate(["loopback bytes", "loopback packets"]):
        vals = [mean_over(folder, f"lo-{build}-*.txt", lambda f: int(open(f).read().split()[i]))
                for build in ("before", "after")]
        row(label, *vals)
    for label, keys in [("worker samples outside the harness", WORKER_SAMPLES),
                        ("  of them the driver's idle polling", ["driver polling"]),
                        ("  of them the rest of the driver's thread", ["driver other"]),
                        ("  of them the plugin's threads", ["plugin threads"]),
                        ("worker samples outside the harness and the polling",
                         ["driver other", "plugin threads"]),
                        ("reducer samples", ["reducers"])]:
        vals = [mean_over(folder, f"threads-{build}-*.txt",
                          lambda f: sum(samples(f).get(k, 0) for k in keys))
                for build in ("before", "after")]
        row(label, *vals)
    for label, keys in [("outside the harness", WORKER_SAMPLES),
                        ("outside the harness and the polling",
                         ["driver other", "plugin threads"])]:
        ratios = []
        for f in sorted(glob.glob(f"{folder}/threads-after-*.txt")):
            sa, sb = samples(f), samples(f.replace("threads-after-", "threads-before-"))
            after, before = (sum(s.get(k, 0) for k in keys) for s in (sa, sb))
            ratios.append(after / max(1, before))
        if ratios:
            print(f"paired after/before, worker samples {label}: "
                  + " ".join(f"{r:.3f}" for r in ratios)
                  + f"; median {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
