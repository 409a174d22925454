package model

import (
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/rules"
)

// TestAbort: a game created to allow it is aborted by either side until
// both first moves are made; after a first-move deadline that passed, the
// deadline's abort (of the side that did not move) comes first; a game
// created without aborts, or begun, is refused.
func TestAbort(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ctl := clock.Default()
	game := func(mayAbort bool) *State {
		ch, err := Create(CreateParams{ID: "x", Variant: rules.Xiangqi, Control: &ctl, Lag: serviceLag, FirstMoveTime: 30 * time.Second,
			PlayersMayAbort: mayAbort, Seats: [2]Seat{{PlayerID: "a"}, {PlayerID: "b"}}}, now)
		if err != nil {
			t.Fatal(err)
		}
		return ch.State
	}
	refused := func(ch Change, err error, want string) {
		t.Helper()
		if apierr.CodeOf(err) != apierr.Precondition || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, %v; want FailedPrecondition about %q", ch.Events, err, want)
		}
	}

	ch, err := Abort(game(false), rules.First, now)
	refused(ch, err, "without aborts")

	st := game(true)
	st = must(t, "red's first move")(Move(st, rules.First, "h3e3", 0, now.Add(time.Second)))
	ch, err = Abort(st, rules.First, now.Add(2*time.Second))
	if err != nil || ch.Reply != nil || ch.State.Status != StatusAborted || *ch.State.Result.Side != rules.First || ch.State.Result.Method != MethodAborted {
		t.Fatalf("Red's abort before Black's first move: %v %v %+v", err, ch.Reply, ch.State.Result)
	}
	// Black let its first move's time pass: the deadline aborts the game
	// for Black, whoever asks, and the request is refused.
	ch, err = Abort(st, rules.First, now.Add(40*time.Second))
	if err != nil || ch.Reply == nil || ch.State.Status != StatusAborted || *ch.State.Result.Side != rules.Second {
		t.Fatalf("an abort after Black's first-move deadline: %v %v %+v", err, ch.Reply, ch.State.Result)
	}

	begun := must(t, "black's first move")(Move(st, rules.Second, "h10g8", 0, now.Add(3*time.Second)))
	ch, err = Abort(begun, rules.Second, now.Add(4*time.Second))
	refused(ch, err, "the game has begun")
	ended := must(t, "resign")(Resign(begun, rules.First, now.Add(5*time.Second)))
	ch, err = Abort(ended, rules.Second, now.Add(6*time.Second))
	refused(ch, err, "ended")
}

// TestAbortIsForHumansBeforeTheGameBegins: the AI's seat cannot abort, and
// a game against the AI that began stays begun after an undo takes both
// first moves back.
func TestAbortIsForHumansBeforeTheGameBegins(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ch, err := Create(CreateParams{ID: "x", Variant: rules.Xiangqi, Lag: serviceLag, PlayersMayAbort: true,
		Seats: [2]Seat{{PlayerID: "human"}, {PlayerID: "ai", AILevel: 3}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Abort(ch.State, rules.Second, now); apierr.CodeOf(err) != apierr.Precondition || !strings.Contains(err.Error(), "AI") {
		t.Fatalf("the AI seat's abort: %v; want it refused", err)
	}
	st := must(t, "human")(Move(ch.State, rules.First, "h3e3", 0, now.Add(time.Second)))
	st = must(t, "ai")(Move(st, rules.Second, "h10g8", 0, now.Add(2*time.Second)))
	st = must(t, "undo")(Undo(st, rules.First, now.Add(3*time.Second)))
	if len(st.Moves) != 0 {
		t.Fatalf("the undo left %d moves, want none", len(st.Moves))
	}
	if _, err := Abort(st, rules.First, now.Add(4*time.Second)); apierr.CodeOf(err) != apierr.Precondition || !strings.Contains(err.Error(), "has begun") {
		t.Fatalf("an abort after both first moves and an undo: %v; want it refused", err)
	}
}

// TestAGameEndedInItsSetupKeepsItsTurn: a Janggi game that ends before
// both formations are chosen shows the side that was choosing to the
// end, as during the setup: it has no board whose side to move to show.
func TestAGameEndedInItsSetupKeepsItsTurn(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	for _, end := range []func(*State) (Change, error){
		func(st *State) (Change, error) { return Abort(st, rules.First, now.Add(time.Second)) },
		func(st *State) (Change, error) { return Resign(st, rules.First, now.Add(time.Second)) },
	} {
		ch, err := Create(CreateParams{ID: "j", Variant: rules.Janggi, PlayersMayAbort: true, SetupTime: time.Minute, Seats: [2]Seat{{PlayerID: "a"}, {PlayerID: "b"}}}, now)
		if err != nil {
			t.Fatal(err)
		}
		if turn := ch.State.Turn(); turn != rules.Second {
			t.Fatalf("the setup's turn %v, want Han's", turn)
		}
		ended := must(t, "the ending")(end(ch.State))
		if !ended.Status.Finished() || ended.Turn() != rules.Second {
			t.Fatalf("after the ending: status %v, turn %v; want it over, Han's turn still", ended.Status, ended.Turn())
		}
	}
}
