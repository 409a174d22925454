package main

import (
	"context"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// readBack is a game service that answers every GetGame with game, and
// every StreamEvents with events, then the end of the stream.
type readBack struct {
	gamev1.GameServiceClient
	game   *gamev1.Game
	events []*gamev1.Event
}

func (r readBack) GetGame(context.Context, *gamev1.GetGameRequest, ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	return &gamev1.GetGameResponse{Game: r.game}, nil
}

func (r readBack) StreamEvents(context.Context, *gamev1.StreamEventsRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[gamev1.StreamEventsResponse], error) {
	return &eventList{events: r.events}, nil
}

// eventList is a stream of events that ends after the last.
type eventList struct {
	grpc.ClientStream
	events []*gamev1.Event
}

func (e *eventList) Recv() (*gamev1.StreamEventsResponse, error) {
	if len(e.events) == 0 {
		return nil, io.EOF
	}
	ev := e.events[0]
	e.events = e.events[1:]
	return &gamev1.StreamEventsResponse{Message: &gamev1.StreamEventsResponse_Event{Event: ev}}, nil
}

// TestClocksCheckJudgesEachGame reads games back as a clock service could
// have left them and requires each to land in its one counter: a flag on
// time, a game still running, a flag at or before the deadline, of the
// wrong side or by the wrong means, and a third move answered other than
// the game shows. Lateness is measured from the first instant past the
// deadline, and only for flags the clock service alone made.
func TestClocksCheckJudgesEachGame(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const budget, grace = 2 * time.Second, time.Second
	deadline := start.Add(budget + grace)
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	// idle is a game whose first side never moved again; moved one whose
	// third move, at start+1s, was accepted, its opponent's deadline
	// 10 s later.
	idle := func() *clockGame {
		return &clockGame{id: "g", behaviour: "idle", deadline: deadline, budget: budget, grace: grace}
	}
	moved := func() *clockGame {
		g := idle()
		g.behaviour, g.moveSent, g.accepted, g.limit = "early", true, true, budget
		g.playedAt, g.deadline2 = start.Add(time.Second), start.Add(11*time.Second)
		return g
	}
	// late is a racing game whose third move was refused, the refusal
	// back 50 ms past its last in-time instant; it may have ended the game
	// itself, at its own instant.
	late := func() *clockGame {
		g := idle()
		g.behaviour, g.moveSent, g.refused, g.limit = "racing", true, true, budget+ms(200)
		g.refusedAt = start.Add(budget + ms(250))
		return g
	}
	plies := func(n int) []*gamev1.MoveRecord { return make([]*gamev1.MoveRecord, n) }
	ended := func(winner commonv1.Winner, at time.Time, moves int) *gamev1.Game {
		return &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ENDED, Moves: plies(moves), EndedAt: timestamppb.New(at),
			Result: &commonv1.Result{Winner: winner, Method: commonv1.EndMethod_END_METHOD_TIMEOUT}}
	}
	firstFlagged := func(at time.Time) *gamev1.Game { return ended(commonv1.Winner_WINNER_SECOND, at, 2) }
	secondFlagged := func(at time.Time) *gamev1.Game { return ended(commonv1.Winner_WINNER_FIRST, at, 3) }
	type counts struct{ flagged, missed, wrong, inconsistent, unexpected, raceIn, raceLate, excused int64 }
	// excusedTurn are the events of a game whose first side was excused
	// an outage of d before its third move.
	excusedTurn := func(d time.Duration) []*gamev1.Event {
		return []*gamev1.Event{
			{Version: 3, Kind: &gamev1.Event_MovePlayed{MovePlayed: &gamev1.MoveRecord{Ply: 2, Side: commonv1.Side_SIDE_SECOND}}},
			{Version: 4, Kind: &gamev1.Event_Clock{Clock: &gamev1.ClockEvent{Side: commonv1.Side_SIDE_FIRST,
				Kind: gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED, Excused: durationpb.New(d)}}},
			{Version: 5, Kind: &gamev1.Event_MovePlayed{MovePlayed: &gamev1.MoveRecord{Ply: 3, Side: commonv1.Side_SIDE_FIRST}}},
		}
	}
	// excusedFlag are the events of a game whose side was excused an
	// outage of d in the turn that move ply began, the one it is flagged
	// in.
	excusedFlag := func(side commonv1.Side, ply uint32, d time.Duration) []*gamev1.Event {
		return []*gamev1.Event{
			{Version: 3, Kind: &gamev1.Event_MovePlayed{MovePlayed: &gamev1.MoveRecord{Ply: ply}}},
			{Version: 4, Kind: &gamev1.Event_Clock{Clock: &gamev1.ClockEvent{Side: side,
				Kind: gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED, Excused: durationpb.New(d)}}},
		}
	}
	tests := []struct {
		name   string
		g      *clockGame
		game   *gamev1.Game
		events []*gamev1.Event
		want   counts
		// lateMs are the lateness figures the game adds.
		lateMs []float64
	}{
		{name: "flagged 5 ms past the deadline", g: idle(), game: firstFlagged(deadline.Add(ms(5))),
			want: counts{flagged: 1}, lateMs: []float64{4}},
		{name: "flagged at the deadline itself", g: idle(), game: firstFlagged(deadline), want: counts{wrong: 1}},
		{name: "flagged early", g: idle(), game: firstFlagged(deadline.Add(-ms(300))), want: counts{wrong: 1}},
		{name: "still running", g: idle(), game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ONGOING, Moves: plies(2)},
			want: counts{missed: 1}},
		{name: "resigned", g: idle(), want: counts{unexpected: 1}, game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ENDED, Moves: plies(2),
			EndedAt: timestamppb.New(deadline.Add(ms(5))), Result: &commonv1.Result{Winner: commonv1.Winner_WINNER_SECOND, Method: commonv1.EndMethod_END_METHOD_RESIGNATION}}},
		{name: "aborted", g: idle(), want: counts{unexpected: 1}, game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ABORTED, Moves: plies(2)}},
		{name: "timed out drawn", g: idle(), game: ended(commonv1.Winner_WINNER_DRAW, deadline.Add(ms(5)), 2), want: counts{unexpected: 1}},
		{name: "the side that never had to move flagged", g: idle(), game: ended(commonv1.Winner_WINNER_FIRST, deadline.Add(ms(5)), 2),
			want: counts{unexpected: 1}},
		{name: "opponent flagged after a move in time", g: moved(), game: secondFlagged(start.Add(11*time.Second + ms(8))),
			want: counts{flagged: 1}, lateMs: []float64{7}},
		{name: "opponent flagged before its deadline", g: moved(), game: secondFlagged(start.Add(10 * time.Second)), want: counts{wrong: 1}},
		{name: "mover flagged though its move stood", g: moved(), game: ended(commonv1.Winner_WINNER_SECOND, start.Add(11*time.Second+ms(8)), 3),
			want: counts{wrong: 1}},
		{name: "accepted move missing", g: moved(), game: firstFlagged(deadline.Add(ms(5))),
			want: counts{inconsistent: 1, flagged: 1}},
		{name: "accepted after its last instant", want: counts{inconsistent: 1, flagged: 1}, lateMs: []float64{7},
			g:    func() *clockGame { g := moved(); g.playedAt = start.Add(budget + ms(1)); return g }(),
			game: secondFlagged(start.Add(11*time.Second + ms(8)))},
		// A storage outage during the turn was excused (OUTAGE_EXCUSED):
		// the move is in time up to that much later.
		{name: "accepted after its last instant, within the outage excused", want: counts{flagged: 1}, lateMs: []float64{7},
			g:      func() *clockGame { g := moved(); g.playedAt = start.Add(budget + ms(900)); return g }(),
			game:   secondFlagged(start.Add(11*time.Second + ms(8))),
			events: excusedTurn(time.Second)},
		{name: "accepted after its last instant and the outage excused", want: counts{inconsistent: 1, flagged: 1}, lateMs: []float64{7},
			g:      func() *clockGame { g := moved(); g.playedAt = start.Add(budget + ms(1100)); return g }(),
			game:   secondFlagged(start.Add(11*time.Second + ms(8))),
			events: excusedTurn(time.Second)},
		// An outage excused in the flagged turn moves its flag instant
		// later: lateness counts from there, and a flag before it is
		// wrong, as is a late move's end before it.
		{name: "flagged past the excused deadline", g: idle(), game: firstFlagged(deadline.Add(time.Second + ms(5))),
			events: excusedFlag(commonv1.Side_SIDE_FIRST, 2, time.Second), want: counts{flagged: 1, excused: 1}, lateMs: []float64{4}},
		{name: "flagged within the excuse", g: idle(), game: firstFlagged(deadline.Add(ms(500))),
			events: excusedFlag(commonv1.Side_SIDE_FIRST, 2, time.Second), want: counts{wrong: 1, excused: 1}},
		{name: "opponent flagged within its excuse", g: moved(), game: secondFlagged(start.Add(11*time.Second + ms(8))),
			events: excusedFlag(commonv1.Side_SIDE_SECOND, 3, time.Second), want: counts{wrong: 1, excused: 1}},
		{name: "opponent flagged past its excused deadline", g: moved(), game: secondFlagged(start.Add(12*time.Second + ms(8))),
			events: excusedFlag(commonv1.Side_SIDE_SECOND, 3, time.Second), want: counts{flagged: 1, excused: 1}, lateMs: []float64{7}},
		{name: "an excuse of the other side moves nothing", g: idle(), game: firstFlagged(deadline.Add(ms(5))),
			events: excusedFlag(commonv1.Side_SIDE_SECOND, 2, time.Second), want: counts{flagged: 1}, lateMs: []float64{4}},
		{name: "ended by the late move within the excuse", g: late(), game: firstFlagged(start.Add(budget + ms(250))),
			events: excusedFlag(commonv1.Side_SIDE_FIRST, 2, time.Second), want: counts{wrong: 1, raceLate: 1, excused: 1}},
		{name: "still running past its excused instant", g: idle(), game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ONGOING, Moves: plies(2)},
			events: excusedFlag(commonv1.Side_SIDE_FIRST, 2, time.Second), want: counts{missed: 1}},
		{name: "refused move present", g: late(), game: secondFlagged(start.Add(11*time.Second + ms(8))),
			want: counts{inconsistent: 1, flagged: 1, raceIn: 1}},
		// The refused move ended the game at its own instant, past its
		// last in-time one though before the sweeper's deadline: a flag,
		// but not the clock service's, so no lateness.
		{name: "ended by the late move", g: late(), game: firstFlagged(start.Add(budget + ms(250))),
			want: counts{flagged: 1, raceLate: 1}},
		{name: "ended before the late move's instant", g: late(), game: firstFlagged(start.Add(budget + ms(150))),
			want: counts{wrong: 1, raceLate: 1}},
		// A racing move refused before its last in-time instant had come,
		// beyond the clock offset's error, was in time, whatever ended the
		// game after.
		{name: "a racing move refused in time", g: func() *clockGame { g := late(); g.refusedAt = start.Add(budget + ms(100)); return g }(),
			game: firstFlagged(deadline.Add(ms(5))), want: counts{wrong: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &clocksLoad{opt: clocksOptions{checkAfter: 2 * time.Second}}
			l.check(t.Context(), &gameRoute{replicas: [][]gamev1.GameServiceClient{{readBack{game: tt.game, events: tt.events}}}}, tt.g)
			got := counts{l.flagged.Load(), l.missed.Load(), l.wrong.Load(), l.inconsistent.Load(), l.unexp.Load(), l.raceIn.Load(), l.raceLate.Load(), l.excused.Load()}
			if got != tt.want || l.checked.Load() != 1 || l.errs.Load() != 0 {
				t.Errorf("counted %+v, checked %d, errors %d; want %+v, checked 1, no error\n%v", got, l.checked.Load(), l.errs.Load(), tt.want, l.errText)
			}
			if !slices.Equal(l.lateness, tt.lateMs) {
				t.Errorf("lateness %v ms, want %v", l.lateness, tt.lateMs)
			}
		})
	}
}

// TestAMissedGameFlaggedWithinItsExcuseWasNotMissed: a game still running
// CheckAfter past its flag instant, read again at the end of the run.
// Flagged since, past an instant an outage excused in its turn moved
// later (the outage was under way at the check), and no more than
// CheckAfter past that, it was not missed; otherwise it stays missed.
// Either way its lateness counts from the instant as moved.
func TestAMissedGameFlaggedWithinItsExcuseWasNotMissed(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const budget, grace, checkAfter = 2 * time.Second, time.Second, 2 * time.Second
	deadline := start.Add(budget + grace)
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	excuse := func(side commonv1.Side, d time.Duration) []*gamev1.Event {
		return []*gamev1.Event{
			{Version: 3, Kind: &gamev1.Event_MovePlayed{MovePlayed: &gamev1.MoveRecord{Ply: 2}}},
			{Version: 4, Kind: &gamev1.Event_Clock{Clock: &gamev1.ClockEvent{Side: side,
				Kind: gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED, Excused: durationpb.New(d)}}},
		}
	}
	flagged := func(winner commonv1.Winner, at time.Time) *gamev1.Game {
		return &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ENDED, Moves: make([]*gamev1.MoveRecord, 2), EndedAt: timestamppb.New(at),
			Result: &commonv1.Result{Winner: winner, Method: commonv1.EndMethod_END_METHOD_TIMEOUT}}
	}
	type counts struct{ missed, flagged, wrong, excused int64 }
	for _, c := range []struct {
		name   string
		game   *gamev1.Game
		events []*gamev1.Event
		want   counts
		lateMs []float64
	}{
		{"flagged past its excused instant", flagged(commonv1.Winner_WINNER_SECOND, deadline.Add(4*time.Second+ms(5))),
			excuse(commonv1.Side_SIDE_FIRST, 4*time.Second), counts{flagged: 1, excused: 1}, []float64{4}},
		{"flagged more than CheckAfter past it", flagged(commonv1.Winner_WINNER_SECOND, deadline.Add(4*time.Second+checkAfter+ms(5))),
			excuse(commonv1.Side_SIDE_FIRST, 4*time.Second), counts{missed: 1}, []float64{2004}},
		{"flagged within its excuse", flagged(commonv1.Winner_WINNER_SECOND, deadline.Add(3*time.Second)),
			excuse(commonv1.Side_SIDE_FIRST, 4*time.Second), counts{wrong: 1, excused: 1}, []float64{-1001}},
		{"the wrong side flagged", flagged(commonv1.Winner_WINNER_FIRST, deadline.Add(4*time.Second+ms(5))),
			excuse(commonv1.Side_SIDE_FIRST, 4*time.Second), counts{wrong: 1, excused: 1}, []float64{4}},
		{"no excuse", flagged(commonv1.Winner_WINNER_SECOND, deadline.Add(time.Second)), nil, counts{missed: 1}, []float64{999}},
		{"an excuse of the other side", flagged(commonv1.Winner_WINNER_SECOND, deadline.Add(time.Second)),
			excuse(commonv1.Side_SIDE_SECOND, 4*time.Second), counts{missed: 1}, []float64{999}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &clocksLoad{opt: clocksOptions{checkAfter: checkAfter, concurrency: 1}}
			l.replicas = [][]gamev1.GameServiceClient{{readBack{game: c.game, events: c.events}}}
			l.missedGames = []*clockGame{{id: "g", behaviour: "idle", deadline: deadline, budget: budget, grace: grace}}
			l.missed.Store(1)
			l.rereadMissed(t.Context())
			got := counts{l.missed.Load(), l.flagged.Load(), l.wrong.Load(), l.excused.Load()}
			if got != c.want || !slices.Equal(l.lateness, c.lateMs) {
				t.Errorf("counted %+v, lateness %v ms; want %+v, %v ms", got, l.lateness, c.want, c.lateMs)
			}
		})
	}
}

// TestClocksEventsResumeAfterUnavailable reads a real game's events up to
// its third move through a proxy that ends every stream Unavailable after
// its first message, as a replica going away would: each stream is
// opened again after the last version it delivered, so the read gets
// through, one event a stream, and counts each stream opened again as a
// retry. Opened again from the start, it would never get past the first
// event.
func TestClocksEventsResumeAfterUnavailable(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	f := &fault{failAfterFirst: gamev1.GameService_StreamEvents_FullMethodName, failLimit: 1000}
	proxy := startFaultyProxy(t, addr, f)
	tr := transport{creds: insecure.NewCredentials()}
	service, err := asService(apptest.ServiceKeys, "test")
	if err != nil {
		t.Fatal(err)
	}
	replicas, ccs, err := replicaClients(tr, proxy, 1, gamev1.NewGameServiceClient, service)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(ccs)
	l := &clocksLoad{replicas: replicas, runID: randomHex(4)}
	r := l.route(0)
	g := l.create(t.Context(), r, 0, &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Minute)}}}, time.Minute, "early")
	if g == nil {
		t.Fatalf("no game created: %v", l.errText)
	}
	for i, mv := range []string{"h10g8", "h1g3"} {
		side := []commonv1.Side{commonv1.Side_SIDE_SECOND, commonv1.Side_SIDE_FIRST}[i]
		if _, err := l.move(t.Context(), r, g, side, mv, 0, strconv.Itoa(i+2)); err != nil {
			t.Fatal(err)
		}
	}
	excused, err := l.turnExcused(t.Context(), r, g, commonv1.Side_SIDE_FIRST, 2, 0)
	if err != nil || excused != 0 {
		t.Fatalf("excused %v, error %v; want 0 and none", excused, err)
	}
	// The last stream may fail after the read has what it needs.
	if n := l.retries.Load(); n < 3 || n < f.injected.Load()-1 || n > f.injected.Load() {
		t.Fatalf("%d streams failed, %d retries counted; want at least 3, each failure the read saw counted", f.injected.Load(), n)
	}
}
