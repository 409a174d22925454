package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestARatingAfterASignInKeepsTheNewName: the name of the latest sign-in
// is the one leaderboards and ratings show. A rated player starts a rated
// game as "Old" and signs in again during it as "New", which the
// leaderboard shows at once; the game's rating, whose pending record names
// "Old", does not put the old name back.
func TestARatingAfterASignInKeepsTheNewName(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	old, other := store.Player{ID: "acct", Name: "Old"}, store.Player{ID: "opp", Name: "Opp"}
	if _, err := st.ApplyRating(ctx, store.Outcome{GameID: "g1", Kind: janggi, A: old, B: other, ScoreA: 1, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Game g2 is created now, its pending record naming "Old"; during it
	// the player signs in as "New".
	if err := st.Rename(ctx, "acct", "New"); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.PlayerRating(ctx, janggi, "acct"); r.Name != "New" {
		t.Fatalf("after the sign-in: %+v, want New", r)
	}
	// g2 ends and is rated with its pending record's names.
	if _, err := st.ApplyRating(ctx, store.Outcome{GameID: "g2", Kind: janggi, A: old, B: other, ScoreA: 0.5, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r, _ := st.PlayerRating(ctx, janggi, "acct")
	lb, _, _ := st.Leaderboard(ctx, janggi, 0, 10)
	var onBoard string
	for _, e := range lb {
		if e.Player == "acct" {
			onBoard = e.Name
		}
	}
	if r.Name != "New" || onBoard != "New" {
		t.Fatalf("after a game that began before the sign-in ended: rating name %q, leaderboard name %q; want New, the latest sign-in's", r.Name, onBoard)
	}
}
