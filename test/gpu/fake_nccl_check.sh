#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A stand-in for tally_gpu_nccl_check, for run_sh_test.sh only: it answers --probe as if a GPU were
# there and prints, for each rank, the NCCL log lines and CHECK/BENCH results the real program and
# NCCL print, without touching a GPU, NCCL or the reducers. It lets the test drive run.sh's GPU
# part (run_gpu.sh) on any machine; since nothing reaches the reducers, run.sh must still fail the
# CollNet row ("the reducers summed nothing"), which the test asserts.
set -u
if [[ "${1:-}" == --probe ]]; then
  echo "GPU 0: fake GPU (test/gpu/fake_nccl_check.sh)"
  exit 0
fi
rank="" checks="collectives,concurrent,split,recreate" bench=0
while (($#)); do
  case "$1" in
    --rank) rank=$2; shift ;;
    --checks) checks=$2; shift ;;
    --bench) bench=1 ;;
    --nranks | --dir | --max-bytes | --timeout-s | --seed) shift ;;
  esac
  shift
done
[[ -n "$rank" ]] || exit 2
say() { echo "fakehost:$$:$$ [0] NCCL INFO $*"; }
say "NCCL version 2.28.3+cuda13.0"
# NCCL_NET picks the net as NCCL does; with Tally the lookup variant must have found the library.
if [[ "${NCCL_NET:-}" == Tally ]]; then
  if [[ -z "${NCCL_NET_PLUGIN:-}${LD_PRELOAD:-}" && -z "${LD_LIBRARY_PATH:-}" ]]; then
    say "NET/Plugin: Could not find: libnccl-net.so"
    exit 1
  fi
  say "Assigned NET plugin Tally to comm"
  # Tally's provider line as on a libfabric without CUDA support.
  [[ "${TALLY_TRANSPORT:-}" == ofi ]] &&
    say "NET/Tally : ofi: provider tcp;ofi_rxm (libfabric 1.20; domains lo; no FI_HMEM: host memory only; mr_mode 0x0)"
  say "CollNet 00/0 : $rank [send] via COLLNET/Tally/0"
  say "NET/Tally : tuner: 4 ranks on 4 nodes, 2 reducers, link 10000 Mb/s (assumed), latency 50 us, NCCL_BUFFSIZE 4 MiB, chunk NCCL's; CollNet all-reduce from 14 KiB (rs 700 us, NCCL ring 700 us there)"
  say "AllReduce: 4 Bytes -> Algo CollNetChain proto SIMPLE channel{Lo..Hi}={0..0}"
  speed=2.000
else
  say "Assigned NET plugin Socket to comm"
  say "AllReduce: 4 Bytes -> Algo Ring proto SIMPLE channel{Lo..Hi}={0..1}"
  speed=1.000
fi
if ((bench)); then
  for bytes in 1048576 4194304 16777216; do
    ((rank == 0)) && echo "BENCH $bytes 1000.0 $speed 0"
  done
  echo "CHECK bench PASS fake"
else
  for check in ${checks//,/ }; do echo "CHECK $check PASS fake $check"; done
fi
echo "RESULT rank $rank: PASS"
