package matchmaking_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking"
)

// With --redis-wait-replicas, what matchmaking acknowledges is on the
// replica: a write the replica does not confirm answers Unavailable, its
// retry answers only once the replica holds it, and a rated game stays
// pending until the replica holds its rating, so that a failover can lose
// neither a ticket nor a rating.
func TestMatchmakingWaitsForReplicas(t *testing.T) {
	ctx := context.Background()
	pair := redistest.NewPair(t)
	e := newEnvOn(t, pair.Master.Addr, nil, 2, func(c *matchmaking.Config) {
		c.WaitReplicas, c.WaitTimeout, c.RatingLease = 1, 300*time.Millisecond, 300*time.Millisecond
	})
	master, onReplica := pair.Master.Client(t), pair.Replica.Client(t)
	ticketKey := func(id string) string {
		tag, _, _ := strings.Cut(id, ".")
		return e.cfg.KeyPrefix + "mm:{p:" + tag + "}:t:" + id
	}
	unconfirmed := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "replicas") {
			t.Fatalf("%s with the replica held back: %v, want Unavailable naming the replicas", what, err)
		}
	}
	a, b := e.account("5001", "Ann"), e.account("5002", "Bo")

	// Acknowledged means on the replica, with no waiting on the test's side.
	ta := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{Rated: true})
	if n, err := onReplica.Exists(ctx, ticketKey(ta.GetTicketId())).Result(); err != nil || n != 1 {
		t.Fatalf("the replica does not hold the acknowledged ticket: %d, %v", n, err)
	}

	pair.Link.Blackhole()
	req := &matchmakingv1.EnterQueueRequest{Rated: true, Kind: janggi, RequestId: rid()}
	_, err := e.mm[1].EnterQueue(b.ctx(), req)
	unconfirmed("entering the queue", err)
	// The retry finds the ticket the first attempt stored, through another
	// replica and its own connections: the answer still waits for it.
	_, err = e.mm[0].EnterQueue(b.ctx(), req)
	unconfirmed("the retry of an unconfirmed entry", err)
	pair.Link.Restore()
	var tb *matchmakingv1.Ticket
	eventually(t, 10*time.Second, "the retry to be confirmed", func() bool {
		r, err := e.mm[0].EnterQueue(b.ctx(), req)
		if status.Code(err) == codes.Unavailable {
			return false
		}
		if err != nil {
			t.Fatalf("retry once the replica is back: %v", err)
		}
		tb = r.GetTicket()
		return true
	})
	if n, err := onReplica.Exists(ctx, ticketKey(tb.GetTicketId())).Result(); err != nil || n != 1 {
		t.Fatalf("the replica does not hold the confirmed ticket: %d, %v", n, err)
	}

	ra := waitTicket(t, e.mm[0], a, ta.GetTicketId(), 10*time.Second)
	rb := waitTicket(t, e.mm[0], b, tb.GetTicketId(), 10*time.Second)
	if ra.GetState() != matched || rb.GetState() != matched || ra.GetSeat().GetGameId() != rb.GetSeat().GetGameId() {
		t.Fatalf("tickets ended %v / %v: want one game for both", ra, rb)
	}

	// The game ends while the replica is held back: the rating reaches the
	// master, but unconfirmed it must not let the game go from pending.
	game := ra.GetSeat().GetGameId()
	pending := e.cfg.KeyPrefix + "mm:{pending}:z"
	if _, err := master.ZScore(ctx, pending, game).Result(); err != nil {
		t.Fatalf("the rated game is not pending: %v", err)
	}
	pair.Link.Blackhole()
	e.resign(t, rb.GetSeat())
	games := e.cfg.KeyPrefix + "mm:{r:janggi}:games"
	eventually(t, 10*time.Second, "the rating to reach the master", func() bool {
		return master.HGet(ctx, games, a.id).Val() == "1"
	})
	time.Sleep(time.Second) // several leases: each replica tries again
	if _, err := master.ZScore(ctx, pending, game).Result(); err != nil {
		t.Fatalf("the game left pending while the replica had not confirmed its rating: %v", err)
	}
	pair.Link.Restore()
	eventually(t, 10*time.Second, "the game to leave pending", func() bool {
		return master.ZScore(ctx, pending, game).Err() != nil
	})
	if got := onReplica.HGet(ctx, games, a.id).Val(); got != "1" {
		t.Fatalf("the replica holds %q rated games for the winner once the game left pending, want 1", got)
	}
	if r := e.rating(a, ""); r.GetGames() != 1 || r.GetRating() != 1220 {
		t.Fatalf("after one win applied through retries: %v, want one game and 1220", r)
	}
}
