#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test/gpu/run.sh: every GPU check of Tally in one run, ending with a PASS/FAIL/SKIP
# table. On the GPU machine it proves from NCCL's own log that all-reduce ran on CollNet through
# Tally, checks NCCL all-reduces of every type and op against a host reference, a second
# communicator, ncclCommSplit, destroy and re-create, the four ways NCCL finds the plugin, PyTorch
# DDP with Tally against NCCL's own Socket net, and prints a bandwidth table. Without a GPU it still
# builds, starts reducers, runs `tally doctor` and the NCCL-free plugin checks, and reports every
# GPU row as SKIP with the reason. docs/nccl.md ("test/gpu/run.sh") describes it.
#
#   test/gpu/run.sh [--build-dir DIR] [--skip-build] [--out DIR] [--no-gpu] [--ranks N]
#                   [--max-bytes BYTES] [--budget-s S]
#   test/gpu/run.sh --stage DEST [--build-dir DIR]
#
#   --build-dir   a CMake build folder, or a folder --stage made (default: build-gpu)
#   --skip-build  use what is in --build-dir; without it, configure (if needed) and build there
#   --out         where logs go (default: $OUT when set, else a new temporary folder)
#   --no-gpu      report the GPU rows as SKIP even where a GPU is present (CI)
#   --ranks       processes on the GPU, each its own node (default 4)
#   --max-bytes   largest all-reduce (default 268435456, 256 MiB)
#   --budget-s    the whole run's time limit; every step's timeout is cut to fit (default 270)
#   --stage       copy the built programs (stripped) and the libraries tally-reducer needs into
#                 DEST, small enough to carry to the GPU machine; then run there with
#                 --skip-build --build-dir DEST
#
# Exit status: 0 when no row is FAIL (SKIPs included), 1 otherwise, 2 for bad arguments.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=run_lib.sh
source "$SRC/test/gpu/run_lib.sh"

BUILD="$SRC/build-gpu" SKIP_BUILD=0 NO_GPU=0 NRANKS=4 MAX_BYTES=268435456 BUDGET_S=270 STAGE=""
OUT_ARG=""
usage() { sed -n '2,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while (($#)); do
  case "$1" in
    --build-dir) BUILD=${2:?}; shift ;;
    --skip-build) SKIP_BUILD=1 ;;
    --out) OUT_ARG=${2:?}; shift ;;
    --no-gpu) NO_GPU=1 ;;
    --ranks) NRANKS=${2:?}; shift ;;
    --max-bytes) MAX_BYTES=${2:?}; shift ;;
    --budget-s) BUDGET_S=${2:?}; shift ;;
    --stage) STAGE=${2:?}; shift ;;
    *) usage ;;
  esac
  shift
done
[[ "$NRANKS" =~ ^[0-9]+$ && "$NRANKS" -ge 2 && "$BUDGET_S" =~ ^[0-9]+$ ]] || usage
BUILD=$(cd "$BUILD" 2>/dev/null && pwd || echo "$BUILD")

if [[ -n "$STAGE" ]]; then
  size=$(stage_build "$BUILD" "$STAGE") || { echo "staging into $STAGE failed" >&2; exit 1; }
  echo "staged $size into $STAGE; on the GPU machine: test/gpu/run.sh --skip-build --build-dir $STAGE"
  exit 0
fi

OUT=${OUT_ARG:-${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/tally-gpu-run.XXXXXX")}}
mkdir -p "$OUT" || exit 2
PRIVATE=$(mktemp -d "${TMPDIR:-/tmp}/tally-gpu-private.XXXXXX")  # token and rendezvous files
trap 'stop_own; rm -rf "$PRIVATE"' EXIT
trap 'exit 130' INT TERM
echo "test/gpu/run.sh: logs in $OUT"

# ---- 1. build ------------------------------------------------------------------------------
PLUGIN="$BUILD/plugin/libnccl-net-tally.so" REDUCER="$BUILD/reducer/tally-reducer"
TALLY="$BUILD/tools/tally" CYCLE="$BUILD/test/gpu/tally_gpu_plugin_cycle"
CHECK="$BUILD/test/gpu/tally_gpu_nccl_check" RUNTIME_LIBS="$BUILD/runtime-libs"
if ((SKIP_BUILD == 0)); then
  t=$(budget_for 1200)  # a first build takes long; only the checks must fit the budget
  START_S=$SECONDS
  generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
  targets=(nccl-net-tally tally-reducer tally tally_gpu_plugin_cycle)
  if { [[ -f "$BUILD/CMakeCache.txt" ]] ||
    timeout "$t" cmake -S "$SRC" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      >"$OUT/cmake.log" 2>&1; } &&
    { ! grep -q "^TALLY_GPU_NCCL_CHECK_BUILT:INTERNAL=ON" "$BUILD/CMakeCache.txt" ||
      targets+=(tally_gpu_nccl_check); } &&
    timeout "$t" cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target "${targets[@]}" \
      >"$OUT/build.log" 2>&1; then
    row "build" PASS "built in $BUILD ($((SECONDS - START_S)) s)"
  else
    row "build" FAIL "see $OUT/cmake.log and $OUT/build.log: $(tail -n 1 "$OUT/build.log" "$OUT/cmake.log" 2>/dev/null | grep -v '^==>' | tr '\n' ' ' | cut -c1-150)"
  fi
  START_S=$SECONDS
else
  missing=""
  for f in "$PLUGIN" "$REDUCER" "$TALLY" "$CYCLE"; do [[ -x "$f" ]] || missing+=" ${f#"$BUILD"/}"; done
  if [[ -z "$missing" ]]; then
    row "build" PASS "found in $BUILD (--skip-build)"
  else
    row "build" FAIL "--skip-build: missing in $BUILD:$missing"
  fi
fi

# ---- 2. reducers, with a job token ---------------------------------------------------------
TOKEN_FILE="$PRIVATE/token"
(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$TOKEN_FILE")
if ! any_fail && start_reducers 2; then
  row "reducers" PASS "2 on $REDUCERS, job token, metrics"
else
  row "reducers" FAIL "${REDUCER_ERROR:-not started: the build failed}"
fi

# What every worker gets: Tally as NCCL's net, CollNet forced for all-reduce (all-gather and
# reduce-scatter held to ring and PAT, so that a first run's algorithm choices are predictable),
# the plugin kept loaded across communicators (what tally launch sets: NCCL 2.27 to 2.29 forget
# the plugin after the last one otherwise), logs that prove it. BASE_ENV leaves NCCL_NET_PLUGIN
# out so the lookup variants can set it their way.
# shellcheck disable=SC2054  # the commas are inside values
BASE_ENV=(NCCL_NET=Tally NCCL_COLLNET_ENABLE=1
  "NCCL_ALGO=allreduce:collnetchain;allgather:ring,pat;reducescatter:ring,pat"
  NCCL_NET_PLUGIN_REF_COUNT=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,TUNING NCCL_SOCKET_IFNAME=lo
  NCCL_MNNVL_ENABLE=0 TALLY_REDUCERS="$REDUCERS" TALLY_SOCKET_IFNAME=lo
  TALLY_JOB_TOKEN_FILE="$TOKEN_FILE" TALLY_CONNECT_TIMEOUT_MS=30000 TALLY_TIMEOUT_MS=60000)
WORKER_ENV=("${BASE_ENV[@]}" NCCL_NET_PLUGIN="$PLUGIN")
# NCCL's own Socket net and ring, for the comparisons.
# shellcheck disable=SC2034,SC2054  # used by run_gpu.sh; the commas are inside values
SOCKET_ENV=(NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_COLLNET_ENABLE=0 NCCL_ALGO=allreduce:ring
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_SOCKET_IFNAME=lo NCCL_MNNVL_ENABLE=0)
PLUGIN_DIR=$(dirname "$PLUGIN")
LIB_PATH="$PLUGIN_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The four ways NCCL finds the plugin (docs/packaging.md): by name, by path, through the
# libnccl-net.so link with NCCL_NET_PLUGIN unset, and preloaded. Used as
# `env -u NCCL_NET_PLUGIN "${BASE_ENV[@]}" "${VARIANT_ENV[@]}" ...`.
VARIANTS=(name path link preload)
variant_env() {
  case "$1" in
    name) VARIANT_ENV=(NCCL_NET_PLUGIN=tally LD_LIBRARY_PATH="$LIB_PATH") ;;
    path) VARIANT_ENV=(NCCL_NET_PLUGIN="$PLUGIN") ;;
    link) VARIANT_ENV=(LD_LIBRARY_PATH="$LIB_PATH") ;;
    preload) VARIANT_ENV=(NCCL_NET_PLUGIN=STATIC_PLUGIN LD_PRELOAD="$PLUGIN") ;;
  esac
}
no_reducers() { ! printf '%s\n' "${ROWS[@]}" | grep -q "^reducers|PASS|"; }

# ---- 3. tally doctor -----------------------------------------------------------------------
if no_reducers; then
  row "tally doctor" SKIP "needs the reducers"
else
  t=$(budget_for 60)
  timeout "$t" env "${WORKER_ENV[@]}" \
    LD_LIBRARY_PATH="$RUNTIME_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$TALLY" doctor --plugin "$PLUGIN" --timeout 5s --probe-seconds 0.5 \
    >"$OUT/doctor.log" 2>&1
  rc=$?
  counts="$(grep -c '^PASS' "$OUT/doctor.log") PASS, $(grep -c '^WARN' "$OUT/doctor.log") WARN"
  case $rc in
    0 | 1) row "tally doctor" PASS "$counts, no FAIL" ;;
    *) row "tally doctor" FAIL "exit $rc: $(grep -m2 '^FAIL' "$OUT/doctor.log" | tr '\n' ' ' | cut -c1-160)" ;;
  esac
fi

# ---- 4. the plugin without NCCL: resolution and the load/unload cycle ----------------------
if no_reducers; then
  row "plugin lookup, no NCCL" SKIP "needs the reducers"
  row "load/unload cycle, no NCCL" SKIP "needs the reducers"
else
  passed=() failed=()
  for v in "${VARIANTS[@]}"; do
    variant_env "$v"
    timeout "$(budget_for 30)" env -u NCCL_NET_PLUGIN "${BASE_ENV[@]}" "${VARIANT_ENV[@]}" \
      "$CYCLE" --ranks 2 --cycles 1 --comms 1 --timeout-s 20 \
      >"$OUT/cycle-$v.log" 2>&1 && passed+=("$v") || failed+=("$v")
  done
  if ((${#failed[@]} == 0)); then
    row "plugin lookup, no NCCL" PASS "${passed[*]}: tables found the way NCCL looks, CollNet all-reduce right"
  else
    row "plugin lookup, no NCCL" FAIL "${failed[*]} failed: $(grep -h -m1 "FAIL\|dlopen" "$OUT/cycle-${failed[0]}.log" | cut -c1-150)"
  fi
  timeout "$(budget_for 60)" env "${WORKER_ENV[@]}" "$CYCLE" --ranks "$NRANKS" --cycles 3 \
    --comms 2 --timeout-s 30 >"$OUT/cycle.log" 2>&1
  rc=$?
  unloaded=$(grep -c "library unloaded" "$OUT/cycle.log")
  if ((rc == 0)); then
    row "load/unload cycle, no NCCL" PASS "$NRANKS ranks x 3 cycles x 2 comms at once; no thread left; unloaded in $unloaded of $((NRANKS * 3))"
  else
    row "load/unload cycle, no NCCL" FAIL "exit $rc: $(grep -m1 "FAIL\|killed" "$OUT/cycle.log" | cut -c1-150)"
  fi
fi

# ---- 5. the GPU ----------------------------------------------------------------------------
GPU_ROWS=("collnet via Tally (NCCL log)" "all-reduce types x ops x sizes" "two communicators at once"
  "ncclCommSplit" "destroy + re-create (unload)" "NCCL finds plugin 4 ways"
  "GPUDirect via Tally net (ofi)" "PyTorch DDP: Tally vs Socket" "tuner decides all-reduce"
  "bandwidth: Tally vs Socket ring")
gpu_why="" gpu_short=""
if ((NO_GPU)); then
  gpu_why="--no-gpu given" gpu_short=$gpu_why
elif [[ ! -x "$CHECK" ]]; then
  gpu_why="$(why_no_nccl_check)" gpu_short="tally_gpu_nccl_check not built"
elif ! timeout 60 "$CHECK" --probe >"$OUT/probe.log" 2>&1; then
  gpu_why="$(head -n 1 "$OUT/probe.log")" gpu_short="no usable GPU"
  command -v nvidia-smi >/dev/null || gpu_why+="; no nvidia-smi"
elif no_reducers; then
  gpu_why="the reducers did not start" gpu_short=$gpu_why
fi
if [[ -n "$gpu_why" ]]; then
  row "GPU" SKIP "$gpu_why"
  for name in "${GPU_ROWS[@]}"; do row "$name" SKIP "$gpu_short"; done
else
  row "GPU" PASS "$(head -n 1 "$OUT/probe.log")"
  # shellcheck source=run_gpu.sh
  source "$SRC/test/gpu/run_gpu.sh"
fi

print_table
any_fail && exit 1
exit 0
