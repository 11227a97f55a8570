#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Classifies every sample of a `perf record -a -g` of `tally bench` by what its call stack is
# doing, per process kind (workers: comm "tally", reducers: "tally-reducer"), as shares of all
# samples (docs/performance.md, "Where the CPU goes"). Usage: scripts/perf_classify.py perf.data
import collections, re, subprocess, sys
classes = [  # first match wins, tested against the whole stack
  ("harness (fill/check, outside timed calls)", r"floatInput|fillExpected|randomBits|fillInput|encodeExact|countMismatches|__memcmp|runBench.*lambda.*\n.*__memset|__memset"),
  ("page faults", r"exc_page_fault"),
  ("futex, condvars, scheduler (thread hand-offs)", r"futex|pthread_cond|__condvar|__schedule|schedule\b|try_to_wake_up|sched_yield|nanosleep"),
  ("epoll", r"epoll_wait|do_epoll"),
  ("send path (sendmsg, TCP out)", r"sendmsg|tcp_sendmsg|__tcp_transmit|ip_finish_output"),
  ("receive path (recv, TCP in)", r"recvfrom|recvmsg|tcp_recvmsg|__libc_recv|tcp_v4_rcv|net_rx|__netif_receive"),
  ("reduction kernels", r"kernels_detail|reduceMany|reduceTyped"),
  ("user-space copies", r"__memmove|__memcpy"),
]
out = subprocess.run(["perf","script","-i",sys.argv[1],"-F","comm,ip,sym"],capture_output=True,text=True).stdout
counts = collections.defaultdict(collections.Counter)
totals = collections.Counter()
for block in out.split("\n\n"):
    lines = block.strip().splitlines()
    if not lines: continue
    comm = lines[0].split()[0]
    if comm not in ("tally","tally-reducer"): comm = "other"
    stack = "\n".join(lines)
    totals[comm] += 1
    for name, pat in classes:
        if re.search(pat, stack):
            counts[comm][name] += 1; break
    else:
        counts[comm]["other"] += 1
all_ = sum(totals.values())
for comm in ("tally","tally-reducer","other"):
    t = totals[comm]
    print(f"{comm}: {100*t/all_:.1f}% of samples")
    for name,_ in classes+[("other",None)]:
        if counts[comm][name]: print(f"  {name}: {100*counts[comm][name]/all_:.1f}%")
