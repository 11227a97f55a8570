# SPDX-License-Identifier: Apache-2.0
# Helpers for test/gpu/run.sh (sourced, not run): the result table, the time budget, reducers,
# rank launches, NCCL log scanning and staging a build for the GPU machine.
# shellcheck shell=bash
# shellcheck disable=SC2034,SC2153  # shared with run.sh, which sets OUT, BUILD, REDUCER, ...

# ---- the table -----------------------------------------------------------------------------
ROWS=()
row() {  # NAME VERDICT DETAIL
  ROWS+=("$1|$2|$3")
  printf '%-5s %s: %s\n' "$2" "$1" "$3"
}
print_table() {
  local entry name verdict detail
  printf '\n%-34s | %-4s | %s\n' "check" "" "detail"
  printf '%s\n' "-----------------------------------+------+-------------------------------------"
  for entry in "${ROWS[@]}"; do
    IFS='|' read -r name verdict detail <<<"$entry"
    printf '%-34s | %-4s | %s\n' "$name" "$verdict" "$detail"
  done
}
any_fail() {
  local entry
  for entry in "${ROWS[@]}"; do [[ "$entry" == *"|FAIL|"* ]] && return 0; done
  return 1
}

# ---- time budget: every step's timeout is cut to what is left ------------------------------
START_S=$SECONDS
budget_for() {  # WANTED_S -> prints min(WANTED_S, seconds left), 0 when the budget is spent
  local left=$((BUDGET_S - (SECONDS - START_S)))
  ((left < 0)) && left=0
  echo $((left < $1 ? left : $1))
}

# ---- processes this script started, stopped by their ids on exit ----------------------------
# OWN_PIDS: the reducers; RANK_PIDS: the `timeout` wrappers of ranks still running (killing one
# makes it stop its rank).
OWN_PIDS=() RANK_PIDS=()
stop_own() {
  local pid
  for pid in "${RANK_PIDS[@]}" "${OWN_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${RANK_PIDS[@]}" "${OWN_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  OWN_PIDS=() RANK_PIDS=()
}

# ---- reducers ------------------------------------------------------------------------------
# start_reducers N: N tally-reducers on 127.0.0.1 with the job token and metrics. Sets REDUCERS
# (host:port,...) and METRICS_URLS; false with REDUCER_ERROR when one does not come up in 10 s.
REDUCERS="" METRICS_URLS=() REDUCER_ERROR=""
start_reducers() {
  local i log addr url waited
  for ((i = 0; i < $1; i++)); do
    log="$OUT/reducer$i.log"
    LD_LIBRARY_PATH="$RUNTIME_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$REDUCER" --listen 127.0.0.1:0 --threads 4 --metrics 127.0.0.1:0 \
      --token-file "$TOKEN_FILE" --verbose >"$log" 2>&1 &
    OWN_PIDS+=($!)
    addr="" url=""
    for ((waited = 0; waited < 100; waited++)); do
      addr=$(sed -n 's/^tally-reducer listening on //p' "$log")
      url=$(sed -n 's/^tally-reducer metrics on //p' "$log")
      [[ -n "$addr" && -n "$url" ]] && break
      kill -0 "${OWN_PIDS[-1]}" 2>/dev/null || break
      sleep 0.1
    done
    if [[ -z "$addr" || -z "$url" ]]; then
      REDUCER_ERROR="reducer $i did not start: $(tail -n 2 "$log" | tr '\n' ' ')"
      return 1
    fi
    REDUCERS+="${REDUCERS:+,}$addr"
    METRICS_URLS+=("$url")
  done
}

# metric_sum NAME: the sum of an unlabelled counter over every reducer's /metrics (bash's
# /dev/tcp, so neither curl nor python is needed).
metric_sum() {
  local url hostport total=0 value
  for url in "${METRICS_URLS[@]}"; do
    hostport=${url#http://}
    hostport=${hostport%%/*}
    # shellcheck disable=SC2016  # expanded by the inner bash
    value=$(timeout 5 bash -c '
      exec 3<>"/dev/tcp/${1%:*}/${1##*:}" || exit 1
      printf "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n" "$1" >&3
      cat <&3' _ "$hostport" | awk -v n="$1" '$1 == n { printf "%.0f", $2 }')
    total=$((total + ${value:-0}))
  done
  echo "$total"
}

# ---- ranks ---------------------------------------------------------------------------------
# run_ranks NAME N LIMIT_S CMD...: N processes, rank r with NCCL_HOSTID=tally-gpu-node<r> (its
# own node), RANK/WORLD_SIZE set, "@RANK@" in CMD replaced by r; output to $OUT/NAME.rank<r>.log.
# Each is bounded by `timeout`; true when every rank exits 0.
run_ranks() {
  local name=$1 n=$2 limit=$3 r rc=0
  shift 3
  ((limit > 0)) || return 124
  for ((r = 0; r < n; r++)); do
    NCCL_HOSTID="tally-gpu-node$r" RANK=$r WORLD_SIZE=$n LOCAL_RANK=0 \
      timeout -k 5 "$limit" "${@//@RANK@/$r}" >"$OUT/$name.rank$r.log" 2>&1 &
    RANK_PIDS+=($!)
  done
  for r in "${RANK_PIDS[@]}"; do wait "$r" || rc=$?; done
  RANK_PIDS=()
  return "$rc"
}

# check_verdict NAME CHECK N: PASS when every rank printed "CHECK <CHECK> PASS", SKIP when rank 0
# skipped it; prints the verdict and rank 0's detail (or the first failing rank's).
check_verdict() {
  local name=$1 check=$2 n=$3 r line
  line=$(grep -m1 "^CHECK $check " "$OUT/$name.rank0.log" 2>/dev/null)
  if [[ "$line" == "CHECK $check SKIP"* ]]; then
    echo "SKIP|${line#CHECK "$check" SKIP }"
    return
  fi
  for ((r = 0; r < n; r++)); do
    line=$(grep -m1 "^CHECK $check " "$OUT/$name.rank$r.log" 2>/dev/null)
    if [[ "$line" != "CHECK $check PASS"* ]]; then
      echo "FAIL|rank $r: ${line:-no result$(rank_error "$OUT/$name.rank$r.log")}"
      return
    fi
  done
  line=$(grep -m1 "^CHECK $check " "$OUT/$name.rank0.log")
  echo "PASS|${line#CHECK "$check" PASS }"
}

# rank_error LOG: ": <last WARN or error line>" for a rank that printed no result.
rank_error() {
  local last
  last=$(grep -E "WARN|Error|error|FAIL|Terminated|timeout" "$1" 2>/dev/null | tail -n 1)
  [[ -n "$last" ]] && echo " (${last:0:150})"
}

# ---- NCCL's log ----------------------------------------------------------------------------
# collnet_proof PREFIX: scans $OUT/PREFIX.rank*.log for the lines that show NCCL loaded Tally and
# ran all-reduce on CollNet through it; prints "PASS|..." or "FAIL|<what is missing; why-not lines>".
collnet_proof() {
  local logs=("$OUT/$1".rank*.log) missing="" why
  grep -q "Assigned NET plugin Tally" "${logs[@]}" || missing+="'Assigned NET plugin Tally' "
  grep -q "via COLLNET/Tally" "${logs[@]}" || missing+="'via COLLNET/Tally' "
  grep -q "Algo CollNetChain" "${logs[@]}" || missing+="'Algo CollNetChain' "
  if [[ -z "$missing" ]]; then
    # shellcheck disable=SC2126  # counted over several files
    echo "PASS|$(grep -h -o "NCCL version [0-9.a-z+]*" "${logs[0]}" | head -n 1), Tally assigned," \
      "$(grep -h "via COLLNET/Tally" "${logs[@]}" | wc -l) CollNet connections," \
      "$(grep -h "Algo CollNetChain" "${logs[@]}" | wc -l) CollNetChain all-reduces"
    return
  fi
  why=$(grep -h -E "disabling CollNet|Cannot initialize CollNet|CollNet disabled|Could not find|Failed to initialize (any )?NET plugin|is unsupported|NET/Tally.*(WARN|fail)" \
    "${logs[@]}" | sed 's/^.*NCCL \(INFO\|WARN\) //' | sort -u | head -n 3 | tr '\n' ';')
  echo "FAIL|missing ${missing}${why:+; NCCL says: $why}"
}

# ---- staging a build for the GPU machine ---------------------------------------------------
# stage_build BUILD DEST: copies what run.sh needs (stripped) with the build's layout, plus the
# shared libraries tally-reducer and tally need beyond the C/C++ runtime (prometheus-cpp,
# civetweb: absent on the GPU machine) into DEST/runtime-libs.
stage_build() {
  local build=$1 dest=$2 f lib
  local files=(plugin/libnccl-net-tally.so reducer/tally-reducer tools/tally
    test/gpu/tally_gpu_plugin_cycle test/gpu/tally_gpu_nccl_check)
  rm -rf "$dest" && mkdir -p "$dest/runtime-libs" || return 1
  for f in "${files[@]}"; do
    [[ -f "$build/$f" ]] || continue
    mkdir -p "$dest/$(dirname "$f")"
    cp "$build/$f" "$dest/$f" && strip --strip-debug "$dest/$f" || return 1
  done
  ln -sf libnccl-net-tally.so "$dest/plugin/libnccl-net.so"
  for f in "$dest/reducer/tally-reducer" "$dest/tools/tally"; do
    ldd "$f" | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libgcc_s.so* | \
          libstdc++.so* | libcrypto.so* | libssl.so* | libz.so*) ;;  # the GPU machine has its own
        *) cp -L "$lib" "$dest/runtime-libs/" ;;
      esac
    done
  done
  {
    echo "staged from $build on $(hostname) at $(date -u +%FT%TZ)"
    echo "source: $(git -C "$SRC" describe --always --dirty 2>/dev/null || echo unknown)"
    grep -E "^TALLY_GPU_NCCL_CHECK_(BUILT|WHY)" "$build/CMakeCache.txt" 2>/dev/null
  } >"$dest/STAGE.txt"
  du -sh "$dest" | cut -f1
}

# why_no_nccl_check: the reason tally_gpu_nccl_check is missing, from CMake's cache or STAGE.txt.
why_no_nccl_check() {
  local why
  why=$(sed -n 's/^TALLY_GPU_NCCL_CHECK_WHY:INTERNAL=//p' "$BUILD/CMakeCache.txt" \
    "$BUILD/STAGE.txt" 2>/dev/null | head -n 1)
  echo "${why:-tally_gpu_nccl_check was not built}"
}
