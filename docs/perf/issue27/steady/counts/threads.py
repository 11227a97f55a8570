#!/usr/bin/env python3
"""A worker's CPU samples by thread, from a `perf record -a -g` of `tally bench`: the bench's
input fill and checks (harness), the driver's idle polling between test() calls (sched_yield,
usleep), the rest of the driver's main thread (posting, test(), the slot copies) and the other
threads (the plugin's progress and link threads); and the reducers' samples. Usage: threads.py
perf.data"""
import collections
import re
import subprocess
import sys

HARNESS = (r"floatInput|fillExpected|randomBits|fillInput|encodeExact|countMismatches|"
           r"checkResult|expectedValue|expectedSum|countWrong|inputValue|__memset|__memcmp")
POLL = r"sched_yield|nanosleep|usleep|IdleBackoff"

text = subprocess.run(["perf", "script", "-i", sys.argv[1], "-F", "comm,pid,tid,ip,sym"],
                      capture_output=True, text=True, check=True).stdout
counts = collections.Counter()
for block in text.split("\n\n"):
    lines = block.strip().splitlines()
    if len(lines) < 2:
        continue
    head = lines[0].split()
    if head[0] == "tally-reducer":
        counts["reducers"] += 1
        continue
    if head[0] != "tally" or "/" not in head[1]:
        continue
    pid, tid = head[1].split("/")
    if re.search(HARNESS, block):
        counts["harness"] += 1
    elif re.search(POLL, block):
        counts["driver polling"] += 1
    elif pid == tid:
        counts["driver other"] += 1
    else:
        counts["plugin threads"] += 1
for k in ["harness", "driver polling", "driver other", "plugin threads", "reducers"]:
    print(f"{k}\t{counts[k]}")
