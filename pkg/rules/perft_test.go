package rules

import (
	"context"
	"errors"
	"testing"
)

var perftTests = []struct {
	name    string
	variant Variant
	fen     string
	want    []uint64 // want[d-1] is perft(d)
}{
	{"janggi start", Janggi, StartFEN(Janggi), []uint64{32, 1024, 33316, 1083563, 36282067}},
	{"janggi middlegame", Janggi, "1n1kaabn1/cr2N4/5C1c1/p1pNp3p/9/9/P1PbP1P1P/3r1p3/4A4/R1BA1KB1R b - - 0 1", []uint64{2, 61, 2644, 76763}},
	{"janggi endgame", Janggi, "1Pbcka3/3nNn1c1/N2CaC3/1pB6/9/9/5P3/9/4K4/9 w - - 0 23", []uint64{25, 378, 8835, 151825}},
	{"xiangqi start", Xiangqi, StartFEN(Xiangqi), []uint64{44, 1920, 79666, 3290240, 133312995}},
	{"xiangqi middlegame", Xiangqi, "1rbaka2R/5r3/6n2/2p1p1p2/4P1bP1/PpC3Bc1/1nPR2P2/2N2AN2/1c2K1p2/2BAC4 w - - 0 1", []uint64{49, 2265, 100326, 4485547}},
	{"xiangqi endgame", Xiangqi, "4kcP1N/8n/3rb4/9/9/9/9/3p1A3/4K4/5CB2 w - - 0 1", []uint64{13, 272, 3707, 92741}},
}

func TestPerft(t *testing.T) {
	for _, tt := range perftTests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFEN(t, tt.variant, tt.fen)
			for d, want := range tt.want {
				depth := d + 1
				if depth >= 5 && testing.Short() {
					t.Skipf("depth %d skipped in -short mode", depth)
				}
				if got := Perft(p, depth); got != want {
					t.Errorf("perft(%d) = %d, want %d", depth, got, want)
				}
			}
		})
	}
}

func mustFEN(tb testing.TB, v Variant, fen string) *Position {
	tb.Helper()
	p, err := ParseFEN(v, fen)
	if err != nil {
		tb.Fatalf("ParseFEN(%v, %q): %v", v, fen, err)
	}
	return p
}

// TestDivideEach: its counts add up to Perft's, and an ended context stops
// it with the context's error.
func TestDivideEach(t *testing.T) {
	p := mustFEN(t, Janggi, StartFEN(Janggi))
	var sum uint64
	if err := DivideEach(context.Background(), p, 3, func(_ Move, n uint64) { sum += n }); err != nil || sum != Perft(p, 3) {
		t.Fatalf("DivideEach: %d, %v; Perft %d", sum, err, Perft(p, 3))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := DivideEach(ctx, p, 6, func(Move, uint64) {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("DivideEach with an ended context: %v", err)
	}
}
