#!/usr/bin/env bash
# Regenerates pkg/gen into a scratch copy of the repository and fails when
# the committed code differs, so stale generated code never lands.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/proto" "$root/buf.yaml" "$root/buf.gen.yaml" "$tmp/"
mkdir -p "$tmp/bin" "$tmp/pkg"
ln -s "$root/bin/protoc-gen-go" "$root/bin/protoc-gen-go-grpc" "$tmp/bin/"
(cd "$tmp" && "$root/bin/buf" generate)
if ! diff -r "$root/pkg/gen" "$tmp/pkg/gen" >"$tmp/diff.txt"; then
	echo "pkg/gen is stale: run 'make gen' and commit the result" >&2
	head -50 "$tmp/diff.txt" >&2
	exit 1
fi
echo "pkg/gen is up to date"
