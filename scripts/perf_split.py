#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where each side's CPU time went, from a `perf record -a -g` of `tally bench`.

Every sample is filed by the function it landed in (the leaf of its stack): user space, the
kernel copying bytes to or from user memory, memory management (page faults, allocation, cgroup
charges), the scheduler (sleeping, waking, switching), syscall entry and exit, the TCP/IP stack,
or other kernel work. Samples are split by side: workers (comm "tally"), reducers
("tally-reducer") and Gloo's ranks ("tally-gloo-bench"). A sample whose stack passes through a
bench's input fill or result check is the harness, outside the timed calls; the shares are of
the samples outside it. docs/performance.md, "Where the CPU goes", has the recipe.

Usage: scripts/perf_split.py perf.data     (runs `perf script` on it)
       scripts/perf_split.py --self-test
"""
import collections
import re
import subprocess
import sys

# First match wins, against the leaf function's name (kernel samples only). Approximate by
# nature: a lock released with interrupts on, for one, counts as the scheduler wherever it was.
# epoll's waits count as the scheduler: a thread there is waiting to be woken.
KERNEL_CLASSES = [
    ("kernel copy", r"copy_user|copy_to_user|copy_from_user|_copy_to_iter|_copy_from_iter|"
                    r"copyout|copyin|memcpy|memmove|rep_movs|skb_copy_datagram|csum_partial_copy|"
                    r"check_object_size|check_heap_object"),
    ("memory", r"page_fault|handle_mm_fault|clear_page|do_anonymous_page|filemap_map|"
               r"__handle_mm|alloc_pages|alloc_frozen|get_page_from_freelist|memcg|mem_cgroup|"
               r"charge|folio|lruvec|unmap|zap_|pte_|rmap|free_unref|page_state|mmap"),
    ("scheduler", r"schedule|finish_task_switch|pick_next|try_to_wake_up|ttwu|enqueue_task|"
                  r"dequeue_task|update_curr|update_load|futex|__wake_up|wake_q|psi_|sched|"
                  r"_raw_spin_unlock_irqrestore|select_task_rq|switch_mm|__switch_to|ep_poll|epoll"),
    ("syscall entry", r"entry_SYSCALL|do_syscall|syscall_exit|syscall_enter|__x64_sys|"
                      r"exit_to_user_mode|syscall_return|fpregs|switch_fpu|__fdget|fput|"
                      r"__sys_|ksys_|security_socket|apparmor|audit"),
    ("TCP stack", r"tcp|^ip_|_ip_|ipv4|ipv6|^__ip|skb|^sk_|_sk_|sock|inet|^net_|netif|^dev_|"
                  r"__dev|loopback|napi|^nf_|veth|qdisc|htb_|tbf_|fq_|"
                  r"release_sock|lock_sock|__release_sock|__local_bh|softirq|net_rx"),
]
# The benches' own input fill, buffer clearing and result check, outside the timed calls: a
# worker's or Gloo rank's sample whose stack passes through them is filed here whatever its leaf.
HARNESS = (r"floatInput|fillExpected|randomBits|fillInput|encodeExact|countMismatches|"
           r"checkResult|expectedValue|expectedSum|countWrong|inputValue|__memset|__memcmp")
CLASSES = (["harness"] + ["user"] + [name for name, _ in KERNEL_CLASSES] + ["other kernel"])
# comm is cut to 15 characters: Gloo's ranks (tally-gloo-bench) are "tally-gloo-benc".
SIDES = {"tally": "workers", "tally-reducer": "reducers", "tally-gloo-benc": "gloo ranks"}


def is_kernel(ip):
    """Whether an instruction address is the kernel's (x86-64: the upper half)."""
    try:
        return int(ip, 16) >= 0xffff800000000000
    except ValueError:
        return False


def classify(ip, sym):
    if not is_kernel(ip):
        return "user"
    for name, pattern in KERNEL_CLASSES:
        if re.search(pattern, sym):
            return name
    return "other kernel"


def split(script_text):
    """Per side, the count of samples in each class, from `perf script -F comm,ip,sym`."""
    counts = collections.defaultdict(collections.Counter)
    for block in script_text.split("\n\n"):
        lines = block.strip().splitlines()
        if len(lines) < 2:
            continue
        side = SIDES.get(lines[0].split()[0])
        if side is None:
            continue
        if side != "reducers" and re.search(HARNESS, block):
            counts[side]["harness"] += 1
            continue
        leaf = lines[1].split(None, 1)  # "ffffffff81234567 tcp_sendmsg_locked+0x12"
        ip, sym = leaf[0], (leaf[1] if len(leaf) > 1 else "")
        counts[side][classify(ip, sym.split("+")[0])] += 1
    return counts


def report(counts):
    lines = []
    for side in ("workers", "reducers", "gloo ranks"):
        total = sum(counts[side].values())
        if total == 0:
            continue
        timed = total - counts[side]["harness"]
        lines.append(f"{side}: {total} samples; shares of the {timed} outside the harness")
        for name in CLASSES:
            n = counts[side][name]
            if n and name == "harness":
                lines.append(f"  {name:14s} ({100.0 * n / total:.1f}% of all samples)")
            elif n:
                lines.append(f"  {name:14s} {100.0 * n / timed:5.1f}%")
    return "\n".join(lines)


def self_test():
    sample = "\n\n".join([
        "tally 1234\n\t    7f0012345678 __memmove_avx_unaligned_erms+0x1a\n\t    7f00aaaa main+0x1",
        "tally 1234\n\t    7f0012345678 randomBits+0x1a\n\t    7f00aaaa floatInput+0x1",
        "tally 1234\n\tffffffff81a00010 copy_user_enhanced_fast_string+0x10\n\tffffffff81b0 tcp_sendmsg",
        "tally 1234\n\tffffffff81c00010 tcp_sendmsg_locked+0x200",
        "tally 1234\n\tffffffff81000090 entry_SYSCALL_64_after_hwframe+0x63",
        "tally-reducer 99\n\tffffffff81100010 __schedule+0x2a0",
        "tally-reducer 99\n\tffffffff81100010 _copy_to_iter+0x90",
        "tally-reducer 99\n\tffffffff81100010 clear_page_erms+0x7",
        "tally-reducer 99\n\tffffffff81100010 some_driver_thing+0x7",
        "tally-gloo-benc 7\n\tffffffff81100010 tcp_recvmsg_locked+0x7",
        "swapper 0\n\tffffffff81100010 intel_idle+0x7",
    ])
    counts = split(sample)
    want = {
        "workers": {"harness": 1, "user": 1, "kernel copy": 1, "TCP stack": 1,
                    "syscall entry": 1},
        "reducers": {"scheduler": 1, "kernel copy": 1, "memory": 1, "other kernel": 1},
        "gloo ranks": {"TCP stack": 1},
    }
    ok = True
    for side, classes in want.items():
        got = {k: v for k, v in counts[side].items() if v}
        if got != classes:
            print(f"self-test: {side}: got {got}, want {classes}")
            ok = False
    if "swapper" in counts or "other" in counts:
        print("self-test: samples of other processes were counted")
        ok = False
    text = report(counts)
    if "workers: 5 samples; shares of the 4" not in text or "kernel copy     25.0%" not in text:
        print("self-test: report:\n" + text)
        ok = False
    print("self-test passed" if ok else "self-test FAILED")
    return 0 if ok else 1


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out = subprocess.run(["perf", "script", "-i", argv[1], "-F", "comm,ip,sym"],
                         capture_output=True, text=True, check=True).stdout
    print(report(split(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
