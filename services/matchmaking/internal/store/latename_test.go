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
// "Old", given before the sign-in, does not put the old name back.
func TestARatingAfterASignInKeepsTheNewName(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	oldAt := time.Now().Add(-time.Hour)
	old, other := store.Player{ID: "acct", Name: "Old", NamedAt: oldAt}, store.Player{ID: "opp", Name: "Opp"}
	if _, err := st.ApplyRating(ctx, store.Outcome{GameID: "g1", Kind: janggi, A: old, B: other, ScoreA: 1, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Game g2 is created now, its pending record naming "Old"; during it
	// the player signs in as "New".
	if err := st.Rename(ctx, "acct", "New", time.Now()); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.PlayerRating(ctx, janggi, "acct"); r.Name != "New" {
		t.Fatalf("after the sign-in: %+v, want New", r)
	}
	// g2 ends and is rated with its pending record's names; so is a game
	// of an older release's record, which does not say when names were
	// given.
	unknown := store.Player{ID: "acct", Name: "Old"}
	for i, a := range []store.Player{old, unknown} {
		if _, err := st.ApplyRating(ctx, store.Outcome{GameID: []string{"g2", "g3"}[i], Kind: janggi, A: a, B: other, ScoreA: 0.5, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		r, _ := st.PlayerRating(ctx, janggi, "acct")
		lb, _, _ := st.Leaderboard(ctx, janggi, store.Page{Start: 0, Stop: 10})
		var onBoard string
		for _, e := range lb {
			if e.Player == "acct" {
				onBoard = e.Name
			}
		}
		if r.Name != "New" || onBoard != "New" {
			t.Fatalf("after a game that began before the sign-in ended (%+v): rating name %q, leaderboard name %q; want New, the latest sign-in's", a, r.Name, onBoard)
		}
	}
}

// TestTheLeaderboardLearnsANameNotSignedInDuringAGame proves that the
// leaderboard shows the name of the latest sign-in even when it did not
// learn it at the sign-in, since a rated game made under the new
// credential brings it, whatever name a game before showed:
//   - first-game: an unrated player signs in as "New" during their first
//     rated game, made as "Old"; that game's rating does not show "Old"
//     over the sign-in's name;
//   - rename-lost: a rated player's sign-in as "New" could not reach the
//     leaderboards (Redis out of reach); their next rated game, made as
//     "New", shows it.
func TestTheLeaderboardLearnsANameNotSignedInDuringAGame(t *testing.T) {
	for _, tc := range []struct {
		name   string
		signIn bool
	}{{"first-game", true}, {"rename-lost", false}} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			ctx := context.Background()
			other := store.Player{ID: "opp", Name: "Opp"}
			oldAt, newAt := time.Now().Add(-time.Hour), time.Now()
			// g1 is made as "Old"; during it the player signs in as "New"
			// (or the sign-in's rename is lost).
			if tc.signIn {
				if err := st.Rename(ctx, "acct", "New", newAt); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.ApplyRating(ctx, store.Outcome{GameID: "g1", Kind: janggi, A: store.Player{ID: "acct", Name: "Old", NamedAt: oldAt}, B: other, ScoreA: 1, At: time.Now()}); err != nil {
				t.Fatal(err)
			}
			// g2 and g3 are made after the sign-in, as "New".
			for _, g := range []string{"g2", "g3"} {
				if _, err := st.ApplyRating(ctx, store.Outcome{GameID: g, Kind: janggi, A: store.Player{ID: "acct", Name: "New", NamedAt: newAt}, B: other, ScoreA: 1, At: time.Now()}); err != nil {
					t.Fatal(err)
				}
				r, err := st.PlayerRating(ctx, janggi, "acct")
				if err != nil {
					t.Fatal(err)
				}
				if r.Name != "New" {
					t.Fatalf("after rated game %s made as %q following the sign-in, the leaderboard names the player %q", g, "New", r.Name)
				}
			}
		})
	}
}
