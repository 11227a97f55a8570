#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Building the images takes half an hour here (scripts/build-images.sh, `make images`, builds
# and checks them without a Docker engine), too long for every test run; this checks the
# Dockerfiles against the repository in a second, so that they cannot rot unseen:
#   - every COPY source in the build context exists, and every COPY --from names an earlier stage;
#   - every scripts/... path a RUN names exists, and every NAME_*.deb it names is a package that
#     cmake/packaging.cmake builds; a GPU worker image (ARG BASE) installs no tally-reducer, whose
#     prometheus-cpp a worker does not need;
#   - every stage that is an image (all but those named build*) has, or inherits,
#     ENTRYPOINT ["tally", "launch", "--"];
#   - with ARG BASE, every stage not built on another stage is FROM ${BASE} (the plugin is built
#     on the image it runs in);
#   - a plugin path in NCCL_NET_PLUGIN or LD_PRELOAD is /usr/<libdir>/libnccl-net-tally.so for
#     the -DCMAKE_INSTALL_LIBDIR the same file builds with, and LD_PRELOAD comes with
#     NCCL_NET_PLUGIN=STATIC_PLUGIN; an image that sets the plugin offers both ways, and every
#     stage that sets it has, or inherits, NCCL_NET_PLUGIN_REF_COUNT=1 (NCCL 2.27 to 2.29 forget
#     the plugin after a process's last communicator otherwise).
#
# Usage: dockerfiles_test.sh SOURCE_DIR
set -euo pipefail

root=$1
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# One instruction a line: continuation lines joined, comment and blank lines dropped.
instructions() {
  awk '
    /^[[:space:]]*(#.*)?$/ { next }
    {
      line = $0
      if (sub(/\\[[:space:]]*$/, "", line)) { buf = buf line " "; next }
      print buf line
      buf = ""
    }
    END { if (buf != "") print buf }' "$1"
}

readonly kEntrypoint='["tally","launch","--"]'

checkDockerfile() {
  local file=$1 name
  name=$(basename "$file")
  local -A entry=() env_plugin=() env_preload=() env_refcount=()
  local stage="" stages=() has_base=0 libdir="" line keyword rest
  libdir=$(grep -o -- '-DCMAKE_INSTALL_LIBDIR=[^[:space:]"]*' "$file" | head -1 | cut -d= -f2 ||
    true)
  while IFS= read -r line; do
    read -r keyword rest <<<"$line"
    keyword=${keyword^^}
    case $keyword in
      ARG)
        [[ $rest == BASE=* || $rest == BASE ]] && has_base=1 ;;
      FROM)
        local words=() image as_name=""
        read -ra words <<<"$rest"
        [[ ${words[0]} == --platform=* ]] && words=("${words[@]:1}")
        image=${words[0]}
        if [ ${#words[@]} -ge 3 ] && [ "${words[1]^^}" = AS ]; then as_name=${words[2]}; fi
        stage=${as_name:-stage${#stages[@]}}
        stages+=("$stage")
        if [ -n "${entry[$image]+x}" ]; then
          entry[$stage]=${entry[$image]}
          env_plugin[$stage]=${env_plugin[$image]}
          env_preload[$stage]=${env_preload[$image]}
          env_refcount[$stage]=${env_refcount[$image]}
        else
          entry[$stage]=""
          env_plugin[$stage]=""
          env_preload[$stage]=""
          env_refcount[$stage]=""
          # shellcheck disable=SC2016  # the literal text ${BASE}, as the Dockerfile spells it
          if [ $has_base = 1 ] && [ "$image" != '${BASE}' ] && [ "$image" != '$BASE' ]; then
            fail "$name: stage $stage is FROM $image, not \${BASE}"
          fi
        fi ;;
      COPY | ADD)
        local words=() from="" args=() i
        read -ra words <<<"$rest"
        for ((i = 0; i < ${#words[@]}; ++i)); do
          case ${words[i]} in
            --from=*) from=${words[i]#--from=} ;;
            --*) ;;
            *) args+=("${words[i]}") ;;
          esac
        done
        if [ ${#args[@]} -lt 2 ]; then
          fail "$name: $keyword without a source and a destination: $line"
        elif [ -n "$from" ]; then
          [ -n "${entry[$from]+x}" ] || fail "$name: COPY --from=$from names no earlier stage"
        else
          for ((i = 0; i < ${#args[@]} - 1; ++i)); do
            compgen -G "$root/${args[i]}" >/dev/null ||
              fail "$name: COPY source ${args[i]} is not in the repository"
          done
        fi ;;
      RUN)
        local script
        for script in $(grep -o 'scripts/[A-Za-z0-9_./-]*' <<<"$rest" || true); do
          [ -e "$root/$script" ] || fail "$name: RUN uses $script, which is not in the repository"
        done
        local deb
        # Read, not a for over $(...): the names are globs, and nullglob would drop them.
        while read -r deb; do
          [ -n "$deb" ] || continue
          deb=${deb%_\*.deb}
          [[ " ${packages[*]} " == *" $deb "* ]] ||
            fail "$name: RUN names ${deb}_*.deb; the packages are: ${packages[*]}"
          [ $has_base = 0 ] || [ "$deb" != tally-reducer ] ||
            fail "$name: a GPU worker image (ARG BASE) installs tally-reducer"
        done < <(grep -oE '[A-Za-z0-9.+-]+_\*\.deb' <<<"$rest" || true) ;;
      ENTRYPOINT)
        [ -n "$stage" ] || fail "$name: ENTRYPOINT before FROM"
        entry[$stage]=${rest// /} ;;
      ENV)
        local pair
        for pair in $rest; do
          case $pair in
            NCCL_NET_PLUGIN=*) env_plugin[$stage]=${pair#*=} ;;
            LD_PRELOAD=*) env_preload[$stage]=${pair#*=} ;;
            NCCL_NET_PLUGIN_REF_COUNT=*) env_refcount[$stage]=${pair#*=} ;;
          esac
        done ;;
    esac
  done < <(instructions "$file")

  [ ${#stages[@]} -gt 0 ] || fail "$name: no FROM"
  local s plugin preload want="/usr/$libdir/libnccl-net-tally.so" ways=""
  for s in "${stages[@]}"; do
    [[ $s == build* ]] && continue
    [ "${entry[$s]}" = "$kEntrypoint" ] ||
      fail "$name: stage $s has ENTRYPOINT '${entry[$s]}', expected $kEntrypoint"
    plugin=${env_plugin[$s]} preload=${env_preload[$s]}
    if [ -n "$plugin$preload" ] && [ -z "$libdir" ]; then
      fail "$name: sets a plugin path but builds without -DCMAKE_INSTALL_LIBDIR: a guessed path"
    fi
    if [ -n "$plugin$preload" ] && [ "${env_refcount[$s]}" != 1 ]; then
      fail "$name: stage $s sets the plugin without NCCL_NET_PLUGIN_REF_COUNT=1"
    fi
    if [[ $plugin == /* ]]; then
      [ "$plugin" = "$want" ] || fail "$name: stage $s: NCCL_NET_PLUGIN=$plugin, installed at $want"
      ways+=" path"
    fi
    if [ -n "$preload" ]; then
      [ "$preload" = "$want" ] || fail "$name: stage $s: LD_PRELOAD=$preload, installed at $want"
      [ "$plugin" = STATIC_PLUGIN ] ||
        fail "$name: stage $s: LD_PRELOAD needs NCCL_NET_PLUGIN=STATIC_PLUGIN, has '$plugin'"
      ways+=" preload"
    fi
  done
  if [ -n "$ways" ] && { [[ $ways != *path* ]] || [[ $ways != *preload* ]]; }; then
    fail "$name: offers only:$ways (expected both NCCL_NET_PLUGIN=path and LD_PRELOAD)"
  fi
  echo "checked $name: stages ${stages[*]}"
}

# The Debian packages CPack builds: CPACK_DEBIAN_<COMPONENT>_PACKAGE_NAME.
mapfile -t packages < <(sed -n 's/^set(CPACK_DEBIAN_[A-Z]*_PACKAGE_NAME \([a-z0-9.+-]*\))$/\1/p' \
  "$root/cmake/packaging.cmake")
[ ${#packages[@]} -ge 3 ] ||
  fail "cmake/packaging.cmake names ${#packages[@]} packages: ${packages[*]}"

shopt -s nullglob
files=("$root"/docker/*.Dockerfile)
[ ${#files[@]} -ge 2 ] || fail "expected docker/reducer.Dockerfile and docker/pytorch.Dockerfile"
for f in "${files[@]}"; do
  checkDockerfile "$f"
done
if [ $failures -ne 0 ]; then
  echo "$failures problem(s)" >&2
  exit 1
fi
echo "PASS: ${#files[@]} Dockerfiles"
