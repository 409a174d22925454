package ratings

import (
	"context"
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
