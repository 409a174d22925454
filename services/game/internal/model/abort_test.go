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
	refused(ch, err, "both sides have made their first move")
	ended := must(t, "resign")(Resign(begun, rules.First, now.Add(5*time.Second)))
	ch, err = Abort(ended, rules.Second, now.Add(6*time.Second))
	refused(ch, err, "ended")
}
