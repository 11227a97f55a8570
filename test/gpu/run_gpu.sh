# SPDX-License-Identifier: Apache-2.0
# The GPU rows of test/gpu/run.sh (sourced by it once a GPU, tally_gpu_nccl_check and the
# reducers are there). Uses run.sh's variables: NRANKS, CHECK, WORKER_ENV, BASE_ENV, SOCKET_ENV,
# VARIANTS, PRIVATE, OUT, MAX_BYTES, SRC.
# shellcheck shell=bash

RDV="$PRIVATE/rendezvous"
mkdir -p "$RDV"

timed_out() { (($1 == 124 || $1 == 137)) && echo " (timed out or the time budget was spent)"; }

# ---- NCCL API: every type and op, two communicators, split, re-create ------------------------
before=$(metric_sum tally_reducer_bytes_reduced_total)
mkdir -p "$RDV/main"
run_ranks nccl "$NRANKS" "$(budget_for 150)" env "${WORKER_ENV[@]}" "$CHECK" --rank @RANK@ \
  --nranks "$NRANKS" --dir "$RDV/main" --max-bytes "$MAX_BYTES" --timeout-s 60
rc=$?
reduced=$((($(metric_sum tally_reducer_bytes_reduced_total) - before) >> 20))
IFS='|' read -r verdict detail <<<"$(collnet_proof nccl)"
if [[ $verdict == PASS ]] && ((reduced == 0)); then
  verdict=FAIL detail="NCCL's log looks right, but the reducers summed nothing"
else
  detail+="; the reducers summed $reduced MiB"
fi
row "collnet via Tally (NCCL log)" "$verdict" "$detail$(timed_out $rc)"
for pair in "all-reduce types x ops x sizes:collectives" "two communicators at once:concurrent" \
  "ncclCommSplit:split" "destroy + re-create (unload):recreate"; do
  IFS='|' read -r verdict detail <<<"$(check_verdict nccl "${pair##*:}" "$NRANKS")"
  case "${pair##*:}" in
    collectives) grep -q "^CHECK float8 SKIP" "$OUT/nccl.rank0.log" && detail+="; float8 skipped (needs sm_90)" ;;
    recreate) detail+="; with NCCL_NET_PLUGIN_REF_COUNT=1, 'Unloading' in NCCL's log: $(grep -h -c "Unloading" "$OUT"/nccl.rank0.log)x on rank 0 (0 expected)" ;;
  esac
  row "${pair%%:*}" "$verdict" "$detail"
done

# ---- the four ways NCCL finds the plugin, each with a checked all-reduce on CollNet ----------
passed=() failed=()
for v in "${VARIANTS[@]}"; do
  variant_env "$v"
  mkdir -p "$RDV/$v"
  run_ranks "lookup-$v" 2 "$(budget_for 60)" env -u NCCL_NET_PLUGIN "${BASE_ENV[@]}" \
    "${VARIANT_ENV[@]}" "$CHECK" --rank @RANK@ --nranks 2 --dir "$RDV/$v" --checks smoke \
    --timeout-s 40
  rc=$?
  proof=$(collnet_proof "lookup-$v")
  if ((rc == 0)) && [[ $proof == PASS* ]]; then passed+=("$v"); else failed+=("$v: ${proof#*|}$(timed_out $rc)"); fi
done
if ((${#failed[@]} == 0)); then
  row "NCCL finds plugin 4 ways" PASS "${passed[*]}: Tally assigned, CollNet all-reduce exact"
else
  row "NCCL finds plugin 4 ways" FAIL "$(printf '%s; ' "${failed[@]}" | cut -c1-200)"
fi

# ---- GPUDirect RDMA through Tally's net: CUDA buffers on the ofi transport ------------------
# A ring all-reduce over Tally's point-to-point net (CollNet off) on libfabric's tcp provider.
# Tally offers CUDA memory where the provider has FI_HMEM (its provider line says so);
# NCCL_NET_GDR_LEVEL=SYS lets NCCL use it with the loopback "NIC". NCCL then registers GPU
# buffers, sends and receives from them and flushes: its channel lines say .../GDRDMA.
# Without the reducers and with TALLY_COLLNET=0: while CollNet reports its device, NCCL keeps
# CollNet's host-memory mark on the NIC both share, and uses no GPUDirect RDMA there.
gdr_env=()
for kv in "${WORKER_ENV[@]}"; do [[ $kv == TALLY_REDUCERS=* ]] || gdr_env+=("$kv"); done
gdr_run() {  # gdr_run NAME VARIABLES...
  mkdir -p "$RDV/$1"
  run_ranks "$1" 2 "$(budget_for 60)" env -u TALLY_REDUCERS "${gdr_env[@]}" "${@:2}" \
    NCCL_COLLNET_ENABLE=0 NCCL_ALGO=allreduce:ring NCCL_NET_GDR_LEVEL=SYS TALLY_TRANSPORT=ofi \
    FI_PROVIDER=tcp "$CHECK" --rank @RANK@ --nranks 2 --dir "$RDV/$1" --checks smoke --timeout-s 40
}
gdr_run gdr TALLY_COLLNET=0
rc=$?
gdr_logs=("$OUT"/gdr.rank*.log)
if grep -q "libfabric.so.1 not found" "${gdr_logs[@]}"; then
  row "GPUDirect via Tally net (ofi)" SKIP "libfabric is not installed on this machine"
elif grep -q "no FI_HMEM" "${gdr_logs[@]}"; then
  row "GPUDirect via Tally net (ofi)" SKIP "libfabric's tcp provider here has no FI_HMEM (built without CUDA)"
elif ((rc != 0)); then
  row "GPUDirect via Tally net (ofi)" FAIL "exit $rc$(timed_out $rc)$(rank_error "$OUT/gdr.rank0.log")"
elif grep -q "/GDRDMA" "${gdr_logs[@]}"; then
  IFS='|' read -r verdict detail <<<"$(check_verdict gdr smoke 2)"
  # shellcheck disable=SC2126  # counted over several files
  row "GPUDirect via Tally net (ofi)" "$verdict" "$(grep -h "/GDRDMA" "${gdr_logs[@]}" | wc -l) GDRDMA connections via NET/Tally; $detail"
  # The same run with CollNet's device reported (TALLY_COLLNET=1, the default): NCCL must not use
  # GPUDirect RDMA on the NIC CollNet shares (docs/nccl.md), and the all-reduce stays exact.
  gdr_run gdr-collnet TALLY_COLLNET=1
  rc=$?
  if ((rc != 0)); then
    row "no GPUDirect while CollNet shares NIC" FAIL "exit $rc$(timed_out $rc)$(rank_error "$OUT/gdr-collnet.rank0.log")"
  elif grep -q "/GDRDMA" "$OUT"/gdr-collnet.rank*.log; then
    row "no GPUDirect while CollNet shares NIC" FAIL "NCCL used GPUDirect RDMA on the NIC CollNet shares: docs/nccl.md is wrong"
  else
    IFS='|' read -r verdict detail <<<"$(check_verdict gdr-collnet smoke 2)"
    row "no GPUDirect while CollNet shares NIC" "$verdict" "no GDRDMA connection, as NCCL's topology code predicts; $detail"
  fi
else
  row "GPUDirect via Tally net (ofi)" FAIL "Tally offered CUDA memory, NCCL did not use it: $(grep -h -m1 "GPU Direct RDMA" "${gdr_logs[@]}" | sed 's/^.*NCCL INFO //' | cut -c1-120)"
fi

# ---- PyTorch DDP: the same training with Tally and with NCCL's Socket net ---------------------
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
if ! torch_info=$(timeout 90 python3 -c 'import torch; assert torch.cuda.is_available(), "no CUDA"; print("torch", torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1); then
  row "PyTorch DDP: Tally vs Socket" SKIP "PyTorch with CUDA not usable: $(tail -n 1 <<<"$torch_info" | cut -c1-120)"
else
  ddp=(python3 "$SRC/test/gpu/ddp_compare.py" --train --steps 40 --timeout-s 60)
  run_ranks ddp-tally "$NRANKS" "$(budget_for 100)" env "${WORKER_ENV[@]}" MASTER_ADDR=127.0.0.1 \
    MASTER_PORT="$(free_port)" "${ddp[@]}" --out "$OUT/ddp-tally.json"
  rc_tally=$?
  run_ranks ddp-socket "$NRANKS" "$(budget_for 100)" env "${SOCKET_ENV[@]}" MASTER_ADDR=127.0.0.1 \
    MASTER_PORT="$(free_port)" "${ddp[@]}" --out "$OUT/ddp-socket.json"
  rc_socket=$?
  proof=$(collnet_proof ddp-tally)
  if ((rc_tally != 0 || rc_socket != 0)); then
    row "PyTorch DDP: Tally vs Socket" FAIL "training failed (tally exit $rc_tally, socket exit $rc_socket)$(timed_out $((rc_tally | rc_socket))): $(grep -h -m1 "Error\|error" "$OUT"/ddp-*.rank0.log | cut -c1-120)"
  elif [[ $proof != PASS* ]]; then
    row "PyTorch DDP: Tally vs Socket" FAIL "$torch_info: ${proof#*|}"
  else
    compared=$(python3 "$SRC/test/gpu/ddp_compare.py" --compare "$OUT/ddp-tally.json" \
      "$OUT/ddp-socket.json" 2>&1 | tee "$OUT/ddp-compare.log" | tail -n 1)
    [[ $compared == PASS* ]] && verdict=PASS || verdict=FAIL
    row "PyTorch DDP: Tally vs Socket" "$verdict" "$torch_info; ${compared#* }"
  fi
fi

# ---- the tuner decides: all-reduce with NCCL_ALGO leaving it free, Tally's tuner found in the
# plugin's library (all-gather and reduce-scatter stay held as everywhere else) ------------------
TUNER_ENV=()
for v in "${WORKER_ENV[@]}"; do
  [[ $v == NCCL_ALGO=* ]] && v="NCCL_ALGO=allgather:ring,pat;reducescatter:ring,pat"
  TUNER_ENV+=("$v")
done
mkdir -p "$RDV/bench-tuner"
run_ranks bench-tuner "$NRANKS" "$(budget_for 60)" env "${TUNER_ENV[@]}" "$CHECK" --bench \
  --rank @RANK@ --nranks "$NRANKS" --dir "$RDV/bench-tuner" --max-bytes "$MAX_BYTES" --timeout-s 40
rc_tuner=$?
tuner_log="$OUT/bench-tuner.rank0.log"
tuner_line=$(grep -h -m1 "NET/Tally : tuner:" "$tuner_log" 2>/dev/null | sed 's/^.*NET\/Tally : tuner: //')
picks="$(grep -hc "AllReduce: .*Algo CollNet" "$tuner_log" 2>/dev/null) CollNet, $(grep -hc "AllReduce: .*Algo \(Ring\|Tree\)" "$tuner_log" 2>/dev/null) ring/tree"
if ((rc_tuner != 0)); then
  row "tuner decides all-reduce" FAIL "bench exit $rc_tuner$(timed_out $rc_tuner)$(rank_error "$tuner_log")"
elif [[ -z $tuner_line ]]; then
  row "tuner decides all-reduce" FAIL "NCCL did not load Tally's tuner (no 'tuner:' line in its log); $picks"
else
  row "tuner decides all-reduce" PASS "${tuner_line#*; }; all-reduces: $picks; every result checked"
fi

# ---- bandwidth: Tally's CollNet against NCCL's Socket ring, same processes and sizes ----------
mkdir -p "$RDV/bench-tally" "$RDV/bench-socket"
run_ranks bench-tally "$NRANKS" "$(budget_for 60)" env "${WORKER_ENV[@]}" "$CHECK" --bench \
  --rank @RANK@ --nranks "$NRANKS" --dir "$RDV/bench-tally" --max-bytes "$MAX_BYTES" --timeout-s 40
rc_tally=$?
run_ranks bench-socket "$NRANKS" "$(budget_for 60)" env "${SOCKET_ENV[@]}" "$CHECK" --bench \
  --rank @RANK@ --nranks "$NRANKS" --dir "$RDV/bench-socket" --max-bytes "$MAX_BYTES" --timeout-s 40
rc_socket=$?
{
  echo "all-reduce float32 sum, $NRANKS processes on one GPU (indicative only: they share it)"
  printf '%12s  %18s  %18s  %6s\n' bytes "Tally CollNet GB/s" "Socket ring GB/s" ratio
  join -j 2 <(awk '$1 == "BENCH" { print $2, $2, $4 }' "$OUT/bench-tally.rank0.log" | sort -k2,2) \
    <(awk '$1 == "BENCH" { print $2, $2, $4 }' "$OUT/bench-socket.rank0.log" | sort -k2,2) |
    sort -n | awk '{ printf "%12d  %18.3f  %18.3f  %6.2f\n", $1, $3, $5, ($5 > 0 ? $3 / $5 : 0) }'
} | tee "$OUT/bandwidth.txt"
largest=$(tail -n 1 "$OUT/bandwidth.txt")
if ((rc_tally == 0 && rc_socket == 0)) && [[ $largest =~ ^\ *[0-9] ]]; then
  read -r b t s ratio <<<"$largest"
  row "bandwidth: Tally vs Socket ring" PASS "at $((b >> 20)) MiB: $t vs $s GB/s (x$ratio), every result checked; table above"
else
  row "bandwidth: Tally vs Socket ring" FAIL "bench exit tally $rc_tally, socket $rc_socket$(timed_out $((rc_tally | rc_socket)))"
fi
