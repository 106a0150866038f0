#!/usr/bin/env bash
# Makes sure `.tools/toxiproxy-server` exists (used by the fault-injection tests in
# test/faults/ and by `npm run loadtest -- faults`). Toxiproxy (Shopify's TCP proxy that
# injects latency, stalls, resets and bandwidth caps) is built from its Go module as helm is
# (scripts/ensure-helm.sh); Go is only a build tool here. Idempotent: when
# `.tools/toxiproxy-server -version` already answers with the pinned version, nothing is built
# and this takes well under a second.
#
#   bash scripts/ensure-toxiproxy.sh
#   TOXIPROXY_VERSION=v2.5.0 bash scripts/ensure-toxiproxy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=go-build-env.sh
source scripts/go-build-env.sh

# v2.5.0: the newest v2 release the Go module proxy serves (`go list -m -versions
# github.com/Shopify/toxiproxy/v2`); it has every toxic the tests use (latency, timeout,
# reset_peer, bandwidth) and the HTTP API of docs in its README.
TOXIPROXY_VERSION="${TOXIPROXY_VERSION:-v2.5.0}"
TOOLS="$PWD/.tools"
BIN="$TOOLS/toxiproxy-server"

have_pinned() {
  [ -x "$BIN" ] || return 1
  local v
  v="$("$BIN" -version 2>/dev/null)" || return 1
  # `toxiproxy-server -version` prints e.g. "toxiproxy-server version v2.5.0" (or the bare
  # version when built without the Makefile's stamp); compare the last word.
  [ "${v##* }" = "$TOXIPROXY_VERSION" ]
}

if ! have_pinned; then
  go_build_env ensure-toxiproxy "toxiproxy $TOXIPROXY_VERSION"
  echo "ensure-toxiproxy: building toxiproxy-server $TOXIPROXY_VERSION into .tools/ (takes a minute or more the first time)" >&2
  start=$(date +%s)
  # Build into a private GOBIN, then rename: `go install` names the binary after its package
  # directory ("server"), which says nothing in a shared tools folder.
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  # Stamp the version as toxiproxy's own Makefile does, so -version answers with it.
  GOBIN="$tmp" go install -ldflags="-s -w -X github.com/Shopify/toxiproxy/v2.Version=$TOXIPROXY_VERSION" \
    "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  mv -f "$tmp/server" "$BIN"
  echo "ensure-toxiproxy: built in $(( $(date +%s) - start )) s" >&2
  if ! have_pinned; then
    echo "ensure-toxiproxy: .tools/toxiproxy-server was built but does not report $TOXIPROXY_VERSION" >&2
    "$BIN" -version >&2 || true
    exit 1
  fi
fi

"$BIN" -version
