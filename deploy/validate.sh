#!/usr/bin/env bash
# Validate Palace's deployment files without a cluster or a Docker engine:
#
#   1. `kustomize build` of deploy/k8s/base and of every overlay;
#   2. deploy/compose.yaml against the Compose Specification's schema
#      (compose-go, the loader `docker compose` itself uses); plus `docker
#      compose config`, which checks references between services and volumes
#      and the `single` profile too, when that plugin is installed;
#   3. with --build (or VALIDATE_BUILD=1): the Dockerfile's `go build`, run
#      locally into a temporary directory.
#
# Neither kustomize nor the schema knows Kubernetes' field names: a misspelt
# field builds. `kubectl apply --dry-run=server` against a cluster checks them.
#
# Tools are pinned and installed into ./bin on first use (Go module proxy).
# Usage: deploy/validate.sh [--build]     (from anywhere; exits non-zero on failure)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
# v5.8.3 and later need Go 1.27; the workspace is on Go 1.26.
KUSTOMIZE_VERSION=${KUSTOMIZE_VERSION:-v5.8.2}
COMPOSE_GO_VERSION=${COMPOSE_GO_VERSION:-v2.16.2}
BUILD=${VALIDATE_BUILD:-0}
for arg in "$@"; do
	case $arg in
	--build) BUILD=1 ;;
	-h | --help) sed -n '2,16p' "$0"; exit 0 ;;
	*) echo "validate.sh: unknown argument $arg" >&2; exit 2 ;;
	esac
done

cd "$ROOT"
fail=0
step() { printf '\n== %s\n' "$*"; }
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*" >&2; fail=1; }

# go install a pinned tool into $BIN under the name $1.
install_tool() {
	local name=$1 pkg=$2 tmp
	[ -x "$BIN/$name" ] && return 0
	echo "installing $pkg into $BIN/$name"
	mkdir -p "$BIN"
	tmp=$(mktemp -d)
	GOWORK=off GOFLAGS='' GOBIN=$tmp go install "$pkg"
	mv "$tmp"/* "$BIN/$name"
	rm -rf "$tmp"
}

# --- Kubernetes -------------------------------------------------------------
step "kustomize $KUSTOMIZE_VERSION"
KUSTOMIZE=${KUSTOMIZE:-$BIN/kustomize}
if [ ! -x "$KUSTOMIZE" ] || ! "$KUSTOMIZE" version 2>/dev/null | grep -q "$KUSTOMIZE_VERSION"; then
	rm -f "$BIN/kustomize"
	install_tool kustomize "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
	KUSTOMIZE=$BIN/kustomize
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for dir in deploy/k8s/base deploy/k8s/overlays/*/; do
	dir=${dir%/}
	f=$out/$(echo "$dir" | tr / _).yaml
	if "$KUSTOMIZE" build "$dir" >"$f"; then
		ok "kustomize build $dir ($(grep -c '^kind:' "$f") resources: $(grep '^kind:' "$f" | sort | uniq -c | awk '{printf "%s%s %s", sep, $1, $3; sep=", "}'))"
	else
		bad "kustomize build $dir"
	fi
done

# --- Compose ----------------------------------------------------------------
step "compose (compose-go $COMPOSE_GO_VERSION)"
# compose-spec prints no version: the one installed is noted beside it.
if [ "$(cat "$BIN/compose-spec.version" 2>/dev/null)" != "$COMPOSE_GO_VERSION" ]; then
	rm -f "$BIN/compose-spec"
fi
install_tool compose-spec "github.com/compose-spec/compose-go/v2/cmd@$COMPOSE_GO_VERSION"
echo "$COMPOSE_GO_VERSION" >"$BIN/compose-spec.version"
# Unset variables the file interpolates, so the check does not depend on the
# caller's environment (.env files are not read: none is committed).
compose_env=(env -u PALACE_IMAGE -u PALACE_LOG_FORMAT -u PALACE_LOG_LEVEL -u PALACE_OTLP_ENDPOINT -u PALACE_CORS_ORIGINS
	-u PALACE_SEAT_SIGNING_KEYS -u PALACE_PLAYER_SIGNING_KEYS -u PALACE_SERVICE_KEYS -u PALACE_ALLOW_PLACEHOLDER_KEYS
	-u PALACE_PUBLISH_ADDR -u PALACE_GAME_GOGC -u COMPOSE_PROFILES -u COMPOSE_FILE)
if (cd "$out" && "${compose_env[@]}" "$BIN/compose-spec" "$ROOT/deploy/compose.yaml" >"$out/compose.yaml"); then
	ok "compose.yaml against the Compose Specification's schema"
else
	bad "compose.yaml against the Compose Specification's schema"
fi
if docker compose version >/dev/null 2>&1; then
	if "${compose_env[@]}" docker compose -f deploy/compose.yaml --profile single config -q; then
		ok "docker compose config"
	else
		bad "docker compose config"
	fi
else
	echo "skip: docker compose plugin not installed: references between services and volumes, and the single profile, are not checked"
fi

# --- Dockerfile's go build -------------------------------------------------------
if [ "$BUILD" = 1 ]; then
	step "go build as in deploy/Dockerfile"
	bin=$out/bin
	# shellcheck disable=SC2086 # the glob must expand, as in the Dockerfile
	if CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$bin/" \
		./cmd/palace ./services/*/cmd/*; then
		ok "built: $(cd "$bin" && echo *)"
	else
		bad "go build"
	fi
fi

echo
if [ "$fail" != 0 ]; then
	echo "deploy/validate.sh: FAILED" >&2
	exit 1
fi
echo "deploy/validate.sh: all checks passed"
