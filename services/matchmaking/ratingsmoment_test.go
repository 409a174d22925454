package matchmaking_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// readsWhileRated is how long the tests below read ratings while games
// are rated: the faults they prove showed within 0.1 s.
const readsWhileRated = 3 * time.Second

// winsAgainstNewcomers rates, until ctx ends, game after game in which
// player "pp" beats a newcomer: "pp" is first on the board at every
// moment. ratingAfter tells pp's rating after a number of games, once
// rated; wait waits for the rating to stop.
func winsAgainstNewcomers(ctx context.Context, st *store.Store) (ratingAfter func(games uint32) (int32, bool), wait func()) {
	var mu sync.Mutex
	after := map[uint32]int32{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			a, err := st.ApplyRating(context.Background(), store.Outcome{GameID: fmt.Sprintf("w%d", i), Kind: janggi,
				A: store.Player{ID: "pp", Name: "P"}, B: store.Player{ID: fmt.Sprintf("fresh%d", i), Name: "F"}, ScoreA: 1, At: time.Now()})
			if err != nil {
				return
			}
			mu.Lock()
			after[uint32(i+1)] = int32(a.AAfter)
			mu.Unlock()
		}
	}()
	return func(games uint32) (int32, bool) {
		mu.Lock()
		defer mu.Unlock()
		r, ok := after[games]
		return r, ok
	}, func() { <-done }
}

// TestALeaderboardPageIsOneMoment: a page of the leaderboard read while
// games are rated shows the board as it was at one moment: its ranks never
// go down, its first is at most offset+1 (no more players can be above the
// one at place offset than offset), and a player's rating is the one they
// had after the games shown. Read in two steps, a page mixed two boards.
func TestALeaderboardPageIsOneMoment(t *testing.T) {
	t.Run("ranks", func(t *testing.T) {
		e := newEnv(t, 1, nil)
		viewer := e.account("r9041", "Viewer")
		st := store.New(e.game.Redis, e.cfg.KeyPrefix)
		const n = 40
		for i := range n / 2 {
			if _, err := st.ApplyRating(context.Background(), store.Outcome{GameID: fmt.Sprintf("seed%d", i), Kind: janggi,
				A: store.Player{ID: fmt.Sprintf("p%02d", 2*i), Name: "P"}, B: store.Player{ID: fmt.Sprintf("p%02d", 2*i+1), Name: "P"}, ScoreA: 1, At: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), readsWhileRated)
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		var seq atomic.Int64
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					a, b := rand.IntN(n), rand.IntN(n)
					if a == b {
						continue
					}
					_, _ = st.ApplyRating(context.Background(), store.Outcome{GameID: fmt.Sprintf("r%d", seq.Add(1)), Kind: janggi,
						A: store.Player{ID: fmt.Sprintf("p%02d", a), Name: "P"}, B: store.Player{ID: fmt.Sprintf("p%02d", b), Name: "P"}, ScoreA: float64(rand.IntN(2)), At: time.Now()})
				}
			})
		}
		for ctx.Err() == nil {
			off := uint32(rand.IntN(30))
			lb, err := e.mm[0].GetLeaderboard(viewer.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: janggi, Limit: 5, Offset: off})
			if err != nil {
				t.Fatal(err)
			}
			var ranks, ratings []int64
			for _, en := range lb.GetEntries() {
				ranks = append(ranks, int64(en.GetRank()))
				ratings = append(ratings, int64(en.GetRating().GetRating()))
			}
			for i := range ranks {
				if (i == 0 && ranks[0] > int64(off)+1) || (i > 0 && ranks[i] < ranks[i-1]) {
					t.Fatalf("page at offset %d: ranks %v, ratings %v", off, ranks, ratings)
				}
			}
		}
	})
	t.Run("ratings", func(t *testing.T) {
		e := newEnv(t, 1, nil)
		viewer := e.account("r9051", "Viewer")
		ctx, cancel := context.WithTimeout(context.Background(), readsWhileRated)
		ratingAfter, wait := winsAgainstNewcomers(ctx, store.New(e.game.Redis, e.cfg.KeyPrefix))
		defer func() { cancel(); wait() }()
		for ctx.Err() == nil {
			lb, err := e.mm[0].GetLeaderboard(viewer.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: janggi, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(lb.GetEntries()) == 0 {
				continue
			}
			r := lb.GetEntries()[0].GetRating()
			if want, ok := ratingAfter(r.GetGames()); ok && want != r.GetRating() {
				t.Fatalf("the leaderboard shows P with %d games at %d; after %d games P's rating was %d", r.GetGames(), r.GetRating(), r.GetGames(), want)
			}
		}
	})
}

// TestARatingIsRankedAtOneMoment: GetRating ranks a player among the
// ratings of one moment: P, who only ever beats newcomers, is first at
// every moment, and is never ranked behind its own later rating.
func TestARatingIsRankedAtOneMoment(t *testing.T) {
	e := newEnv(t, 1, nil)
	viewer := e.account("r9061", "Viewer")
	ctx, cancel := context.WithTimeout(context.Background(), readsWhileRated)
	ratingAfter, wait := winsAgainstNewcomers(ctx, store.New(e.game.Redis, e.cfg.KeyPrefix))
	defer func() { cancel(); wait() }()
	for ctx.Err() == nil {
		rr, err := e.mm[0].GetRating(viewer.ctx(), &matchmakingv1.GetRatingRequest{Kind: janggi, PlayerId: "pp"})
		if err != nil {
			t.Fatal(err)
		}
		r := rr.GetRating()
		if r.GetRank() != 1 && r.GetGames() > 0 {
			t.Fatalf("P, never beaten, is ranked %d: %v", r.GetRank(), r)
		}
		if want, ok := ratingAfter(r.GetGames()); ok && want != r.GetRating() {
			t.Fatalf("GetRating shows P with %d games at %d; after %d games P's rating was %d", r.GetGames(), r.GetRating(), r.GetGames(), want)
		}
	}
}
