#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The man pages' rule (cmake/manpages.cmake) with both CMake generators: a fresh build folder
# must get man/hello.1.gz, with the page's summary in it. Unix Makefiles, CMake's default, do not
# make an output's folder as Ninja does; the rule must make its own.
# Usage: manpages_test.sh SOURCE_DIR
set -euo pipefail
src=$1
command -v help2man >/dev/null || { echo "help2man is not installed: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
generators=("Unix Makefiles")
command -v ninja >/dev/null && generators+=("Ninja")
for gen in "${generators[@]}"; do
  dir="$work/${gen// /_}"
  cmake -S "$src/test/system/packaging/manpage_project" -B "$dir" -G "$gen" \
    -DTALLY_SOURCE_DIR="$src" > "$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  cmake --build "$dir" >> "$dir.log" 2>&1 || { echo "$gen: build failed"; cat "$dir.log"; exit 1; }
  page="$dir/man/hello.1.gz"
  [ -f "$page" ] || { echo "$gen: no $page"; cat "$dir.log"; exit 1; }
  zcat "$page" | grep -q "says hello for the man page test" ||
    { echo "$gen: $page lacks the summary"; exit 1; }
  echo "$gen: man/hello.1.gz built"
done
