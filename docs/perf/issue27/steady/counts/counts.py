#!/usr/bin/env python3
"""Summary of run.sh's counts: syscalls per run by kind and side (perf trace -s), loopback bytes
and packets, and worker CPU samples by thread (threads.py), means over the pairs, after/before."""
import collections
import glob
import re
import statistics
import sys

folder = sys.argv[1] if len(sys.argv) > 1 else "."
KINDS = {
    "socket receives": {"recvfrom", "recvmsg"},
    "socket sends": {"sendmsg", "sendto"},
    "epoll_wait": {"epoll_wait"},
    "futex": {"futex"},
    "driver polling (sched_yield, clock_nanosleep)": {"sched_yield", "clock_nanosleep"},
}


def syscalls(path):
    """{(side, kind): calls} of one perf trace -s summary; side: workers or reducers."""
    out = collections.Counter()
    comm = None
    for line in open(path):
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


def mean(side, fn):
    values = [fn(p) for p in sorted(glob.glob(f"{folder}/{side}-*"))]
    return statistics.mean(values) if values else float("nan")


def row(label, before, after):
    ratio = after / before if before else float("nan")
    print(f"| {label} | {before:,.0f} | {after:,.0f} | {ratio:.3f} |")


print("| per run (means of the pairs) | before | after | after/before |")
print("|---|---|---|---|")
for side in ["workers", "reducers"]:
    for kind in ["all"] + list(KINDS):
        if side == "reducers" and kind.startswith("driver"):
            continue
        vals = {}
        for build in ["before", "after"]:
            files = sorted(glob.glob(f"{folder}/trace-{build}-*.txt"))
            vals[build] = statistics.mean(syscalls(f)[(side, kind)] for f in files)
        row(f"{side}: syscalls, {kind}", vals["before"], vals["after"])
for i, label in enumerate(["loopback bytes", "loopback packets"]):
    vals = {}
    for build in ["before", "after"]:
        files = sorted(glob.glob(f"{folder}/lo-{build}-*.txt"))
        vals[build] = statistics.mean(int(open(f).read().split()[i]) for f in files)
    row(label, vals["before"], vals["after"])


def samples(path):
    return {k: int(v) for k, v in (line.split("\t") for line in open(path) if "\t" in line)}


for label, keys in [("worker samples outside the harness", ["driver polling", "driver other",
                                                             "plugin threads"]),
                    ("  of them the driver's idle polling", ["driver polling"]),
                    ("  of them the rest of the driver's thread", ["driver other"]),
                    ("  of them the plugin's threads", ["plugin threads"]),
                    ("worker samples outside the harness and the polling",
                     ["driver other", "plugin threads"]),
                    ("reducer samples", ["reducers"])]:
    vals = {}
    for build in ["before", "after"]:
        files = sorted(glob.glob(f"{folder}/threads-{build}-*.txt"))
        vals[build] = statistics.mean(sum(samples(f).get(k, 0) for k in keys) for f in files)
    row(label, vals["before"], vals["after"])
# Paired ratios of the worker samples outside the harness, with and without the polling.
for label, keys in [("outside the harness", ["driver polling", "driver other", "plugin threads"]),
                    ("outside the harness and the polling", ["driver other", "plugin threads"])]:
    ratios = []
    for f in sorted(glob.glob(f"{folder}/threads-after-*.txt")):
        b = f.replace("after", "before")
        sa, sb = samples(f), samples(b)
        ratios.append(sum(sa.get(k, 0) for k in keys) / max(1, sum(sb.get(k, 0) for k in keys)))
    print(f"paired after/before, worker samples {label}: " +
          " ".join(f"{r:.3f}" for r in ratios) + f"; median {statistics.median(ratios):.3f}")
