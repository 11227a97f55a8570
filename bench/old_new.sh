# SPDX-License-Identifier: Apache-2.0
# Sourced by the scripts that compare two builds (steady_pairs.sh, steady_rounds.sh,
# syscall_counts.sh), with the name of their results folder: sets HERE, ROOT, NEW and OLD (the
# two `tally` binaries, made absolute), OLD_ARGS and NEW_ARGS, and enters OUT (default
# $TMPDIR/tally-bench/NAME).
HERE=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
NEW=${NEW:-$ROOT/build/tools/tally}
OLD=${OLD:-$ROOT/../before/build/tools/tally}
OLD_ARGS=${OLD_ARGS:-}
NEW_ARGS=${NEW_ARGS:-}
OUT=${OUT:-${TMPDIR:-/tmp}/tally-bench/$1}
# A relative path given for a binary is taken from where the script was started.
absolute() { case $1 in /*|"") echo "$1" ;; */*) echo "$PWD/$1" ;; *) echo "$1" ;; esac; }
OLD=$(absolute "$OLD")
NEW=$(absolute "$NEW")
mkdir -p "$OUT" && cd "$OUT" || exit 1
