#!/usr/bin/env bash
# Shows that gen-check catches stale generated code: a copy of the
# repository whose proto gains a field must fail the check.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/proto" "$root/buf.yaml" "$root/buf.gen.yaml" "$root/scripts" "$tmp/"
mkdir -p "$tmp/pkg" "$tmp/bin"
cp -r "$root/pkg/gen" "$tmp/pkg/gen"
ln -s "$root/bin/buf" "$root/bin/protoc-gen-go" "$root/bin/protoc-gen-go-grpc" "$tmp/bin/"
sed -i 's/^message Position {/message Position {\n  string stale_check = 99;/' "$tmp/proto/palace/common/v1/common.proto"
if "$tmp/scripts/gen-check.sh" >/dev/null 2>&1; then
	echo "gen-check passed on stale generated code" >&2
	exit 1
fi
echo "gen-check fails on stale generated code, as it must"
