#!/usr/bin/env bash
# Build a real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl, helm) and kwok (simulated kubelets) from the
# Go module proxy, without Docker.
#
# Versions come from the wrapper modules in e2e/controlplane/ (go.mod + go.sum
# are committed, so the module graph is pinned and checksum-verified):
#   e2e/controlplane/go.mod       k8s.io/kubernetes (+ staging replaces)
#   e2e/controlplane/etcd/go.mod  go.etcd.io/etcd/server/v3
#   e2e/controlplane/helm/go.mod  helm.sh/helm/v3
#   e2e/controlplane/kwok/go.mod  sigs.k8s.io/kwok
#
# Binaries go to a cache OUTSIDE the repository, keyed by those versions:
#   ${BERTH_CACHE:-$HOME/.cache/berth}/controlplane/<k8s>-etcd<ver>-helm<ver>/bin/
# If every binary is already there nothing is built; otherwise only the groups
# with a binary missing (etcd; kubernetes; helm; kwok) are.
#
# stdout: only the bin directory, as the LAST line (BIN=$(e2e/build-controlplane.sh | tail -1)).
# stderr: progress. build-info.txt in the cache dir: build seconds and disk usage.
#
# Env: BERTH_KUBERNETES=v1.38 builds the Kubernetes binaries of e2e/controlplane/v1.38 instead
#      (v1.38.0-beta.0, which needs Go 1.27: GOTOOLCHAIN=go1.27.3 is set, and the go command takes
#      that toolchain from the Go module proxy) into a cache directory of their own,
#      BERTH_CACHE (cache root), GO (go binary), BERTH_BUILD_P (go build -p, default 2),
#      BERTH_FORCE_REBUILD=1 (ignore existing binaries). GOMODCACHE/GOCACHE/GOPROXY
#      are honoured as usual (defaults live outside the repository).
set -euo pipefail

# Keep stdout clean: everything goes to stderr except the final path.
exec 3>&1 1>&2

log() { printf '[build-controlplane %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MOD_K8S="$HERE/controlplane"
case "${BERTH_KUBERNETES:-}" in
  "") ;;
  v1.38) MOD_K8S="$HERE/controlplane/v1.38"; export GOTOOLCHAIN=go1.27.3 ;;
  *) echo "BERTH_KUBERNETES: v1.38 or unset, not ${BERTH_KUBERNETES}" >&2; exit 1 ;;
esac
MOD_ETCD="$HERE/controlplane/etcd"
MOD_HELM="$HERE/controlplane/helm"
MOD_KWOK="$HERE/controlplane/kwok"

GO="${GO:-}"
if [[ -z "$GO" ]]; then
  if command -v go >/dev/null 2>&1; then GO="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else die "no Go toolchain found (set GO=/path/to/go)"; fi
fi
PAR="${BERTH_BUILD_P:-2}"

modver() { # modver <module dir> <module path>
  (cd "$1" && "$GO" list -m -f '{{.Version}}' "$2")
}

K8S_VERSION="$(modver "$MOD_K8S" k8s.io/kubernetes)"
STAGING_VERSION="$(cd "$MOD_K8S" && "$GO" list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/component-base)"
ETCD_VERSION="$(modver "$MOD_ETCD" go.etcd.io/etcd/server/v3)"
HELM_VERSION="$(modver "$MOD_HELM" helm.sh/helm/v3)"
HELM_CLIENTGO_VERSION="$(modver "$MOD_HELM" k8s.io/client-go)"
KWOK_VERSION="$(modver "$MOD_KWOK" sigs.k8s.io/kwok)"

KEY="${K8S_VERSION}-etcd${ETCD_VERSION#v}-helm${HELM_VERSION#v}"
CACHE_ROOT="${BERTH_CACHE:-$HOME/.cache/berth}"
CACHE_DIR="$CACHE_ROOT/controlplane/$KEY"
BIN="$CACHE_DIR/bin"
INFO="$CACHE_DIR/build-info.txt"
BINARIES=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl helm kwok)
K8S_BINARIES=(kube-apiserver kube-scheduler kube-controller-manager kubectl)

case "$CACHE_DIR/" in
  "$(cd "$HERE/.." && pwd)"/*) die "cache dir $CACHE_DIR is inside the repository; set BERTH_CACHE elsewhere" ;;
esac

present() { # present <binary>...: every one is built (kwok: at the version of its module)
  local b
  for b in "$@"; do
    [[ -x "$BIN/$b" ]] || return 1
    if [[ "$b" == kwok ]]; then
      [[ -f "$BIN/kwok-stages.yaml" && "$(cat "$BIN/kwok.version" 2>/dev/null)" == "$KWOK_VERSION" ]] || return 1
    fi
  done
}
all_present() { present "${BINARIES[@]}"; }
wanted() { # wanted <binary>...: build this group (forced, or one of its binaries missing)
  [[ "${BERTH_FORCE_REBUILD:-0}" == 1 ]] || ! present "$@"
}

if [[ "${BERTH_FORCE_REBUILD:-0}" != 1 ]] && all_present; then
  log "up to date: $BIN"
  echo "$BIN" >&3
  exit 0
fi

mkdir -p "$BIN"
# Serialize concurrent builds of the same key (e.g. parallel test sessions).
exec 9>"$CACHE_DIR/.lock"
if ! flock -n 9; then
  log "another build holds $CACHE_DIR/.lock; waiting"
  flock 9
fi
if [[ "${BERTH_FORCE_REBUILD:-0}" != 1 ]] && all_present; then
  log "built by a concurrent run: $BIN"
  echo "$BIN" >&3
  exit 0
fi

GOMODCACHE_DIR="$("$GO" env GOMODCACHE)"
GOCACHE_DIR="$("$GO" env GOCACHE)"
dus() { du -sh "$1" 2>/dev/null | cut -f1 || echo "?"; }

log "go: $("$GO" version)"
log "kubernetes $K8S_VERSION (staging $STAGING_VERSION), etcd $ETCD_VERSION, helm $HELM_VERSION, kwok $KWOK_VERSION"
log "target: $BIN (go build -p $PAR)"
GOCACHE_BEFORE="$(dus "$GOCACHE_DIR")"
GOMODCACHE_BEFORE="$(dus "$GOMODCACHE_DIR")"

export CGO_ENABLED=0
# -mod=readonly: go.mod/go.sum are committed and must not change during a build.
# -buildvcs=false: the wrapper modules live inside the berth git tree; VCS stamping
# would make binaries depend on the berth commit.
COMMON=(-p "$PAR" -trimpath -mod=readonly -buildvcs=false)

k8s_major="${K8S_VERSION#v}"; k8s_major="${k8s_major%%.*}"
k8s_minor="${K8S_VERSION#v*.}"; k8s_minor="${k8s_minor%%.*}"
K8S_LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  K8S_LDFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$k8s_major -X $pkg.gitMinor=$k8s_minor"
  K8S_LDFLAGS+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=module-proxy-$K8S_VERSION"
done

hcg="${HELM_CLIENTGO_VERSION#v0.}"
helm_k8s_major=1; helm_k8s_minor="${hcg%%.*}"
HELM_LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
HELM_LDFLAGS+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
HELM_LDFLAGS+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$helm_k8s_major"
HELM_LDFLAGS+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$helm_k8s_minor"
HELM_LDFLAGS+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$helm_k8s_major"
HELM_LDFLAGS+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$helm_k8s_minor"

ETCD_LDFLAGS="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-proxy-$ETCD_VERSION"
KWOK_LDFLAGS="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"

STAGE="$CACHE_DIR/stage.$$"
rm -rf "$STAGE"; mkdir -p "$STAGE"
trap 'rm -rf "$STAGE"' EXIT

declare -A SECS=([etcd]=0 [kubernetes]=0 [helm]=0 [kwok]=0)
step() { # step <name> <module dir> <ldflags> <pkg>...
  local name="$1" dir="$2" ldf="$3"; shift 3
  local t0=$SECONDS
  log "building $name: $*"
  (cd "$dir" && "$GO" build "${COMMON[@]}" -ldflags "$ldf" -o "$STAGE/" "$@")
  SECS[$name]=$((SECONDS - t0))
  log "built $name in ${SECS[$name]}s"
}

T0=$SECONDS
BUILT=()
if [[ -n "${BERTH_KUBERNETES:-}" ]]; then
  # Another Kubernetes release: etcd, helm and kwok are the default build's, linked here.
  DEFAULT_BIN="$(env -u BERTH_KUBERNETES -u GOTOOLCHAIN bash "$HERE/build-controlplane.sh" 2>&2 | tail -1)"
  for b in etcd helm kwok kwok.version kwok-stages.yaml; do ln -sf "$DEFAULT_BIN/$b" "$BIN/$b"; done
fi
if wanted etcd; then
  step etcd "$MOD_ETCD" "$ETCD_LDFLAGS" go.etcd.io/etcd/server/v3
  # go build names that binary "server" (last non-major-version path element).
  for n in server v3; do
    if [[ -e "$STAGE/$n" ]]; then mv "$STAGE/$n" "$STAGE/etcd"; fi
  done
  [[ -x "$STAGE/etcd" ]] || die "etcd binary not produced"
  BUILT+=(etcd)
fi
if wanted "${K8S_BINARIES[@]}"; then
  step kubernetes "$MOD_K8S" "$K8S_LDFLAGS" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
  BUILT+=("${K8S_BINARIES[@]}")
fi
if wanted helm; then
  step helm "$MOD_HELM" "$HELM_LDFLAGS" helm.sh/helm/v3/cmd/helm
  BUILT+=(helm)
fi
if wanted kwok; then
  step kwok "$MOD_KWOK" "$KWOK_LDFLAGS" sigs.k8s.io/kwok/cmd/kwok
  echo "$KWOK_VERSION" > "$STAGE/kwok.version"
  # kwok's own "fast" stages, from its module as fetched: nodes Ready with lease heartbeats, pods
  # Running and Ready at once, graceful deletion completed. They go with the binary, out of the tree.
  KWOK_DIR="$(cd "$MOD_KWOK" && "$GO" list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    [[ -f "$KWOK_DIR/kustomize/stage/$f" ]] || die "kwok stage $f not found in $KWOK_DIR"
    cat "$KWOK_DIR/kustomize/stage/$f"; echo "---"
  done > "$STAGE/kwok-stages.yaml"
  BUILT+=(kwok)
fi
TOTAL=$((SECONDS - T0))

VERSIONS=""
for b in "${BUILT[@]}"; do
  case "$b" in
    helm) args=(version --short) ;;
    kubectl) args=(version --client) ;;
    kwok) args=(--version) ;;
    *) args=(--version) ;;
  esac
  # No pipe into head: with pipefail an early-closed pipe (SIGPIPE) would fail.
  out="$("$STAGE/$b" "${args[@]}" 2>&1)" || die "$b ${args[*]} failed: $out"
  v="${out%%$'\n'*}"
  log "$b: $v"
  VERSIONS+="  $b: $v"$'\n'
done
for b in "${BUILT[@]}"; do mv -f "$STAGE/$b" "$BIN/$b"; done
for f in kwok.version kwok-stages.yaml; do
  if [[ -e "$STAGE/$f" ]]; then mv -f "$STAGE/$f" "$BIN/$f"; fi
done

{
  echo "# berth control plane build ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
  echo "key: $KEY"
  echo "go: $("$GO" version)"
  echo "host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), go build -p $PAR"
  echo "kubernetes: $K8S_VERSION (staging modules $STAGING_VERSION)"
  echo "etcd: $ETCD_VERSION"
  echo "helm: $HELM_VERSION (k8s.io/client-go $HELM_CLIENTGO_VERSION)"
  echo "kwok: $KWOK_VERSION"
  echo "built now: ${BUILT[*]}"
  echo "build seconds: etcd=${SECS[etcd]} kubernetes=${SECS[kubernetes]} helm=${SECS[helm]} kwok=${SECS[kwok]} total=$TOTAL"
  echo "GOCACHE before build: $GOCACHE_BEFORE, GOMODCACHE before build: $GOMODCACHE_BEFORE"
  echo "disk after build:"
  echo "  bin dir ($BIN): $(dus "$BIN")"
  for b in "${BINARIES[@]}"; do echo "    $b: $(dus "$BIN/$b")"; done
  echo "  GOMODCACHE ($GOMODCACHE_DIR): $(dus "$GOMODCACHE_DIR")"
  echo "  GOCACHE ($GOCACHE_DIR): $(dus "$GOCACHE_DIR")"
  echo "versions:"
  printf '%s' "$VERSIONS"
} > "$INFO"
cat "$INFO" >&2

echo "$BIN" >&3
