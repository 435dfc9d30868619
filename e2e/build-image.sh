#!/usr/bin/env bash
# Build the berth image from the Dockerfile with buildah, without a daemon and without pulling anything.
#
# The Dockerfile's base (ARG BASE, python:3.11-slim by default) cannot be pulled here, so the base is made
# from Debian's packages: debootstrap bookworm (minbase) with python3.11 and python3-venv, imported into
# buildah storage. Everything is cached OUTSIDE the repository:
#   ${BERTH_CACHE:-$HOME/.cache/berth}/image-base/<key>/rootfs.tar   the debootstrapped base
#   ${BERTH_CACHE:-$HOME/.cache/berth}/image-storage/<driver>/         buildah storage: images and layers
# and pip's downloads in buildah's cache mount (the Dockerfile's RUN --mount=type=cache). The storage
# driver is overlay where this kernel mounts it, else vfs (slower: each layer is a full copy).
# The image is tagged with a hash of what the build copies (Dockerfile, pyproject.toml, README.md,
# berth/); when that image is already in storage nothing is built.
#
# stdout: IMAGE=<name>, BUILDAH_ROOT=<storage>, BUILDAH_RUNROOT=<dir>, BUILDAH_DRIVER=<driver>, one a line:
# run `buildah --root "$BUILDAH_ROOT" --runroot "$BUILDAH_RUNROOT" --storage-driver "$BUILDAH_DRIVER" ...`
# on the image. stderr: progress and timings.
# Env: BERTH_CACHE (cache root), BERTH_FORCE_REBUILD=1 (build even if the image exists),
#      BERTH_BUILDAH_DRIVER (overlay or vfs instead of the probe).
set -euo pipefail
exec 3>&1 1>&2

log() { printf '[build-image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_ROOT="${BERTH_CACHE:-$HOME/.cache/berth}"
case "$CACHE_ROOT/" in "$ROOT"/*) die "cache $CACHE_ROOT is inside the repository; set BERTH_CACHE elsewhere" ;; esac

SUITE=bookworm
MIRROR="${BERTH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# What python:3.11-slim has that berth uses: Python 3.11 with venv, CA certificates, `python`.
PACKAGES=python3.11,python3-venv,python-is-python3,ca-certificates

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/image.lock"
flock 9  # one build at a time on this machine; a second run then finds the image built

missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if ((${#missing[@]})); then
  log "installing ${missing[*]} (Debian packages)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

RUNROOT="${XDG_RUNTIME_DIR:-/tmp}/berth-buildah-run"
probe_overlay() { # overlay works when a container of it can be mounted
  local root="$CACHE_ROOT/image-storage/overlay" c
  c="$(buildah --root "$root" --runroot "$RUNROOT" --storage-driver overlay from scratch 2>/dev/null)" || return 1
  buildah --root "$root" --runroot "$RUNROOT" --storage-driver overlay mount "$c" >/dev/null 2>&1
  local ok=$?
  buildah --root "$root" --runroot "$RUNROOT" --storage-driver overlay rm "$c" >/dev/null 2>&1
  return $ok
}
DRIVER="${BERTH_BUILDAH_DRIVER:-}"
[[ -n "$DRIVER" ]] || { probe_overlay && DRIVER=overlay || DRIVER=vfs; }
STORAGE="$CACHE_ROOT/image-storage/$DRIVER"
bh() { buildah --root "$STORAGE" --runroot "$RUNROOT" --storage-driver "$DRIVER" "$@"; }
has_image() { bh inspect --type image "$1" >/dev/null 2>&1; }

t0=$SECONDS
BASE_KEY="$SUITE-$(printf '%s' "$PACKAGES" | sha256sum | cut -c1-12)"
BASE_DIR="$CACHE_ROOT/image-base/$BASE_KEY"
BASE_TAR="$BASE_DIR/rootfs.tar"
BASE_IMAGE="localhost/berth-base:$BASE_KEY"
if [[ ! -s "$BASE_TAR" ]]; then
  log "debootstrap $SUITE ($PACKAGES) into $BASE_DIR"
  mkdir -p "$BASE_DIR"
  work="$(mktemp -d "$BASE_DIR/tmp.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/rootfs" "$MIRROR" \
    >"$BASE_DIR/debootstrap.log" 2>&1 || { tail -20 "$BASE_DIR/debootstrap.log"; die "debootstrap failed"; }
  # What a container base leaves out: downloaded packages and package lists.
  rm -rf "$work/rootfs"/var/cache/apt/archives/*.deb "$work/rootfs"/var/lib/apt/lists/*
  tar --numeric-owner -C "$work/rootfs" -cf "$work/rootfs.tar" .
  mv "$work/rootfs.tar" "$BASE_TAR"
  rm -rf "$work"
  trap - EXIT
  log "base root filesystem: $(du -h "$BASE_TAR" | cut -f1) after $((SECONDS - t0)) s"
fi
if [[ -n "${BERTH_FORCE_REBUILD:-}" ]] || ! has_image "$BASE_IMAGE"; then
  log "importing the base into buildah storage as $BASE_IMAGE"
  ctr="$(bh from scratch)"
  bh add "$ctr" "$BASE_TAR" / >/dev/null
  bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --cmd python3 "$ctr"
  bh commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
fi

# The tag: a hash of exactly what the build reads.
KEY="$(cd "$ROOT" && { find berth -type f ! -path '*/__pycache__/*' ! -name '*.pyc' | LC_ALL=C sort |
  xargs sha256sum; sha256sum Dockerfile pyproject.toml README.md .dockerignore; } |
  sha256sum | cut -c1-16)"
IMAGE="localhost/berth:ci-$KEY"
if [[ -n "${BERTH_FORCE_REBUILD:-}" ]] || ! has_image "$IMAGE"; then
  t1=$SECONDS
  untagged() { bh images -a --format '{{.ID}} {{.Name}}' | awk '$2 == "<none>" || $2 == "" { print $1 }'; }
  earlier="$(untagged)"
  log "building $IMAGE from the Dockerfile on $BASE_IMAGE"
  # The build's pip reaches PyPI as this machine's pip does: with its configuration and CA bundle (a
  # proxy that re-signs TLS), lent to the RUN steps only, never part of the image.
  lent=()
  for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do [[ -f "$f" ]] && lent+=(-v "$f:$f:ro"); done
  bh build --isolation chroot --layers "${lent[@]}" --build-arg "BASE=$BASE_IMAGE" -t "$IMAGE" \
    -f "$ROOT/Dockerfile" "$ROOT" \
    >"$CACHE_ROOT/image-build.log" 2>&1 || { tail -30 "$CACHE_ROOT/image-build.log"; die "buildah build failed"; }
  log "built in $((SECONDS - t1)) s"
  # Keep this build's image and layers (the next build reuses them) and the base; earlier builds' images
  # and layers this build did not reuse would only fill the disk.
  bh images --format '{{.Name}}:{{.Tag}} {{.ID}}' | while read -r name id; do
    if [[ "$name" == localhost/berth:ci-* && "$name" != "$IMAGE" ]]; then bh rmi "$id" >/dev/null 2>&1 || true; fi
  done
  reused="$(grep -o 'Using cache [0-9a-f]*' "$CACHE_ROOT/image-build.log" | cut -c13-24 || true)"
  for id in $earlier; do
    grep -q "^$id" <<<"$reused" || bh rmi "$id" >/dev/null 2>&1 || true
  done
fi
log "image $IMAGE ($DRIVER storage) ready after $((SECONDS - t0)) s"
printf 'IMAGE=%s\nBUILDAH_ROOT=%s\nBUILDAH_RUNROOT=%s\nBUILDAH_DRIVER=%s\n' "$IMAGE" "$STORAGE" "$RUNROOT" "$DRIVER" >&3
