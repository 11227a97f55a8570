#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds Tally's container images from docker/*.Dockerfile, then checks each one from the inside:
# the packages it holds, its entrypoint and user, the plugin path NCCL is told, and, in the
# reducer image, a local all-reduce (`tally demo`) run through the entrypoint.
#
# With a Docker engine it uses `docker build`. Without one (as on Tally's build and CI machines)
# it uses buildah, daemonless, with chroot isolation; buildah needs the base images locally or
# from a registry, and where no registry answers, --bootstrap-base makes debian:bookworm and
# debian:bookworm-slim with debootstrap from the Debian mirror that apt uses.
#
# Usage: scripts/build-images.sh [options]
#   --engine docker|buildah   default: docker when `docker info` answers, else buildah
#   --bootstrap-base          buildah: debootstrap the Debian base images when they are missing
#   --pytorch-base IMAGE      BASE of docker/pytorch.Dockerfile (default: the Dockerfile's own)
#   --no-pytorch              build the reducer image only
#   --tag PREFIX              image names PREFIX-reducer, PREFIX-pytorch, PREFIX-pytorch-preload
#                             (default localhost/tally)
#   --check-only              build nothing: check the images already tagged so
# Installs buildah (and debootstrap) with apt when run as root and they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

engine="" bootstrap=0 pytorch=1 pytorch_base="" prefix=localhost/tally build_images=1
while [ $# -gt 0 ]; do
  case $1 in
    --engine) engine=$2; shift 2 ;;
    --bootstrap-base) bootstrap=1; shift ;;
    --pytorch-base) pytorch_base=$2; shift 2 ;;
    --no-pytorch) pytorch=0; shift ;;
    --tag) prefix=$2; shift 2 ;;
    --check-only) build_images=0; shift ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-images: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "build-images: $*" >&2; exit 1; }
step() { echo "=== build-images: $*"; }

if [ -z "$engine" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then engine=docker
  else engine=buildah; fi
fi
case $engine in docker | buildah) ;; *) die "--engine is docker or buildah, not $engine" ;; esac

need() {  # need COMMAND PACKAGE: install PACKAGE with apt when COMMAND is missing
  command -v "$1" >/dev/null 2>&1 && return
  [ "$(id -u)" = 0 ] || die "$1 is missing; install the Debian package $2"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$2" >/dev/null ||
    die "apt-get install $2 failed"
}

if [ $engine = buildah ]; then
  need buildah buildah
fi
# vfs works in any container or VM (no overlay mount needed); STORAGE_DRIVER=overlay picks
# another. Chroot isolation needs no user namespaces or OCI runtime.
buildah() { command buildah --storage-driver "${STORAGE_DRIVER:-vfs}" "$@"; }
export BUILDAH_ISOLATION=chroot

work=$(mktemp -d /tmp/tally-images.XXXXXX)
containers=()
cleanup() {
  local c
  for c in "${containers[@]}"; do buildah rm "$c" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# ---- base images (buildah): local, else pulled, else bootstrapped when asked ----
haveImage() { buildah inspect --type image "$1" >/dev/null 2>&1; }
bootstrapBase() {
  need debootstrap debootstrap
  local mirror rootfs=$work/rootfs c
  # The mirror apt already uses (deb822 or one-line sources), else Debian's own.
  mirror=$(sed -nE 's#^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)(https?://[^[:space:]]+).*#\3#p' \
    /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
    grep -v security | head -1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  step "debootstrap bookworm (minbase) from $mirror"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -cf "$work/rootfs.tar" .
  rm -rf "$rootfs"
  c=$(buildah from scratch)
  containers+=("$c")
  buildah add "$c" "$work/rootfs.tar" / >/dev/null
  buildah config --cmd /bin/bash "$c"
  buildah commit -q "$c" docker.io/library/debian:bookworm >/dev/null
  buildah tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
  rm -f "$work/rootfs.tar"
}
ensureBase() {
  local image=$1
  [ $engine = buildah ] && [ $build_images = 1 ] || return 0
  haveImage "$image" && return
  if timeout 120 buildah pull -q "$image" >/dev/null 2>&1; then return; fi
  [[ $image == debian:bookworm* || $image == docker.io/library/debian:bookworm* ]] && [ $bootstrap = 1 ] ||
    die "no image $image here and none could be pulled (for debian:bookworm: --bootstrap-base)"
  bootstrapBase
}

# ---- the build context: the working tree's tracked and untracked, not ignored, files ----
if [ $build_images = 1 ]; then
  step "context from $root"
  mkdir "$work/context"
  git -C "$root" ls-files -z --cached --others --exclude-standard |
    (cd "$root" && xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) |
    tar -C "$root" --null -T - -cf - | tar -C "$work/context" -xf -
fi

build() {  # build TAG DOCKERFILE [build args...]
  local tag=$1 file=$2
  shift 2
  [ $build_images = 1 ] || return 0
  step "build $tag from $file $*"
  local start=$SECONDS
  if [ $engine = docker ]; then
    docker build -f "$work/context/$file" -t "$tag" "$@" "$work/context"
  else
    buildah bud --pull-never --layers -f "$work/context/$file" -t "$tag" "$@" "$work/context"
  fi
  echo "=== build-images: $tag built in $((SECONDS - start)) s"
}

# ---- looking inside an image ----
field() {  # field IMAGE GO-TEMPLATE-OF-THE-OCI-CONFIG (a list prints as [a b c])
  if [ $engine = docker ]; then
    docker image inspect --format "{{${2/.OCIv1.Config/.Config}}}" "$1"
  else
    buildah inspect --type image --format "{{$2}}" "$1"
  fi
}
inside() {  # inside IMAGE COMMAND...: runs COMMAND through the image's entrypoint
  local image=$1
  shift
  if [ $engine = docker ]; then
    docker run --rm --network host "$image" "$@"
  else
    local c entry words user rc=0
    entry=$(field "$image" .OCIv1.Config.Entrypoint)
    read -ra words <<<"${entry//[][]/}"
    user=$(field "$image" .OCIv1.Config.User)
    c=$(buildah from --pull-never "$image")
    buildah run --network host ${user:+--user "$user"} "$c" -- "${words[@]}" "$@" || rc=$?
    buildah rm "$c" >/dev/null
    return $rc
  fi
}
failures=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@" >"$work/check.log" 2>&1; then
    echo "ok   $what"
  else
    echo "FAIL $what" >&2
    sed 's/^/     /' "$work/check.log" >&2
    failures=$((failures + 1))
  fi
}
equals() { [ "$1" = "$2" ] || { echo "got '$1', expected '$2'"; return 1; }; }
hasLine() { grep -qx -- "$1" <<<"$2" || { echo "no line '$1' in:"; echo "$2"; return 1; }; }
shellIn() { local image=$1; shift; inside "$image" sh -c "$*"; }

checkCommon() {  # checkCommon IMAGE: what every image has
  local image=$1
  check "$image: entrypoint is tally launch --" \
    equals "$(field "$image" .OCIv1.Config.Entrypoint)" "[tally launch --]"
  check "$image: tally --version" inside "$image" tally --version
  check "$image: tally-nccl-plugin holds libnccl-net-tally.so" shellIn "$image" \
    'f=$(dpkg -L tally-nccl-plugin | grep "/libnccl-net-tally.so$") && test -f "$f"'
  check "$image: no libnccl-net.so that would take over NCCL" shellIn "$image" \
    '! ls /usr/lib/libnccl-net.so /usr/lib/*/libnccl-net.so 2>/dev/null'
}

# ---- the reducer image ----
ensureBase docker.io/library/debian:bookworm
ensureBase docker.io/library/debian:bookworm-slim
reducer=$prefix-reducer
build "$reducer" docker/reducer.Dockerfile
checkCommon "$reducer"
check "$reducer: runs as the user tally" equals "$(field "$reducer" .OCIv1.Config.User)" tally
check "$reducer: tally-reducer --version" inside "$reducer" tally-reducer --version
check "$reducer: the three packages are installed" inside "$reducer" \
  dpkg-query -W tally-nccl-plugin tally-reducer tally-tools
check "$reducer: tally demo (2 workers, 2 reducers, checked all-reduce through the plugin)" \
  inside "$reducer" tally demo --workers 2 --reducers 2 --sizes 64K,1M --iters 2 --warmup 1

# ---- the PyTorch images: both ways NCCL finds the plugin ----
if [ $pytorch = 1 ]; then
  args=()
  if [ -n "$pytorch_base" ]; then
    args=(--build-arg "BASE=$pytorch_base")
    ensureBase "$pytorch_base"
  fi
  for target in plugin-path preload; do
    tag=$prefix-pytorch
    [ $target = preload ] && tag=$prefix-pytorch-preload
    build "$tag" docker/pytorch.Dockerfile --target "$target" "${args[@]}"
    checkCommon "$tag"
    check "$tag: no tally-reducer, so no prometheus-cpp" shellIn "$tag" \
      '! dpkg-query -W -f "\${Status}" tally-reducer 2>/dev/null | grep -q "ok installed" &&
       ! ls /usr/lib/*/libprometheus-cpp* 2>/dev/null'
    check "$tag: the plugin at /usr/lib/libnccl-net-tally.so" inside "$tag" \
      test -f /usr/lib/libnccl-net-tally.so
    env=$(inside "$tag" env)
    check "$tag: NCCL_NET_PLUGIN_REF_COUNT=1, so NCCL 2.27 to 2.29 keep the plugin loaded" \
      hasLine NCCL_NET_PLUGIN_REF_COUNT=1 "$env"
    if [ $target = plugin-path ]; then
      check "$tag: NCCL_NET_PLUGIN is the plugin's path" \
        hasLine NCCL_NET_PLUGIN=/usr/lib/libnccl-net-tally.so "$env"
    else
      check "$tag: LD_PRELOAD is the plugin's path" \
        hasLine LD_PRELOAD=/usr/lib/libnccl-net-tally.so "$env"
      check "$tag: NCCL_NET_PLUGIN=STATIC_PLUGIN, as LD_PRELOAD needs" \
        hasLine NCCL_NET_PLUGIN=STATIC_PLUGIN "$env"
      check "$tag: a process starts with the plugin preloaded" shellIn "$tag" \
        'grep -q libnccl-net-tally.so /proc/self/maps'
    fi
  done
fi

if [ $failures -ne 0 ]; then die "$failures check(s) failed"; fi
step "all images built and checked ($engine)"
