package model

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/rules"
)

// snapshot is everything a state holds, so that a command that changed
// a state it was given (instead of its own copy) is caught.
func snapshot(t *testing.T, st *State) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	m, err := json.Marshal(st.Moves)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b) + "|" + string(m)
	if st.replayed != nil {
		s += fmt.Sprintf("|%d %s", st.replayed.Plies(), st.replayed.Position().FEN())
	}
	return s
}

// fuzzGame feeds a game commands chosen by a fuzzer's bytes.
type fuzzGame struct {
	t    *testing.T
	in   []byte
	now  time.Time
	hist []*State
	snap []string
}

func (f *fuzzGame) byte() byte {
	if len(f.in) == 0 {
		return 0
	}
	b := f.in[0]
	f.in = f.in[1:]
	return b
}

// FuzzCommands plays commands chosen by the fuzzer (legal and illegal
// moves, passes, formations, draws, undos, resignations, deadlines,
// processes holding and letting go of seats, outages excused, with time
// passing between them) on a game, sometimes on an older state of it as a process with a
// stale copy would. Whatever the input, no command panics or changes a
// state it was given; a refusal is a client error, never an internal one;
// every change carries events that take the version one by one; the moves
// replay to the position the command saw; a seat's count is its holders;
// and a game that the rules have ended is never left ongoing.
func FuzzCommands(f *testing.F) {
	f.Add([]byte{0, 1, 10, 1, 3, 1, 7, 1, 200, 1, 5, 1, 9, 3, 0, 6, 1})
	f.Add([]byte{1, 0, 2, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 4, 255, 9, 8, 7})
	f.Add([]byte{2, 0, 0, 3, 0, 2, 1, 1, 1, 7, 0, 7, 1, 6, 0, 6, 1, 8, 250, 8, 250, 8, 250})
	f.Add([]byte{3, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 0, 2, 0, 2})
	f.Add([]byte{8, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 1, 1, 0})
	f.Add([]byte{15, 2, 0, 0, 1, 3, 0, 0, 0, 1, 0, 0, 1, 8, 0, 0, 0, 8, 0, 250, 1, 9, 0})
	f.Add([]byte{10, 4, 0, 0, 5, 0, 0, 1, 5, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 8})
	f.Fuzz(playFuzzed)
}

// fuzzStarts are custom start positions a few plies from an ending:
// mates, counters near the move limits, the second side to move first.
var fuzzStarts = map[rules.Variant][]string{
	rules.Xiangqi: {
		"3k5/7P1/1R6P/9/9/9/9/9/9/4K4 w - - 0 1",
		"2ba5/9/3k4b/9/9/9/4N4/4K4/1C7/9 w - - 0 1",
		"3k5/1R5P1/9/9/9/9/9/9/9/4K4 w - - 117 80",
		"3ak4/4a4/9/9/2R6/9/9/3K5/9/6C2 b - - 118 1",
		"3k5/9/9/9/9/9/9/9/4p4/4K4 w - - 0 1",
	},
	rules.Janggi: {
		"5N1b1/4a4/3k5/4N4/9/9/9/4K4/9/p7p w - - 0 1",
		"b2k2C1b/5P3/3P1a3/9/9/9/9/9/3K5/p7p w - - 0 1",
		"b2aak2b/9/4P4/9/8P/4R4/9/9/9/p4K2p b - - 198 100",
		"4k4/9/9/9/9/9/9/9/9/4K4 w - - 0 1",
		"4k4/9/9/9/9/9/9/9/9/3K5 b - - 0 1",
	},
}

func playFuzzed(t *testing.T, in []byte) {
	g := &fuzzGame{t: t, in: in, now: time.UnixMilli(1_700_000_000_000)}
	opts := g.byte()
	p := CreateParams{ID: "fuzz", Variant: rules.Janggi, SetupTime: 60 * time.Second, FirstMoveTime: 30 * time.Second}
	if opts&1 != 0 {
		p.Variant = rules.Xiangqi
	}
	if opts&2 != 0 {
		p.Control = &clock.Control{Kind: clock.ByoYomi, MainTime: 20 * time.Second, Periods: 1, PeriodTime: 5 * time.Second}
	}
	if opts&4 != 0 {
		p.Seats[1].AILevel = 1
	}
	if opts&8 != 0 {
		starts := fuzzStarts[p.Variant]
		start, err := StartFrom(p.Variant, starts[int(g.byte())%len(starts)])
		if err != nil {
			t.Fatal(err)
		}
		p.Start = start
	}
	ch, err := Create(p, g.now)
	if err != nil {
		t.Fatal(err)
	}
	Seal(ch, 0, g.now)
	g.keep(ch.State)
	for steps := 0; len(g.in) > 0 && steps < 300; steps++ {
		g.step()
	}
	// No command, on any state, changed a state it was given.
	for i, st := range g.hist {
		if got := snapshot(t, st); got != g.snap[i] {
			t.Fatalf("state %d changed after a later command:\nwas %s\nnow %s", i, g.snap[i], got)
		}
	}
}

func (g *fuzzGame) keep(st *State) {
	g.hist = append(g.hist, st)
	g.snap = append(g.snap, snapshot(g.t, st))
}

func (g *fuzzGame) step() {
	t := g.t
	base := g.hist[len(g.hist)-1]
	// Now and then the command works on an older state: a process whose
	// copy is stale computes a change that its commit will refuse.
	if b := g.byte(); b >= 240 {
		base = g.hist[int(b)%len(g.hist)]
	}
	g.now = g.now.Add(time.Duration(g.byte()) * 300 * time.Millisecond)
	side := rules.Side(g.byte() & 1)
	op := g.byte() % 12
	before := snapshot(t, base)

	var (
		ch      Change
		err     error
		changed = true
	)
	switch op {
	case 0:
		ch, err = ChooseFormation(base, side, rules.Formation(g.byte()%5), g.now)
	case 1, 2, 3:
		// A legal move, when there is one to pick.
		text := "a1a2"
		if lg, gerr := base.Game(); gerr == nil {
			if legal := lg.LegalMoves(); len(legal) > 0 {
				text = legal[int(g.byte())%len(legal)].String()
			}
		}
		ch, err = Move(base, side, text, time.Duration(g.byte())*time.Millisecond, g.now)
	case 4:
		// Whatever the fuzzer writes.
		n := int(g.byte() % 8)
		text := make([]byte, 0, n)
		for range n {
			text = append(text, g.byte())
		}
		ch, err = Move(base, side, string(text), 0, g.now)
	case 5:
		ch, err = Pass(base, side, 0, g.now)
	case 6:
		if g.byte() < 16 {
			ch, err = Resign(base, side, g.now)
		} else {
			ch, err = OfferDraw(base, side, g.now)
		}
	case 7:
		ch, err = AnswerDraw(base, side, g.byte()&1 == 0, g.now)
	case 8:
		ch, err = Undo(base, side, g.now)
	case 9:
		at := base.WakeMs
		if b := g.byte(); b < 32 {
			at = ms(g.now) - int64(b)
		}
		ch, changed, err = Expire(base, at, g.now)
	case 10:
		proc := fmt.Sprintf("p%d", g.byte()%3)
		switch g.byte() % 3 {
		case 0:
			ch, changed = Hold(base, side, proc)
		case 1:
			ch, changed = LetGo(base, side, proc)
		default:
			ch, changed = Release(base, proc)
		}
	case 11:
		// An outage of up to a minute excused, as much as the turn holds.
		ch, changed = Excuse(base, time.Duration(g.byte())*250*time.Millisecond, g.now)
	}
	if after := snapshot(t, base); after != before {
		t.Fatalf("op %d changed the state it was given:\nwas %s\nnow %s", op, before, after)
	}
	if err != nil {
		if c := apierr.CodeOf(err); c == apierr.Internal {
			t.Fatalf("op %d on %s: internal error %v", op, base.Status, err)
		}
		return
	}
	if !changed {
		return
	}
	if base.Status.Finished() {
		t.Fatalf("op %d changed a finished game", op)
	}
	// A seat held by one more process of the service changes who holds it
	// and nothing a client sees: no event.
	if ch.State == nil || ch.State == base || (len(ch.Events) == 0 && !ch.Presence) {
		t.Fatalf("op %d: a change without its own state or without events: %+v", op, ch)
	}
	// A refused command commits only what was due before it: the end of a
	// game on time, or the default formation of a setup time run out.
	lateChoice := len(ch.Events) > 0 && ch.Events[0].GetFormationChosen().GetByDefault()
	if ch.Reply != nil && !ch.State.Status.Finished() && !lateChoice {
		t.Fatalf("op %d: refused with %v, yet the game goes on", op, ch.Reply)
	}
	Seal(ch, base.Version, g.now)
	if ch.State.Version != base.Version+uint64(len(ch.Events)) {
		t.Fatalf("op %d: version %d after %d events from %d", op, ch.State.Version, len(ch.Events), base.Version)
	}
	for i, e := range ch.Events {
		if e.GetVersion() != base.Version+uint64(i)+1 {
			t.Fatalf("op %d: event %d has version %d after %d", op, i, e.GetVersion(), base.Version)
		}
	}
	for _, sd := range []rules.Side{rules.First, rules.Second} {
		if c, h := ch.State.Connections[sd], len(ch.State.Holders[sd]); c < h || (c != h && op == 10 && base.Connections[sd] == len(base.Holders[sd])) {
			t.Fatalf("op %d: %d connections of side %d for holders %v (before: %d for %v)", op, c, sd, ch.State.Holders[sd], base.Connections[sd], base.Holders[sd])
		}
	}
	if d := len(ch.State.Moves) - len(base.Moves); d < -2 || d > 1 || (d != 0 && op != 8 && (op < 1 || op > 5)) {
		t.Fatalf("op %d took the moves from %d to %d", op, len(base.Moves), len(ch.State.Moves))
	}
	// A wait's wake-up is its deadline, moved or not, and a wait is never
	// excused more than it has lasted.
	if d := max(setupDeadline(ch.State), firstMoveDeadline(ch.State)); d != 0 && ch.State.WakeMs != d+1 {
		t.Fatalf("op %d: a wait's deadline %d, its wake-up %d", op, d, ch.State.WakeMs)
	}
	if start, excused, ok := Waiting(ch.State); ok && ch.State.WaitExcusedMs != 0 && excused > max(0, ms(g.now)-start) {
		t.Fatalf("op %d: %d ms excused of a wait begun at %d, now %d", op, excused, start, ms(g.now))
	}
	if ch.State.Status == StatusSetup {
		g.keep(ch.State)
		return
	}
	// The moves replay to the position the command played on, and an
	// ending the rules decide is never left uncommitted.
	fresh := *ch.State
	fresh.replayed = nil
	replay, rerr := fresh.Game()
	if rerr != nil {
		t.Fatalf("op %d: the moves do not replay: %v", op, rerr)
	}
	if r := ch.State.Replayed(); r != nil && (r.Plies() != len(ch.State.Moves) || r.Position().FEN() != replay.Position().FEN()) {
		t.Fatalf("op %d: the kept replay (%d plies, %s) is not the moves' (%d, %s)", op, r.Plies(), r.Position().FEN(), len(ch.State.Moves), replay.Position().FEN())
	}
	if replay.Outcome().Ended && ch.State.Status == StatusOngoing {
		t.Fatalf("op %d: the rules ended the game (%v) but it is still ongoing", op, replay.Outcome().Method)
	}
	g.keep(ch.State)
}
