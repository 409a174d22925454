package main

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestLoadtestGamesFindsInjectedFaults runs `palace loadtest games`
// through a proxy that does one thing wrong between the tool and a real
// server: a load test that finds nothing wrong is worth something only if
// it finds what is wrong. Each fault must show in the counter the report
// has for it, and make the tool exit 1; through a faithful proxy the
// report stays clean, so the counts come from the faults alone.
func TestLoadtestGamesFindsInjectedFaults(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	tests := []struct {
		name  string
		fault func() *fault
		// found are the report's counters the fault must raise, clean
		// those it cannot touch; the others may follow from it.
		found, clean []string
		// each, when set, is the counter that must count every injected
		// fault exactly once.
		each string
		// unplayed: no move can be played, and the run must fail for
		// having tested nothing, every counter clean.
		unplayed bool
		// args are flags of the run's own, after the common ones.
		args []string
	}{
		{name: "none", fault: func() *fault { return &fault{} },
			clean: []string{"lost", "duplicated", "gaps", "errors"}},
		// A stream that skipped the event and reconnected with a snapshot
		// has the move from the snapshot: gaps for sure, lost maybe.
		{name: "event-dropped", fault: dropMoveEvent(3),
			found: []string{"gaps"}, clean: []string{"duplicated", "errors"}},
		{name: "event-doubled", fault: doubleFirstMoveEvent,
			found: []string{"duplicated"}, clean: []string{"lost", "gaps", "errors"}},
		{name: "retry-answered-differently", fault: bumpRetriedVersion,
			found: []string{"duplicated"}, clean: []string{"lost", "gaps", "errors"}, each: "duplicated"},
		{name: "move-acknowledged-not-applied", fault: swallowMove(3),
			found: []string{"errors", "lost"}, clean: []string{"duplicated", "gaps"}},
		{name: "answer-without-the-game", fault: answerEmpty(3),
			found: []string{"errors", "lost"}, clean: []string{"gaps"}},
		{name: "stream-cancelled", fault: cancelStreamAfter(3),
			found: []string{"errors"}, clean: []string{"duplicated"}},
		{name: "no-legal-move-in-a-game-going-on", fault: noLegalMoveAt(5),
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "one-kind-only", fault: xiangqiOnly,
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "every-game-ended-at-creation", fault: func() *fault { return resignAtCreation() }, unplayed: true},
		{name: "old-answers-forgotten", fault: forgetOldAnswers,
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "retry-in-flight-refused", fault: refuseInFlightRetry,
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "final-result-changed", fault: flipFinalWinner,
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "final-status-changed", fault: abortFinalState, each: "errors",
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "resignation-answered-otherwise", fault: flipResignedWinner, each: "errors",
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "ending-event-changed", fault: flipEndedWinner,
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "heartbeat-ahead", fault: heartbeatAhead,
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "snapshot-with-another-move", fault: snapshotWithAnotherFirstMove,
			found: []string{"errors"}, clean: []string{"duplicated", "gaps"}},
		// Each fault alone in its counter: the exit status must follow
		// every counter, not only the errors that come with most faults.
		{name: "final-state-without-its-last-move", fault: dropLastStoredMove,
			found: []string{"lost"}, clean: []string{"duplicated", "gaps", "errors"}, each: "lost"},
		{name: "streams-without-the-end", fault: dropEndEvents,
			found: []string{"gaps"}, clean: []string{"lost", "duplicated", "errors"}},
		{name: "game-gone", fault: gameGone,
			found: []string{"errors", "lost"}, clean: []string{"duplicated", "gaps"}},
		// The move of a call that failed may have been applied: finding it
		// in the game and its streams is no fault.
		{name: "move-applied-then-call-failed", fault: failAfterApplying(3),
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "answer-with-another-move", fault: editMoveAnswer(3, func(m *gamev1.MoveRecord) { m.Move = anotherMove(m.GetMove()) }),
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "answer-at-another-ply", fault: editMoveAnswer(3, func(m *gamev1.MoveRecord) { m.Ply++ }),
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		// Without reconnections every stream ends on the game's end
		// event, whose stream must be checked as whole as one the server
		// closes.
		{name: "event-with-another-move", fault: streamAnotherMove(3), args: []string{"--reconnect-rate", "0"}, each: "lost",
			found: []string{"lost"}, clean: []string{"duplicated", "gaps", "errors"}},
		// Cut off after it: an error, and the move shown wrongly lost.
		{name: "event-with-another-move-then-cut-off", fault: streamAnotherMoveThenCut(3), args: []string{"--retry-rate", "0", "--reconnect-rate", "0"}, each: "lost",
			found: []string{"lost", "errors"}, clean: []string{"duplicated", "gaps"}},
		// A stream without the snapshot it asked for misses what came
		// before it, too.
		// A floor call that fails is an error as a game's is.
		{name: "probe-refused", fault: refuseEveryOtherProbe, args: []string{"--floor=true"}, each: "errors",
			found: []string{"errors"}, clean: []string{"lost", "duplicated", "gaps"}},
		{name: "snapshot-withheld", fault: withholdSnapshots,
			found: []string{"errors"}, clean: []string{"duplicated"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fault()
			rep, errOut, code := gamesThrough(t, upstream, f, tc.args...)
			got := faultCounters(rep)
			t.Logf("injected %d: lost %d, duplicated %d, gaps %d, errors %d (%d moves, %d retries, %d reconnects)",
				f.injected.Load(), rep.Lost, rep.Duplicated, rep.Gaps, rep.Errors, rep.Moves, rep.Retries, rep.Reconnects)
			if tc.unplayed {
				if f.injected.Load() == 0 || rep.Games == 0 {
					t.Fatalf("the fault never happened: %+v\n%s", rep, errOut)
				}
				if rep.Moves != 0 || rep.Lost+rep.Duplicated+rep.Gaps+rep.Errors != 0 || code != exitFail {
					t.Fatalf("exit %d, %+v; want exit %d with no move and no fault counted\n%s", code, rep, exitFail, errOut)
				}
				return
			}
			if rep.Moves == 0 {
				t.Fatalf("no move played through the proxy: %+v\n%s", rep, errOut)
			}
			for _, c := range tc.clean {
				if got[c] != 0 {
					t.Errorf("%s = %d, want 0", c, got[c])
				}
			}
			if tc.found == nil {
				if code != exitOK {
					t.Fatalf("exit %d through a faithful proxy, want %d: %+v\n%s", code, exitOK, rep, errOut)
				}
				// The proxy must relay retries and reconnections faithfully
				// too, or a fault could hide behind its own.
				if rep.Retries == 0 || rep.Reconnects == 0 {
					t.Fatalf("no retries or reconnections through the proxy: %+v", rep)
				}
				return
			}
			if f.injected.Load() == 0 {
				t.Fatalf("the fault never happened: %+v", rep)
			}
			for _, c := range tc.found {
				if got[c] == 0 {
					t.Errorf("%s = 0, want it to count the fault", c)
				}
			}
			if tc.each != "" && got[tc.each] != f.injected.Load() {
				t.Errorf("%s = %d, want one for each of the %d faults", tc.each, got[tc.each], f.injected.Load())
			}
			if code != exitFail {
				t.Errorf("exit %d with faults reported, want %d", code, exitFail)
			}
			if t.Failed() {
				t.Logf("report %+v\n%s", rep, errOut)
			}
		})
	}
}

// TestLoadtestGamesPausesAfterARefusedCreation: a server that refuses every
// new game gets each slot's creation again only after a pause, not in a
// loop that would burn the machine the server shares with the tool.
func TestLoadtestGamesPausesAfterARefusedCreation(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	f := &fault{}
	f.create = func(context.Context, gamev1.GameServiceClient, *gamev1.CreateGameRequest) (*gamev1.CreateGameResponse, error) {
		f.injected.Add(1)
		return nil, status.Error(codes.Internal, "no games today (the faulty proxy)")
	}
	addr := startFaultyProxy(t, upstream, f)
	games, d := 3, 1500*time.Millisecond
	out, errOut, code := palace("loadtest", "games", "--addr", addr, "--games", strconv.Itoa(games), "--duration", d.String(),
		"--floor=false", "--service-keys", apptest.ServiceKeys)
	var rep gamesReport
	lastJSON(t, out, &rep)
	// Each slot tries at once, then once per pause.
	most := int64(games) * (int64(d/failoverPauseMax) + 2)
	if n := f.injected.Load(); n == 0 || n > most || rep.Errors != n || code != exitFail {
		t.Fatalf("%d creations refused (want 1 to %d), %d errors counted, exit %d (want %d)\n%s", n, most, rep.Errors, code, exitFail, errOut)
	}
}

// TestLoadtestClocksFindsAWrongWinner: a timeout recorded as a draw, or
// without a winner, is no correct flag, whoever the tool expected to flag.
func TestLoadtestClocksFindsAWrongWinner(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	for _, winner := range []commonv1.Winner{commonv1.Winner_WINNER_DRAW, commonv1.Winner_WINNER_UNSPECIFIED} {
		t.Run(winner.String(), func(t *testing.T) {
			f := &fault{}
			f.get = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
				resp, err := up.GetGame(ctx, req)
				if err == nil && resp.GetGame().GetResult().GetMethod() == commonv1.EndMethod_END_METHOD_TIMEOUT {
					f.injected.Add(1)
					resp.Game.Result.Winner = winner
				}
				return resp, err
			}
			addr := startFaultyProxy(t, upstream, f)
			out, errOut, code := palace("loadtest", "clocks", "--addr", addr, "--games", "6", "--spread", "1s",
				"--min-time", "2s", "--max-time", "2s", "--service-keys", apptest.ServiceKeys)
			var rep clocksReport
			lastJSON(t, out, &rep)
			if f.injected.Load() == 0 || rep.Unexpected != rep.Checked || rep.Checked != 6 || rep.Flagged != 0 || code != exitFail {
				t.Fatalf("%d results changed; report %+v, exit %d; want every game of 6 unexpected and exit %d\n%s", f.injected.Load(), rep, code, exitFail, errOut)
			}
		})
	}
}

// TestLoadtestMatchmakingFindsAGameUnlikeItsPool reads the games back
// through a proxy that changes one thing a pool decides: a pairing into
// a game of another kind, time control or rating is a wrong one.
func TestLoadtestMatchmakingFindsAGameUnlikeItsPool(t *testing.T) {
	keys := playerKeys
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--player-signing-keys", keys, "--pairing-interval", "50ms")
	for name, change := range map[string]func(*gamev1.Game){
		"kind": func(g *gamev1.Game) {
			if g.Kind == commonv1.GameKind_GAME_KIND_JANGGI {
				g.Kind = commonv1.GameKind_GAME_KIND_XIANGQI
			} else {
				g.Kind = commonv1.GameKind_GAME_KIND_JANGGI
			}
		},
		"time-control": func(g *gamev1.Game) { g.TimeControl = nil },
		"rated":        func(g *gamev1.Game) { g.Rated = !g.Rated },
	} {
		t.Run(name, func(t *testing.T) {
			f := &fault{}
			f.get = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
				resp, err := up.GetGame(ctx, req)
				if err == nil {
					f.injected.Add(1)
					change(resp.Game)
				}
				return resp, err
			}
			gameAddr := startFaultyProxy(t, addr, f)
			out, errOut, code := palace("loadtest", "matchmaking", "--addr", addr, "--game-addr", gameAddr, "--tickets", "16", "--cancel", "0",
				"--player-signing-keys", keys, "--timeout", "60s")
			var rep mmReport
			lastJSON(t, out, &rep)
			if f.injected.Load() == 0 || rep.GamesChecked == 0 || rep.DoublePaired != 2*rep.GamesChecked || code != exitFail {
				t.Fatalf("%d games changed; report %+v, exit %d; want every pairing of a game checked wrong and exit %d\n%s", f.injected.Load(), rep, code, exitFail, errOut)
			}
		})
	}
}

// TestLoadtestMatchmakingCountsAWatchEndedWhileWaiting: a watch that the
// server ends cleanly while its ticket waits leaves the player with no word
// of a match; its ticket is unsettled, not waiting.
func TestLoadtestMatchmakingCountsAWatchEndedWhileWaiting(t *testing.T) {
	keys := playerKeys
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--player-signing-keys", keys, "--pairing-interval", "50ms")
	f := &fault{endAfterFirst: matchmakingv1.MatchmakingService_WatchTicket_FullMethodName}
	proxy := startFaultyProxy(t, addr, f)
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", proxy, "--tickets", "8", "--cancel", "0",
		"--player-signing-keys", keys, "--timeout", "20s")
	var rep mmReport
	lastJSON(t, out, &rep)
	if f.injected.Load() == 0 || rep.Unsettled == 0 || rep.Matched+rep.Waiting+rep.Unsettled != rep.Tickets || code != exitFail {
		t.Fatalf("%d watches ended; report %+v, exit %d; want unsettled tickets and exit %d\n%s", f.injected.Load(), rep, code, exitFail, errOut)
	}
}

// TestLoadtestMatchmakingWatchesAgainAfterAReplicaGoesAway: a watch that
// fails Unavailable (its replica gone, a Redis failover) is opened again,
// as an app would, and its ticket's match is still seen: no error, and its
// partner's pairing is not taken for a wrong one.
func TestLoadtestMatchmakingWatchesAgainAfterAReplicaGoesAway(t *testing.T) {
	keys := playerKeys
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--player-signing-keys", keys, "--pairing-interval", "50ms")
	f := &fault{failAfterFirst: matchmakingv1.MatchmakingService_WatchTicket_FullMethodName, failLimit: 6}
	proxy := startFaultyProxy(t, addr, f)
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", proxy, "--tickets", "16", "--cancel", "0",
		"--player-signing-keys", keys, "--timeout", "30s")
	var rep mmReport
	lastJSON(t, out, &rep)
	if f.injected.Load() < f.failLimit || rep.Rewatched < f.failLimit || rep.Matched != rep.Tickets || rep.DoublePaired != 0 || rep.Errors != 0 || code != 0 {
		t.Fatalf("%d watches failed; report %+v, exit %d; want every ticket matched, %d watches opened again, no error, exit 0\n%s", f.injected.Load(), rep, code, f.failLimit, errOut)
	}
}

// gamesThrough runs `palace loadtest games` through a proxy to upstream
// that does fault f: 3 games for 1.5 s, with retries and reconnections,
// then the flags args, which override those. It returns the report, the
// tool's stderr and its exit status.
func gamesThrough(t *testing.T, upstream string, f *fault, args ...string) (rep gamesReport, errOut string, code int) {
	t.Helper()
	addr := startFaultyProxy(t, upstream, f)
	out, errOut, code := palace(append([]string{"loadtest", "games", "--addr", addr, "--games", "3", "--duration", "1500ms",
		"--floor=false", "--retry-rate", "0.3", "--reconnect-rate", "0.2", "--service-keys", apptest.ServiceKeys}, args...)...)
	lastJSON(t, out, &rep)
	return rep, errOut, code
}

// wantFaultCounted fails t unless fault f happened in a run that played
// moves, and the run counted it in one of its fault counters and exited 1.
func wantFaultCounted(t *testing.T, f *fault, rep gamesReport, errOut string, code int) {
	t.Helper()
	if f.injected.Load() == 0 || rep.Moves == 0 {
		t.Fatalf("the fault never happened: injected %d, %+v\n%s", f.injected.Load(), rep, errOut)
	}
	if rep.Lost+rep.Duplicated+rep.Gaps+rep.Errors == 0 || code != exitFail {
		t.Fatalf("%d faults injected, yet exit %d and lost %d duplicated %d gaps %d errors %d (moves %d, retries %d, reconnects %d)\n%s",
			f.injected.Load(), code, rep.Lost, rep.Duplicated, rep.Gaps, rep.Errors, rep.Moves, rep.Retries, rep.Reconnects, errOut)
	}
}

// faultCounters are the report's fault counters by their JSON names.
func faultCounters(rep gamesReport) map[string]int64 {
	return map[string]int64{"lost": rep.Lost, "duplicated": rep.Duplicated, "gaps": rep.Gaps, "errors": rep.Errors}
}

// fault is what the proxy does wrong; a nil hook forwards its calls as
// they are.
type fault struct {
	// move answers a MakeMove; up reaches the real server, with the
	// caller's credentials in ctx.
	move func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error)
	// create answers a CreateGame, get a GetGame.
	create func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.CreateGameRequest) (*gamev1.CreateGameResponse, error)
	get    func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error)
	probe  func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.ProbeRequest) (*gamev1.ProbeResponse, error)
	resign func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.ResignRequest) (*gamev1.ResignResponse, error)
	// endAfterFirst names a server-streaming method (of any service) whose
	// calls the proxy ends cleanly after their first answer.
	endAfterFirst string
	// failAfterFirst names a server-streaming method whose first
	// failLimit calls the proxy ends Unavailable after their first answer,
	// as a replica going away does.
	failAfterFirst string
	failLimit      int64
	// events makes the filter of one StreamEvents call.
	events func() eventFilter
	// injected counts the faults done.
	injected atomic.Int64
}

// eventFilter turns a message of the real server's stream into those the
// client gets, or into the error the stream ends with.
type eventFilter func(*gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error)

// dropMoveEvent leaves the event of the move at ply out of every stream,
// a reconnection's too: the stream skips a version and misses a move.
func dropMoveEvent(ply uint32) func() *fault {
	return func() *fault {
		return dropEvents(func(m *gamev1.StreamEventsResponse) bool { return m.GetEvent().GetMovePlayed().GetPly() == ply })
	}
}

// dropEvents leaves the messages that drop says out of every stream.
func dropEvents(drop func(*gamev1.StreamEventsResponse) bool) *fault {
	f := &fault{}
	f.events = func() eventFilter {
		return func(m *gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error) {
			if drop(m) {
				f.injected.Add(1)
				return nil, nil
			}
			return []*gamev1.StreamEventsResponse{m}, nil
		}
	}
	return f
}

// doubleFirstMoveEvent sends the first move event of every stream twice.
// Every stream, not one: a client that reconnects right after the first
// copy never reads the second, and the next stream must fault again.
func doubleFirstMoveEvent() *fault {
	f := &fault{}
	f.events = func() eventFilter {
		doubled := false
		return func(m *gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error) {
			if doubled || m.GetEvent().GetMovePlayed() == nil {
				return []*gamev1.StreamEventsResponse{m}, nil
			}
			doubled = true
			f.injected.Add(1)
			return []*gamev1.StreamEventsResponse{m, m}, nil
		}
	}
	return f
}

// bumpRetriedVersion answers every second retried MakeMove (a request id
// seen before) with the game one version ahead, as a server that applied
// the retry again would: a retry must get the first answer, whole. The
// faithful retries in between show that the tool counts wrong answers,
// not retries.
func bumpRetriedVersion() *fault {
	f := &fault{}
	var mu sync.Mutex
	seen := map[string]bool{}
	retries := 0
	f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
		mu.Lock()
		retry := seen[req.GetRequestId()]
		seen[req.GetRequestId()] = true
		if retry {
			retries++
		}
		bump := retry && retries%2 == 1
		mu.Unlock()
		resp, err := up.MakeMove(ctx, req)
		if err != nil || !bump {
			return resp, err
		}
		f.injected.Add(1)
		resp.Game.Version++
		return resp, nil
	}
	return f
}

// swallowMove acknowledges the nth move of every game without passing it
// on. Its answer is the game as it stands, the move not echoed and not
// played, and a retry gets the same: a server that loses a move it
// acknowledged. (An empty answer would leave the tool without the game's
// state, so it could neither play on nor resign and end its streams.)
func swallowMove(nth int) func() *fault {
	return func() *fault {
		f := &fault{}
		var mu sync.Mutex
		moves := map[string]int{} // distinct requests by game
		// swallowed holds the answers by request id, a request sent twice
		// at once waiting for the first's.
		type answer struct {
			ready chan struct{}
			resp  *gamev1.MakeMoveResponse
			err   error
		}
		swallowed := map[string]*answer{}
		seen := map[string]bool{}
		f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
			mu.Lock()
			if a, ok := swallowed[req.GetRequestId()]; ok {
				mu.Unlock()
				<-a.ready
				return a.resp, a.err
			}
			first := !seen[req.GetRequestId()]
			seen[req.GetRequestId()] = true
			if first {
				moves[req.GetGameId()]++
			}
			if !first || moves[req.GetGameId()] != nth {
				mu.Unlock()
				return up.MakeMove(ctx, req)
			}
			a := &answer{ready: make(chan struct{})}
			swallowed[req.GetRequestId()] = a
			mu.Unlock()
			defer close(a.ready)
			g, err := up.GetGame(ctx, &gamev1.GetGameRequest{GameId: req.GetGameId()})
			if err != nil {
				// Nothing swallowed: a later retry goes through.
				mu.Lock()
				delete(swallowed, req.GetRequestId())
				mu.Unlock()
				a.err = err
				return nil, err
			}
			a.resp = &gamev1.MakeMoveResponse{Game: g.GetGame()}
			f.injected.Add(1)
			return a.resp, nil
		}
		return f
	}
}

// answerEmpty answers the nth move of every game with an empty answer,
// without passing it on: the tool has no game to play on, and must still
// end the game and its streams rather than wait for ever.
func answerEmpty(nth int) func() *fault {
	return func() *fault {
		f := &fault{}
		var mu sync.Mutex
		moves := map[string]int{}
		f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
			mu.Lock()
			moves[req.GetGameId()]++
			empty := moves[req.GetGameId()] == nth
			mu.Unlock()
			if !empty {
				return up.MakeMove(ctx, req)
			}
			f.injected.Add(1)
			return &gamev1.MakeMoveResponse{}, nil
		}
		return f
	}
}

// cancelStreamAfter ends every stream with Canceled after n events, as
// if the call had been cancelled, though the client did not cancel it.
func cancelStreamAfter(n int) func() *fault {
	return func() *fault {
		f := &fault{}
		f.events = func() eventFilter {
			events := 0
			return func(m *gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error) {
				if m.GetEvent() == nil {
					return []*gamev1.StreamEventsResponse{m}, nil
				}
				if events++; events > n {
					f.injected.Add(1)
					return nil, status.Error(codes.Canceled, "stream cancelled by the faulty proxy")
				}
				return []*gamev1.StreamEventsResponse{m}, nil
			}
		}
		return f
	}
}

// noLegalMoveAt answers the move at ply with the game going on but no
// legal move left to play: the tool must report it, not crash.
func noLegalMoveAt(ply uint32) func() *fault {
	return func() *fault {
		f := &fault{}
		f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
			resp, err := up.MakeMove(ctx, req)
			if err != nil || resp.GetMove().GetPly() != ply || resp.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
				return resp, err
			}
			f.injected.Add(1)
			resp.Game.LegalMoves = nil
			return resp, nil
		}
		return f
	}
}

// xiangqiOnly creates every game as Xiangqi, whatever was asked: a server
// that plays one kind only.
func xiangqiOnly() *fault {
	f := &fault{}
	f.create = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.CreateGameRequest) (*gamev1.CreateGameResponse, error) {
		if req.GetKind() != commonv1.GameKind_GAME_KIND_XIANGQI {
			f.injected.Add(1)
			req.Kind, req.Start = commonv1.GameKind_GAME_KIND_XIANGQI, nil
		}
		return up.CreateGame(ctx, req)
	}
	return f
}

// resignAtCreation ends every game of the kinds given (of every kind when
// none is) as it is created: a run of such games counts no fault, and must
// fail all the same for testing nothing.
func resignAtCreation(kinds ...commonv1.GameKind) *fault {
	f := &fault{}
	f.create = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.CreateGameRequest) (*gamev1.CreateGameResponse, error) {
		created, err := up.CreateGame(ctx, req)
		if err != nil || len(kinds) > 0 && !slices.Contains(kinds, req.GetKind()) {
			return created, err
		}
		var token string
		for _, c := range created.GetCredentials() {
			if c.GetSide() == commonv1.Side_SIDE_FIRST {
				token = c.GetToken()
			}
		}
		resigned, err := up.Resign(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token),
			&gamev1.ResignRequest{GameId: created.GetGameId(), RequestId: req.GetRequestId() + "-at-once"})
		if err != nil {
			return nil, err
		}
		f.injected.Add(1)
		created.Game = resigned.GetGame()
		return created, nil
	}
	return f
}

// forgetOldAnswers refuses a move sent again once a later one of its game
// was: a server that keeps only the last answer of each game.
func forgetOldAnswers() *fault {
	f := &fault{}
	var mu sync.Mutex
	latest := map[string]string{} // request id by game
	seen := map[string]bool{}
	f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
		mu.Lock()
		forgotten := seen[req.GetRequestId()] && latest[req.GetGameId()] != req.GetRequestId()
		seen[req.GetRequestId()] = true
		latest[req.GetGameId()] = req.GetRequestId()
		mu.Unlock()
		if forgotten {
			f.injected.Add(1)
			return nil, status.Error(codes.FailedPrecondition, "request unknown (the faulty proxy keeps the last answer only)")
		}
		return up.MakeMove(ctx, req)
	}
	return f
}

// refuseInFlightRetry refuses a move whose request id is in flight
// already, where the second call should get the first's answer.
func refuseInFlightRetry() *fault {
	f := &fault{}
	var mu sync.Mutex
	inFlight := map[string]bool{}
	f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
		mu.Lock()
		busy := inFlight[req.GetRequestId()]
		inFlight[req.GetRequestId()] = true
		mu.Unlock()
		if busy {
			f.injected.Add(1)
			return nil, status.Error(codes.Aborted, "request in flight (the faulty proxy)")
		}
		defer func() {
			mu.Lock()
			delete(inFlight, req.GetRequestId())
			mu.Unlock()
		}()
		return up.MakeMove(ctx, req)
	}
	return f
}

// otherWinner turns a decisive result into the opposite one, and a draw
// into a win.
func otherWinner(r *commonv1.Result) {
	if r.GetWinner() == commonv1.Winner_WINNER_FIRST {
		r.Winner = commonv1.Winner_WINNER_SECOND
	} else {
		r.Winner = commonv1.Winner_WINNER_FIRST
	}
}

// flipFinalWinner reads every game back with the other side winning.
func flipFinalWinner() *fault {
	f := &fault{}
	f.get = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
		resp, err := up.GetGame(ctx, req)
		if err != nil || resp.GetGame().GetResult() == nil {
			return resp, err
		}
		f.injected.Add(1)
		otherWinner(resp.Game.Result)
		return resp, nil
	}
	return f
}

// abortFinalState reads every game back aborted, its result kept: a
// game that ended must stay ended.
func abortFinalState() *fault {
	f := &fault{}
	f.get = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
		resp, err := up.GetGame(ctx, req)
		if err != nil || resp.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ENDED {
			return resp, err
		}
		f.injected.Add(1)
		resp.Game.Status = commonv1.GameStatus_GAME_STATUS_ABORTED
		return resp, nil
	}
	return f
}

// flipResignedWinner answers every resignation with the other side
// winning, the game and its streams ending as they do.
func flipResignedWinner() *fault {
	f := &fault{}
	f.resign = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.ResignRequest) (*gamev1.ResignResponse, error) {
		resp, err := up.Resign(ctx, req)
		if err != nil || resp.GetGame().GetResult() == nil {
			return resp, err
		}
		f.injected.Add(1)
		otherWinner(resp.Game.Result)
		return resp, nil
	}
	return f
}

// editEvents relays every stream's messages after edit, which reports
// whether it changed one.
func editEvents(edit func(*gamev1.StreamEventsResponse) bool) *fault {
	f := &fault{}
	f.events = func() eventFilter {
		return func(m *gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error) {
			if edit(m) {
				f.injected.Add(1)
			}
			return []*gamev1.StreamEventsResponse{m}, nil
		}
	}
	return f
}

// flipEndedWinner streams every game's end with the other side winning.
func flipEndedWinner() *fault {
	return editEvents(func(m *gamev1.StreamEventsResponse) bool {
		end := m.GetEvent().GetGameEnded()
		if end.GetResult() == nil {
			return false
		}
		otherWinner(end.Result)
		return true
	})
}

// heartbeatAhead has every heartbeat claim a version one past the
// stream's.
func heartbeatAhead() *fault {
	return editEvents(func(m *gamev1.StreamEventsResponse) bool {
		hb := m.GetHeartbeat()
		if hb == nil {
			return false
		}
		hb.Version++
		return true
	})
}

// snapshotWithAnotherFirstMove sends snapshots whose first move is not the
// one played.
func snapshotWithAnotherFirstMove() *fault {
	return editEvents(func(m *gamev1.StreamEventsResponse) bool {
		g := m.GetSnapshot()
		if len(g.GetMoves()) == 0 {
			return false
		}
		g.Moves[0].Move = anotherMove(g.Moves[0].GetMove())
		return true
	})
}

// dropLastStoredMove reads every game back without its last move: a
// server that lost a move it acknowledged, all else in order.
func dropLastStoredMove() *fault {
	f := &fault{}
	f.get = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
		resp, err := up.GetGame(ctx, req)
		if err != nil || len(resp.GetGame().GetMoves()) == 0 {
			return resp, err
		}
		f.injected.Add(1)
		resp.Game.Moves = resp.Game.Moves[:len(resp.Game.Moves)-1]
		return resp, nil
	}
	return f
}

// dropEndEvents leaves the game's end out of every stream, which then
// ends cleanly one version short: every move delivered, the end skipped.
func dropEndEvents() *fault {
	return dropEvents(func(m *gamev1.StreamEventsResponse) bool { return m.GetEvent().GetGameEnded() != nil })
}

// gameGone reads every game back as not found: a server that lost the
// game, and every move acknowledged in it.
func gameGone() *fault {
	f := &fault{}
	f.get = func(context.Context, gamev1.GameServiceClient, *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
		f.injected.Add(1)
		return nil, status.Error(codes.NotFound, "no such game (the faulty proxy)")
	}
	return f
}

// failAfterApplying passes the nth move of every game on, then fails its
// first call: the move stands though its answer said the call failed.
func failAfterApplying(nth int) func() *fault {
	return func() *fault {
		f := &fault{}
		var mu sync.Mutex
		moves := map[string]int{}
		seen := map[string]bool{}
		f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
			mu.Lock()
			first := !seen[req.GetRequestId()]
			seen[req.GetRequestId()] = true
			if first {
				moves[req.GetGameId()]++
			}
			fail := first && moves[req.GetGameId()] == nth
			mu.Unlock()
			resp, err := up.MakeMove(ctx, req)
			if err != nil || !fail {
				return resp, err
			}
			f.injected.Add(1)
			return nil, status.Error(codes.Internal, "answer lost (the faulty proxy)")
		}
		return f
	}
}

// editMoveAnswer answers the move at ply, every time it is sent, with its
// record changed by edit.
func editMoveAnswer(ply uint32, edit func(*gamev1.MoveRecord)) func() *fault {
	return func() *fault {
		f := &fault{}
		f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
			resp, err := up.MakeMove(ctx, req)
			if err != nil || resp.GetMove().GetPly() != ply {
				return resp, err
			}
			f.injected.Add(1)
			edit(resp.Move)
			return resp, nil
		}
		return f
	}
}

// anotherMove is a move other than m: a random game plays a1a2 now and
// then, and an edit to the move played changes nothing.
func anotherMove(m *commonv1.Move) *commonv1.Move {
	if m.GetCoordinate() == "a1a2" {
		return &commonv1.Move{Coordinate: "a1a3"}
	}
	return &commonv1.Move{Coordinate: "a1a2"}
}

// streamAnotherMove streams the move at ply as another one, its version
// and everything else in order.
func streamAnotherMove(ply uint32) func() *fault {
	return func() *fault {
		return editEvents(func(m *gamev1.StreamEventsResponse) bool {
			mp := m.GetEvent().GetMovePlayed()
			if mp.GetPly() != ply {
				return false
			}
			mp.Move = anotherMove(mp.GetMove())
			return true
		})
	}
}

// streamAnotherMoveThenCut streams the move at ply as another one, then
// cuts the stream off (Internal): a stream that did not end whole is
// still held to the moves it showed.
func streamAnotherMoveThenCut(ply uint32) func() *fault {
	return func() *fault {
		f := &fault{}
		f.events = func() eventFilter {
			return func(m *gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error) {
				mp := m.GetEvent().GetMovePlayed()
				if mp.GetPly() != ply {
					return []*gamev1.StreamEventsResponse{m}, nil
				}
				f.injected.Add(1)
				mp.Move = anotherMove(mp.GetMove())
				return []*gamev1.StreamEventsResponse{m}, status.Error(codes.Internal, "cut off after another move (the faulty proxy)")
			}
		}
		return f
	}
}

// refuseEveryOtherProbe fails every second floor call.
func refuseEveryOtherProbe() *fault {
	f := &fault{}
	var calls atomic.Int64
	f.probe = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.ProbeRequest) (*gamev1.ProbeResponse, error) {
		if calls.Add(1)%2 == 0 {
			f.injected.Add(1)
			return nil, status.Error(codes.Internal, "probe refused (the faulty proxy)")
		}
		return up.Probe(ctx, req)
	}
	return f
}

// withholdSnapshots leaves out the snapshot a stream asked for, sending
// the events after its version only.
func withholdSnapshots() *fault {
	f := &fault{}
	f.events = func() eventFilter {
		return func(m *gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error) {
			if m.GetSnapshot() != nil {
				f.injected.Add(1)
				return nil, nil
			}
			return []*gamev1.StreamEventsResponse{m}, nil
		}
	}
	return f
}

// startFaultyProxy serves a gRPC proxy to upstream, with fault f, until
// the test ends, and returns its address.
func startFaultyProxy(t *testing.T, upstream string, f *fault) string {
	t.Helper()
	cc, err := transport{insecure.NewCredentials()}.dial(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultyProxy{up: cc, game: gamev1.NewGameServiceClient(cc), fault: f}
	// With no service registered, every call reaches the unknown-service
	// handler, in raw bytes.
	srv := grpc.NewServer(grpc.UnknownServiceHandler(p.handle), grpc.ForceServerCodecV2(rawCodec{}))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	return lis.Addr().String()
}

type faultyProxy struct {
	up    *grpc.ClientConn
	game  gamev1.GameServiceClient
	fault *fault
}

// handle serves one call, unary or server streaming: every call of the
// game service is one of these.
func (p *faultyProxy) handle(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	ctx := withCredentials(ss.Context())
	switch {
	case method == gamev1.GameService_MakeMove_FullMethodName && p.fault.move != nil:
		return answer(ss, &gamev1.MakeMoveRequest{}, func(req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
			return p.fault.move(ctx, p.game, req)
		})
	case method == gamev1.GameService_CreateGame_FullMethodName && p.fault.create != nil:
		return answer(ss, &gamev1.CreateGameRequest{}, func(req *gamev1.CreateGameRequest) (*gamev1.CreateGameResponse, error) {
			return p.fault.create(ctx, p.game, req)
		})
	case method == gamev1.GameService_GetGame_FullMethodName && p.fault.get != nil:
		return answer(ss, &gamev1.GetGameRequest{}, func(req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
			return p.fault.get(ctx, p.game, req)
		})
	case method == gamev1.GameService_Resign_FullMethodName && p.fault.resign != nil:
		return answer(ss, &gamev1.ResignRequest{}, func(req *gamev1.ResignRequest) (*gamev1.ResignResponse, error) {
			return p.fault.resign(ctx, p.game, req)
		})
	case method == gamev1.GameService_Probe_FullMethodName && p.fault.probe != nil:
		return answer(ss, &gamev1.ProbeRequest{}, func(req *gamev1.ProbeRequest) (*gamev1.ProbeResponse, error) {
			return p.fault.probe(ctx, p.game, req)
		})
	case method == gamev1.GameService_StreamEvents_FullMethodName && p.fault.events != nil:
		var req gamev1.StreamEventsRequest
		if err := recvProto(ss, &req); err != nil {
			return err
		}
		return p.filterEvents(ctx, ss, &req, p.fault.events())
	}
	return p.forward(ctx, ss, method)
}

// answer serves a unary call with hook, reading its request into req.
func answer[Req, Resp proto.Message](ss grpc.ServerStream, req Req, hook func(Req) (Resp, error)) error {
	if err := recvProto(ss, req); err != nil {
		return err
	}
	resp, err := hook(req)
	if err != nil {
		return err
	}
	return sendProto(ss, resp)
}

// filterEvents relays a stream of events through filter.
func (p *faultyProxy) filterEvents(ctx context.Context, ss grpc.ServerStream, req *gamev1.StreamEventsRequest, filter eventFilter) error {
	st, err := p.game.StreamEvents(ctx, req)
	if err != nil {
		return err
	}
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		out, ferr := filter(m)
		for _, o := range out {
			if err := sendProto(ss, o); err != nil {
				return err
			}
		}
		if ferr != nil {
			return ferr
		}
	}
}

// forward relays a call as it is: its request, then every answer, then
// its status.
func (p *faultyProxy) forward(ctx context.Context, ss grpc.ServerStream, method string) error {
	var req []byte
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	cs, err := p.up.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		return err
	}
	// io.EOF from SendMsg means the call has ended; RecvMsg has its status.
	if err := cs.SendMsg(&req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	for {
		var resp []byte
		err := cs.RecvMsg(&resp)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ss.SendMsg(&resp); err != nil {
			return err
		}
		if method == p.fault.endAfterFirst {
			p.fault.injected.Add(1)
			return nil
		}
		if method == p.fault.failAfterFirst && p.fault.injected.Add(1) <= p.fault.failLimit {
			return status.Error(codes.Unavailable, "replica going away")
		}
	}
}

// forwardedHeaders are the metadata the game service reads: a seat's
// credential and a service's.
var forwardedHeaders = []string{"authorization", auth.ServiceHeader}

// withCredentials is the context of a call to the real server on behalf
// of the call in: its deadline, its cancellation, its credentials.
func withCredentials(in context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(in)
	out := metadata.MD{}
	for _, k := range forwardedHeaders {
		if v := md.Get(k); len(v) > 0 {
			out.Set(k, v...)
		}
	}
	return metadata.NewOutgoingContext(in, out)
}

func recvProto(ss grpc.ServerStream, m proto.Message) error {
	var b []byte
	if err := ss.RecvMsg(&b); err != nil {
		return err
	}
	return proto.Unmarshal(b, m)
}

func sendProto(ss grpc.ServerStream, m proto.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return ss.SendMsg(&b)
}

// rawCodec passes messages through as their wire bytes (*[]byte), so the
// proxy relays any call without knowing its types. It is named proto
// because that is what the bytes are, and what the server expects.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	// A copy: gRPC reuses data's buffers once this returns.
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }
