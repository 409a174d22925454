#!/usr/bin/env bash
# Runs every fuzz target of the workspace for the given time each
# (default 20s): the parsers of FEN, moves, notation, time controls and
# credentials, and random play through the rules.
#
# A target that fails stops the run, its failing input kept in its
# testdata/fuzz/<target>/ for `go test -run` to replay. One failure is not
# a finding: Go before 1.27 can fail a target as its -fuzztime ends with
# a bare "context deadline exceeded" and no input, a race in its fuzzing
# coordinator (go.dev/issue/75804). Such a run, when it wrote no input and
# its corpus passes again, is reported and the run goes on.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-20s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# coordinator_race LOG TARGET: the target's failure is the deadline's
# message alone.
coordinator_race() {
	awk -v target="$2" '
		index($0, "--- FAIL: " target " (") == 1 { in_fail = 1; next }
		in_fail && /^FAIL/ { exit }
		in_fail { lines++; if ($0 != "    context deadline exceeded") other = 1 }
		END { exit !(lines == 1 && !other) }
	' "$1"
}

targets=0 raced=0
while read -r file; do
	dir=$(dirname "$file")
	for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //'); do
		targets=$((targets + 1))
		echo "== $dir $target ($t)"
		corpus="$dir/testdata/fuzz/$target"
		before=$(ls "$corpus" 2>/dev/null || true)
		if (cd "$dir" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" .) 2>&1 | tee "$log"; then
			continue
		fi
		after=$(ls "$corpus" 2>/dev/null || true)
		if [ "$before" = "$after" ] && coordinator_race "$log" "$target" &&
			(cd "$dir" && go test -count=1 -run "^${target}\$" .); then
			echo "fuzz: $target: stopped by Go's fuzzing coordinator at the deadline with no failing input (go.dev/issue/75804); its corpus passes again"
			raced=$((raced + 1))
			continue
		fi
		echo "fuzz: $target failed; a failing input is replayed by: (cd $dir && go test -run '^${target}\$' .)" >&2
		exit 1
	done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | sort)
echo "fuzz: $targets targets for $t each, no failing input ($raced stopped by the coordinator's deadline race)"
