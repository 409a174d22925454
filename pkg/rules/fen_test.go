package rules

import (
	"errors"
	"strings"
	"testing"
)

func TestFENRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		variant Variant
		fen     string
	}{
		{"xiangqi start", Xiangqi, StartFEN(Xiangqi)},
		{"janggi start", Janggi, StartFEN(Janggi)},
		{"janggi mixed formations", Janggi, JanggiStartFEN(SangMaMaSang, MaSangMaSang)},
		{"second to move with counters", Janggi, "1n1kaabn1/cr2N4/5C1c1/p1pNp3p/9/9/P1PbP1P1P/3r1p3/4A4/R1BA1KB1R b - - 17 42"},
		{"sparse board", Janggi, "1Pbcka3/3nNn1c1/N2CaC3/1pB6/9/9/5P3/9/4K4/9 w - - 0 23"},
		{"xiangqi middlegame", Xiangqi, "1rbaka2R/5r3/6n2/2p1p1p2/4P1bP1/PpC3Bc1/1nPR2P2/2N2AN2/1c2K1p2/2BAC4 w - - 0 1"},
		{"large counters", Xiangqi, "4kcP1N/8n/3rb4/9/9/9/9/3p1A3/4K4/5CB2 w - - 2147483647 2147483647"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFEN(t, tt.variant, tt.fen)
			if got := p.FEN(); got != tt.fen {
				t.Errorf("FEN() = %q, want %q", got, tt.fen)
			}
			if p.Hash() != p.computeHash() {
				t.Errorf("Hash() differs from a fresh computation")
			}
		})
	}
}

func TestFENNormalises(t *testing.T) {
	tests := []struct {
		name    string
		variant Variant
		in      string
		want    string
	}{
		{"e and h letters", Xiangqi, "rheakaehr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RHEAKAEHR w - - 0 1", StartFEN(Xiangqi)},
		{"counters omitted", Janggi, "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w", StartFEN(Janggi)},
		{"fullmove 0 is read as 1", Janggi, strings.Replace(StartFEN(Janggi), "- 0 1", "- 0 0", 1), StartFEN(Janggi)},
		{"xiangqi fullmove 0 with Black to move", Xiangqi, "4k4/9/9/9/9/9/9/9/9/3K5 b - - 7 0", "4k4/9/9/9/9/9/9/9/9/3K5 b - - 7 1"},
		{"halfmove only", Janggi, "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 3", strings.Replace(StartFEN(Janggi), "- 0 1", "- 3 1", 1)},
		{"red as r and extra spaces", Xiangqi, "  rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR   r - -  0 1 ", StartFEN(Xiangqi)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustFEN(t, tt.variant, tt.in).FEN(); got != tt.want {
				t.Errorf("FEN() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBadFEN(t *testing.T) {
	const (
		jrest = "/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 0 1"
		xrest = "/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 0 1"
	)
	tests := []struct {
		name    string
		variant Variant
		fen     string
		want    string // substring of the error
	}{
		{"empty", Janggi, "", "empty FEN"},
		{"unknown variant", Variant(7), StartFEN(Janggi), "unknown variant"},
		{"no side to move", Janggi, "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR", "missing side to move"},
		{"nine ranks", Janggi, "4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 0 1", "board has 9 ranks, want 10"},
		{"eleven ranks", Janggi, "9/rnba1abnr" + jrest, "board has 11 ranks"},
		{"short rank", Janggi, "rnba1abnr/4k4/1c5c1/p1p1p1p1/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 0 1", `rank 7 ("p1p1p1p1") has 8 files, want 9`},
		{"long rank by digit", Janggi, "rnba1abnr/4k5/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 0 1", `rank 9 ("4k5") has more than 9 files`},
		{"long rank by piece", Janggi, "rnba1abnrr" + jrest, `rank 10 ("rnba1abnrr") has more than 9 files`},
		{"empty rank", Janggi, "rnba1abnr//1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 0 1", `rank 9 ("") has 0 files`},
		{"unknown letter", Janggi, "rnbx1abnr" + jrest, `rank 10 ("rnbx1abnr"): unknown character 'x' at position 4`},
		{"zero digit", Janggi, "rnba0abnr" + jrest, "unknown character '0'"},
		{"a character of several bytes", Janggi, "rnbⅸ1abnr" + jrest, "unknown character 'ⅸ' at position 4"},
		{"two digits", Janggi, "rnba1abnr/4k4/1c5c1/p1p1p1p1p/45/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 0 1", `rank 6 ("45"): two digits in a row`},
		{"missing Cho general", Janggi, "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBA1ABNR w - - 0 1", "missing Cho general (K)"},
		{"missing Black general", Xiangqi, "rnba1abnr" + xrest, "missing Black general (k)"},
		{"two generals", Janggi, "rnbakabnr" + jrest, "Han has two generals (k)"},
		{"general outside palace", Janggi, "rnba1abnr/9/1c5c1/p1p1p1p1p/4k4/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 0 1", "Han general (k) on e6 is outside its palace (d8-f10)"},
		{"guard outside palace", Janggi, "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNAA2BNR w - - 0 1", "Cho guard (A) on c1 is outside its palace (d1-f3)"},
		{"guard far outside palace", Janggi, "anb2abnr" + jrest, "Han guard (a) on a10 is outside its palace (d8-f10)"},
		{"advisor outside palace", Xiangqi, "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKBANR w - - 0 1", "Red advisor (A) on g1 is outside its palace"},
		{"xiangqi elephant across the river", Xiangqi, "rn1akabnr/9/1c5c1/p1p1p1p1p/9/2b6/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 0 1", "Black elephant (b) on c5 is across the river"},
		{"too many soldiers", Janggi, "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/P8/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 0 1", "Cho has more than 5 soldiers (P)"},
		{"three chariots", Xiangqi, "rnbakabnr/r8/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 0 1", "Black has more than 2 chariots (r)"},
		{"bad side", Janggi, strings.Replace(StartFEN(Janggi), " w ", " x ", 1), `side to move "x", want w or b`},
		{"castling field", Janggi, strings.Replace(StartFEN(Janggi), " w - - ", " w KQ - ", 1), `castling field "KQ"`},
		{"en passant field", Janggi, strings.Replace(StartFEN(Janggi), " w - - ", " w - e3 ", 1), `en passant field "e3"`},
		{"negative halfmove", Janggi, strings.Replace(StartFEN(Janggi), "- 0 1", "- -1 1", 1), `halfmove clock "-1"`},
		{"huge halfmove", Janggi, strings.Replace(StartFEN(Janggi), "- 0 1", "- 99999999999 1", 1), `halfmove clock "99999999999"`},
		{"negative fullmove", Janggi, strings.Replace(StartFEN(Janggi), "- 0 1", "- 0 -1", 1), `fullmove number "-1"`},
		{"text fullmove", Janggi, strings.Replace(StartFEN(Janggi), "- 0 1", "- 0 x", 1), `fullmove number "x"`},
		{"seven fields", Janggi, StartFEN(Janggi) + " 5", "7 fields, want at most 6"},
		{"side not to move in check", Janggi, "4k4/9/4R4/9/9/9/9/9/4K4/9 w - - 0 1", "the side not to move (Han) is in check: its general on e10 is attacked"},
		{"xiangqi generals facing", Xiangqi, "4k4/9/9/9/9/9/9/9/9/4K4 w - - 0 1", "the generals face each other on the e-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseFEN(tt.variant, tt.fen)
			if err == nil {
				t.Fatalf("ParseFEN(%q) = %v, want an error containing %q", tt.fen, p.FEN(), tt.want)
			}
			if !errors.Is(err, ErrBadFEN) {
				t.Errorf("error %v does not wrap ErrBadFEN", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestJanggiFacingGeneralsAreAValidFEN(t *testing.T) {
	p := mustFEN(t, Janggi, "4k4/9/9/9/9/9/9/9/9/4K4 w - - 0 1")
	if !p.GeneralsFacing() || p.InCheck() {
		t.Errorf("GeneralsFacing = %v, InCheck = %v; want true, false", p.GeneralsFacing(), p.InCheck())
	}
}

func TestPoints(t *testing.T) {
	tests := []struct {
		name    string
		variant Variant
		fen     string
		want    [2]float64
	}{
		{"janggi start", Janggi, StartFEN(Janggi), [2]float64{72, 73.5}},
		{"janggi bare generals", Janggi, "4k4/9/9/9/9/9/9/9/9/4K4 w - - 0 1", [2]float64{0, 1.5}},
		{"xiangqi has no compensation", Xiangqi, StartFEN(Xiangqi), [2]float64{72, 72}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFEN(t, tt.variant, tt.fen)
			for s := First; s <= Second; s++ {
				if got := p.Points(s); got != tt.want[s] {
					t.Errorf("Points(%v) = %v, want %v", s, got, tt.want[s])
				}
			}
		})
	}
}

// TestReachable: a piece on a point no game can bring it to is named;
// every point that a game can is accepted, for both games.
func TestReachable(t *testing.T) {
	for _, tt := range []struct {
		variant Variant
		fen     string
		want    string // "" for a reachable position, else a substring of the error
	}{
		{Xiangqi, StartFEN(Xiangqi), ""},
		{Janggi, StartFEN(Janggi), ""},
		// Advisors on all five palace points, elephants on all seven.
		{Xiangqi, "4k4/4a4/b4a2b/9/9/9/9/B2AB4/4A4/4K4 w - - 0 1", ""},
		{Xiangqi, "3k5/9/3a5/9/2b3b2/2B3B2/9/5A3/9/4K4 w - - 0 1", ""},
		{Xiangqi, "4k4/9/4b4/9/9/9/9/8B/9/4K4 w - - 0 1", ""},
		// Soldiers across the river go sideways: any file.
		{Xiangqi, "3k5/9/9/1P7/9/9/7p1/9/9/4K4 w - - 0 1", ""},
		{Janggi, "3k5/9/9/1p7/9/9/7P1/9/4K4/9 w - - 0 1", ""},
		{Xiangqi, "3k5/9/9/9/9/9/9/4A4/9/R3K4 w - - 0 1", "Red advisor (A) on e3 is off the palace's diagonals"},
		{Xiangqi, "3k5/9/9/9/9/9/9/9/3B5/R3K4 w - - 0 1", "Red elephant (B) on d2 is off the seven points"},
		{Xiangqi, "3k5/9/9/9/9/9/9/P8/9/R3K4 w - - 0 1", "Red soldier (P) on a3 is behind the rank soldiers start on"},
		{Xiangqi, "3k5/9/9/9/9/9/1P7/9/9/R3K4 w - - 0 1", "Red soldier (P) on b4 is on a file soldiers keep to"},
		{Xiangqi, "3k5/9/2p6/9/9/9/9/9/9/R3K4 w - - 0 1", "Black soldier (p) on c8 is behind"},
		{Xiangqi, "3k5/9/9/1p7/9/9/9/9/9/R3K4 w - - 0 1", "Black soldier (p) on b7 is on a file"},
		{Xiangqi, "3k5/9/9/9/9/P8/P8/9/9/4K4 w - - 0 1", "Red soldiers (P) on a5 and a4 share a file before the river"},
		{Xiangqi, "3k5/9/9/4p4/4p4/9/9/9/9/4K4 w - - 0 1", "Black soldiers (p) on e7 and e6 share a file"},
		// Across the river they do not keep to their files.
		{Xiangqi, "3k5/9/9/P8/P8/9/9/9/9/4K4 w - - 0 1", ""},
		{Janggi, "3k5/9/9/9/9/9/9/P8/4K4/9 w - - 0 1", "Cho soldier (P) on a3 is behind"},
		{Janggi, "3k5/8p/9/9/9/9/9/9/4K4/9 w - - 0 1", "Han soldier (p) on i9 is behind"},
	} {
		p, err := ParseFEN(tt.variant, tt.fen)
		if err != nil {
			t.Fatalf("ParseFEN(%v, %q): %v", tt.variant, tt.fen, err)
		}
		err = p.Reachable()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v %s: %v, want it reachable", tt.variant, tt.fen, err)
		case tt.want != "" && (err == nil || !errors.Is(err, ErrBadFEN) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v %s: %v, want an error containing %q", tt.variant, tt.fen, err, tt.want)
		}
	}
}
