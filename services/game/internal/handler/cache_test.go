package handler

import (
	"testing"
	"time"

	"github.com/palacehq/palace/services/game/internal/model"
)

func TestCacheAnswersOnlyTheLastRequest(t *testing.T) {
	c := newStateCache(2, time.Hour, time.Now)
	c.put(&model.State{ID: "g", Version: 3}, "r1", []byte("first"))
	if got := string(c.answer("g", "r1")); got != "first" {
		t.Fatalf("answer to r1: %q", got)
	}
	for _, q := range []struct{ id, rid string }{{"g", "r2"}, {"g", ""}, {"h", "r1"}} {
		if got := c.answer(q.id, q.rid); got != nil {
			t.Fatalf("answer to %s of %s: %q, want none", q.rid, q.id, got)
		}
	}
	// The next commit replaces it; one without an answer leaves none.
	c.put(&model.State{ID: "g", Version: 4}, "r2", []byte("second"))
	if c.answer("g", "r1") != nil || string(c.answer("g", "r2")) != "second" {
		t.Fatal("the next commit's answer did not replace the last")
	}
	c.put(&model.State{ID: "g", Version: 5}, "r3", nil)
	if c.answer("g", "r3") != nil || c.answer("g", "r2") != nil {
		t.Fatal("a commit without an answer kept one")
	}
	c.drop("g")
	if c.get("g") != nil {
		t.Fatal("dropped game still cached")
	}
}

// TestCacheDropsIdleGames: an entry not committed for the idle time goes
// (an abandoned game, or one another process finished), however often it
// is read, while one committed since stays.
func TestCacheDropsIdleGames(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newStateCache(10, 10*time.Minute, func() time.Time { return now })
	c.put(&model.State{ID: "idle", Version: 3}, "", nil)
	c.put(&model.State{ID: "read", Version: 3}, "", nil)
	c.put(&model.State{ID: "committed", Version: 3}, "", nil)
	now = now.Add(6 * time.Minute)
	c.get("read")
	c.put(&model.State{ID: "committed", Version: 4}, "", nil)
	now = now.Add(5 * time.Minute)
	c.get("read")
	c.sweep()
	for _, id := range []string{"idle", "read"} {
		if _, ok := c.m[id]; ok {
			t.Fatalf("%s, committed 11 minutes ago, is still cached", id)
		}
	}
	if _, ok := c.m["committed"]; !ok {
		t.Fatal("an entry committed 5 minutes ago was dropped")
	}
	now = now.Add(10 * time.Minute)
	c.sweep()
	if len(c.m) != 0 {
		t.Fatalf("%d entries left after all were idle", len(c.m))
	}
}
