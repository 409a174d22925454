package game_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// playAs plays mv as side with a fresh request id, retrying while the
// service answers Unavailable (Redis restarting).
func playAs(t *testing.T, env *gametest.Env, tb *table, side commonv1.Side, mv string) *gamev1.MakeMoveResponse {
	t.Helper()
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: mv}}
	var resp *gamev1.MakeMoveResponse
	retrying(t, "move "+mv, func() (err error) {
		resp, err = env.Client.MakeMove(tb.as(side), req)
		return err
	})
	return resp
}

// TestARetryOfALostCommitIsAppliedAgain: a move is committed and answered,
// the answer never reaches the client, and Redis restarts from a snapshot
// that lacks the commit. The client's retry, with the same request id,
// reaches the process that made the commit and still holds its answer:
// that answer no longer stands, and the move is applied again, as any
// other process would apply it, instead of being answered as played and
// lost for good while the player waits for a reply that never comes.
func TestARetryOfALostCommitIsAppliedAgain(t *testing.T) {
	srv := redistest.Own(t, "--appendonly", "no")
	a := gametest.StartOn(t, srv.Addr, func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.StartOn(t, srv.Addr, func(c *game.Config) { c.KeyPrefix = a.Config.KeyPrefix; c.SigningKeys = keyOne })
	tb := xiangqi(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	openAndSave(ctx, t, srv, a, tb)
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b1c3"}}
	if _, err := a.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), req); err != nil {
		t.Fatal(err)
	}
	if err := srv.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	var retried *gamev1.MakeMoveResponse
	retrying(t, "retry on the process that committed", func() (err error) {
		retried, err = a.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), req)
		return err
	})
	// What Redis holds, read by a process that caches nothing of the game.
	var g *gamev1.Game
	retrying(t, "read on another process", func() error {
		r, err := b.Client.GetGame(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.GetGameRequest{GameId: tb.id})
		g = r.GetGame()
		return err
	})
	if len(g.GetMoves()) != 3 || g.GetVersion() != retried.GetGame().GetVersion() {
		t.Fatalf("the retry of %s was answered as played at version %d, but the game holds %d moves at version %d, %v to move",
			req.GetMove().GetCoordinate(), retried.GetGame().GetVersion(), len(g.GetMoves()), g.GetVersion(), g.GetTurn())
	}
}

// openAndSave plays h3e3 and h10g8 on env and has Redis save a snapshot
// of the game as they left it, which it returns.
func openAndSave(ctx context.Context, t *testing.T, srv *redistest.Server, env *gametest.Env, tb *table) *gamev1.Game {
	t.Helper()
	playAs(t, env, tb, commonv1.Side_SIDE_FIRST, "h3e3")
	g := playAs(t, env, tb, commonv1.Side_SIDE_SECOND, "h10g8").GetGame()
	if err := srv.Client(t).Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	return g
}

// loseAMove plays h3e3 and h10g8 on env, snapshots Redis, plays b1c3,
// calls seen (when not nil) while Redis still holds the move, and
// restarts Redis from the snapshot, which lacks it. It returns the game
// as h10g8 and b1c3 left it.
func loseAMove(ctx context.Context, t *testing.T, srv *redistest.Server, env *gametest.Env, tb *table, seen func(before, lost *gamev1.Game)) (before, lost *gamev1.Game) {
	t.Helper()
	before = openAndSave(ctx, t, srv, env, tb)
	lost = playAs(t, env, tb, commonv1.Side_SIDE_FIRST, "b1c3").GetGame()
	if seen != nil {
		seen(before, lost)
	}
	if err := srv.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	return before, lost
}

// streamedEvent is one event of a stream, or the error that ended it.
type streamedEvent struct {
	ev  *gamev1.Event
	err error
}

// followEvents streams game id's events, without a snapshot, into a channel.
func followEvents(ctx context.Context, env *gametest.Env, id string) (<-chan streamedEvent, error) {
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: id})
	if err != nil {
		return nil, err
	}
	out := make(chan streamedEvent, 256)
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				out <- streamedEvent{err: err}
				return
			}
			if e := m.GetEvent(); e != nil {
				out <- streamedEvent{ev: e}
			}
		}
	}()
	return out, nil
}

// TestAResumeAfterALostCommitEnds: a client had the move at version L,
// with its commit, and Redis restarts from a snapshot without it; the
// player moves again at version L. The client, resuming after L with the
// commit it had, is told to read the game anew (OutOfRange), both while
// the game is at L and once it has gone on: it never gets the game's
// next events on top of a move the game no longer holds. A client that
// has the new L, or resumes before it, streams on.
func TestAResumeAfterALostCommitEnds(t *testing.T) {
	srv := redistest.Own(t, "--appendonly", "no")
	env := gametest.StartOn(t, srv.Addr, nil)
	tb := xiangqi(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resume := func(after uint64, commit string) (*gamev1.Event, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: after, AfterCommit: commit})
		if err != nil {
			return nil, err
		}
		for {
			m, err := st.Recv()
			if err != nil || m.GetEvent() != nil {
				return m.GetEvent(), err
			}
		}
	}

	before, lost := loseAMove(ctx, t, srv, env, tb, func(before, lost *gamev1.Game) {
		// The answer names the commit that the stream sends with the event.
		if e, err := resume(before.GetVersion(), before.GetCommit()); err != nil || e.GetVersion() != lost.GetVersion() || e.GetCommit() != lost.GetCommit() || lost.GetCommit() == "" {
			t.Fatalf("resumed after version %d: %v, %v; want version %d of commit %q", before.GetVersion(), e, err, lost.GetVersion(), lost.GetCommit())
		}
	})
	again := playAs(t, env, tb, commonv1.Side_SIDE_FIRST, "h1g3").GetGame()
	if again.GetVersion() != lost.GetVersion() || again.GetCommit() == lost.GetCommit() {
		t.Fatalf("the replacement move is at version %d of commit %q, the lost one was at %d of %q: Redis did not lose the move",
			again.GetVersion(), again.GetCommit(), lost.GetVersion(), lost.GetCommit())
	}
	wantRewritten := func(when string) {
		t.Helper()
		if e, err := resume(lost.GetVersion(), lost.GetCommit()); status.Code(err) != codes.OutOfRange {
			t.Fatalf("%s, resumed after the lost b1c3 (version %d, commit %q): %v, %v; want OutOfRange", when, lost.GetVersion(), lost.GetCommit(), e, err)
		}
	}
	wantRewritten("at the lost move's version")
	reply := playAs(t, env, tb, commonv1.Side_SIDE_SECOND, "b10c8").GetGame()
	wantRewritten("one move past it")
	if e, err := resume(again.GetVersion(), again.GetCommit()); err != nil || e.GetVersion() != reply.GetVersion() || e.GetMovePlayed().GetMove().GetCoordinate() != "b10c8" {
		t.Fatalf("resumed after h1g3: %v, %v; want b10c8 at version %d", e, err, reply.GetVersion())
	}
	if e, err := resume(before.GetVersion(), before.GetCommit()); err != nil || e.GetVersion() != again.GetVersion() || e.GetMovePlayed().GetMove().GetCoordinate() != "h1g3" {
		t.Fatalf("resumed before the lost move: %v, %v; want h1g3 at version %d", e, err, again.GetVersion())
	}
}

// TestAResumeAfterALostEndingEnds: a client saw Red resign (the game's
// last event, version L, commit X). Redis restarts from a snapshot without
// it, and Black resigns instead, at the same version L. The client resumes
// after L naming X: the game no longer holds X at L (it ended the other
// way), and the stream ends with OUT_OF_RANGE, not OK as complete, which
// would leave the client with a result the game does not have.
func TestAResumeAfterALostEndingEnds(t *testing.T) {
	srv := redistest.Own(t, "--appendonly", "no")
	env := gametest.StartOn(t, srv.Addr, nil)
	tb := xiangqi(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	openAndSave(ctx, t, srv, env, tb)
	resign := func(side commonv1.Side) *gamev1.Game {
		t.Helper()
		var g *gamev1.Game
		retrying(t, "resign", func() error {
			r, err := env.Client.Resign(tb.as(side), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()})
			g = r.GetGame()
			return err
		})
		return g
	}
	lost := resign(commonv1.Side_SIDE_FIRST)
	if err := srv.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	again := resign(commonv1.Side_SIDE_SECOND)
	if again.GetVersion() != lost.GetVersion() || again.GetCommit() == lost.GetCommit() || lost.GetCommit() == "" {
		t.Fatalf("Black's resignation is at version %d of commit %q, Red's lost one at %d of %q: not the case under test",
			again.GetVersion(), again.GetCommit(), lost.GetVersion(), lost.GetCommit())
	}
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	st, err := env.Client.StreamEvents(sctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: lost.GetVersion(), AfterCommit: lost.GetCommit()})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if status.Code(err) == codes.OutOfRange {
			return
		}
		if errors.Is(err, io.EOF) {
			t.Fatalf("resumed after Red's lost resignation (version %d, commit %q) while the game holds Black's (commit %q, result %v): "+
				"the stream ended OK, as complete; want OutOfRange", lost.GetVersion(), lost.GetCommit(), again.GetCommit(), again.GetResult())
		}
		if err != nil {
			t.Fatalf("resumed after Red's lost resignation: %v; want OutOfRange", err)
		}
		t.Logf("got %v", m)
	}
}

// TestAResumeOnAProcessThatHeldALostCommitGoesOn: process a made a move
// that Redis then lost (a restart from a snapshot), and still holds the
// game as that move left it; on b the game went on from before the move.
// A client that has the game as Redis holds it resumes on a without
// naming a commit: the stream takes the log's word for the version it
// resumes after, not a's memory of the lost move, and streams on instead
// of ending, falsely, as if the client had the lost move.
func TestAResumeOnAProcessThatHeldALostCommitGoesOn(t *testing.T) {
	srv := redistest.Own(t, "--appendonly", "no")
	a := gametest.StartOn(t, srv.Addr, func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.StartOn(t, srv.Addr, func(c *game.Config) { c.KeyPrefix = a.Config.KeyPrefix; c.SigningKeys = keyOne })
	tb := xiangqi(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, lost := loseAMove(ctx, t, srv, a, tb, nil)
	again := playAs(t, b, tb, commonv1.Side_SIDE_FIRST, "h1g3").GetGame()
	if again.GetVersion() != lost.GetVersion() {
		t.Fatalf("the replacement move is at version %d, the lost one was at %d: Redis did not lose the move", again.GetVersion(), lost.GetVersion())
	}
	st, err := a.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: again.GetVersion()})
	if err != nil {
		t.Fatal(err)
	}
	reply := playAs(t, b, tb, commonv1.Side_SIDE_SECOND, "b10c8").GetGame()
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("the stream resumed on a after h1g3, as Redis holds it: %v; want b10c8 at version %d", err, reply.GetVersion())
		}
		if e := m.GetEvent(); e != nil {
			if e.GetVersion() != reply.GetVersion() || e.GetMovePlayed().GetMove().GetCoordinate() != "b10c8" {
				t.Fatalf("the stream resumed on a after h1g3 sent %v; want b10c8 at version %d", e, reply.GetVersion())
			}
			return
		}
	}
}

// TestAStreamEndsWhenTheGameGoesOnFromBeforeALostWrite: Redis persists
// with snapshots only and restarts without the last move, which a
// spectator's stream had sent. The player then plays another move at that
// version, and the opponent answers. The stream never sends the answer on
// top of the lost move: it ends with OutOfRange, and its client reads the
// game anew.
func TestAStreamEndsWhenTheGameGoesOnFromBeforeALostWrite(t *testing.T) {
	srv := redistest.Own(t, "--appendonly", "no")
	// The production heartbeat, so that the version check it triggers does
	// not happen to run while the game is behind.
	env := gametest.StartOn(t, srv.Addr, func(c *game.Config) { c.Heartbeat = 15 * time.Second })
	tb := xiangqi(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	playAs(t, env, tb, commonv1.Side_SIDE_FIRST, "h3e3")
	playAs(t, env, tb, commonv1.Side_SIDE_SECOND, "h10g8")
	evs, err := followEvents(ctx, env, tb.id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]string{}
	var last uint64
	recv := func(what string) (*gamev1.Event, error) {
		t.Helper()
		select {
		case s := <-evs:
			if s.err != nil {
				return nil, s.err
			}
			if s.ev.GetVersion() != last+1 {
				t.Fatalf("%s: version %d after %d", what, s.ev.GetVersion(), last)
			}
			last = s.ev.GetVersion()
			seen[last] = s.ev.GetMovePlayed().GetMove().GetCoordinate()
			return s.ev, nil
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing streamed for 10s (last version %d)", what, last)
		}
		return nil, nil
	}
	for last < tb.get(t).GetVersion() {
		if _, err := recv("before the snapshot"); err != nil {
			t.Fatal(err)
		}
	}
	// The snapshot that Redis will restart from.
	if err := srv.Client(t).Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	lost := playAs(t, env, tb, commonv1.Side_SIDE_FIRST, "b1c3").GetGame().GetVersion()
	for last < lost {
		if _, err := recv("the move to be lost"); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	again := playAs(t, env, tb, commonv1.Side_SIDE_FIRST, "h1g3").GetGame().GetVersion()
	reply := playAs(t, env, tb, commonv1.Side_SIDE_SECOND, "b10c8").GetGame().GetVersion()
	t.Logf("lost b1c3 at version %d; h1g3 at %d, b10c8 at %d", lost, again, reply)
	if again != lost {
		t.Fatalf("the replacement move is at version %d, not %d: Redis did not lose the move", again, lost)
	}
	for last < reply {
		if _, err := recv("after the restart"); err != nil {
			if status.Code(err) == codes.OutOfRange {
				return // the stream noticed
			}
			t.Fatalf("stream after the restart: %v", err)
		}
	}
	g := tb.get(t)
	// The stream delivered version `lost` as b1c3 and then version `reply`
	// built on h1g3: two histories in one stream.
	if seen[lost] != "h1g3" {
		t.Fatalf("the stream delivered version %d as %q (lost with the restart), then version %d (%q) of a game whose version %d is %q; game moves now %v",
			lost, seen[lost], reply, seen[reply], lost, "h1g3", g.GetMoves())
	}
}

// TestAStreamEndsWhenAnOutageExcuseTakesTheVersionOfALostMove: as above,
// but nobody acts after Redis comes back. The game process excuses the
// outage itself, committing an OUTAGE_EXCUSED event at the version the
// lost move had. The stream that sent the lost move does not take that
// event for one it sent: it ends at once, not for good, its client showing
// a move the game does not have while the player's clock runs.
func TestAStreamEndsWhenAnOutageExcuseTakesTheVersionOfALostMove(t *testing.T) {
	srv := redistest.Own(t, "--appendonly", "no")
	env := gametest.StartOn(t, srv.Addr, func(c *game.Config) { c.SigningKeys, c.Heartbeat = keyOne, 15*time.Second })
	// A timed game (5 min a side), so that an outage has a turn to excuse.
	fischer := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(5 * time.Minute)}}}
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, TimeControl: fischer})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	playAs(t, env, tb, commonv1.Side_SIDE_FIRST, "h3e3")
	playAs(t, env, tb, commonv1.Side_SIDE_SECOND, "h10g8")
	evs, err := followEvents(ctx, env, tb.id)
	if err != nil {
		t.Fatal(err)
	}
	streamed := map[uint64]*gamev1.Event{}
	var last uint64
	take := func(d time.Duration) (bool, error) {
		select {
		case s := <-evs:
			if s.err != nil {
				return false, s.err
			}
			if s.ev.GetVersion() != last+1 {
				t.Fatalf("version %d after %d", s.ev.GetVersion(), last)
			}
			last = s.ev.GetVersion()
			streamed[last] = s.ev
			return true, nil
		case <-time.After(d):
			return false, nil
		}
	}
	if err := srv.Client(t).Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	lost := playAs(t, env, tb, commonv1.Side_SIDE_FIRST, "b1c3").GetGame().GetVersion()
	for last < lost {
		if ok, err := take(10 * time.Second); !ok || err != nil {
			t.Fatalf("waiting for version %d: %v", lost, err)
		}
	}
	// Down long enough to be an outage the process excuses.
	if err := srv.CrashFor(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	// Many heartbeats: the stream has every chance to notice.
	var streamErr error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && streamErr == nil; {
		_, streamErr = take(100 * time.Millisecond)
	}
	t.Logf("after the restart the stream ended with %v", streamErr)
	// The game as Redis holds it, read from the log by a fresh stream on
	// a process that caches nothing.
	fresh := gametest.StartOn(t, srv.Addr, func(c *game.Config) { c.KeyPrefix, c.SigningKeys = env.Config.KeyPrefix, keyOne })
	var g *gamev1.Game
	retrying(t, "read", func() error {
		r, err := fresh.Client.GetGame(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.GetGameRequest{GameId: tb.id})
		g = r.GetGame()
		return err
	})
	fevs, err := followEvents(ctx, fresh, tb.id)
	if err != nil {
		t.Fatal(err)
	}
	truth := map[uint64]*gamev1.Event{}
	for v := uint64(1); v <= g.GetVersion(); v++ {
		s := <-fevs
		if s.err != nil {
			t.Fatal(s.err)
		}
		truth[s.ev.GetVersion()] = s.ev
	}
	t.Logf("game now at version %d with %d moves; old stream at %d, ended with %v", g.GetVersion(), len(g.GetMoves()), last, streamErr)
	if streamErr != nil {
		if status.Code(streamErr) == codes.OutOfRange {
			return
		}
		t.Fatalf("stream ended with %v", streamErr)
	}
	for v := uint64(1); v <= last && v <= g.GetVersion(); v++ {
		if !proto.Equal(streamed[v], truth[v]) {
			t.Fatalf("the live stream, still open, delivered version %d as\n  %v\nbut the game's version %d is\n  %v\n(the game has %d moves; the stream's client believes %d)",
				v, streamed[v], v, truth[v], len(g.GetMoves()), 3)
		}
	}
}

// TestAStreamRefusedForAnotherCommitRecordsNoPresence: a seat's stream
// refused because the commit it names is not the game's (a client that
// had a move Redis lost) is answered OUT_OF_RANGE and, as every refusal,
// changes nothing: the opponent sees the seat neither connect nor
// disconnect, and the game's version stays.
func TestAStreamRefusedForAnotherCommitRecordsNoPresence(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	g := tb.get(t)
	before := redisState(t, env, tb.id)
	ctx, cancel := context.WithTimeout(tb.as(commonv1.Side_SIDE_SECOND), 5*time.Second)
	defer cancel()
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: g.GetVersion(), AfterCommit: "notthecommit"})
	if err != nil {
		t.Fatal(err)
	}
	// A resumed stream may send a heartbeat before its refusal: read on.
	for err == nil {
		_, err = st.Recv()
	}
	wantCode(t, err, codes.OutOfRange)
	time.Sleep(500 * time.Millisecond) // past the presence grace
	if after := redisState(t, env, tb.id); after != before {
		t.Fatalf("a refused stream changed Redis:\nbefore %s\nafter  %s", before, after)
	}
}
