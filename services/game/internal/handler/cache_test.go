package handler

import (
	"testing"

	"github.com/palacehq/palace/services/game/internal/model"
)

func TestCacheAnswersOnlyTheLastRequest(t *testing.T) {
	c := newStateCache(2)
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
