package game_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// replicaHold is a timed Xiangqi game on two game processes, a and b,
// each on a proxy of its own, that wait for a Redis replica whose
// acknowledgements the test holds (--redis-wait-replicas): until the
// replica confirms a move, nobody sees it (streams publish on
// confirmation, reads confirm first).
type replicaHold struct {
	pair           redistest.Pair
	proxyA, proxyB *redistest.Proxy
	a, b           *gametest.Env
	tb             *table
	master         *redis.Client
	key            string
	// before is the game's version before the held move.
	before uint64
}

// startReplicaHold starts the game with main on each clock and plays to
// Red's turn; with blackLeft, Black has about that much left.
func startReplicaHold(t *testing.T, main, blackLeft time.Duration) *replicaHold {
	t.Helper()
	r := &replicaHold{pair: redistest.NewPair(t)}
	r.proxyA = redistest.NewProxy(t, r.pair.Master.Addr)
	r.proxyB = redistest.NewProxy(t, r.pair.Master.Addr)
	cfg := func(c *game.Config) {
		c.SigningKeys, c.LagMaxPerMove, c.WaitReplicas, c.WaitTimeout = keyOne, 0, 1, 10*time.Second
	}
	r.a = gametest.StartOn(t, r.proxyA.Addr(), cfg)
	r.b = gametest.StartOn(t, r.proxyB.Addr(), func(c *game.Config) { cfg(c); c.KeyPrefix = r.a.Config.KeyPrefix })
	clocked := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(main)}}}
	r.tb = create(t, r.a, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: clocked, Public: true})
	r.tb.move(t, "h3e3")
	last := r.tb.move(t, "h10g8")
	if blackLeft > 0 {
		r.tb.move(t, "c4c5")
		time.Sleep(main - blackLeft)
		last = r.tb.move(t, "b10c8")
	}
	r.before = last.GetGame().GetVersion()
	r.master = r.pair.Master.Client(t)
	r.key = r.a.Config.KeyPrefix + "{g:" + r.tb.id + "}"
	return r
}

// moveHeld has a play Red's mv while the replica's acknowledgements wait,
// and returns once the move is on the master, with when it was sent and
// the channel of its answer.
func (r *replicaHold) moveHeld(t *testing.T, mv string) (judged time.Time, done <-chan error) {
	t.Helper()
	r.pair.Link.Hold()
	t.Cleanup(r.pair.Link.Restore)
	answered := make(chan error, 1)
	judged = time.Now()
	go func() {
		_, err := r.a.Client.MakeMove(r.tb.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{
			GameId: r.tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: mv}})
		answered <- err
	}()
	for until := time.Now().Add(5 * time.Second); r.field(t, "v") <= r.before; time.Sleep(time.Millisecond) {
		if time.Now().After(until) {
			t.Fatal("the move never landed on the master")
		}
	}
	return judged, answered
}

// field reads a number of the game's hash on the master (0 when unset).
func (r *replicaHold) field(t *testing.T, name string) uint64 {
	t.Helper()
	v, _ := r.master.HGet(context.Background(), r.key, name).Result()
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// sweepFromB has b expire the game's stored wake-up, as the deadline
// sweeper would, once it is due, and returns the answer's channel.
func (r *replicaHold) sweepFromB(t *testing.T) (wake int64, swept <-chan *gamev1.ExpireDeadlineResponse) {
	t.Helper()
	wake = wakeIn(t, r.master, r.key)
	time.Sleep(time.Until(time.UnixMilli(wake)) + 20*time.Millisecond)
	out := make(chan *gamev1.ExpireDeadlineResponse, 1)
	go func() {
		resp, err := r.b.Client.ExpireDeadline(context.Background(), &gamev1.ExpireDeadlineRequest{GameId: r.tb.id, DeadlineUnixMs: wake})
		if err != nil {
			t.Errorf("ExpireDeadline: %v", err)
		}
		out <- resp
	}()
	// b's read found the move unconfirmed and waits for the replica too.
	for until := time.Now().Add(5 * time.Second); waiting(t, r.master) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(until) {
			t.Fatal("b never waited for the replica")
		}
	}
	return wake, out
}

// scriptSHA is the hash under which the store runs one of its scripts.
func scriptSHA(t *testing.T, name string) []byte {
	t.Helper()
	src, err := os.ReadFile("internal/store/" + name)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(src)
	return []byte(hex.EncodeToString(sum[:]))
}

// waiting counts the connections of rdb blocked in WAIT.
func waiting(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, "cmd=wait")
}

// TestTheSweeperDoesNotFlagATurnHeldByTheReplicas: Red's move lands on the
// master at once, but its replica confirms it only 2 s later. Black, with
// 0.5 s left, began its turn at the judgment. The hold is measured when
// the move is confirmed, not when the commit script ran: the sweeper
// asking process b, which reads the move confirmed, before a's excuse
// lands, excuses Black the hold instead of flagging Black for a move Black
// could not see.
func TestTheSweeperDoesNotFlagATurnHeldByTheReplicas(t *testing.T) {
	r := startReplicaHold(t, 2*time.Second, 500*time.Millisecond)
	_, done := r.moveHeld(t, "b1c3")
	hold := holdCommits(t, r.proxyA, r.tb.id) // a's excuse, once the move is confirmed, waits
	defer hold.end()
	time.Sleep(2 * time.Second)
	r.pair.Link.Restore()
	hold.wait(t, "the excuse's commit")
	sweepWhileHeld(t, r.b, r.tb, wakeIn(t, r.master, r.key), hold, done, "a move its replica held 2 s")
}

// TestTheSweeperDoesNotFlagATurnHeldByTheReplicasWhoeverConfirmsIt: as
// above, but Black's deadline comes during the 1.5 s hold, so the
// sweeper's read on b finds the move unconfirmed and waits for the
// replica too, and a's confirmation, the first, records the hold. b's
// confirmation learns it all the same, and excuses it rather than judge
// the turn as read before it.
func TestTheSweeperDoesNotFlagATurnHeldByTheReplicasWhoeverConfirmsIt(t *testing.T) {
	r := startReplicaHold(t, 2*time.Second, 500*time.Millisecond)
	judged, done := r.moveHeld(t, "b1c3")
	holdA := holdScripts(t, r.proxyA, scriptSHA(t, "commit.lua"), r.tb.id) // a's excuse waits
	defer holdA.end()
	_, swept := r.sweepFromB(t)
	holdB := holdScripts(t, r.proxyB, scriptSHA(t, "confirmed.lua"), r.tb.id) // b's confirmation comes second
	defer holdB.end()
	time.Sleep(time.Until(judged.Add(1500 * time.Millisecond)))
	r.pair.Link.Restore()
	holdB.wait(t, "b's confirmation")
	for until := time.Now().Add(5 * time.Second); r.field(t, "c") <= r.before; time.Sleep(time.Millisecond) {
		if time.Now().After(until) {
			t.Fatal("a never confirmed its move")
		}
	}
	x, _ := r.master.HGet(context.Background(), r.key, "x").Result()
	holdB.end()
	resp := <-swept
	holdA.end()
	<-done
	if g := r.tb.get(t); g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("the sweeper flagged Black for a move its replica held 1.5 s, past Black's deadline (x = %q, recorded by a's confirmation): %v %v (applied %v)",
			x, g.GetStatus(), g.GetResult(), resp.GetApplied())
	}
}

// TestASweepDuringTheReplicasHoldExcusesTheWholeHold: Black's deadline
// comes during a 1.15 s hold by the replica, and b's sweep, whose read
// came before the move could be seen, records the hold in its own
// confirmation. b judges the turn no earlier than the end of the hold, so
// Black is excused all of it and keeps the time Black had once the move
// shows, rather than a deadline before the move could be seen.
func TestASweepDuringTheReplicasHoldExcusesTheWholeHold(t *testing.T) {
	const blackLeft, held = 500 * time.Millisecond, 1150 * time.Millisecond
	r := startReplicaHold(t, 2*time.Second, blackLeft)
	judged, done := r.moveHeld(t, "b1c3")
	holdA := holdScripts(t, r.proxyA, scriptSHA(t, "confirmed.lua"), r.tb.id) // a's confirmation comes second
	defer holdA.end()
	_, swept := r.sweepFromB(t)
	time.Sleep(time.Until(judged.Add(held)))
	r.pair.Link.Restore()
	resp := <-swept
	holdA.end()
	<-done
	seen := judged.Add(held)
	if next := time.UnixMilli(wakeIn(t, r.master, r.key)); next.Before(seen.Add(blackLeft - 150*time.Millisecond)) {
		x, _ := r.master.HGet(context.Background(), r.key, "x").Result()
		t.Fatalf("after the sweep during the hold (x = %q), Black's deadline is %v after the move could be seen, want about %v (the sweep left Black %v)",
			x, next.Sub(seen).Round(time.Millisecond), blackLeft, resp.GetGame().GetClocks().GetSecond().GetMainLeft().AsDuration())
	}
}

// TestAHoldConfirmedByAReaderIsExcusedByTheCommitter: Red's move is held
// 2 s by the replica, and a spectator's read on b, waiting for the same
// replica, confirms the move first and records the hold. a's own
// confirmation learns it all the same: a excuses Black at once and keeps
// the hold in its cached state, so Black's move, judged on that cache, is
// not charged the 2 s Black could not see Red's move.
func TestAHoldConfirmedByAReaderIsExcusedByTheCommitter(t *testing.T) {
	const main = time.Minute
	r := startReplicaHold(t, main, 0)
	judged, done := r.moveHeld(t, "c4c5")
	hold := holdCommits(t, r.proxyA, r.tb.id) // a's confirmation waits
	defer hold.end()
	read := make(chan error, 1)
	go func() {
		_, err := r.b.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: r.tb.id})
		read <- err
	}()
	time.Sleep(2 * time.Second)
	r.pair.Link.Restore()
	if err := <-read; err != nil {
		t.Fatalf("b's read: %v", err)
	}
	hold.wait(t, "a's confirmation")
	x, _ := r.master.HGet(context.Background(), r.key, "x").Result()
	hold.end()
	if err := <-done; err != nil {
		t.Fatalf("Red's move: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	resp, err := r.a.Client.MakeMove(r.tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{
		GameId: r.tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b10c8"}})
	if err != nil {
		t.Fatalf("Black's move: %v", err)
	}
	wall := time.Since(judged)
	charged := main - resp.GetGame().GetClocks().GetSecond().GetMainLeft().AsDuration()
	if charged > wall-2*time.Second+700*time.Millisecond {
		t.Fatalf("Black's turn lasted %v, the first 2 s of it before anyone could see Red's move (x = %q, recorded by b's confirmation): Black is charged %v",
			wall.Round(time.Millisecond), x, charged.Round(time.Millisecond))
	}
}
