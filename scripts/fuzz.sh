#!/usr/bin/env bash
# Runs every fuzz target of the workspace for the given time each
# (default 20s): the parsers of FEN, moves, notation, time controls and
# credentials, and random play through the rules.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-20s}
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r file; do
	dir=$(dirname "$file")
	for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //'); do
		echo "== $dir $target ($t)"
		(cd "$dir" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" .)
	done
done
