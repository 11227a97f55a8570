#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A `perf record -a -g` of `tally bench` split by thread: the workers' samples in the bench's
input fill and checks (harness), in the driver's idle polling between test() calls
(sched_yield, usleep), in the rest of the driver's main thread (posting, test(), the staging
copies) and in the other threads (the plugin's own); and the reducers' samples. Prints one
"name<TAB>count" line each.

Usage: samples_by_thread.py perf.data"""
import collections
import re
import subprocess
import sys

HARNESS = (r"floatInput|fillExpected|randomBits|fillInput|encodeExact|countMismatches|"
           r"checkResult|expectedValue|expectedSum|countWrong|inputValue|__memset|__memcmp")
POLL = r"sched_yield|nanosleep|usleep|IdleBackoff"
NAMES = ("harness", "driver polling", "driver other", "plugin threads", "reducers")


def classify(script_text):
    counts = collections.Counter()
    for block in script_text.split("\n\n"):
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
    return counts


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    text = subprocess.run(["perf", "script", "-i", sys.argv[1], "-F", "comm,pid,tid,ip,sym"],
                          capture_output=True, text=True, check=True).stdout
    counts = classify(text)
    for name in NAMES:
        print(f"{name}\t{counts[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
