package game_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// redisCalls reads how many times Redis ran cmd (INFO commandstats).
func redisCalls(t *testing.T, rdb *redis.Client, cmd string) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// TestASeatMovingBetweenProcessesHasNoStreamReadTheLog: a change of
// which processes hold a connected seat commits without an event, and
// such a commit published a notification without events, which has
// every stream of the game, in every process, read the log: a seat's
// client moving to another process and back, with 40 spectators, cost
// some 80 reads of the log for nothing to send. A commit without events
// publishes nothing.
func TestASeatMovingBetweenProcessesHasNoStreamReadTheLog(t *testing.T) {
	srv := redistest.Own(t)
	rdb := srv.Client(t)
	edit := func(c *game.Config) { c.PresenceGrace = 20 * time.Millisecond; c.Heartbeat = 10 * time.Second }
	a := gametest.StartOn(t, srv.Addr, edit)
	b := gametest.StartOn(t, srv.Addr, func(c *game.Config) {
		edit(c)
		c.KeyPrefix, c.SigningKeys = a.Config.KeyPrefix, a.Config.SigningKeys
	})
	tb := create(t, a, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The seat connects on a: an event, as before.
	seat, err := a.Client.StreamEvents(gametest.As(ctx, tb.seats[commonv1.Side_SIDE_SECOND]), &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seat.Recv(); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, err := seat.Recv(); err != nil {
				return
			}
		}
	}()
	const spectators = 40
	var events atomic.Int64
	for i := range spectators {
		env := a
		if i%2 == 1 {
			env = b
		}
		st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				m, err := st.Recv()
				if err != nil {
					return
				}
				if m.GetEvent() != nil {
					events.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	version := tb.get(t).GetVersion()
	told := events.Load()
	before := redisCalls(t, rdb, "xrange")

	// The same seat's client reconnects to b and leaves it: b holds the
	// seat too (2 holders) and lets it go (1): no event either time.
	hctx, hcancel := context.WithCancel(gametest.As(ctx, tb.seats[commonv1.Side_SIDE_SECOND]))
	hop, err := b.Client.StreamEvents(hctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hop.Recv(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	hcancel()
	time.Sleep(time.Second)

	reads := redisCalls(t, rdb, "xrange") - before
	if v, n := tb.get(t).GetVersion(), events.Load()-told; v != version || n != 0 {
		t.Fatalf("the hop committed events: version %d -> %d, %d events to spectators", version, v, n)
	}
	// The hop's own stream reads the log once or twice.
	if reads > 5 {
		t.Fatalf("a seat hopping to another process and back with %d spectators made %d reads of the game's log (XRANGE), with nothing for any stream to send: each eventless commit's notification has every stream of the game read the log", spectators, reads)
	}
}
