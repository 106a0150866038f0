# Sourced by the scripts that build a tool from its Go module into the ignored .tools/
# (ensure-helm.sh, ensure-toxiproxy.sh): finds Go and sets the build environment. Go is only
# a build tool here; the project contains no Go code.
#
#   go_build_env <script name> <what is built>   # exits 1 with a clear line when Go is missing

go_build_env() {
  local who="$1" what="$2"
  if ! command -v go >/dev/null 2>&1; then
    for d in /usr/local/go/bin /usr/lib/go/bin; do
      if [ -x "$d/go" ]; then PATH="$d:$PATH"; break; fi
    done
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "$who: Go is needed to build $what and was not found (install Go, or put the binary in .tools/)" >&2
    exit 1
  fi
  mkdir -p "$TOOLS"
  # Keep Go's caches where they usually are, so a second build (or another Go tool) reuses them.
  export GOCACHE="${GOCACHE:-$(go env GOCACHE 2>/dev/null || echo "$HOME/.cache/go-build")}"
  export GOMODCACHE="${GOMODCACHE:-$(go env GOMODCACHE 2>/dev/null || echo "$HOME/go/pkg/mod")}"
  # -mod=mod: resolve the tool's own go.mod regardless of any vendor dir; -buildvcs=false: there is no VCS info to stamp.
  export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod -buildvcs=false"
  export CGO_ENABLED="${CGO_ENABLED:-0}"
}
