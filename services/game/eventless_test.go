package game_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/deadline"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// storedWake reads the stored wake-up of game id.
func storedWake(t *testing.T, env *gametest.Env, id string) int64 {
	t.Helper()
	return wakeIn(t, env.Redis, env.Config.KeyPrefix+"{g:"+id+"}")
}

// wakeIn reads the wake-up stored in a game's hash, key, on rdb.
func wakeIn(t *testing.T, rdb redis.Cmdable, key string) int64 {
	t.Helper()
	raw, err := rdb.HGet(context.Background(), key, "s").Result()
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Wake int64 `json:"wake"`
	}
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	return st.Wake
}

// TestAnEventlessCommitDoesNotEndHealthyStreams: model.Expire moves a
// wake-up set on a milestone announced already (as a build before that
// rule could leave it) in a change without events: the version stays,
// and the log's last event stays the head streams check against. No history was
// lost, so no stream ends with OutOfRange: neither one open across the
// change, nor one opened after it with a snapshot.
func TestAnEventlessCommitDoesNotEndHealthyStreams(t *testing.T) {
	env := gametest.Start(t, nil)
	byoyomi := &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{
		MainTime: durationpb.New(time.Second), Periods: 3, PeriodTime: durationpb.New(30 * time.Second)}}}
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, TimeControl: byoyomi})
	tb.move(t, "h3e3")
	tb.move(t, "h10g8")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Red enters byo-yomi; the sweeper's call announces it.
	entered := storedWake(t, env, tb.id)
	if entered == 0 {
		t.Fatal("no wake-up stored for Red's turn")
	}
	time.Sleep(time.Until(time.UnixMilli(entered).Add(100 * time.Millisecond)))
	r, err := env.Client.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: tb.id, DeadlineUnixMs: entered})
	if err != nil || !r.GetApplied() {
		t.Fatalf("byo-yomi's wake-up: %v %v", r, err)
	}
	// What a build before the rule could leave: the wake-up back on the
	// milestone just announced (the stamp unchanged, as the edit is no
	// commit).
	editStored(t, env, tb.id, func(st map[string]any) string {
		st["wake"] = entered
		return ""
	})

	evs, err := followEvents(ctx, env, tb.id)
	if err != nil {
		t.Fatal(err)
	}
	version := tb.get(t).GetVersion()
	for v := uint64(1); v <= version; v++ {
		if s := <-evs; s.err != nil {
			t.Fatalf("catching up, at version %d: %v", v, s.err)
		}
	}

	// The sweeper finds the wake-up: a change without events moves it on.
	r, err = env.Client.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: tb.id, DeadlineUnixMs: entered})
	if err != nil || !r.GetApplied() || r.GetGame().GetVersion() != version {
		t.Fatalf("the wake-up on the announced milestone: %v %v; want it applied with no new version", r, err)
	}

	// A stream opened now with a snapshot, as a client told OutOfRange does.
	snap, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := snap.Recv(); err != nil || m.GetSnapshot() == nil {
		t.Fatalf("snapshot stream's first message: %v %v", m, err)
	}
	snapErr := make(chan error, 1)
	go func() {
		for {
			m, err := snap.Recv()
			if err != nil {
				snapErr <- err
				return
			}
			if m.GetEvent() != nil {
				snapErr <- nil
				return
			}
		}
	}()

	// Several heartbeats (200 ms here): each looks at the game's head.
	openEnded := false
	select {
	case s := <-evs:
		t.Errorf("the stream open across the change got %v / ended with %v before anything happened", s.ev, s.err)
		openEnded = true
	case <-time.After(time.Second):
	}
	// Red plays: both streams must get the move.
	tb.move(t, "b1c3")
	if !openEnded {
		select {
		case s := <-evs:
			if s.err != nil {
				t.Errorf("the stream open across the change ended with %v at Red's move", s.err)
			}
		case <-time.After(5 * time.Second):
			t.Error("the stream open across the change got nothing of Red's move")
		}
	}
	select {
	case err := <-snapErr:
		if err != nil {
			t.Errorf("the stream opened with a snapshot after the change ended with %v (OutOfRange: %v)", err, status.Code(err) == codes.OutOfRange)
		}
	case <-time.After(5 * time.Second):
		t.Error("the snapshot stream got nothing of Red's move")
	}
}

// TestAStaleCacheDoesNotUndoAnEventlessCommit: an eventless commit (the
// sweeper moving a wake-up set on a milestone announced already, as a build
// before that rule could leave it) keeps the version but takes a stamp of
// its own. A process that holds the state from before that commit in its
// cache fails the compare-and-set with it, instead of writing the old
// wake-up back: that entry left the deadline index with the eventless
// commit, and the game would then have no wake-up indexed, its flag never
// swept.
func TestAStaleCacheDoesNotUndoAnEventlessCommit(t *testing.T) {
	a := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.Start(t, func(c *game.Config) { c.KeyPrefix = a.Config.KeyPrefix; c.SigningKeys = keyOne })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	byoyomi := &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{
		MainTime: durationpb.New(time.Second), Periods: 3, PeriodTime: durationpb.New(5 * time.Second)}}}
	tb := create(t, a, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, TimeControl: byoyomi})
	tb.move(t, "h3e3")
	tb.move(t, "h10g8")
	onB := &table{env: b, id: tb.id, seats: tb.seats}

	// Black offers a draw, on process a.
	if _, err := a.Client.OfferDraw(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.OfferDrawRequest{GameId: tb.id, RequestId: rid()}); err != nil {
		t.Fatal(err)
	}
	// Red enters byo-yomi; the sweeper's call, on process b, announces it.
	entered := storedWake(t, a, tb.id)
	time.Sleep(time.Until(time.UnixMilli(entered).Add(100 * time.Millisecond)))
	r, err := b.Client.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: tb.id, DeadlineUnixMs: entered})
	if err != nil || !r.GetApplied() {
		t.Fatalf("byo-yomi's wake-up: %v %v", r, err)
	}
	// What a build before the rule could leave: the wake-up back on the
	// milestone just announced.
	editStored(t, a, tb.id, func(st map[string]any) string {
		st["wake"] = entered
		return ""
	})

	// Red's app opens its stream on process a: a's presence commit, on the
	// state read anew (its cache is behind), keeps that wake-up, and a
	// caches the state it committed.
	before := onB.get(t).GetVersion()
	sctx, scancel := context.WithCancel(tb.as(commonv1.Side_SIDE_FIRST))
	defer scancel()
	st, err := a.Client.StreamEvents(sctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); onB.get(t).GetVersion() == before; {
		if time.Now().After(deadline) {
			t.Fatal("Red's stream on a recorded no presence")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if w := storedWake(t, a, tb.id); w != entered {
		t.Fatalf("after the presence commit the stored wake-up is %d, want the legacy %d", w, entered)
	}

	// The sweeper finds that wake-up again, through process b: a change
	// without events moves it on, keeping version and stamp.
	version := onB.get(t).GetVersion()
	r, err = b.Client.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: tb.id, DeadlineUnixMs: entered})
	if err != nil || !r.GetApplied() || r.GetGame().GetVersion() != version {
		t.Fatalf("the wake-up on the announced milestone: %v %v; want it applied with no new version", r, err)
	}
	moved := storedWake(t, a, tb.id)
	if moved == entered || moved == 0 {
		t.Fatalf("the eventless commit left the wake-up at %d", moved)
	}

	// Red declines the draw, on process a: its command runs on the state it
	// cached before the eventless commit.
	if _, err := a.Client.AnswerDraw(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.AnswerDrawRequest{GameId: tb.id, RequestId: rid(), Accept: false}); err != nil {
		t.Fatal(err)
	}

	stored := storedWake(t, a, tb.id)
	idx, err := deadline.New(a.Redis, a.Config.KeyPrefix, a.Config.DeadlineShards)
	if err != nil {
		t.Fatal(err)
	}
	key := idx.Key(idx.ShardOf(tb.id))
	_, zerr := a.Redis.ZScore(ctx, key, tb.id+"|"+strconv.FormatInt(stored, 10)).Result()
	indexed, _ := a.Redis.ZRange(ctx, key, 0, -1).Result()
	if stored != moved || zerr != nil {
		// What the sweeper does with the entry it finds: stale, dropped.
		time.Sleep(time.Until(time.UnixMilli(moved).Add(100 * time.Millisecond)))
		r, err := b.Client.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: tb.id, DeadlineUnixMs: moved})
		t.Fatalf("after Red's decline on a's cached state, the stored wake-up is %d (the eventless commit set %d, the legacy one was %d); "+
			"stored wake-up indexed: %v; index holds %v; the sweeper's call on the indexed %d: applied=%v err=%v; game status %v, Red's clock %v",
			stored, moved, entered, zerr == nil, indexed, moved, r.GetApplied(), err, onB.get(t).GetStatus(), onB.get(t).GetClocks())
	}
}
