#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch DDP with Tally against NCCL's own network, for test/gpu/run.sh.

  ddp_compare.py --train --out FILE [--steps N] [--timeout-s T] [--cpu]
      One rank of a data-parallel training run (torch.distributed, NCCL backend; RANK, WORLD_SIZE,
      MASTER_ADDR, MASTER_PORT from the environment, every rank on cuda:0). It first checks one
      all-reduce of exact integers, then trains a small MLP for N steps; rank 0 writes each
      step's local loss and the loss averaged over ranks to FILE (JSON). --cpu runs the same on
      the CPU with the Gloo backend, to try the script where there is no GPU.
  ddp_compare.py --compare TALLY.json SOCKET.json
      Compares two runs step by step; the last line is "PASS ..." or "FAIL ...", exit 0 or 1.
  ddp_compare.py --self-test
      Checks --compare on made-up runs (no PyTorch needed): equal runs pass, runs apart by more
      than the tolerance, or with a different first step, fail.

Why the tolerance is RTOL = 1e-4 (relative, per step). Both runs start from the same weights (DDP
broadcasts rank 0's) and see the same data; deterministic kernels make every local gradient
bit-identical, so the step-0 loss of rank 0 must match exactly, and it is compared bitwise. After
that the runs differ only in how the 4 float32 gradient values of each element are added: the
reducer and NCCL's ring add them in different orders, and any two orders of 4 float32 additions
agree within a few units in the last place (about 1e-7 relative to the summed magnitudes). With
SGD (lr 0.05, momentum 0.9) on this small, well-conditioned model such differences stay near
1e-6 of the loss over 40 steps. A wrong all-reduce -- one rank's gradient missing or doubled,
another op, stale data -- moves the gradient by a quarter or more and the loss by far more than
1e-4 within a step or two. Measured with --cpu (Gloo, PyTorch 1.13) through a comm hook: up to 2
units in the last place of noise on every reduced gradient moved the loss by at most 1.1e-7
(relative) in 40 steps; one rank's gradient left out (the sum times 3/4) moved it by 4e-4 at
step 1 and ended at 1.37 instead of 1.04. So 1e-4 sits far from both.
"""
import argparse
import json
import math
import os
import sys
import tempfile

RTOL = 1e-4
ATOL = 1e-7


def train(args):
    # Deterministic cuBLAS needs this before CUDA starts.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.use_deterministic_algorithms(True, warn_only=True)
    timeout = datetime.timedelta(seconds=args.timeout_s)
    if args.cpu:
        device = torch.device("cpu")
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
    else:
        device = torch.device("cuda", 0)
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = False
        # device_id: NCCL's communicator is created here, not at the first collective.
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device,
                                timeout=timeout)

    # One exact all-reduce first: integers below 2^24 add up exactly in float32 in any order.
    x = (torch.arange(1_000_003, device=device, dtype=torch.float32) % 251) * (rank + 1)
    dist.all_reduce(x)
    want = (torch.arange(1_000_003, device=device, dtype=torch.float32) % 251) * (
        world * (world + 1) // 2)
    if not torch.equal(x, want):
        bad = int((x != want).sum())
        print(f"FAIL: all_reduce of exact integers: {bad} wrong elements", flush=True)
        return 1

    torch.manual_seed(1234)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10)).to(device)
    # Small buckets: several all-reduces per step, of different sizes.
    ddp = DistributedDataParallel(model, device_ids=None if args.cpu else [0], bucket_cap_mb=1)
    teacher = torch.Generator().manual_seed(99)
    w_true = torch.randn(32, 10, generator=teacher)
    data = torch.Generator().manual_seed(1000 + rank)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    losses, global_losses = [], []
    for _ in range(args.steps):
        inputs = torch.randn(64, 32, generator=data)
        labels = (inputs @ w_true).argmax(dim=1)
        inputs, labels = inputs.to(device), labels.to(device)
        loss = torch.nn.functional.cross_entropy(ddp(inputs), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(loss.item())
        global_losses.append(mean.item() / world)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"world": world, "losses": losses, "global_losses": global_losses,
                       "torch": torch.__version__,
                       "nccl": None if args.cpu else ".".join(map(str, torch.cuda.nccl.version()))},
                      f)
    dist.destroy_process_group()
    print(f"rank {rank}: {args.steps} steps, loss {losses[0]:.6f} -> {losses[-1]:.6f}", flush=True)
    return 0


def compare(path_a, path_b):
    with open(path_a) as f:
        a = json.load(f)
    with open(path_b) as f:
        b = json.load(f)
    la, lb = a["losses"], b["losses"]
    if len(la) != len(lb) or not la:
        return False, f"FAIL step counts differ: {len(la)} vs {len(lb)}"
    if la[0] != lb[0]:
        return False, f"FAIL step 0 loss differs ({la[0]!r} vs {lb[0]!r}): not the same start"
    worst, worst_step = 0.0, 0
    for key in ("losses", "global_losses"):
        for step, (x, y) in enumerate(zip(a[key], b[key])):
            if not (math.isfinite(x) and math.isfinite(y)):
                return False, f"FAIL {key} step {step} not finite: {x} vs {y}"
            rel = abs(x - y) / max(abs(x), abs(y), ATOL)
            if rel > worst:
                worst, worst_step = rel, step
            if abs(x - y) > RTOL * max(abs(x), abs(y)) + ATOL:
                return False, (f"FAIL {key} step {step}: {x:.8g} vs {y:.8g} "
                               f"(relative {rel:.2e} > {RTOL:g})")
    if not la[-1] < 0.9 * la[0]:
        return False, f"FAIL the model did not learn: loss {la[0]:.4f} -> {la[-1]:.4f}"
    return True, (f"PASS {len(la)} steps x {a.get('world')} ranks, loss {la[0]:.4f} -> "
                  f"{la[-1]:.4f}; largest difference {worst:.1e} relative (step {worst_step}), "
                  f"limit {RTOL:g}")


def self_test():
    base = [2.3 * 0.97 ** i for i in range(40)]
    runs = {
        "same": base,
        "tiny": [base[0]] + [v * (1 + 3e-6) for v in base[1:]],
        "off": [base[0]] + [v * (1 + 1e-3 * (i > 5)) for i, v in enumerate(base[1:])],
        "start": [base[0] * (1 + 1e-7)] + base[1:],
        "flat": [base[0]] * 40,
    }
    paths = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, losses in runs.items():
            paths[name] = os.path.join(tmp, name + ".json")
            with open(paths[name], "w") as f:
                json.dump({"world": 4, "losses": losses, "global_losses": losses}, f)
        cases = [("same", True), ("tiny", True), ("off", False), ("start", False)]
        failures = 0
        for name, want in cases:
            ok, line = compare(paths["same"], paths[name])
            if ok != want:
                failures += 1
                print(f"self-test {name}: expected {'PASS' if want else 'FAIL'}, got: {line}")
        ok, line = compare(paths["flat"], paths["flat"])
        if ok or "did not learn" not in line:
            failures += 1
            print(f"self-test flat: expected a 'did not learn' FAIL, got: {line}")
    print("PASS ddp_compare self-test" if failures == 0 else f"FAIL {failures} self-test case(s)")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--train", action="store_true")
    mode.add_argument("--compare", nargs=2, metavar=("TALLY_JSON", "SOCKET_JSON"))
    mode.add_argument("--self-test", action="store_true")
    parser.add_argument("--out", default="ddp.json")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--timeout-s", type=int, default=60)
    parser.add_argument("--cpu", action="store_true", help="Gloo on the CPU instead of NCCL")
    args = parser.parse_args()
    if args.train:
        return train(args)
    if args.compare:
        ok, line = compare(*args.compare)
        print(line)
        return 0 if ok else 1
    return self_test()


if __name__ == "__main__":
    sys.exit(main())
