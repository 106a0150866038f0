#!/usr/bin/env bash
# Makes sure `.tools/helm` exists (used by test/deploy/helm.test.ts and by operators who
# want to render helm/phonebridge from a checkout). Helm is not in this machine's package
# registries as a binary, so it is built from its Go module; Go is only a build tool here
# and the project contains no Go code. Idempotent: when `.tools/helm version` already
# answers with the pinned version, nothing is built and this takes well under a second.
#
#   bash scripts/ensure-helm.sh          # build if missing, then print the version
#   HELM_VERSION=v3.22.0 bash scripts/ensure-helm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=go-build-env.sh
source scripts/go-build-env.sh

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
TOOLS="$PWD/.tools"
HELM="$TOOLS/helm"

have_pinned() {
  [ -x "$HELM" ] || return 1
  local v
  v="$("$HELM" version --template '{{.Version}}' 2>/dev/null)" || return 1
  [ "$v" = "$HELM_VERSION" ]
}

if ! have_pinned; then
  go_build_env ensure-helm "helm $HELM_VERSION"
  echo "ensure-helm: building helm $HELM_VERSION into .tools/ (takes a few minutes the first time)" >&2
  start=$(date +%s)
  # Stamp what helm's own Makefile stamps: its version, and the Kubernetes version that
  # `helm template`/`lint` assume (.Capabilities.KubeVersion, deprecation checks). Without
  # these a `go install` build says "v3.22" and assumes Kubernetes 1.20. The Kubernetes
  # version follows helm's client-go: v0.X.Y -> 1.X.
  gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
  k8s_minor="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9][0-9]*\)\..*/\1/p' "$gomod" | head -1)"
  if [ -z "$k8s_minor" ]; then
    echo "ensure-helm: could not read k8s.io/client-go's version from $gomod" >&2
    exit 1
  fi
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags="$ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
  done
  GOBIN="$TOOLS" go install -ldflags="$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  echo "ensure-helm: built in $(( $(date +%s) - start )) s" >&2
  if ! have_pinned; then
    echo "ensure-helm: .tools/helm was built but does not report $HELM_VERSION" >&2
    "$HELM" version >&2 || true
    exit 1
  fi
fi

"$HELM" version
