package game_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/auth"
	"github.com/palacehq/palace/pkg/deadline"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// sweep does what a clock sweeper does: hand every due deadline of the
// index to ExpireDeadline and drop the entry.
func sweep(t *testing.T, env *gametest.Env) int {
	t.Helper()
	ctx := context.Background()
	idx, err := deadline.New(env.Redis, env.Config.KeyPrefix, env.Config.DeadlineShards)
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for s := range idx.Shards() {
		due, err := idx.Due(ctx, s, time.Now(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range due {
			r, err := env.Client.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: e.GameID, DeadlineUnixMs: e.At.UnixMilli()})
			if err != nil {
				t.Fatalf("ExpireDeadline: %v", err)
			}
			if r.GetApplied() {
				applied++
			}
			if err := idx.Remove(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	return applied
}

func wantEnd(t *testing.T, g *gamev1.Game, winner commonv1.Winner, method commonv1.EndMethod) {
	t.Helper()
	if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ENDED && g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ABORTED {
		t.Fatalf("status %v, want an ended game", g.GetStatus())
	}
	if r := g.GetResult(); r.GetWinner() != winner || r.GetMethod() != method {
		t.Fatalf("result %v, want %v by %v", r, winner, method)
	}
}

func TestEndingsThroughTheAPI(t *testing.T) {
	env := gametest.Start(t, nil)
	janggiStart := rules.StartFEN(rules.Janggi)
	byoyomi := &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{MainTime: durationpb.New(5 * time.Minute), Periods: 3, PeriodTime: durationpb.New(30 * time.Second)}}}
	fischer1s := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Second)}}}
	tests := []struct {
		name       string
		create     *gamev1.CreateGameRequest
		moves      []string
		act        func(t *testing.T, tb *table)
		wantWinner commonv1.Winner
		wantMethod commonv1.EndMethod
		wantPoints bool
	}{
		{
			name:       "xiangqi checkmate",
			create:     &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Start: &commonv1.Position{Fen: "4k4/R8/9/9/9/9/9/9/9/1R1K5 w - - 0 1"}},
			moves:      []string{"b1b10"},
			wantWinner: commonv1.Winner_WINNER_FIRST, wantMethod: commonv1.EndMethod_END_METHOD_CHECKMATE,
		},
		{
			name:       "janggi two passes decided by points",
			create:     &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Start: &commonv1.Position{Fen: janggiStart}},
			moves:      []string{"e2e2", "e9e9"},
			wantWinner: commonv1.Winner_WINNER_SECOND, wantMethod: commonv1.EndMethod_END_METHOD_TWO_PASSES, wantPoints: true,
		},
		{
			name:   "resignation",
			create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI},
			act: func(t *testing.T, tb *table) {
				if _, err := tb.env.Client.Resign(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()}); err != nil {
					t.Fatal(err)
				}
			},
			wantWinner: commonv1.Winner_WINNER_SECOND, wantMethod: commonv1.EndMethod_END_METHOD_RESIGNATION,
		},
		{
			name:   "draw by agreement",
			create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI},
			act: func(t *testing.T, tb *table) {
				if _, err := tb.env.Client.OfferDraw(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.OfferDrawRequest{GameId: tb.id, RequestId: rid()}); err != nil {
					t.Fatal(err)
				}
				if _, err := tb.env.Client.AnswerDraw(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.AnswerDrawRequest{GameId: tb.id, RequestId: rid(), Accept: true}); err != nil {
					t.Fatal(err)
				}
			},
			wantWinner: commonv1.Winner_WINNER_DRAW, wantMethod: commonv1.EndMethod_END_METHOD_AGREEMENT,
		},
		{
			name:   "timeout while nobody is connected",
			create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer1s},
			moves:  []string{"h3e3", "h10g8"},
			act: func(t *testing.T, tb *table) {
				// The flag falls after main time plus the lag allowance a
				// player could still be credited (1 s by default). Timed
				// from the clocks the server shows, not from when the
				// moves returned: a loaded machine may take long to
				// return them.
				c := tb.get(t).GetClocks()
				budgetEnd := c.GetAsOf().AsTime().Add(c.GetFirst().GetMainLeft().AsDuration())
				flag := c.GetDeadline().AsTime()
				if grace := flag.Sub(budgetEnd); grace < time.Second-5*time.Millisecond || grace > time.Second+5*time.Millisecond {
					t.Fatalf("the flag falls %v after the budget's end, want the 1 s lag allowance", grace)
				}
				time.Sleep(time.Until(budgetEnd.Add(100 * time.Millisecond)))
				swept := time.Now()
				n := sweep(t, tb.env)
				switch {
				case n != 0 && swept.Before(flag.Add(-50*time.Millisecond)):
					t.Fatalf("sweep %v before the flag flagged within the lag allowance (%d applied)", flag.Sub(swept), n)
				case n != 0:
					t.Logf("the machine stalled past the flag (%v late): flagged at the first sweep", swept.Sub(flag))
					return
				}
				time.Sleep(time.Until(flag.Add(100 * time.Millisecond)))
				if n := sweep(t, tb.env); n != 1 {
					t.Fatalf("sweep applied %d deadlines, want 1", n)
				}
			},
			wantWinner: commonv1.Winner_WINNER_SECOND, wantMethod: commonv1.EndMethod_END_METHOD_TIMEOUT,
		},
		{
			name:   "aborted without a first move",
			create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: byoyomi, FirstMoveTime: durationpb.New(time.Second)},
			act: func(t *testing.T, tb *table) {
				time.Sleep(1100 * time.Millisecond)
				sweep(t, tb.env)
			},
			wantWinner: commonv1.Winner_WINNER_UNSPECIFIED, wantMethod: commonv1.EndMethod_END_METHOD_ABORTED,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := create(t, env, tt.create)
			for _, m := range tt.moves {
				tb.move(t, m)
			}
			if tt.act != nil {
				tt.act(t, tb)
			}
			g := tb.get(t)
			wantEnd(t, g, tt.wantWinner, tt.wantMethod)
			if tt.wantPoints && g.GetResult().GetPoints() == nil {
				t.Fatal("a Janggi result decided by points has no points")
			}
			// The last event is the ending, and nothing is accepted after it.
			_, err := env.Client.Resign(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()})
			wantCode(t, err, codes.FailedPrecondition)
		})
	}
}

func TestJanggiSetupPhase(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, SetupTime: durationpb.New(time.Second)})
	g := tb.get(t)
	if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_SETUP || g.GetTurn() != commonv1.Side_SIDE_SECOND {
		t.Fatalf("new Janggi game: %v, %v to choose", g.GetStatus(), g.GetTurn())
	}
	// Cho may not choose before Han.
	_, err := env.Client.ChooseFormation(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.ChooseFormationRequest{GameId: tb.id, RequestId: rid(), Formation: commonv1.Formation_FORMATION_SANG_MA_SANG_MA})
	wantCode(t, err, codes.FailedPrecondition)
	// Moves are refused during setup.
	_, err = env.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "a4a5"}})
	wantCode(t, err, codes.FailedPrecondition)
	if _, err := env.Client.ChooseFormation(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.ChooseFormationRequest{GameId: tb.id, RequestId: rid(), Formation: commonv1.Formation_FORMATION_SANG_MA_MA_SANG}); err != nil {
		t.Fatal(err)
	}
	// Cho does not choose: the default formation is applied on time.
	time.Sleep(1100 * time.Millisecond)
	if n := sweep(t, env); n != 1 {
		t.Fatalf("sweep applied %d, want 1", n)
	}
	g = tb.get(t)
	want := rules.JanggiStartFEN(rules.MaSangSangMa, rules.SangMaMaSang)
	if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING || g.GetStart().GetFen() != want {
		t.Fatalf("after setup: %v from %q, want ongoing from %q", g.GetStatus(), g.GetStart().GetFen(), want)
	}
	// Both choices are in the event stream, in order.
	st, err := env.Client.StreamEvents(context.Background(), &gamev1.StreamEventsRequest{GameId: tb.id})
	wantCode(t, err, codes.OK)
	var got []string
	for len(got) < 4 {
		m, err := st.Recv()
		if err != nil {
			// private game, no credential: the stream itself is refused
			wantCode(t, err, codes.PermissionDenied)
			break
		}
		got = append(got, fmt.Sprint(m.GetEvent().GetKind()))
	}
	st, err = env.Client.StreamEvents(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for len(kinds) < 4 {
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		e := m.GetEvent()
		switch {
		case e.GetGameCreated() != nil:
			kinds = append(kinds, "created")
		case e.GetFormationChosen() != nil:
			fc := e.GetFormationChosen()
			kinds = append(kinds, fmt.Sprintf("%v:%v:%v", fc.GetSide(), fc.GetFormation(), fc.GetByDefault()))
		case e.GetGameStarted() != nil:
			kinds = append(kinds, "started")
		}
	}
	want2 := "created SIDE_SECOND:FORMATION_SANG_MA_MA_SANG:false SIDE_FIRST:FORMATION_MA_SANG_SANG_MA:true started"
	if strings.Join(kinds, " ") != want2 {
		t.Fatalf("events %v, want %s", kinds, want2)
	}
}

func TestUndoAgainstTheAI(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(0, 3)})
	tb.move(t, "h3e3")
	tb.move(t, "h10g8") // the AI seat's reply, made with its credential
	tb.move(t, "b3b7")
	resp, err := env.Client.Undo(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.UndoRequest{GameId: tb.id, RequestId: rid()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tb.get(t).GetMoves()); n != 2 || resp.GetGame().GetVersion() != tb.get(t).GetVersion() {
		t.Fatalf("undo before the AI replied left %d moves, want 2", n)
	}
	resp, err = env.Client.Undo(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.UndoRequest{GameId: tb.id, RequestId: rid()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tb.get(t).GetMoves()); n != 0 || resp.GetGame().GetTurn() != commonv1.Side_SIDE_FIRST {
		t.Fatalf("undo of move and reply left %d moves, turn %v", n, resp.GetGame().GetTurn())
	}
	_, err = env.Client.Undo(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.UndoRequest{GameId: tb.id, RequestId: rid()})
	wantCode(t, err, codes.FailedPrecondition)
	// Play on from the emptied game: the stored moves start again, and
	// expire with the rest of the game.
	tb.move(t, "b1c3")
	if ms := tb.get(t).GetMoves(); len(ms) != 1 || ms[0].GetMove().GetCoordinate() != "b1c3" {
		t.Fatalf("moves after undoing everything and playing b1c3: %v", ms)
	}
	if d := env.Redis.PTTL(context.Background(), env.Config.KeyPrefix+"{g:"+tb.id+"}:m").Val(); d <= 0 {
		t.Fatalf("the new list of moves expires in %v", d)
	}
}

// TestAnUndoStoresTheClocksOfTheMoveItKeeps: the last move an undo leaves
// shows the running turn's clocks as the undo left them, read back from
// Redis as in the undo's answer and its MovesUndone event (which a client
// following the events puts on that move), not those of when it was
// played.
func TestAnUndoStoresTheClocksOfTheMoveItKeeps(t *testing.T) {
	env := gametest.Start(t, nil)
	fischer := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{
		MainTime: durationpb.New(10 * time.Minute), Increment: durationpb.New(5 * time.Second)}}}
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(0, 3), TimeControl: fischer})
	for _, mv := range []string{"a4a5", "a7a6", "c4c5", "c7c6"} {
		tb.move(t, mv)
		// Time on the clocks, so that the undo's clocks differ from
		// those of any move.
		time.Sleep(30 * time.Millisecond)
	}
	resp, err := env.Client.Undo(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.UndoRequest{GameId: tb.id, RequestId: rid()})
	if err != nil {
		t.Fatal(err)
	}
	g := tb.get(t)
	moves := g.GetMoves()
	if len(moves) != 2 || g.GetVersion() != resp.GetGame().GetVersion() {
		t.Fatalf("after the undo: %d moves at version %d, want 2 at version %d", len(moves), g.GetVersion(), resp.GetGame().GetVersion())
	}
	if got, want := moves[1].GetClocks(), resp.GetGame().GetClocks(); !proto.Equal(got, want) {
		t.Fatalf("the last move kept, read back, shows clocks %v; the undo left %v", got, want)
	}
	evs := eventsAfter(t, tb, g.GetVersion()-1)
	if got, want := moves[1].GetClocks(), evs[len(evs)-1].GetMovesUndone().GetClocks(); !proto.Equal(got, want) {
		t.Fatalf("the last move kept, read back, shows clocks %v; the undo's event %v", got, want)
	}
}

// TestMovesAndUndosDoNotHoldOffTheFlag: through the public API, a human
// playing the AI under byo-yomi (a single period of 1 s) could think on one
// position far beyond it by playing any move before the period ran out and
// taking it back, every move filling the period again and its undo leaving
// it filled.
func TestMovesAndUndosDoNotHoldOffTheFlag(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := create(t, env, &gamev1.CreateGameRequest{
		Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(0, 3),
		TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{
			MainTime: durationpb.New(0), Periods: 1, PeriodTime: durationpb.New(time.Second)}}},
	})
	red, ai := commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND
	play := func(side commonv1.Side, mv string) error {
		_, err := env.Client.MakeMove(tb.as(side), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: mv}})
		return err
	}
	// The two first moves start Red's clock: 1 s in all.
	for _, m := range []struct {
		side commonv1.Side
		mv   string
	}{{red, "h3e3"}, {ai, "h10g8"}} {
		if err := play(m.side, m.mv); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for cycle := 1; cycle <= 6; cycle++ {
		time.Sleep(700 * time.Millisecond) // thinking on the same position
		if err := play(red, "a4a5"); err != nil {
			t.Logf("cycle %d: Red's move refused after %v: %v (fine)", cycle, time.Since(start), err)
			return
		}
		if err := play(ai, "a7a6"); err != nil {
			t.Fatalf("the AI's reply: %v", err)
		}
		if _, err := env.Client.Undo(tb.as(red), &gamev1.UndoRequest{GameId: tb.id, RequestId: rid()}); err != nil {
			t.Fatalf("cycle %d: undo: %v", cycle, err)
		}
	}
	g := tb.get(t)
	t.Fatalf("Red thought %v on one position with a budget of 1 s, yet the game is %v with Red at %d period(s), %v left",
		time.Since(start).Round(time.Millisecond), g.GetStatus(), g.GetClocks().GetFirst().GetPeriodsLeft(), g.GetClocks().GetFirst().GetPeriodLeft().AsDuration())
}

// TestGamesAreKeptForTheirTime checks the expiry of a game's keys: an
// unfinished game is kept at least LiveTTL after its last change (the
// expiry is extended when due, not on every move) and a finished one for
// the retention.
func TestGamesAreKeptForTheirTime(t *testing.T) {
	const live = 6400 * time.Millisecond // extended when more than live/64 = 100ms old
	env := gametest.Start(t, func(c *game.Config) { c.LiveTTL, c.Retention = live, 3*time.Hour })
	tb := xiangqi(t, env)
	ctx := context.Background()
	p := env.Config.KeyPrefix + "{g:" + tb.id + "}"
	keys := []string{p, p + ":e"}
	pttl := func(lo, hi time.Duration) time.Duration {
		t.Helper()
		got := []time.Duration{hi}
		for _, k := range keys {
			d := env.Redis.PTTL(ctx, k).Val()
			if d <= lo || d > hi {
				t.Fatalf("%s expires in %v, want (%v, %v]", k, d, lo, hi)
			}
			got = append(got, d)
		}
		return slices.Min(got)
	}
	first := pttl(live-time.Second, live+live/64)
	tb.move(t, "h3e3")
	keys = append(keys, p+":m") // the moves, from the first one on
	if d := pttl(live-time.Second, first); d > first {
		t.Fatalf("a move right after the last extension extended the expiry again: %v > %v", d, first)
	}
	time.Sleep(live/64 + 50*time.Millisecond)
	before := pttl(0, first)
	tb.move(t, "h8e8")
	if after := pttl(live, live+live/64); after <= before {
		t.Fatalf("a move after the slack did not extend the expiry: %v <= %v", after, before)
	}
	if _, err := env.Client.Resign(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()}); err != nil {
		t.Fatal(err)
	}
	pttl(3*time.Hour-5*time.Second, 3*time.Hour)
}

// TestTimedGamesOutliveTheirTurns: a game with a deadline to come is kept
// at least LiveTTL past it, however short LiveTTL is, so that the deadline
// ends it instead of its keys expiring in the middle of a turn; a game
// without a clock expires LiveTTL after its last change.
func TestTimedGamesOutliveTheirTurns(t *testing.T) {
	const live = 1280 * time.Millisecond
	env := gametest.Start(t, func(c *game.Config) { c.LiveTTL = live })
	ctx := context.Background()
	pttl := func(tb *table) time.Duration {
		t.Helper()
		p := env.Config.KeyPrefix + "{g:" + tb.id + "}"
		asked := time.Now()
		d := env.Redis.PTTL(ctx, p).Val()
		for _, k := range []string{p + ":e", p + ":m"} {
			// One commit sets the same expiry on every key; the reads
			// come one after another, so a later one may see less left
			// by the time gone since the first, rounded to milliseconds.
			// Redis 7.0 does not freeze the time within a script, so the
			// commit's later PEXPIREs may fall a millisecond after its
			// first.
			e := env.Redis.PTTL(ctx, k).Val()
			since := time.Since(asked).Round(time.Millisecond) + time.Millisecond
			if (e > d+time.Millisecond || e < d-since) && env.Redis.Exists(ctx, k).Val() == 1 {
				t.Fatalf("%s expires in %v, the game in %v (read %v apart)", k, e, d, since)
			}
		}
		return d
	}
	untimed := xiangqi(t, env)
	if d := pttl(untimed); d > live+live/64 {
		t.Fatalf("an untimed game is kept %v, want at most %v", d, live+live/64)
	}

	fischer := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Minute), Increment: durationpb.New(0)}}}
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer, FirstMoveTime: durationpb.New(30 * time.Second)})
	if d := pttl(tb); d < 30*time.Second+live {
		t.Fatalf("a game awaiting its first move for 30s is kept %v", d)
	}
	tb.move(t, "h3e3")
	tb.move(t, "h8e8")
	// Red's clock runs: a minute and the lag grace.
	if d := pttl(tb); d < time.Minute+live {
		t.Fatalf("a game whose clock runs for a minute is kept %v", d)
	}
	time.Sleep(live + live/64)
	if _, err := env.Client.GetGame(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.GetGameRequest{GameId: tb.id}); err != nil {
		t.Fatalf("the timed game, its LiveTTL past, in the middle of a turn: %v", err)
	}
}

// A game that expired is gone for its readers too, even on the process
// that still holds its last state.
func TestExpiredGameIsNotStreamed(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.LiveTTL = 640 * time.Millisecond })
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	deadline := time.Now().Add(5 * time.Second)
	for env.Redis.Exists(context.Background(), env.Config.KeyPrefix+"{g:"+tb.id+"}").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the game never expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(tb.as(commonv1.Side_SIDE_FIRST), 3*time.Second)
	defer cancel()
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err == nil {
		_, err = st.Recv()
	}
	wantCode(t, err, codes.NotFound)
}

// TestAIJobCredentialLastsAsLongAsASeat: a job waits while the workers
// are down, so its credential must outlive that wait as a player's does;
// a shorter one would strand the game once it ran out.
func TestAIJobCredentialLastsAsLongAsASeat(t *testing.T) {
	const keys = "k1:" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	env := gametest.Start(t, func(c *game.Config) { c.SigningKeys, c.SeatTTL = keys, 72*time.Hour })
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(0, 3)})
	tb.move(t, "h3e3")
	q := aijobs.New(env.Redis, env.Config.KeyPrefix)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := q.Next(ctx, "test", time.Second)
	if err != nil || d == nil {
		t.Fatalf("no AI job after the human's move: %v", err)
	}
	ring, err := auth.ParseKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ring.Verify(d.Job.Token, time.Now())
	if err != nil {
		t.Fatalf("the job's credential: %v", err)
	}
	if life := time.Duration(c.ExpiresAt-c.IssuedAt) * time.Second; life != 72*time.Hour {
		t.Fatalf("the job's credential lives %v, want the seat TTL of 72h", life)
	}
	if c.Game != tb.id || c.Side != "second" {
		t.Fatalf("the job's credential is for game %s side %s, want %s second", c.Game, c.Side, tb.id)
	}
}

// TestAGameBetweenTwoAIsWaitsBehindPlayers: once workers read both lanes,
// the jobs of a game between two AI seats go to the background lane, and
// a worker takes a player's job first, though it came later.
func TestAGameBetweenTwoAIsWaitsBehindPlayers(t *testing.T) {
	env := gametest.Start(t, nil)
	q := aijobs.New(env.Redis, env.Config.KeyPrefix)
	if err := q.ReadBothLanes(context.Background()); err != nil {
		t.Fatal(err)
	}
	bots := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(2, 3), Public: true})
	human := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(0, 3)})
	human.move(t, "h3e3")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, want := range []struct {
		game       string
		background bool
	}{{human.id, false}, {bots.id, true}} {
		d, err := q.Next(ctx, "test", time.Second)
		if err != nil || d == nil {
			t.Fatalf("no AI job for %s: %v", want.game, err)
		}
		if d.Job.GameID != want.game || d.Background() != want.background || d.Job.Background != want.background {
			t.Fatalf("job %+v from the background lane: %v; want game %s, background %v", d.Job, d.Background(), want.game, want.background)
		}
	}
}
