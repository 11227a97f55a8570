#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest gpu.run_sh_no_gpu: keeps test/gpu/run.sh working on machines without a GPU.
#   1. run.sh --no-gpu --skip-build on the build tree exits 0 and ends with its table, in which
#      the CPU rows are PASS and every GPU row is SKIP with the reason;
#   2. on a build folder without the programs it exits 1 with the build row FAIL;
#   3. with fake_nccl_check.sh in place of tally_gpu_nccl_check (a "GPU" that prints NCCL's log
#      lines but reduces nothing) the GPU part runs: its rows come from the log and CHECK lines,
#      and the CollNet row fails because the reducers' metrics show no work.
# Usage: run_sh_test.sh BUILD_DIR
set -uo pipefail

build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tally-run-sh-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

# verdict FILE NAME: the verdict column of table row NAME in FILE.
verdict() { awk -F' [|] ' -v n="$2" '{ sub(/ +$/, "", $1) } $1 == n { gsub(/ /, "", $2); print $2 }' "$1"; }
table_of() { sed -n '/^check  *|/,$p' "$1"; }

cpu_rows=("build" "reducers" "tally doctor" "plugin lookup, no NCCL" "load/unload cycle, no NCCL")
gpu_rows=("GPU" "collnet via Tally (NCCL log)" "all-reduce types x ops x sizes"
  "two communicators at once" "ncclCommSplit" "destroy + re-create (unload)"
  "NCCL finds plugin 4 ways" "GPUDirect via Tally net (ofi)" "PyTorch DDP: Tally vs Socket"
  "tuner decides all-reduce" "bandwidth: Tally vs Socket ring")

# 1. The real build.
start=$SECONDS
bash "$here/run.sh" --no-gpu --skip-build --build-dir "$build" --out "$tmp/logs" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
((rc == 0)) || fail "run.sh exited $rc, expected 0"
table_of "$tmp/out" >"$tmp/table"
[[ -s "$tmp/table" ]] || fail "no table in the output"
# The table is the last thing printed: its last line is its last row.
[[ "$(tail -n 1 "$tmp/out")" == "bandwidth: Tally vs Socket ring"* ]] || fail "the table is not last"
for name in "${cpu_rows[@]}"; do
  [[ "$(verdict "$tmp/table" "$name")" == PASS ]] || fail "row '$name' is not PASS"
done
for name in "${gpu_rows[@]}"; do
  [[ "$(verdict "$tmp/table" "$name")" == SKIP ]] || fail "GPU row '$name' is not SKIP"
  grep -q "^$name .*SKIP.*--no-gpu given" "$tmp/table" || fail "GPU row '$name' gives no reason"
done
! grep -q "| FAIL |" "$tmp/table" || fail "a row failed"
# The reducers were stopped: their logs exist and no process of this run is left.
[[ -s "$tmp/logs/reducer0.log" && -s "$tmp/logs/reducer1.log" ]] || fail "no reducer logs"
echo "no-GPU run took $((SECONDS - start)) s"

# 2. A folder without the programs fails the build row and the run.
mkdir -p "$tmp/empty"
bash "$here/run.sh" --no-gpu --skip-build --build-dir "$tmp/empty" --out "$tmp/logs2" \
  >"$tmp/out2" 2>&1
rc=$?
((rc == 1)) || { cat "$tmp/out2"; fail "run.sh on an empty folder exited $rc, expected 1"; }
table_of "$tmp/out2" >"$tmp/table2"
[[ "$(verdict "$tmp/table2" "build")" == FAIL ]] || fail "empty folder: build row is not FAIL"
grep -q "missing in .*tally-reducer" "$tmp/table2" || fail "empty folder: the build row names no file"
[[ "$(verdict "$tmp/table2" "GPU")" == SKIP ]] || fail "empty folder: GPU row is not SKIP"

# 3. The GPU part against the stand-in program.
fake="$tmp/fake"
mkdir -p "$fake/plugin" "$fake/reducer" "$fake/tools" "$fake/test/gpu"
for f in plugin/libnccl-net-tally.so plugin/libnccl-net.so reducer/tally-reducer tools/tally \
  test/gpu/tally_gpu_plugin_cycle; do
  ln -s "$build/$f" "$fake/$f"
done
ln -s "$here/fake_nccl_check.sh" "$fake/test/gpu/tally_gpu_nccl_check"
bash "$here/run.sh" --skip-build --build-dir "$fake" --out "$tmp/logs3" --budget-s 200 \
  >"$tmp/out3" 2>&1
rc=$?
table_of "$tmp/out3" >"$tmp/table3"
expect() {  # ROW VERDICT [TEXT]
  [[ "$(verdict "$tmp/table3" "$1")" == "$2" ]] || { cat "$tmp/out3"; fail "fake GPU: '$1' is not $2"; }
  [[ -z "${3:-}" ]] || grep -q "^$1 .*$3" "$tmp/table3" || { cat "$tmp/out3"; fail "fake GPU: '$1' lacks '$3'"; }
}
((rc == 1)) || { cat "$tmp/out3"; fail "fake GPU: run.sh exited $rc, expected 1"; }
expect "GPU" PASS "fake GPU"
expect "collnet via Tally (NCCL log)" FAIL "the reducers summed nothing"
expect "all-reduce types x ops x sizes" PASS "fake collectives"
expect "two communicators at once" PASS
expect "ncclCommSplit" PASS
expect "destroy + re-create (unload)" PASS
expect "NCCL finds plugin 4 ways" PASS "name path link preload"
expect "GPUDirect via Tally net (ofi)" SKIP "no FI_HMEM"
expect "tuner decides all-reduce" PASS "CollNet all-reduce from 14 KiB"
expect "bandwidth: Tally vs Socket ring" PASS "x2.00"
grep -q "^ *16777216  *2.000  *1.000  *2.00$" "$tmp/out3" || fail "fake GPU: no bandwidth table"
if ! python3 -c "import torch" 2>/dev/null; then
  expect "PyTorch DDP: Tally vs Socket" SKIP "PyTorch with CUDA not usable"
fi
echo "PASS: run.sh no-GPU mode and its GPU part on a stand-in"
