package model

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/rules"
)

// TestUndoPastTheFirstMovesKeepsTheClock: once both first moves have
// started the clock, an undo that takes the game back before them must not
// bring back the first-move rule, which would abort the game of a human
// who still has most of their time.
func TestUndoPastTheFirstMovesKeepsTheClock(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	now := start
	ctl := clock.Default()
	ch, err := Create(CreateParams{
		ID: "g", Variant: rules.Xiangqi, Control: &ctl, FirstMoveTime: 30 * time.Second,
		Seats: [2]Seat{{PlayerID: "p"}, {PlayerID: "ai", AILevel: 1}},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	for i, mv := range []string{"h3e3", "h8e8", "b1c3", "b10c8"} {
		now = now.Add(time.Second)
		ch, err := Move(st, rules.Side(i%2), mv, 0, now)
		if err != nil {
			t.Fatalf("%s: %v", mv, err)
		}
		st = ch.State
	}
	for range 2 { // back to the start position, clock still running
		now = now.Add(time.Second)
		u, err := Undo(st, rules.First, now)
		if err != nil {
			t.Fatal(err)
		}
		st = u.State
	}
	if len(st.Moves) != 0 || st.Clock.Phase != clock.Running {
		t.Fatalf("after the undos: %d moves, clock phase %v; want 0 moves and a running clock", len(st.Moves), st.Clock.Phase)
	}
	if d := firstMoveDeadline(st); d != 0 {
		t.Fatalf("the first-move deadline is back after the undos: %v after the last undo", time.UnixMilli(d).Sub(now))
	}
	// A wake-up at the game's next instant must not abort it either.
	if st.WakeMs != 0 {
		if ch, applied, err := Expire(st, st.WakeMs, time.UnixMilli(st.WakeMs)); err != nil {
			t.Fatal(err)
		} else if applied && ch.State.Status != StatusOngoing {
			t.Fatalf("the wake-up at %v ended the game: %v, %+v", time.UnixMilli(st.WakeMs).Sub(now), ch.State.Status, ch.State.Result)
		}
	}
	// 45 s later, well within the human's 5 minutes, the move is played.
	now = now.Add(45 * time.Second)
	ch, err = Move(st, rules.First, "h3e3", 0, now)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Reply != nil || ch.State.Status != StatusOngoing || len(ch.State.Moves) != 1 {
		t.Fatalf("a move 45 s after the undo: status %v, reply %v, %d moves; want it played", ch.State.Status, ch.Reply, len(ch.State.Moves))
	}
}

// TestUndosAreBounded: each move and undo keeps its answer and event for
// the game's life, so a game allows MaxUndos undos, and the state after
// them survives being stored.
func TestUndosAreBounded(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ch, err := Create(CreateParams{ID: "g", Variant: rules.Xiangqi, Seats: [2]Seat{{PlayerID: "p"}, {PlayerID: "ai", AILevel: 1}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	for i := range MaxUndos + 1 {
		st = must(t, "h3e3")(Move(st, rules.First, "h3e3", 0, now))
		_, err := Undo(st, rules.First, now)
		if i == MaxUndos {
			if apierr.CodeOf(err) != apierr.Precondition || !strings.Contains(err.Error(), "no more undos") {
				t.Fatalf("undo %d: %v, want FailedPrecondition: no more undos", i+1, err)
			}
			return
		}
		st = must(t, "undo")(Undo(st, rules.First, now))
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var stored State
		if err := json.Unmarshal(b, &stored); err != nil || stored.Undos != i+1 {
			t.Fatalf("undo %d stored as %d undos (%v)", i+1, stored.Undos, err)
		}
		st = &stored
	}
}

// TestUndoTakesBackTheIncrements: under Fischer, a move and its undo must
// not leave the human the increment behind, or every move and undo would
// add time; the AI's reply taken back keeps its own.
func TestUndoTakesBackTheIncrements(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ctl := clock.Control{Kind: clock.Fischer, MainTime: 5 * time.Minute, Increment: 3 * time.Second}
	ch, err := Create(CreateParams{
		ID: "g", Variant: rules.Xiangqi, Control: &ctl,
		Seats: [2]Seat{{PlayerID: "p"}, {PlayerID: "ai", AILevel: 1}},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	play := func(side rules.Side, mv string, after time.Duration) {
		t.Helper()
		now = now.Add(after)
		ch, err := Move(st, side, mv, 0, now)
		if err != nil || ch.Reply != nil {
			t.Fatalf("%s: %v %v", mv, err, ch.Reply)
		}
		st = ch.State
	}
	undo := func(after time.Duration) {
		t.Helper()
		now = now.Add(after)
		u, err := Undo(st, rules.First, now)
		if err != nil || u.Reply != nil {
			t.Fatalf("undo: %v %v", err, u.Reply)
		}
		st = u.State
	}
	main := func() [2]time.Duration {
		s := st.Clock.Snapshot(now)
		return [2]time.Duration{s.Players[0].Main(), s.Players[1].Main()}
	}
	// The first two plies start the clock and earn nothing.
	play(rules.First, "h3e3", time.Second)
	play(rules.Second, "h8e8", time.Second)
	before := main()
	// The human moves after 10 s; the AI replies after 4 s; the human
	// takes both back 2 s into its turn: each is charged its thinking, and
	// the human keeps no 3 s increment.
	play(rules.First, "b1c3", 10*time.Second)
	play(rules.Second, "b10c8", 4*time.Second)
	undo(2 * time.Second)
	if got, want := main(), [2]time.Duration{before[0] - 12*time.Second, before[1] - 4*time.Second + 3*time.Second}; got != want {
		t.Fatalf("after a move, a reply and the undo: %v left, want %v", got, want)
	}
	// Taken back before the AI replies: the AI's turn is cut short, and
	// the human's move keeps no increment either.
	before = main()
	play(rules.First, "b1c3", 5*time.Second)
	undo(time.Second)
	if got, want := main(), [2]time.Duration{before[0] - 5*time.Second, before[1] - time.Second}; got != want {
		t.Fatalf("after a move and its undo: %v left, want %v", got, want)
	}
	// Ten moves and undos in a row gain nothing.
	before = main()
	for range 10 {
		play(rules.First, "b1c3", 0)
		undo(0)
	}
	if got := main(); got != before {
		t.Fatalf("ten moves and undos at once: %v left, was %v", got, before)
	}
}

// TestUndoPastTheFirstMovesTakesBackTheirIncrements: once an undo has
// taken the game back before the moves that started the clock, the clock
// runs, so those moves played again earn increments, and their undos must
// withdraw the human's (the AI's replies keep theirs).
func TestUndoPastTheFirstMovesTakesBackTheirIncrements(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ctl := clock.Control{Kind: clock.Fischer, MainTime: 5 * time.Minute, Increment: 3 * time.Second}
	ch, err := Create(CreateParams{
		ID: "g", Variant: rules.Xiangqi, Control: &ctl,
		Seats: [2]Seat{{PlayerID: "p"}, {PlayerID: "ai", AILevel: 1}},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	cycle := func() {
		t.Helper()
		for i, mv := range []string{"h3e3", "h8e8"} {
			ch, err := Move(st, rules.Side(i), mv, 0, now)
			if err != nil || ch.Reply != nil {
				t.Fatalf("%s: %v %v", mv, err, ch.Reply)
			}
			st = ch.State
		}
		u, err := Undo(st, rules.First, now)
		if err != nil || u.Reply != nil {
			t.Fatalf("undo: %v %v", err, u.Reply)
		}
		st = u.State
	}
	cycle()
	before := st.Clock.Snapshot(now).Players
	for range 10 {
		cycle()
	}
	if got := st.Clock.Snapshot(now).Players; got[rules.First] != before[rules.First] ||
		got[rules.Second].Main() != before[rules.Second].Main()+10*ctl.Increment {
		t.Fatalf("ten moves, replies and undos from the start: %+v, was %+v; want the human's unchanged, the AI's 10 increments up", got, before)
	}
}

// TestAnUndoWithdrawsADrawOfferAndSaysSo: an offer belongs to the position
// it was made in, and a client following the events must learn that the
// undo ended it; an undo with no offer pending says nothing of one.
func TestAnUndoWithdrawsADrawOfferAndSaysSo(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ch, err := Create(CreateParams{ID: "x", Variant: rules.Xiangqi, Lag: serviceLag,
		Seats: [2]Seat{{PlayerID: "human"}, {PlayerID: "ai", AILevel: 3}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := must(t, "human")(Move(ch.State, rules.First, "h3e3", 0, now))
	st = must(t, "ai")(Move(st, rules.Second, "h10g8", 0, now))
	offered := must(t, "offer")(OfferDraw(st, rules.First, now))
	for _, tc := range []struct {
		name  string
		from  *State
		offer bool
	}{{"with an offer pending", offered, true}, {"with none", st, false}} {
		ch, err := Undo(tc.from, rules.First, now)
		if err != nil || ch.Reply != nil {
			t.Fatalf("undo %s: %v %v", tc.name, err, ch.Reply)
		}
		undone := ch.Events[len(ch.Events)-1].GetMovesUndone()
		if undone == nil || undone.GetDrawOfferWithdrawn() != tc.offer || ch.State.DrawOffer != nil {
			t.Fatalf("undo %s: event %v, offer left %v; want draw_offer_withdrawn %v and no offer", tc.name, ch.Events, ch.State.DrawOffer, tc.offer)
		}
	}
}
