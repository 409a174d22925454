package model

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/rules"
)

func movesOf(st *State) []string {
	var out []string
	for _, m := range st.Moves {
		out = append(out, m.Move)
	}
	return out
}

// TestStatesKeepTheirMoves checks that states sharing one slice of moves
// never see each other's changes: a sibling made from the same state, a
// move after an undo, and the states before them all keep what they had.
func TestStatesKeepTheirMoves(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ch, err := Create(CreateParams{ID: "g", Variant: rules.Xiangqi, Seats: [2]Seat{{PlayerID: "p"}, {PlayerID: "ai", AILevel: 1}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	play := func(st *State, side rules.Side, mv string) *State {
		t.Helper()
		ch, err := Move(st, side, mv, 0, now)
		if err != nil {
			t.Fatalf("%s: %v", mv, err)
		}
		return ch.State
	}
	s1 := play(st, rules.First, "h3e3")
	s2 := play(s1, rules.Second, "h8e8")
	s3 := play(s2, rules.First, "b1c3")
	// Two siblings of s3: the second must not see the first's move.
	a := play(s3, rules.Second, "b10c8")
	b := play(s3, rules.Second, "a10a9")
	if got := movesOf(a); !slices.Equal(got, []string{"h3e3", "h8e8", "b1c3", "b10c8"}) {
		t.Fatalf("first sibling: %v", got)
	}
	if got := movesOf(b); !slices.Equal(got, []string{"h3e3", "h8e8", "b1c3", "a10a9"}) {
		t.Fatalf("second sibling: %v", got)
	}
	// The human takes back b1c3 and b10c8 (the AI's reply), then plays on:
	// the state before the undo must keep both.
	u, err := Undo(a, rules.First, now)
	if err != nil {
		t.Fatal(err)
	}
	after := play(u.State, rules.First, "c4c5")
	if got := movesOf(after); !slices.Equal(got, []string{"h3e3", "h8e8", "c4c5"}) {
		t.Fatalf("after undo: %v", got)
	}
	if got := movesOf(a); !slices.Equal(got, []string{"h3e3", "h8e8", "b1c3", "b10c8"}) {
		t.Fatalf("the state before the undo changed: %v", got)
	}
	if got := movesOf(s3); !slices.Equal(got, []string{"h3e3", "h8e8", "b1c3"}) {
		t.Fatalf("an older state changed: %v", got)
	}
}

// TestJanggiResignedDuringSetupHasItsPoints: a Janggi result always
// carries the points (72 and 73.5 at the start), and so does the game
// read later; formations still being chosen change no piece's value.
// Its clocks are as of its end, however late it is read.
func TestJanggiResignedDuringSetupHasItsPoints(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ctl := clock.Control{Kind: clock.Fischer, MainTime: 5 * time.Minute}
	ch, err := Create(CreateParams{ID: "j", Variant: rules.Janggi, SetupTime: time.Minute, Control: &ctl}, now)
	if err != nil {
		t.Fatal(err)
	}
	if p := View(ch.State, nil, now).GetPoints(); p.GetFirst() != 72 || p.GetSecond() != 73.5 {
		t.Fatalf("points read in the setup: %v, want 72 and 73.5", p)
	}
	ended := now.Add(time.Second)
	ch, err = Resign(ch.State, rules.First, ended)
	if err != nil || ch.Reply != nil {
		t.Fatalf("resign during setup: %v %v", err, ch.Reply)
	}
	if got, want := ch.State.Result.Points, [2]float64{72, 73.5}; got != want {
		t.Fatalf("points %v, want %v", got, want)
	}
	read := View(ch.State, nil, ended.Add(time.Hour))
	if p := read.GetPoints(); p.GetFirst() != 72 || p.GetSecond() != 73.5 {
		t.Fatalf("points of the game read after: %v, want 72 and 73.5 as its result has", p)
	}
	if at := read.GetClocks().GetAsOf().AsTime(); !at.Equal(ended) {
		t.Fatalf("clocks read an hour after the end are as of %v, want the end, %v", at, ended)
	}
}

// TestDrawsAreAXiangqiRule: answering a draw in Janggi is refused as
// offering one is, naming the rule.
func TestDrawsAreAXiangqiRule(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ch, err := Create(CreateParams{ID: "j", Variant: rules.Janggi, SetupTime: time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = AnswerDraw(ch.State, rules.First, true, now)
	if apierr.CodeOf(err) != apierr.Precondition || !strings.Contains(err.Error(), "Xiangqi rule") {
		t.Fatalf("AnswerDraw in Janggi = %v, want FailedPrecondition naming the Xiangqi rule", err)
	}
}
