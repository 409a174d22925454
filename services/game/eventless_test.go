package game_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game/gametest"
)

// storedWake reads the stored wake-up of game id.
func storedWake(t *testing.T, env *gametest.Env, id string) int64 {
	t.Helper()
	raw, err := env.Redis.HGet(context.Background(), env.Config.KeyPrefix+"{g:"+id+"}", "s").Result()
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
// and so does the stamp that the log's last event carries. No history was
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
