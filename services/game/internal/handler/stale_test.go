package handler

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rules"
)

// afterPipeline runs then once, right after the next load of a game (a
// pipeline starting with its read: an EVAL of the state with its moves,
// or an HMGET of the state alone) once armed.
type afterPipeline struct {
	armed atomic.Bool
	then  func()
}

func (a *afterPipeline) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (a *afterPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (a *afterPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if len(cmds) > 0 && (cmds[0].Name() == "eval" || cmds[0].Name() == "hmget") && a.armed.CompareAndSwap(true, false) {
			a.then()
		}
		return err
	}
}

// TestStaleVersionNamesTheCurrentOne: a command with expected_version
// loses its compare-and-set to a commit of two events (a move that also
// declines a pending draw offer) made between its read and its commit by
// another process. The Aborted answer must name the version the game is
// at, which a client retrying with it needs, not the read one plus one.
func TestStaleVersionNamesTheCurrentOne(t *testing.T) {
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	hooked := redistest.Client(t)
	race := &afterPipeline{}
	hooked.AddHook(race)
	slow := newRedisHandlerOn(t, hooked, prefix, ring)
	other := newRedisHandlerOn(t, redistest.Client(t), prefix, ring)

	id, red, black := newXiangqi(t, other)
	if _, err := other.MakeMove(red, &gamev1.MakeMoveRequest{GameId: id, RequestId: "m1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	offered, err := other.OfferDraw(red, &gamev1.OfferDrawRequest{GameId: id, RequestId: "offer"})
	if err != nil {
		t.Fatal(err)
	}
	seen := offered.GetGame().GetVersion()
	var current uint64
	race.then = func() {
		resp, err := other.MakeMove(black, &gamev1.MakeMoveRequest{GameId: id, RequestId: "m2", Move: &commonv1.Move{Coordinate: "h10g8"}})
		if err != nil {
			t.Errorf("the racing move: %v", err)
			return
		}
		current = resp.GetGame().GetVersion()
	}
	race.armed.Store(true)
	_, err = slow.Resign(red, &gamev1.ResignRequest{GameId: id, RequestId: "resign", ExpectedVersion: seen})
	if current != seen+2 {
		t.Fatalf("the racing move took the game from version %d to %d, want two events", seen, current)
	}
	want := fmt.Sprintf("version %d;", current)
	if status.Code(err) != codes.Aborted || !strings.Contains(status.Convert(err).Message(), want) {
		t.Fatalf("resign at version %d after a race to %d: %v; want Aborted naming %q", seen, current, err, want)
	}
}

// TestCachedStateOfALostCommitIsNotBuiltOn: Redis loses a commit this
// process made and cached (a failover to a replica that lacked it, or a
// restart from a file without it), and another process then brings the
// game back to the same version with another change. The version alone
// matches, but the cached state is not the stored one: a command run on
// it must lose its compare-and-set and be decided on the stored game.
func TestCachedStateOfALostCommitIsNotBuiltOn(t *testing.T) {
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	rdb := redistest.Client(t)
	first := newRedisHandlerOn(t, rdb, prefix, ring)
	other := newRedisHandlerOn(t, redistest.Client(t), prefix, ring)
	ctx := t.Context()
	id, red, black := newXiangqi(t, first)
	move := func(h *Handler, side context.Context, mv string) error {
		_, err := h.MakeMove(side, &gamev1.MakeMoveRequest{GameId: id, RequestId: "m-" + mv, Move: &commonv1.Move{Coordinate: mv}})
		return err
	}
	for _, m := range []struct {
		side context.Context
		mv   string
	}{{red, "h3e3"}, {black, "h10g8"}} {
		if err := move(first, m.side, m.mv); err != nil {
			t.Fatal(err)
		}
	}
	keys := first.store.Keys(id)
	saved := map[string]string{}
	for _, k := range keys {
		saved[k] = rdb.Dump(ctx, k).Val()
	}
	if err := move(first, red, "b3d3"); err != nil { // cached here, then lost
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := rdb.RestoreReplace(ctx, k, time.Hour, saved[k]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The other process brings the game to the lost commit's version with
	// a seat's presence: Red is still to move.
	other.presence.opened(ctx, id, rules.First)
	head, err := other.store.LoadHead(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if cached := first.cache.get(id); cached == nil || cached.Version != head.State.Version {
		t.Fatalf("the test needs the lost commit cached at the stored version %d", head.State.Version)
	}
	err = move(first, black, "b10c8")
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Black's move on the cached state of the lost commit: %v; want FailedPrecondition (Red is to move)", err)
	}
	l, err := other.store.Load(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range l.State.Moves {
		got = append(got, m.Move)
	}
	if !slices.Equal(got, []string{"h3e3", "h10g8"}) || !slices.Contains(l.State.Holders[rules.First], other.proc) {
		t.Fatalf("stored moves %v, holders %v: the lost commit's state was built on", got, l.State.Holders)
	}
	// And Red plays on as the stored game says.
	if err := move(first, red, "a4a5"); err != nil {
		t.Fatal(err)
	}
}

// TestALogThatHoldsTheVersionIsNotLost: a stream whose read of the log
// found nothing past the version it sent, though a check had found the
// game past it, asks logLost why. Redis may have lost the commit the
// check saw (a failover) and the game gone on again before logLost looked:
// the version is past the stream's then, but the log holds it too, and
// the stream must read on, not end as if the log were lost. A log that
// lacks it is lost.
func TestALogThatHoldsTheVersionIsNotLost(t *testing.T) {
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Client(t)
	h := newRedisHandlerOn(t, rdb, redistest.Prefix(t), ring)
	ctx := t.Context()
	id, red, _ := newXiangqi(t, h)
	created, err := h.store.Version(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.MakeMove(red, &gamev1.MakeMoveRequest{GameId: id, RequestId: "m1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.logLost(ctx, id, created); err != nil {
		t.Fatalf("the log holds version %d: %v", created+1, err)
	}
	if err := rdb.Del(ctx, h.store.Keys(id)[1]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := h.logLost(ctx, id, created); err == nil || !strings.Contains(err.Error(), "the log was lost") {
		t.Fatalf("the log deleted: %v; want it told lost", err)
	}
}
