package rules

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// ruleTests: one hand-built position per movement rule, with the exact
// legal moves of one piece (from) or of the whole side (from == ""), and the
// reasons CheckMove must give for some illegal moves.
var ruleTests = []struct {
	name    string
	variant Variant
	side    string
	pieces  []string
	from    string
	want    []string
	reasons map[string]string // move -> substring of CheckMove's error
}{
	// Janggi generals and guards: palace lines, diagonals only through the centre.
	{
		name: "janggi general at palace centre steps along all eight lines", variant: Janggi, side: "w",
		pieces: []string{"Ke2", "ke9"}, from: "e2",
		want: []string{"e2d1", "e2d2", "e2d3", "e2e1", "e2e2", "e2e3", "e2f1", "e2f2", "e2f3"},
	},
	{
		name: "janggi general on palace edge has no diagonal", variant: Janggi, side: "w",
		pieces: []string{"Kd2", "ke9"}, from: "d2",
		want:    []string{"d2d1", "d2d2", "d2d3", "d2e2"},
		reasons: map[string]string{"d2e3": "cannot move like that", "d2c2": "cannot leave its palace"},
	},
	{
		name: "janggi general in palace corner", variant: Janggi, side: "w",
		pieces: []string{"Kd1", "ke9"}, from: "d1",
		want: []string{"d1d1", "d1d2", "d1e1", "d1e2"},
	},
	{
		name: "janggi second general in its palace corner", variant: Janggi, side: "b",
		pieces: []string{"Ke2", "kf10"}, from: "f10",
		want: []string{"f10e10", "f10e9", "f10f10", "f10f9"},
	},
	{
		name: "janggi guard steps along palace diagonal from corner", variant: Janggi, side: "w",
		pieces: []string{"Ke1", "Af3", "ke9"}, from: "f3",
		want: []string{"f3e2", "f3e3", "f3f2"},
	},
	{
		name: "janggi guard cannot leave its palace", variant: Janggi, side: "w",
		pieces: []string{"Ke2", "Ad3", "ke9"}, from: "d3",
		want:    []string{"d3d2", "d3e3"},
		reasons: map[string]string{"d3d4": "the guard cannot leave its palace", "d3e2": "cannot capture your own general"},
	},
	// Janggi chariot and cannon on palace diagonals.
	{
		name: "janggi chariot slides along palace diagonal through empty centre", variant: Janggi, side: "w",
		pieces: []string{"Bc1", "Rd1", "Ae1", "Ad2", "Kf2", "ke9"}, from: "d1",
		want:    []string{"d1e2", "d1f3"},
		reasons: map[string]string{"d1d3": "the chariot's path is blocked at d2", "d1e3": "the chariot cannot move like that"},
	},
	{
		name: "janggi chariot captures on palace centre to answer check", variant: Janggi, side: "w",
		pieces: []string{"Bc1", "Rd1", "Ae1", "Ad2", "Kf2", "pe2", "ke9"}, from: "",
		want: []string{"d1e2", "d2e2", "e1e2", "f2e2", "f2f3"},
		reasons: map[string]string{
			"d1f3": "the chariot's path is blocked at e2",
			"f2f1": "leaves the general in check from the soldier on e2",
			"c1e4": "leaves the general in check from the soldier on e2",
			"f2f2": "cannot pass while in check",
		},
	},
	{
		name: "janggi chariot at palace centre reaches each corner", variant: Janggi, side: "w",
		pieces: []string{"Ke1", "Re2", "Pd2", "Pf2", "Pe3", "ke9"}, from: "e2",
		want: []string{"e2d1", "e2d3", "e2f1", "e2f3"},
	},
	{
		name: "janggi chariot on enemy palace diagonal", variant: Janggi, side: "w",
		pieces: []string{"Ke2", "Rd8", "Pc8", "Pd7", "Pe8", "Pd9", "kf9"}, from: "d8",
		want: []string{"d8e9", "d8f10"},
	},
	{
		name: "janggi cannon uses the general as screen on palace diagonal", variant: Janggi, side: "w",
		pieces: []string{"Cd1", "Ke2", "ke9"}, from: "d1",
		want: []string{"d1f3"},
	},
	{
		name: "janggi cannon needs a screen on palace diagonal", variant: Janggi, side: "w",
		pieces: []string{"Cd1", "Kf2", "ke9"}, from: "d1",
		want:    nil,
		reasons: map[string]string{"d1f3": "the cannon needs a screen to jump over", "d1d5": "needs a screen"},
	},
	{
		name: "janggi cannon at palace centre has nothing to jump diagonally", variant: Janggi, side: "w",
		pieces: []string{"Ke1", "Ce2", "Pd2", "Pf2", "Pe3", "Ad1", "pe8", "ke9"}, from: "e2",
		want:    []string{"e2a2", "e2b2", "e2c2", "e2e4", "e2e5", "e2e6", "e2e7", "e2e8", "e2g2", "e2h2", "e2i2"},
		reasons: map[string]string{"e2f3": "the cannon needs a screen to jump over"},
	},
	{
		name: "janggi cannon cannot jump a cannon", variant: Janggi, side: "w",
		pieces: []string{"Cb3", "Cb5", "Pd3", "Ke2", "ke9"}, from: "b3",
		want:    []string{"b3e3", "b3f3", "b3g3", "b3h3", "b3i3"},
		reasons: map[string]string{"b3b6": "the cannon cannot jump over a cannon (on b5)", "b3c3": "needs a screen"},
	},
	{
		name: "janggi cannon cannot capture a cannon", variant: Janggi, side: "w",
		pieces: []string{"Cb3", "Pb5", "cb7", "Ke2", "ke9"}, from: "b3",
		want:    []string{"b3b6"},
		reasons: map[string]string{"b3b7": "the cannon cannot capture a cannon", "b3b8": "exactly one piece, but b5 and b7"},
	},
	{
		name: "janggi cannon captures over one screen", variant: Janggi, side: "w",
		pieces: []string{"Cb3", "Pb5", "nb8", "Ke2", "ke9"}, from: "b3",
		want: []string{"b3b6", "b3b7", "b3b8"},
	},
	{
		name: "janggi cannon screen cannot be a cannon so no check", variant: Janggi, side: "w",
		pieces: []string{"Ke2", "Ce4", "ce7", "ke9"}, from: "e4",
		want: []string{"e4e1"},
	},
	// Janggi horse and elephant blocking.
	{
		name: "janggi horse is blocked at its leg", variant: Janggi, side: "w",
		pieces: []string{"Ne5", "Pe6", "Ke2", "ke9"}, from: "e5",
		want:    []string{"e5c4", "e5c6", "e5d3", "e5f3", "e5g4", "e5g6"},
		reasons: map[string]string{"e5d7": "the horse is blocked at e6", "e5e7": "the horse cannot move like that"},
	},
	{
		name: "janggi horse near the palace corner", variant: Janggi, side: "w",
		pieces: []string{"Nc1", "Kd1", "Pc2", "ke9"}, from: "c1",
		want:    []string{"c1a2"},
		reasons: map[string]string{"c1e2": "the horse is blocked at d1", "c1d3": "the horse is blocked at c2"},
	},
	{
		name: "janggi elephant is blocked at either point", variant: Janggi, side: "w",
		pieces: []string{"Be5", "Pf7", "pd5", "Ke2", "ke9"}, from: "e5",
		want: []string{"e5c2", "e5c8", "e5g2", "e5h3", "e5h7"},
		reasons: map[string]string{
			"e5g8": "the elephant is blocked at f7",
			"e5b3": "the elephant is blocked at d5",
			"e5g7": "the elephant cannot move like that",
		},
	},
	{
		name: "janggi elephant crosses the board freely", variant: Janggi, side: "w",
		pieces: []string{"Bc5", "Ke2", "ke9"}, from: "c5",
		want:    []string{"c5a2", "c5a8", "c5e8", "c5f3", "c5f7"},
		reasons: map[string]string{"c5e2": "cannot capture your own general on e2"},
	},
	// Janggi soldiers.
	{
		name: "janggi soldier moves forward or sideways, never backward", variant: Janggi, side: "w",
		pieces: []string{"Pc5", "Ke2", "ke9"}, from: "c5",
		want:    []string{"c5b5", "c5c6", "c5d5"},
		reasons: map[string]string{"c5c4": "the soldier cannot move backward", "c5d6": "the soldier cannot move like that"},
	},
	{
		name: "janggi second soldier moves toward rank 1", variant: Janggi, side: "b",
		pieces: []string{"pg6", "Ke2", "ke9"}, from: "g6",
		want: []string{"g6f6", "g6g5", "g6h6"},
	},
	{
		name: "janggi soldier in enemy palace centre moves diagonally forward", variant: Janggi, side: "w",
		pieces: []string{"Pd8", "Pe9", "Ke2", "kf8"}, from: "e9",
		want: []string{"e9d10", "e9d9", "e9e10", "e9f10", "e9f9"},
	},
	{
		name: "janggi soldier in enemy palace corner moves diagonally to centre", variant: Janggi, side: "w",
		pieces: []string{"Pd8", "Ke2", "kf10"}, from: "d8",
		want: []string{"d8c8", "d8d9", "d8e8", "d8e9"},
	},
	{
		name: "janggi second soldier in enemy palace", variant: Janggi, side: "b",
		pieces: []string{"pf3", "Kd1", "ke9"}, from: "f3",
		want: []string{"f3e2", "f3e3", "f3f2", "f3g3"},
	},
	{
		name: "janggi soldier has no diagonal in its own palace", variant: Janggi, side: "w",
		pieces: []string{"Pd1", "Kf2", "ke9"}, from: "d1",
		want:    []string{"d1c1", "d1d2", "d1e1"},
		reasons: map[string]string{"d1e2": "the soldier cannot move like that"},
	},
	{
		name: "janggi soldier outside the palace has no diagonal", variant: Janggi, side: "w",
		pieces: []string{"Pd7", "Ke2", "kf10"}, from: "d7",
		want: []string{"d7c7", "d7d8", "d7e7"},
	},
	// Janggi check, passing, pins.
	{
		name: "janggi pass refused in check", variant: Janggi, side: "w",
		pieces: []string{"Ke2", "re7", "ke9"}, from: "",
		want: []string{"e2d1", "e2d2", "e2d3", "e2f1", "e2f2", "e2f3"},
		reasons: map[string]string{
			"e2e2": "cannot pass while in check",
			"e2e3": "leaves the general in check from the chariot on e7",
		},
	},
	{
		name: "janggi pass allowed when not in check", variant: Janggi, side: "b",
		pieces: []string{"Ke2", "ke9", "pa7"}, from: "",
		want:    []string{"a7a6", "a7b7", "e9d10", "e9d8", "e9d9", "e9e10", "e9e8", "e9e9", "e9f10", "e9f8", "e9f9"},
		reasons: map[string]string{"a7a7": "a pass is the general's square twice, but a7 holds the soldier"},
	},
	{
		name: "janggi chariot pinned on the file", variant: Janggi, side: "w",
		pieces: []string{"Ke2", "Re4", "re7", "ke9"}, from: "e4",
		want:    []string{"e4e3", "e4e5", "e4e6", "e4e7"},
		reasons: map[string]string{"e4d4": "leaves the general in check from the chariot on e7"},
	},
	{
		name: "janggi piece may not become a cannon's screen", variant: Janggi, side: "w",
		pieces: []string{"Ke2", "Nc4", "ce7", "ke9"}, from: "c4",
		want:    []string{"c4a3", "c4a5", "c4b2", "c4b6", "c4d2", "c4d6"},
		reasons: map[string]string{"c4e5": "leaves the general in check from the cannon on e7"},
	},
	{
		name: "janggi facing generals are legal", variant: Janggi, side: "w",
		pieces: []string{"Ke2", "Pe5", "ke9"}, from: "e5",
		want: []string{"e5d5", "e5e6", "e5f5"},
	},
	{
		name: "janggi move rules for whose turn and empty squares", variant: Janggi, side: "w",
		pieces: []string{"Ke2", "ke9", "pa7"}, from: "a7",
		want: nil,
		reasons: map[string]string{
			"a7a6": "the soldier on a7 belongs to the opponent: Cho is to move",
			"b7b6": "there is no piece on b7",
			// A pass sent with the other side's general, as a client that
			// takes e2e2 for "the pass" does: the message names the right one.
			"e9e9": "e9 holds Han's general: Cho passes with its own general's square twice, e2e2",
		},
	},

	// Xiangqi.
	{
		name: "xiangqi general moves orthogonally only", variant: Xiangqi, side: "w",
		pieces: []string{"Ke2", "Pe5", "ke10"}, from: "e2",
		want:    []string{"e2d2", "e2e1", "e2e3", "e2f2"},
		reasons: map[string]string{"e2d1": "the general cannot move like that", "e2e2": "passing is not allowed in xiangqi"},
	},
	{
		name: "xiangqi advisor moves diagonally in the palace", variant: Xiangqi, side: "w",
		pieces: []string{"Kf1", "Ae2", "kd10"}, from: "e2",
		want:    []string{"e2d1", "e2d3", "e2f3"},
		reasons: map[string]string{"e2e3": "the advisor cannot move like that"},
	},
	{
		name: "xiangqi advisor in palace corner", variant: Xiangqi, side: "w",
		pieces: []string{"Kf1", "Ad3", "kd10"}, from: "d3",
		want:    []string{"d3e2"},
		reasons: map[string]string{"d3c4": "the advisor cannot leave its palace"},
	},
	{
		name: "xiangqi flying general pins a piece on the file", variant: Xiangqi, side: "w",
		pieces: []string{"Ke1", "Ce5", "ke10"}, from: "e5",
		want:    []string{"e5e2", "e5e3", "e5e4", "e5e6", "e5e7", "e5e8", "e5e9"},
		reasons: map[string]string{"e5d5": "the generals would face each other on the e-file"},
	},
	{
		name: "xiangqi general may not step onto the other general's open file", variant: Xiangqi, side: "w",
		pieces: []string{"Ke1", "kd10"}, from: "e1",
		want:    []string{"e1e2", "e1f1"},
		reasons: map[string]string{"e1d1": "the generals would face each other on the d-file"},
	},
	{
		name: "xiangqi chariot has no palace diagonal", variant: Xiangqi, side: "w",
		pieces: []string{"Bc1", "Rd1", "Ke1", "Pd2", "kd10"}, from: "d1",
		want:    nil,
		reasons: map[string]string{"d1e2": "the chariot cannot move like that (it moves along a file or a rank)"},
	},
	{
		name: "xiangqi cannon moves like a chariot and captures over one screen", variant: Xiangqi, side: "w",
		pieces: []string{"Cb3", "pb5", "nb8", "Ke1", "kd10"}, from: "b3",
		want: []string{"b3a3", "b3b1", "b3b2", "b3b4", "b3b8", "b3c3", "b3d3", "b3e3", "b3f3", "b3g3", "b3h3", "b3i3"},
		reasons: map[string]string{
			"b3b6": "the cannon's path is blocked at b5",
			"b3b5": "the cannon needs a screen to capture",
		},
	},
	{
		name: "xiangqi cannon jumps a cannon to capture a cannon", variant: Xiangqi, side: "w",
		pieces: []string{"Cb3", "cb5", "cb8", "Pa3", "Pc3", "Pb2", "Ke1", "kd10"}, from: "b3",
		want: []string{"b3b4", "b3b8"},
	},
	{
		name: "xiangqi horse is blocked at its leg", variant: Xiangqi, side: "w",
		pieces: []string{"Ne5", "Pe6", "Ke1", "kd10"}, from: "e5",
		want:    []string{"e5c4", "e5c6", "e5d3", "e5f3", "e5g4", "e5g6"},
		reasons: map[string]string{"e5f7": "the horse is blocked at e6"},
	},
	{
		name: "xiangqi elephant is blocked at its eye and stops at the river", variant: Xiangqi, side: "w",
		pieces: []string{"Bc5", "Pd4", "Ke1", "kd10"}, from: "c5",
		want: []string{"c5a3"},
		reasons: map[string]string{
			"c5e7": "the elephant cannot cross the river",
			"c5e3": "the elephant is blocked at d4",
			"c5e4": "the elephant cannot move like that",
		},
	},
	{
		name: "xiangqi second elephant at the river", variant: Xiangqi, side: "b",
		pieces: []string{"bg6", "Ke1", "kd10"}, from: "g6",
		want: []string{"g6e8", "g6i8"},
	},
	{
		name: "xiangqi soldier before the river moves only forward", variant: Xiangqi, side: "w",
		pieces: []string{"Pc4", "Ke1", "kd10"}, from: "c4",
		want: []string{"c4c5"},
		reasons: map[string]string{
			"c4b4": "the soldier cannot move sideways before crossing the river",
			"c4c3": "the soldier cannot move backward",
		},
	},
	{
		name: "xiangqi soldier on the river bank still moves only forward", variant: Xiangqi, side: "w",
		pieces: []string{"Pc5", "Ke1", "kd10"}, from: "c5",
		want: []string{"c5c6"},
	},
	{
		name: "xiangqi soldier across the river also moves sideways", variant: Xiangqi, side: "w",
		pieces: []string{"Pc6", "Ke1", "kd10"}, from: "c6",
		want: []string{"c6b6", "c6c7", "c6d6"},
	},
	{
		name: "xiangqi second soldier across the river", variant: Xiangqi, side: "b",
		pieces: []string{"pc5", "pg7", "Ke1", "kd10"}, from: "c5",
		want: []string{"c5b5", "c5c4", "c5d5"},
	},
	{
		name: "xiangqi second soldier before the river", variant: Xiangqi, side: "b",
		pieces: []string{"pc5", "pg6", "Ke1", "kd10"}, from: "g6",
		want: []string{"g6g5"},
	},
	{
		name: "xiangqi soldier on the last rank moves only sideways", variant: Xiangqi, side: "w",
		pieces: []string{"Pa10", "Ke1", "kd10"}, from: "a10",
		want: []string{"a10b10"},
	},
	{
		name: "xiangqi soldier has no palace diagonal", variant: Xiangqi, side: "w",
		pieces: []string{"Pd8", "Ke1", "kf10"}, from: "d8",
		want: []string{"d8c8", "d8d9", "d8e8"},
	},
}

func TestMovementRules(t *testing.T) {
	for _, tt := range ruleTests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFEN(t, tt.variant, placeFEN(t, tt.side, tt.pieces...))
			got := legalFrom(t, p, tt.from)
			if !slices.Equal(got, tt.want) {
				t.Errorf("legal moves from %q:\n got %v\nwant %v", tt.from, got, tt.want)
			}
			if ref := toRef(p).legal(); !slices.Equal(moveStrings(p.LegalMoves(nil)), ref) {
				t.Errorf("reference generator disagrees: %v", ref)
			}
			for _, w := range tt.want {
				if err := p.CheckMove(mustParseMove(t, w)); err != nil {
					t.Errorf("CheckMove(%s) = %v, want nil", w, err)
				}
			}
			for mv, reason := range tt.reasons {
				err := p.CheckMove(mustParseMove(t, mv))
				if !errors.Is(err, ErrIllegalMove) || !strings.Contains(err.Error(), reason) {
					t.Errorf("CheckMove(%s) = %v, want an ErrIllegalMove containing %q", mv, err, reason)
				}
				if !strings.HasPrefix(err.Error(), "move "+mv+": ") {
					t.Errorf("CheckMove(%s) = %q does not name the move", mv, err)
				}
			}
		})
	}
}

func mustParseMove(tb testing.TB, s string) Move {
	tb.Helper()
	m, err := ParseMove(s)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestCheckAndFacing(t *testing.T) {
	tests := []struct {
		name        string
		variant     Variant
		side        string
		pieces      []string
		wantCheck   bool
		wantFacing  bool
		wantNoMoves bool
	}{
		{"janggi facing generals are not check", Janggi, "b", []string{"Ke2", "ke9"}, false, true, false},
		{"janggi chariot gives check", Janggi, "w", []string{"Ke2", "re7", "ke9"}, true, false, false},
		{"janggi cannon over a general screen gives check", Janggi, "b", []string{"Kd1", "Ce2", "Cf3", "kf8", "Pd10", "ae9"}, false, false, false},
		{"janggi cannon on palace diagonal gives check", Janggi, "b", []string{"Ke1", "Cf8", "ae9", "kd10"}, true, false, false},
		{"janggi soldier gives check diagonally in the palace", Janggi, "b", []string{"Ke2", "Pe9", "kd10"}, true, false, false},
		{"janggi checkmate has no moves and no pass", Janggi, "w", []string{"Kd1", "rd5", "re5", "ke9"}, true, false, true},
		{"xiangqi cannon over a cannon gives check", Xiangqi, "w", []string{"Ke1", "ce3", "ce6", "kd10"}, true, false, false},
		{"xiangqi stalemate has no moves", Xiangqi, "b", []string{"Ke1", "Ra9", "kd10"}, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFEN(t, tt.variant, placeFEN(t, tt.side, tt.pieces...))
			if got := p.InCheck(); got != tt.wantCheck {
				t.Errorf("InCheck() = %v, want %v", got, tt.wantCheck)
			}
			if got := p.GeneralsFacing(); got != tt.wantFacing {
				t.Errorf("GeneralsFacing() = %v, want %v", got, tt.wantFacing)
			}
			if got := len(p.LegalMoves(nil)) == 0; got != tt.wantNoMoves {
				t.Errorf("no legal moves = %v, want %v (moves %v)", got, tt.wantNoMoves, moveStrings(p.LegalMoves(nil)))
			}
		})
	}
}

func TestFormationMirrorForHan(t *testing.T) {
	want := map[Formation][2]string{
		MaSangSangMa: {"RNBA1ABNR", "rnba1abnr"},
		SangMaSangMa: {"RBNA1ABNR", "rnba1anbr"},
		MaSangMaSang: {"RNBA1ANBR", "rbna1abnr"},
		SangMaMaSang: {"RBNA1ANBR", "rbna1anbr"},
	}
	for cho := MaSangSangMa; cho <= SangMaMaSang; cho++ {
		for han := MaSangSangMa; han <= SangMaMaSang; han++ {
			fen := JanggiStartFEN(cho, han)
			board := strings.Fields(fen)[0]
			ranks := strings.Split(board, "/")
			if ranks[9] != want[cho][0] || ranks[0] != want[han][1] {
				t.Errorf("JanggiStartFEN(%v, %v) back ranks %s / %s, want %s / %s", cho, han, ranks[9], ranks[0], want[cho][0], want[han][1])
			}
			p := mustFEN(t, Janggi, fen)
			if got := p.FEN(); got != fen {
				t.Errorf("FEN round trip %q -> %q", fen, got)
			}
		}
	}
	// Han's sang-ma-sang-ma, seen from Han's side (its left is the i-file):
	// elephant on h10, horse on g10, so the g10 horse is hemmed in by the
	// guard on f10 and the elephant on h10.
	fen := strings.Replace(JanggiStartFEN(MaSangSangMa, SangMaSangMa), " w ", " b ", 1)
	p := mustFEN(t, Janggi, fen)
	for from, want := range map[string][]string{
		"g10": {"g10f8"}, // h8 holds Han's own cannon
		"h10": {"h10f7"},
		"b10": {"b10a8", "b10c8"},
		"c10": nil, // a7 and e7 hold soldiers, f8 is blocked at d10
	} {
		if got := legalFrom(t, p, from); !slices.Equal(got, want) {
			t.Errorf("Han sang-ma-sang-ma moves from %s: got %v, want %v", from, got, want)
		}
	}
	if got, want := StartFEN(Janggi), "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 0 1"; got != want {
		t.Errorf("StartFEN(Janggi) = %q, want %q", got, want)
	}
	if got := JanggiStartFEN(0, MaSangSangMa); got != "" {
		t.Errorf("JanggiStartFEN with an invalid formation = %q, want \"\"", got)
	}
}

func TestParseFormation(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Formation
		wantErr bool
	}{
		{"canonical", "sang-ma-ma-sang", SangMaMaSang, false},
		{"upper case without hyphens", "MaSangMaSang", MaSangMaSang, false},
		{"hanja", "象馬象馬", SangMaSangMa, false},
		{"hangul", "마상상마", MaSangSangMa, false},
		{"unknown", "ma-ma-sang-sang", 0, true},
		{"empty", "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFormation(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseFormation(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
			if err == nil && got.String() != tt.want.String() {
				t.Errorf("String mismatch")
			}
		})
	}
}

// TestAgainstReference compares the fast generator, the attack test and
// CheckMove with the plain reference implementation on positions from
// random games.
func TestAgainstReference(t *testing.T) {
	games, plies := 6, 120
	if testing.Short() {
		games, plies = 2, 60
	}
	for i, sp := range startPositions() {
		for g := 0; g < games; g++ {
			n := 0
			randomGame(t, sp.v, sp.fen, uint64(i*1000+g), plies, func(p *Position) {
				n++
				comparePosition(t, p, n%10 == 0)
			})
			if t.Failed() {
				return
			}
		}
	}
}

func comparePosition(tb testing.TB, p *Position, allPairs bool) {
	tb.Helper()
	rp := toRef(p)
	got := moveStrings(p.LegalMoves(nil))
	if want := rp.legal(); !slices.Equal(got, want) {
		tb.Fatalf("%s: LegalMoves\n got %v\nwant %v", p.FEN(), got, want)
	}
	if got, want := p.InCheck(), rp.inCheck(); got != want {
		tb.Fatalf("%s: InCheck = %v, reference %v", p.FEN(), got, want)
	}
	for sq := 0; sq < NumSquares; sq++ {
		for by := First; by <= Second; by++ {
			if got, want := p.IsAttacked(Square(sq), by), rp.attacked(sq, by); got != want {
				tb.Fatalf("%s: IsAttacked(%v, %v) = %v, reference %v", p.FEN(), Square(sq), by, got, want)
			}
		}
	}
	if !allPairs {
		return
	}
	legal := map[Move]bool{}
	for _, m := range p.LegalMoves(nil) {
		legal[m] = true
	}
	for from := 0; from < NumSquares; from++ {
		for to := 0; to < NumSquares; to++ {
			m := mkMove(from, to)
			err := p.CheckMove(m)
			if (err == nil) != legal[m] {
				tb.Fatalf("%s: CheckMove(%v) = %v but legal = %v", p.FEN(), m, err, legal[m])
			}
			if err != nil && !errors.Is(err, ErrIllegalMove) {
				tb.Fatalf("CheckMove(%v) error %v does not wrap ErrIllegalMove", m, err)
			}
		}
	}
	if err := p.CheckMove(NoMove); !errors.Is(err, ErrIllegalMove) {
		tb.Fatalf("CheckMove(NoMove) = %v", err)
	}
}

// randomPlacement builds a random position that ParseFEN may accept: pieces
// are dropped at random, often into the palaces, so the palace rules and
// unusual screens get exercised more than in games from the start.
func randomPlacement(rng *rand.Rand, v Variant) string {
	var board [NumSquares]Piece
	palaceSquares := func(s Side) []int {
		var out []int
		for sq := 0; sq < NumSquares; sq++ {
			if palaceOf(sq) == int(s) {
				out = append(out, sq)
			}
		}
		return out
	}
	place := func(pc Piece, choices []int) {
		for tries := 0; tries < 20; tries++ {
			sq := choices[rng.IntN(len(choices))]
			if board[sq] == NoPiece {
				board[sq] = pc
				return
			}
		}
	}
	all := make([]int, NumSquares)
	for i := range all {
		all[i] = i
	}
	palaces := append(palaceSquares(First), palaceSquares(Second)...)
	for s := First; s <= Second; s++ {
		var half []int
		for sq := 0; sq < NumSquares; sq++ {
			if ownHalf(s, sq) {
				half = append(half, sq)
			}
		}
		place(mkPiece(s, General), palaceSquares(s))
		for k := Guard; k <= Soldier; k++ {
			for n := rng.IntN(maxPerKind[k] + 1); n > 0; n-- {
				choices := all
				switch {
				case k == Guard:
					choices = palaceSquares(s)
				case k == Elephant && v == Xiangqi:
					choices = half
				case rng.IntN(3) == 0:
					choices = palaces
				}
				place(mkPiece(s, k), choices)
			}
		}
	}
	p := &Position{}
	p.board = board
	if rng.IntN(2) == 1 {
		p.turn = Second
	}
	p.fullmove = 1
	return p.FEN()
}

func TestRandomPositionsAgainstReference(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 500
	}
	rng := rand.New(rand.NewPCG(1, 2))
	valid := 0
	for i := 0; i < n; i++ {
		v := Janggi
		if i%2 == 1 {
			v = Xiangqi
		}
		fen := randomPlacement(rng, v)
		p, err := ParseFEN(v, fen)
		if err != nil {
			continue
		}
		valid++
		comparePosition(t, p, i%20 == 0)
		checkMakeUnmake(t, p)
	}
	t.Logf("%d of %d random placements valid", valid, n)
	if valid < n/4 {
		t.Errorf("only %d of %d random placements were valid", valid, n)
	}
}
