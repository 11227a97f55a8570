#!/usr/bin/env bash
# Builds the Debian package from a built tree with `cpack -G DEB` (into a temporary folder, never
# the build tree), checks its control fields and file list with dpkg-deb, then extracts it and
# runs what it holds: tally and tally-reducer start, and the plugin loads by its path, through
# the libnccl-net.so link and from LD_PRELOAD (the STATIC_PLUGIN way).
#
# Usage: deb_test.sh BUILD_DIR CPACK VERSION LIBDIR PLUGIN_CHECK SOURCE_DIR SANITIZE
# Exit 77 (skipped) on a machine without dpkg-deb.
set -euo pipefail

build_dir=$1 cpack=$2 version=$3 libdir=$4 plugin_check=$5 source_dir=$6 sanitize=${7:-}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

if ! command -v dpkg-deb >/dev/null; then
  echo "SKIP: dpkg-deb not found (not a Debian system)"
  exit 77
fi
for tool in dpkg-shlibdeps file; do
  command -v "$tool" >/dev/null || fail "$tool not found: scripts/install-deps.sh installs it"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tally-deb-test.XXXXXX")
# cpack's install step rewrites BUILD_DIR/install_manifest.txt: put back what was there.
manifest="$build_dir/install_manifest.txt"
if [ -f "$manifest" ]; then cp -p "$manifest" "$tmp/install_manifest.txt"; fi
cleanup() {
  if [ -f "$tmp/install_manifest.txt" ]; then
    cp -p "$tmp/install_manifest.txt" "$manifest"
  else
    rm -f "$manifest"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# 1. Build the package.
if ! timeout 120 "$cpack" -G DEB --config "$build_dir/CPackConfig.cmake" -B "$tmp/out" \
    >"$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log" >&2
  fail "cpack -G DEB failed"
fi
arch=$(dpkg --print-architecture)
deb="$tmp/out/tally_${version}_${arch}.deb"
[ -f "$deb" ] || fail "expected $deb; cpack wrote: $(ls "$tmp/out")"
echo "built $(basename "$deb") ($(stat -c %s "$deb") bytes)"

# 2. Control fields.
field() { dpkg-deb --field "$deb" "$1"; }
[ "$(field Package)" = tally ] || fail "Package is '$(field Package)', expected tally"
[ "$(field Version)" = "$version" ] || fail "Version is '$(field Version)', expected $version"
[ "$(field Architecture)" = "$arch" ] || fail "Architecture is '$(field Architecture)'"
[ "$(field Section)" = net ] || fail "Section is '$(field Section)', expected net"
depends=$(field Depends)
# dpkg-shlibdeps computed them: the C and C++ runtimes every binary links.
[[ "$depends" == *libc6* && "$depends" == *libstdc++6* ]] ||
  fail "Depends '$depends' lacks libc6 and libstdc++6: were they computed by dpkg-shlibdeps?"
# The libraries Tally loads at run time (dlopen) are recommended, not required.
recommends=$(field Recommends)
for lib in libisal2 libfabric1 libibverbs1 libssl3; do
  [[ "$recommends" == *"$lib"* ]] || fail "Recommends '$recommends' lacks $lib"
  [[ "$depends" != *"$lib"* ]] || fail "Depends names $lib, which Tally only loads at run time"
done
for name in Maintainer Homepage Description; do
  [ -n "$(field "$name")" ] || fail "control field $name is empty"
done
description=$(field Description)
[ "$(sed -n 1p <<<"$description")" != "$(sed -n 2p <<<"$description" | sed 's/^ //')" ] ||
  fail "Description repeats its summary line"
echo "Depends: $depends"

# 3. File list: "MODE OWNER SIZE DATE TIME PATH [-> TARGET]".
dpkg-deb --contents "$deb" >"$tmp/contents"
entry() { awk -v p="./$1" '$6 == p' "$tmp/contents"; }
for exe in usr/bin/tally usr/bin/tally-reducer; do
  [[ "$(entry "$exe")" == -rwxr-xr-x* ]] || fail "$exe missing or not executable"
done
plugin="usr/$libdir/libnccl-net-tally.so"
[[ "$(entry "$plugin")" == -rw* ]] || fail "$plugin missing"
link=$(entry "usr/$libdir/libnccl-net.so")
[[ "$link" == l*"-> libnccl-net-tally.so" ]] ||
  fail "usr/$libdir/libnccl-net.so is not a link to libnccl-net-tally.so: '$link'"
for doc in "$source_dir"/docs/*.md; do
  [ -n "$(entry "usr/share/doc/tally/$(basename "$doc")")" ] ||
    fail "usr/share/doc/tally/$(basename "$doc") missing"
done
if [ -d "$source_dir/examples" ]; then
  for example in "$source_dir"/examples/*; do
    [ -n "$(entry "usr/share/tally/examples/$(basename "$example")")" ] ||
      fail "usr/share/tally/examples/$(basename "$example") missing"
  done
fi
awk '$2 != "root/root" { print; bad = 1 } END { exit bad }' "$tmp/contents" ||
  fail "entries above are not owned by root/root"
awk '$6 != "./" && $6 !~ /^\.\/usr\// { print; bad = 1 } END { exit bad }' "$tmp/contents" ||
  fail "entries above are outside /usr"

# 4. Extract and run.
dpkg-deb --extract "$deb" "$tmp/root"
help=$("$tmp/root/usr/bin/tally" --help)
for cmd in launch plan doctor; do
  grep -qw "$cmd" <<<"$help" || fail "tally --help does not list $cmd"
done
"$tmp/root/usr/bin/tally-reducer" --help >/dev/null || fail "tally-reducer --help failed"
"$plugin_check" "$tmp/root/$plugin" "$tmp/root/usr/$libdir/libnccl-net.so" ||
  fail "the packaged plugin does not load with its v11 tables"
# A sanitized build's runtime must come first in the process; preloading the plugin breaks that.
if [ -z "$sanitize" ]; then
  if "$plugin_check" --global >/dev/null 2>&1; then
    fail "the check finds the tables in its global scope without LD_PRELOAD"
  fi
  LD_PRELOAD="$tmp/root/$plugin" "$plugin_check" --global ||
    fail "LD_PRELOAD of the packaged plugin does not put its tables in the global scope"
fi
echo "PASS: tally_${version}_${arch}.deb"
