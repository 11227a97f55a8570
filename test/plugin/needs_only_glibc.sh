#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# NCCL dlopens the plugin with RTLD_LOCAL and silently falls back to its own net when that fails,
# so the library may need nothing from the host but glibc:
#   - every NEEDED entry is one of glibc's libraries;
#   - no imported symbol carries a libstdc++ or libgcc version (GLIBCXX_, CXXABI_, GCC_): the C++
#     runtime is linked in statically, so an older libstdc++ in the process cannot break the load.
# Sanitizer builds link the sanitizer runtimes and the shared C++ runtime: skipped (77) there.
#   needs_only_glibc.sh LIBRARY [TALLY_SANITIZE]
set -euo pipefail
lib=$1
sanitize=${2:-}
if [ -n "$sanitize" ]; then
  echo "SKIP: a sanitizer build ($sanitize) links the sanitizer and C++ runtimes"
  exit 77
fi
readonly allowed='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1)$'
status=0

needed=$(readelf -d "$lib" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $5); print $5 }')
[ -n "$needed" ] || { echo "FAIL $lib: readelf listed no NEEDED entry at all"; exit 1; }
while IFS= read -r entry; do
  if [[ $entry =~ $allowed ]]; then
    echo "ok   NEEDED $entry"
  else
    echo "FAIL NEEDED $entry: not glibc; link it statically or dlopen it at run time"
    status=1
  fi
done <<<"$needed"

# Undefined dynamic symbols with their version: "... *UND* ... (GLIBCXX_3.4.30) name"
undefined=$(objdump -T "$lib" | awk '$0 ~ /\*UND\*/')
[ -n "$undefined" ] || { echo "FAIL $lib: objdump listed no undefined symbol at all"; exit 1; }
runtime=$(grep -E '(GLIBCXX|CXXABI|GCC)_[0-9]' <<<"$undefined" || true)
if [ -n "$runtime" ]; then
  echo "FAIL symbols that need the host's C++ runtime:"
  sed 's/^/     /' <<<"$runtime"
  status=1
else
  echo "ok   $(wc -l <<<"$undefined") undefined symbols, none versioned GLIBCXX_, CXXABI_ or GCC_"
fi
exit $status
