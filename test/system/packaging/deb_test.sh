#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian packages from a built tree with `cpack -G DEB` (into a temporary folder, never
# the build tree): tally-nccl-plugin, tally-reducer and tally-tools. Checks their control fields
# and file lists with dpkg-deb, runs lintian on them (no error and no warning may remain), then
# extracts them into one scratch root and runs what they hold: tally and tally-reducer start, and
# the plugin loads by its path, by its name NCCL_NET_PLUGIN=tally, through a libnccl-net.so link
# made as docs/packaging.md says (the packages ship none), and from LD_PRELOAD (STATIC_PLUGIN).
#
# Usage: deb_test.sh BUILD_DIR CPACK VERSION LIBDIR PLUGIN_CHECK SOURCE_DIR SANITIZE
# VERSION is the Debian version, with its revision (0.1.0-1). Exit 77 (skipped) on a machine
# without dpkg-deb.
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
for tool in dpkg-shlibdeps file lintian; do
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

# 1. Build the packages.
if ! timeout 120 "$cpack" -G DEB --config "$build_dir/CPackConfig.cmake" -B "$tmp/out" \
    >"$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log" >&2
  fail "cpack -G DEB failed"
fi
[[ $version == *-* ]] || fail "version $version has no Debian revision"
arch=$(dpkg --print-architecture)
packages=(tally-nccl-plugin tally-reducer tally-tools)
declare -A deb=()
for p in "${packages[@]}"; do
  deb[$p]="$tmp/out/${p}_${version}_${arch}.deb"
  [ -f "${deb[$p]}" ] || fail "expected ${deb[$p]}; cpack wrote: $(ls "$tmp/out")"
  echo "built $(basename "${deb[$p]}") ($(stat -c %s "${deb[$p]}") bytes)"
done
[ "$(find "$tmp/out" -maxdepth 1 -name '*.deb' | wc -l)" = ${#packages[@]} ] ||
  fail "cpack wrote other packages too: $(ls "$tmp/out")"

# 2. Control fields.
field() { dpkg-deb --field "${deb[$1]}" "$2"; }
for p in "${packages[@]}"; do
  [ "$(field "$p" Package)" = "$p" ] || fail "$p: Package is '$(field "$p" Package)'"
  [ "$(field "$p" Version)" = "$version" ] || fail "$p: Version is '$(field "$p" Version)'"
  [ "$(field "$p" Architecture)" = "$arch" ] || fail "$p: Architecture is wrong"
  for name in Maintainer Description Section; do
    [ -n "$(field "$p" "$name")" ] || fail "$p: control field $name is empty"
  done
  # The project's own name, and no placeholder homepage (it has none yet).
  [[ "$(field "$p" Maintainer)" == "Tally project maintainers <"* ]] ||
    fail "$p: Maintainer is '$(field "$p" Maintainer)'"
  [ -z "$(field "$p" Homepage)" ] || fail "$p: Homepage '$(field "$p" Homepage)' was invented"
  description=$(field "$p" Description)
  [ "$(sed -n 1p <<<"$description")" != "$(sed -n 2p <<<"$description" | sed 's/^ //')" ] ||
    fail "$p: Description repeats its summary line"
  # dpkg-shlibdeps computed them: every binary links the C runtime.
  [[ "$(field "$p" Depends)" == *"libc6 (>="* ]] || fail "$p: Depends lacks a versioned libc6"
  echo "$p Depends: $(field "$p" Depends)"
done
# A GPU worker image installs the plugin (and tools): neither may pull in the reducer's
# prometheus-cpp. The plugin links libstdc++ statically, so libc6 is all it needs.
[[ "$(field tally-nccl-plugin Depends)" =~ ^libc6\ \([^,]*\)$ ]] ||
  fail "tally-nccl-plugin Depends '$(field tally-nccl-plugin Depends)', expected libc6 only"
[[ "$(field tally-tools Depends)" != *prometheus* ]] || fail "tally-tools depends on prometheus-cpp"
[[ "$(field tally-tools Depends)" == *"tally-nccl-plugin (= $version)"* ]] ||
  fail "tally-tools does not depend on tally-nccl-plugin (= $version)"
[[ "$(field tally-reducer Depends)" == *libprometheus-cpp-pull* ]] ||
  fail "tally-reducer Depends lacks prometheus-cpp (was it computed by dpkg-shlibdeps?)"
# Each package names the others it works with: the tools run the reducer in a job's reducer pool
# (`tally launch`), and the plugin and the reducer are driven by the tools.
declare -A suggests=([tally-tools]=tally-reducer [tally-nccl-plugin]=tally-tools
                     [tally-reducer]=tally-tools)
for p in "${packages[@]}"; do
  [ "$(field "$p" Suggests)" = "${suggests[$p]}" ] ||
    fail "$p: Suggests is '$(field "$p" Suggests)', expected ${suggests[$p]}"
done
# The libraries Tally loads at run time (dlopen) are recommended, not required.
for p in tally-nccl-plugin tally-reducer; do
  for lib in libisal2 libfabric1 libibverbs1 libssl3; do
    [[ "$(field "$p" Recommends)" == *"$lib"* ]] || fail "$p: Recommends lacks $lib"
    [[ "$(field "$p" Depends)" != *"$lib"* ]] || fail "$p: Depends names $lib, loaded at run time"
  done
done
# The ldconfig trigger, and no maintainer scripts (CPack's run ldconfig).
for p in "${packages[@]}"; do
  dpkg-deb --ctrl-tarfile "${deb[$p]}" | tar -t >"$tmp/$p.control"
  ! grep -qE 'post(inst|rm)|pre(inst|rm)' "$tmp/$p.control" ||
    fail "$p has maintainer scripts: $(tr '\n' ' ' <"$tmp/$p.control")"
done
[ "$(dpkg-deb --info "${deb[tally-nccl-plugin]}" triggers)" = "activate-noawait ldconfig" ] ||
  fail "tally-nccl-plugin has no 'activate-noawait ldconfig' trigger"

# 3. File lists: "MODE OWNER SIZE DATE TIME PATH [-> TARGET]".
for p in "${packages[@]}"; do dpkg-deb --contents "${deb[$p]}" >"$tmp/$p.contents"; done
entry() { awk -v p="./$2" '$6 == p' "$tmp/$1.contents"; }
[[ "$(entry tally-tools usr/bin/tally)" == -rwxr-xr-x* ]] || fail "tally-tools: no usr/bin/tally"
[[ "$(entry tally-reducer usr/bin/tally-reducer)" == -rwxr-xr-x* ]] ||
  fail "tally-reducer: no usr/bin/tally-reducer"
[ -n "$(entry tally-tools usr/share/man/man1/tally.1.gz)" ] ||
  fail "tally-tools: no man page (is help2man installed?)"
# One page for each command of tally (test/docs/check_man_pages.py checks what is on them).
for command in launch plan doctor bench demo env; do
  [ -n "$(entry tally-tools "usr/share/man/man1/tally-$command.1.gz")" ] ||
    fail "tally-tools: no man page for tally $command"
done
[ -n "$(entry tally-reducer usr/share/man/man1/tally-reducer.1.gz)" ] ||
  fail "tally-reducer: no man page"
plugin="usr/$libdir/libnccl-net-tally.so"
[[ "$(entry tally-nccl-plugin "$plugin")" == -rw* ]] || fail "tally-nccl-plugin: no $plugin"
# The NCCL config line that keeps the plugin loaded across communicators (NCCL 2.27 to 2.29).
grep -qx 'NCCL_NET_PLUGIN_REF_COUNT=1' \
  <(dpkg-deb --fsys-tarfile "${deb[tally-nccl-plugin]}" | tar -xO ./usr/share/tally/nccl.conf) ||
  fail "tally-nccl-plugin: usr/share/tally/nccl.conf does not set NCCL_NET_PLUGIN_REF_COUNT=1"
# Installed under its own name only: a libnccl-net.so would take over every NCCL process.
cat "$tmp"/*.contents >"$tmp/all.contents"
! grep -q 'libnccl-net\.so' "$tmp/all.contents" || fail "a package ships libnccl-net.so"
[ "$(grep -c '\.so' "$tmp/tally-nccl-plugin.contents")" = 1 ] ||
  fail "tally-nccl-plugin holds other libraries: $(grep '\.so' "$tmp/tally-nccl-plugin.contents")"
for p in "${packages[@]}"; do
  for doc in copyright changelog.Debian.gz; do
    [ -n "$(entry "$p" "usr/share/doc/$p/$doc")" ] || fail "$p: no usr/share/doc/$p/$doc"
  done
  grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' \
    <(dpkg-deb --fsys-tarfile "${deb[$p]}" | tar -xO "./usr/share/doc/$p/copyright") ||
    fail "$p: copyright is not machine-readable (DEP-5)"
  grep -qx 'License: Apache-2.0' \
    <(dpkg-deb --fsys-tarfile "${deb[$p]}" | tar -xO "./usr/share/doc/$p/copyright") ||
    fail "$p: copyright does not grant the Apache License 2.0"
done
for doc in "$source_dir"/README.md "$source_dir"/docs/*.md; do
  name=$(basename "$doc")
  # The docs' own index is installed as index.md, beside the project's README (CMakeLists.txt).
  [ "$doc" = "$source_dir/docs/README.md" ] && name=index.md
  [ -n "$(entry tally-tools "usr/share/doc/tally-tools/$name")" ] ||
    fail "tally-tools: usr/share/doc/tally-tools/$name missing"
done
if [ -d "$source_dir/examples" ]; then
  for example in "$source_dir"/examples/*; do
    [ -n "$(entry tally-tools "usr/share/tally/examples/$(basename "$example")")" ] ||
      fail "tally-tools: usr/share/tally/examples/$(basename "$example") missing"
  done
fi
awk '$2 != "root/root" { print; bad = 1 } END { exit bad }' "$tmp/all.contents" ||
  fail "entries above are not owned by root/root"
awk '$6 != "./" && $6 !~ /^\.\/usr\// { print; bad = 1 } END { exit bad }' "$tmp/all.contents" ||
  fail "entries above are outside /usr"

# 4. lintian: no error and no warning (info tags, such as the hardening ones of a developer
# build, are allowed). Its overrides are in cmake/debian.
lintian --no-cfg "${deb[@]}" >"$tmp/lintian.log" 2>&1 || true
if grep -E '^[EW]: ' "$tmp/lintian.log"; then
  fail "lintian reports the errors or warnings above"
fi
# Anything else it printed that is not a tag is an error of lintian itself.
if grep -vE '^[IPNOX]: |root privileges is not recommended' "$tmp/lintian.log"; then
  fail "lintian printed the lines above"
fi
echo "lintian: no errors, no warnings"

# 5. Extract all three into one root and run them.
for p in "${packages[@]}"; do dpkg-deb --extract "${deb[$p]}" "$tmp/root"; done
help=$("$tmp/root/usr/bin/tally" --help)
for cmd in launch plan doctor; do
  grep -qw "$cmd" <<<"$help" || fail "tally --help does not list $cmd"
done
[ "$("$tmp/root/usr/bin/tally" --version)" = "tally ${version%-*}" ] ||
  fail "tally --version says '$("$tmp/root/usr/bin/tally" --version)'"
"$tmp/root/usr/bin/tally-reducer" --help >/dev/null || fail "tally-reducer --help failed"
# The opt-in of docs/packaging.md: a libnccl-net.so link made by the user.
ln -s libnccl-net-tally.so "$tmp/root/usr/$libdir/libnccl-net.so"
"$plugin_check" "$tmp/root/$plugin" "$tmp/root/usr/$libdir/libnccl-net.so" ||
  fail "the packaged plugin does not load with its v11 and v12 tables"
# NCCL_NET_PLUGIN=tally: NCCL opens libnccl-net-tally.so by name, through the loader's path.
LD_LIBRARY_PATH="$tmp/root/usr/$libdir" "$plugin_check" libnccl-net-tally.so ||
  fail "the packaged plugin does not load by its name libnccl-net-tally.so"
# A sanitized build's runtime must come first in the process; preloading the plugin breaks that.
if [ -z "$sanitize" ]; then
  if "$plugin_check" --global >/dev/null 2>&1; then
    fail "the check finds the tables in its global scope without LD_PRELOAD"
  fi
  LD_PRELOAD="$tmp/root/$plugin" "$plugin_check" --global ||
    fail "LD_PRELOAD of the packaged plugin does not put its tables in the global scope"
fi
echo "PASS: ${packages[*]} ${version}"
