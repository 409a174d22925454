package ratings

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// One pending record that does not decode (damaged, or written by another
// release in another form) failed the claim of its whole batch, leased
// all the same: every game in it was watched by nobody, and, all leased
// to the same instant, claimed with it again at every lease's end.
func TestAnUnreadablePendingRecordHeldUpTheGamesClaimedWithIt(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	f := &fixture{env: gametest.Start(t, nil), store: store.New(rdb, prefix)}
	ctx := context.Background()

	// A finished rated game, pending.
	p, tok := f.ratedGame(t, "alice", "bob", true)
	f.resign(t, p.Game, tok[commonv1.Side_SIDE_SECOND])

	// And one pending record that cannot be decoded.
	z, info := prefix+"mm:{pending}:z", prefix+"mm:{pending}:info"
	if err := rdb.HSet(ctx, info, "poison", `{"kind":"xiangqi","p1":"carol"}`).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, z, redis.Z{Score: 0, Member: "poison"}).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), z, info) })

	c := f.consumer(t, Config{ClaimEvery: 50 * time.Millisecond, Lease: time.Second})
	run(t, c)

	deadline := time.Now().Add(8 * time.Second)
	for f.pending(t, p.Game) {
		if time.Now().After(deadline) {
			t.Fatalf("game %s (alice beat bob) still unrated after 8 s, through several leases: the undecodable pending record claimed with it fails every claim of its batch", p.Game)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a := f.rating(t, "alice"); a.Rating != 1220 {
		t.Fatalf("alice after her win: %+v", a)
	}
	// The record is kept, for a release that reads it or an operator.
	if !f.pending(t, "poison") {
		t.Fatal("the unreadable record was dropped")
	}
}

// A pending record of another form (or damaged to {}) decodes without
// error, its fields empty: it was rated for the player "" on both sides,
// and forgotten, its real players never rated. It is kept, as one that
// does not decode.
func TestAPendingRecordOfAnotherFormWasRatedForNobody(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	f := &fixture{env: gametest.Start(t, nil), store: store.New(rdb, prefix)}
	ctx := context.Background()

	// A rated game, its pending record written in another form: its
	// players under other names than p1 and p2.
	p, tok := f.unrecordedRatedGame(t, "alice", "bob", true)
	z, info := prefix+"mm:{pending}:z", prefix+"mm:{pending}:info"
	rec := fmt.Sprintf(`{"kind":%d,"first":"alice","second":"bob","tok":%q}`, p.Kind, p.Token)
	if err := rdb.HSet(ctx, info, p.Game, rec).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, z, redis.Z{Score: 0, Member: p.Game}).Err(); err != nil {
		t.Fatal(err)
	}
	f.resign(t, p.Game, tok[commonv1.Side_SIDE_SECOND])

	c := f.consumer(t, Config{ClaimEvery: 50 * time.Millisecond, Lease: time.Second})
	run(t, c)
	time.Sleep(3 * time.Second) // several claims and leases

	nobody, err := f.store.PlayerRating(ctx, commonv1.GameKind_GAME_KIND_XIANGQI, "")
	if err != nil {
		t.Fatal(err)
	}
	if nobody.Games > 0 {
		t.Errorf("the player \"\" was rated: %+v", nobody)
	}
	if !f.pending(t, p.Game) {
		t.Errorf("game %s (alice beat bob) left pending, its record (%s) naming no player it reads: alice %+v, bob %+v", p.Game, rec, f.rating(t, "alice"), f.rating(t, "bob"))
	}
}
