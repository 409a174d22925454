package handler

import (
	"testing"
	"time"

	"github.com/palacehq/palace/services/game/internal/model"
)

func TestCacheAnswersOnlyTheLastRequest(t *testing.T) {
	c := newStateCache(2, time.Hour, time.Now)
	ans := func(id, rid string) []byte {
		a, _ := c.answer(id, rid)
		return a
	}
	c.put(&model.State{ID: "g", Version: 3, Stamp: "s3"}, nil, "r1", []byte("first"), nil)
	if got, stamp := c.answer("g", "r1"); string(got) != "first" || stamp != "s3" {
		t.Fatalf("answer to r1: %q of the commit stamped %q, want %q of s3", got, stamp, "first")
	}
	for _, q := range []struct{ id, rid string }{{"g", "r2"}, {"g", ""}, {"h", "r1"}} {
		if got := ans(q.id, q.rid); got != nil {
			t.Fatalf("answer to %s of %s: %q, want none", q.rid, q.id, got)
		}
	}
	// The next commit replaces it; one without an answer leaves none.
	c.put(&model.State{ID: "g", Version: 4}, nil, "r2", []byte("second"), nil)
	if ans("g", "r1") != nil || string(ans("g", "r2")) != "second" {
		t.Fatal("the next commit's answer did not replace the last")
	}
	c.put(&model.State{ID: "g", Version: 5}, nil, "r3", nil, nil)
	if ans("g", "r3") != nil || ans("g", "r2") != nil {
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
	c.put(&model.State{ID: "idle", Version: 3}, nil, "", nil, nil)
	c.put(&model.State{ID: "read", Version: 3}, nil, "", nil, nil)
	c.put(&model.State{ID: "committed", Version: 3}, nil, "", nil, nil)
	now = now.Add(6 * time.Minute)
	c.get("read")
	c.put(&model.State{ID: "committed", Version: 4}, nil, "", nil, nil)
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

// TestCacheKnowsTheRequestIDsUsed: a game's request fields are known from
// its creation, or from a read that listed them, and kept commit after
// commit; a commit over another state than the cached one (another
// process's) leaves them unknown, as does a drop.
func TestCacheKnowsTheRequestIDsUsed(t *testing.T) {
	c := newStateCache(10, time.Hour, time.Now)
	v1 := &model.State{ID: "g", Version: 1, Stamp: "a"}
	c.put(v1, nil, "create", []byte("x"), nil)
	if !c.unused("g", "") {
		t.Fatal("a command with no request id counts as one used before")
	}
	if c.unused("g", "create") || !c.unused("g", "m1") {
		t.Fatal("after the creation: its id must count as used, another as new")
	}
	v2 := &model.State{ID: "g", Version: 2, Stamp: "b"}
	c.put(v2, v1, "m1", []byte("x"), nil)
	if c.unused("g", "m1") || c.unused("g", "create") || !c.unused("g", "Red|m1") {
		t.Fatal("after a commit over the cached state: both ids used, the seat's own field new")
	}
	// A commit over a state read from Redis that the cache did not have:
	// the ids are not known.
	other := &model.State{ID: "g", Version: 5, Stamp: "z"}
	v6 := &model.State{ID: "g", Version: 6, Stamp: "y"}
	c.put(v6, other, "m6", []byte("x"), nil)
	if c.knowsIDs("g") || c.unused("g", "new") {
		t.Fatal("ids known after a commit over a state the cache did not hold")
	}
	// The same, with the fields read with that state.
	c.put(v6, other, "m6", []byte("x"), []string{"create", "m1", "m5"})
	for _, f := range []string{"create", "m1", "m5", "m6"} {
		if c.unused("g", f) {
			t.Fatalf("%s, read or committed, counts as new", f)
		}
	}
	if !c.unused("g", "m7") {
		t.Fatal("an id never used counts as used")
	}
	// A commit that stores no answer under a field adds none.
	v7 := &model.State{ID: "g", Version: 7, Stamp: "x"}
	c.put(v7, v6, "", nil, nil)
	if !c.unused("g", "m7") || c.unused("g", "m6") {
		t.Fatal("a commit without a request field changed the ids")
	}
	// A commit whose answer was lost may have been made: the cached state
	// may be behind, and any id used.
	c.unsure("g")
	if c.unused("g", "lost") || c.unused("g", "m7") || c.knowsIDs("g") {
		t.Fatal("after a commit whose answer was lost, an id counts as new")
	}
	if c.get("g") != v7 {
		t.Fatal("the last state known confirmed was dropped")
	}
	// A read from Redis that knows the ids again makes them known.
	v8 := &model.State{ID: "g", Version: 8, Stamp: "y"}
	c.put(v8, v7, "m8", []byte("a"), []string{"create", "m1", "m8"})
	if !c.unused("g", "m7") || c.unused("g", "m8") {
		t.Fatal("the ids read again are not known")
	}
	c.drop("g")
	if c.knowsIDs("g") || c.unused("g", "m7") {
		t.Fatal("a dropped game's ids still known")
	}
}
