#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# One `tally bench` configuration under several values of one environment variable, in
# interleaved rounds (each round runs every value once), then ratios.py over the runs:
#
#   bench/sweep_env.sh VARIABLE "VALUE..." BENCH-ARGUMENTS...
#   sudo bench/sweep_env.sh TALLY_COLL_WINDOW "16 8" --emulate 1gbit --workers 4 --reducers 4 \
#       --sizes 4M,64M -n 3 -w 1 --algo rs,ring,gloo_ring
#
# The variable is set in the bench's environment, which the processes it starts inherit.
# ROUNDS: rounds (default 3); BIN: the `tally` binary (default this tree's build); OUT: where
# the runs go (default $TMPDIR/tally-bench/VARIABLE), a NAME-VALUE-ROUND.json and .txt per run.
set -u
if [ $# -lt 3 ]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
VAR=$1 VALUES=$2
shift 2
BIN=${BIN:-$ROOT/build/tools/tally}
OUT=${OUT:-${TMPDIR:-/tmp}/tally-bench/$VAR}
# A relative path given for a binary is taken from where the script was started.
absolute() { case $1 in /*|"") echo "$1" ;; */*) echo "$PWD/$1" ;; *) echo "$1" ;; esac; }
BIN=$(absolute "$BIN")
mkdir -p "$OUT" && cd "$OUT" || exit 1
name=$(echo "$VAR" | tr '[:upper:]' '[:lower:]' | sed 's/^tally_//')
for i in $(seq 1 "${ROUNDS:-3}"); do
  for value in $VALUES; do
    env "$VAR=$value" "$BIN" bench "$@" --json "$name-$value-$i.json" > "$name-$value-$i.txt" 2>&1
  done
done
echo "runs in $PWD"
"$HERE/ratios.py" "$PWD"
