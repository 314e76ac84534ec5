#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl) from source through the Go module proxy and
# caches the binaries, so tests and `make demo` need no downloads and no Docker.
# A cold build takes 12-16 minutes on 2 cores; a warm one does nothing.
#
#   hack/kube/build.sh [BIN_DIR]     (default: .cache/kube/bin under the repo root)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${1:-${KARPLESS_KUBE_BIN:-$root/.cache/kube/bin}}
# The builds below run from hack/kube, so a relative BIN must be pinned first or
# the binaries land under hack/kube while the stamp claims the cache is warm.
mkdir -p "$BIN"
BIN=$(cd "$BIN" && pwd)
K8S_VERSION=$(grep -o "k8s.io/kubernetes v[0-9.]*" "$here/go.mod" | head -1 | sed "s/.* v//")
STAMP="$BIN/.version"
COMPONENTS="kube-apiserver kube-scheduler kube-controller-manager kubectl"
# The components carry the virtual wall clock hook (virtualclock/); its
# version is part of the stamp so a cache built without it is rebuilt.
VCLOCK_VERSION=1
WANT="$K8S_VERSION+vclock$VCLOCK_VERSION"

mkdir -p "$BIN"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  missing=0
  for c in etcd $COMPONENTS; do [ -x "$BIN/$c" ] || missing=1; done
  [ $missing = 0 ] && exit 0
fi
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" != "$WANT" ]; then
  for c in $COMPONENTS; do rm -f "$BIN/$c"; done
fi

export GOFLAGS=-buildvcs=false
minor=${K8S_VERSION#1.}; minor=${minor%%.*}
ldf="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"

log() { echo "[kube-build $(date +%T)] $*" >&2; }
cd "$here"

# The virtual wall clock: time.Now's wall reading comes from a shared file
# when KARPLESS_VIRTUAL_CLOCK names one (see virtualclock/zz_virtual_clock.go.in).
# Go's own time.go gets one line after runtimeNow; the hook is a file of ours.
GOROOT_TIME="$(go env GOROOT)/src/time"
OVL="$BIN/.overlay"
mkdir -p "$OVL"
sed 's/^\tsec, nsec, mono := runtimeNow()$/&\n\tsec, nsec = virtualWall(sec, nsec)/' "$GOROOT_TIME/time.go" > "$OVL/time.go"
if [ "$(grep -c 'sec, nsec = virtualWall(sec, nsec)' "$OVL/time.go")" != 1 ]; then
  echo "kube-build: cannot place the virtual clock hook in $GOROOT_TIME/time.go (Go changed time.Now?)" >&2
  exit 1
fi
cp "$here/virtualclock/zz_virtual_clock.go.in" "$OVL/zz_virtual_clock.go"
printf '{"Replace":{"%s":"%s","%s":"%s"}}\n' \
  "$GOROOT_TIME/time.go" "$OVL/time.go" "$GOROOT_TIME/zz_virtual_clock.go" "$OVL/zz_virtual_clock.go" > "$OVL/overlay.json"
for c in $COMPONENTS; do
  [ -x "$BIN/$c" ] && continue
  t0=$(date +%s)
  log "building $c v$K8S_VERSION (the first build compiles Kubernetes: ~12 min on 2 cores)"
  go build -trimpath -overlay "$OVL/overlay.json" -ldflags "$ldf" -o "$BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c"
  mv "$BIN/$c.tmp" "$BIN/$c"
  log "$c built in $(( $(date +%s) - t0 ))s"
done
if [ ! -x "$BIN/etcd" ]; then
  t0=$(date +%s)
  log "building etcd (version pinned by Kubernetes' go.mod)"
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$BIN/etcd.tmp" "$BIN/etcd"
  log "etcd built in $(( $(date +%s) - t0 ))s"
fi
echo "$WANT" > "$STAMP"
log "control plane binaries ready in $BIN"
