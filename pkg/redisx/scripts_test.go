package redisx

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestRunScriptsSendsAnUnknownScriptInFull: a script the server has never
// seen answers NOSCRIPT by its hash; each call is sent again in full, and
// answers its own, and the server then knows the script.
func TestRunScriptsSendsAnUnknownScriptInFull(t *testing.T) {
	ctx := t.Context()
	rdb := redistest.Client(t)
	// A script of this test's own, which no server has seen.
	script := redis.NewScript(fmt.Sprintf("-- %s\nreturn {KEYS[1], ARGV[1]}", redistest.Prefix(t)))
	calls := []ScriptCall{{Keys: []string{"a"}, Args: []any{1}}, {Keys: []string{"b"}, Args: []any{2}}}
	for round := range 2 {
		cmds := RunScripts(ctx, rdb, script, calls)
		for i, c := range cmds {
			v, err := c.StringSlice()
			if err != nil || len(v) != 2 || v[0] != calls[i].Keys[0] || v[1] != fmt.Sprint(calls[i].Args[0]) {
				t.Fatalf("round %d, call %d: %v, %v", round, i, v, err)
			}
		}
		if known, err := script.Exists(ctx, rdb).Result(); err != nil || len(known) != 1 || !known[0] {
			t.Fatalf("round %d: the server knows the script: %v, %v", round, known, err)
		}
	}
}
