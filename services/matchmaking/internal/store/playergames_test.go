package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// playerGamesStore is a store with its client and prefix, to look at the
// keys of a player's list.
func playerGamesStore(t *testing.T) (*store.Store, redis.UniversalClient, string) {
	t.Helper()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	return store.New(rdb, prefix), rdb, prefix
}

func sameEntry(a, b store.Entry) bool {
	a.Created, b.Created = time.UnixMilli(a.Created.UnixMilli()), time.UnixMilli(b.Created.UnixMilli())
	return a == b
}

func TestPlayerGames(t *testing.T) {
	st, rdb, prefix := playerGamesStore(t)
	ctx := context.Background()
	t0 := time.UnixMilli(time.Now().UnixMilli())
	if got, err := st.PlayerGames(ctx, "p1", time.Time{}, 100); err != nil || len(got) != 0 {
		t.Fatalf("a player without games: %v %v, want none", got, err)
	}
	entries := []store.Entry{
		{Game: "g1", Kind: janggi, Side: "first", Opponent: "p2", OpponentName: "Bob", Rated: true, Control: clock.Default(), Created: t0},
		// A name may hold the separator; no clock against the AI.
		{Game: "g2", Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Side: "second", Opponent: "ai", OpponentName: "a|b|c 👨‍👩‍👧", Created: t0.Add(time.Second)},
		{Game: "g3", Kind: janggi, Side: "second", Opponent: "p3", OpponentName: "Carol",
			Control: clock.Control{Kind: clock.Fischer, MainTime: 3 * time.Minute, Increment: 2 * time.Second}, Created: t0.Add(2 * time.Second)},
	}
	for _, e := range entries {
		added, _, err := st.AddPlayerGame(ctx, "p1", e, time.Hour)
		if err != nil || !added {
			t.Fatalf("add %s: %v %v", e.Game, added, err)
		}
	}
	want := []store.Entry{entries[2], entries[1], entries[0]}
	check := func(what string, limit int, want []store.Entry) {
		t.Helper()
		got, err := st.PlayerGames(ctx, "p1", time.Time{}, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d games %v, want %d", what, len(got), got, len(want))
		}
		for i := range want {
			if !sameEntry(got[i], want[i]) {
				t.Fatalf("%s: game %d is %+v, want %+v", what, i, got[i], want[i])
			}
		}
	}
	check("three games", 100, want)
	check("at most two", 2, want[:2])

	// A retried creation, however late and whatever it says, keeps the
	// first entry and time; it only lengthens the list's life.
	retry := entries[0]
	retry.Created, retry.OpponentName, retry.Side = t0.Add(time.Hour), "Robert", "second"
	if added, _, err := st.AddPlayerGame(ctx, "p1", retry, 2*time.Hour); err != nil || added {
		t.Fatalf("retry: %v %v, want listed already", added, err)
	}
	check("after a retry", 100, want)
	for _, k := range []string{"mm:{pl:p1}:g", "mm:{pl:p1}:gi"} {
		if ttl := rdb.PTTL(ctx, prefix+k).Val(); ttl <= time.Hour || ttl > 2*time.Hour {
			t.Fatalf("%s lives %v, want the 2 h of the latest add", k, ttl)
		}
	}
	if got, err := st.PlayerGames(ctx, "p2", time.Time{}, 100); err != nil || len(got) != 0 {
		t.Fatalf("another player's list: %v %v, want none", got, err)
	}
}

// TestPlayerGamesKeepsTheNewest: beyond MaxPlayerGames the oldest go, from
// both keys, whatever order the games were added in.
func TestPlayerGamesKeepsTheNewest(t *testing.T) {
	st, rdb, prefix := playerGamesStore(t)
	ctx := context.Background()
	t0 := time.UnixMilli(time.Now().UnixMilli())
	const extra = 5
	add := func(i int) {
		t.Helper()
		e := store.Entry{Game: fmt.Sprintf("g%03d", i), Kind: janggi, Side: "first", Opponent: "p2", OpponentName: "Bob",
			Control: clock.Default(), Created: t0.Add(time.Duration(i) * time.Second)}
		if _, _, err := st.AddPlayerGame(ctx, "p1", e, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// Game 0, the oldest, comes last: it is dropped at once.
	for i := 1; i < store.MaxPlayerGames+extra; i++ {
		add(i)
	}
	add(0)
	got, err := st.PlayerGames(ctx, "p1", time.Time{}, store.MaxPlayerGames+extra)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != store.MaxPlayerGames {
		t.Fatalf("%d games listed, want %d", len(got), store.MaxPlayerGames)
	}
	for i, e := range got {
		if want := fmt.Sprintf("g%03d", store.MaxPlayerGames+extra-1-i); e.Game != want {
			t.Fatalf("game %d is %s, want %s", i, e.Game, want)
		}
	}
	if n := rdb.ZCard(ctx, prefix+"mm:{pl:p1}:g").Val(); n != store.MaxPlayerGames {
		t.Fatalf("zset holds %d, want %d", n, store.MaxPlayerGames)
	}
	if n := rdb.HLen(ctx, prefix+"mm:{pl:p1}:gi").Val(); n != store.MaxPlayerGames {
		t.Fatalf("hash holds %d, want %d: the dropped games' entries must go too", n, store.MaxPlayerGames)
	}
}

// TestPlayerGamesKeepEachForKeep: an entry is listed no longer than its
// game's record is kept, however often the player plays since: passed
// over by reads at once, dropped by the next game listed.
func TestPlayerGamesKeepEachForKeep(t *testing.T) {
	st, rdb, prefix := playerGamesStore(t)
	ctx := context.Background()
	keep := 30 * 24 * time.Hour
	now := time.UnixMilli(1_800_000_000_000)
	add := func(id string, at time.Time) {
		t.Helper()
		e := store.Entry{Game: id, Kind: janggi, Side: "first", Opponent: "ai", OpponentName: "AI level 1", Created: at}
		if _, _, err := st.AddPlayerGame(ctx, "p", e, keep); err != nil {
			t.Fatal(err)
		}
	}
	// Listed in this order, the ancient one is not dropped by the recent
	// one's listing: only reads pass it over.
	add("recent", now.Add(-29*24*time.Hour))
	add("ancient", now.Add(-60*24*time.Hour))
	ids := func(since time.Time) []string {
		t.Helper()
		got, err := st.PlayerGames(ctx, "p", since, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range got {
			out = append(out, e.Game)
		}
		return out
	}
	if got := ids(now.Add(-keep)); fmt.Sprint(got) != "[recent]" {
		t.Fatalf("listed %v, want [recent]: an entry older than keep is passed over", got)
	}
	add("new", now)
	if got := ids(time.Time{}); fmt.Sprint(got) != "[new recent]" {
		t.Fatalf("listed %v after a new game, want [new recent]: the old entry is dropped", got)
	}
	if n := rdb.HLen(ctx, prefix+"mm:{pl:p}:gi").Val(); n != 2 {
		t.Fatalf("hash holds %d entries, want 2", n)
	}
}
