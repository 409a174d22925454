package rules

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// Positions with tandem pieces, which random play from the start rarely
// reaches, for the notation tests and fuzz seeds.
var (
	xiangqiTandemFENs = []string{
		"4k4/9/9/9/9/R8/9/9/9/R2K5 w - - 0 1",          // two red chariots on the a-file
		"r3k4/9/9/9/r8/9/9/9/9/3K5 b - - 0 1",          // two black chariots on the a-file
		"3k5/9/4P4/4P4/4P4/9/9/9/9/4K4 w - - 0 1",      // three red soldiers on the e-file
		"3k5/9/9/2P3P2/2P3P2/9/9/9/9/4K4 w - - 0 1",    // two files with two soldiers each
		"3k5/9/9/2P6/2P3P2/9/9/9/9/4K4 w - - 0 1",      // one pair of soldiers
		"4k4/9/9/9/9/4p4/4p4/9/9/3K5 b - - 0 1",        // two black soldiers on the e-file
		"4k4/9/9/9/9/9/9/5A3/9/3K1A3 w - - 0 1",        // two red advisors on the f-file
		"2bk1P3/5P3/5P3/5P3/5P3/9/9/9/9/4K4 w - - 0 1", // five soldiers on one file
		"r1bak4/4a4/2n1b1n2/p1p3p1p/4c4/2P1C1P2/P2R4P/1CN1B1N2/4A4/2B1KA3 w - - 0 1",
	}
	janggiFENs = []string{
		"1n1kaabn1/cr2N4/5C1c1/p1pNp3p/9/9/P1PbP1P1P/3r1p3/4A4/R1BA1KB1R b - - 0 1",
		"1Pbcka3/3nNn1c1/N2CaC3/1pB6/9/9/5P3/9/4K4/9 w - - 0 23",
		"4k4/9/3P1P3/9/9/9/9/9/4K4/9 w - - 0 1", // soldiers in the enemy palace
	}
)

func TestWXF(t *testing.T) {
	start := StartFEN(Xiangqi)
	afterC25 := "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR b - - 1 1"
	tests := []struct {
		name string
		fen  string
		move string
		want string
	}{
		{"central cannon", start, "h3e3", "C2.5"},
		{"right horse", start, "h1g3", "H2+3"},
		{"left horse", start, "b1c3", "H8+7"},
		{"chariot forward", start, "a1a2", "R9+1"},
		{"soldier", start, "c4c5", "P7+1"},
		{"elephant", start, "g1e3", "E3+5"},
		{"advisor", start, "f1e2", "A4+5"},
		{"general", start, "e1e2", "K5+1"},
		{"cannon takes horse", start, "b3b10", "C8+7"},
		{"black horse", afterC25, "b10c8", "H2+3"},
		{"black horse on the right", afterC25, "h10g8", "H8+7"},
		{"black cannon across", afterC25, "h8e8", "C8.5"},
		{"black cannon back", afterC25, "h8h9", "C8-1"},
		{"black soldier", afterC25, "a7a6", "P1+1"},
		{"black advisor", afterC25, "d10e9", "A4+5"},
		{"black elephant", afterC25, "c10e8", "E3+5"},
		{"front chariot across", xiangqiTandemFENs[0], "a5b5", "R+.8"},
		{"rear chariot across", xiangqiTandemFENs[0], "a1b1", "R-.8"},
		{"front chariot forward", xiangqiTandemFENs[0], "a5a9", "R++4"},
		{"rear chariot forward", xiangqiTandemFENs[0], "a1a4", "R-+3"},
		{"black front chariot", xiangqiTandemFENs[1], "a6b6", "R+.2"},
		{"black rear chariot", xiangqiTandemFENs[1], "a10b10", "R-.2"},
		{"black front chariot forward", xiangqiTandemFENs[1], "a6a5", "R++1"},
		{"first of three soldiers", xiangqiTandemFENs[2], "e8d8", "15.6"},
		{"second of three soldiers", xiangqiTandemFENs[2], "e7d7", "25.6"},
		{"third of three soldiers", xiangqiTandemFENs[2], "e6f6", "35.4"},
		{"front of three soldiers forward", xiangqiTandemFENs[2], "e8e9", "15+1"},
		{"front soldier of two pairs", xiangqiTandemFENs[3], "c7c8", "17+1"},
		{"rear soldier of two pairs", xiangqiTandemFENs[3], "c6b6", "27.8"},
		{"other pair, front", xiangqiTandemFENs[3], "g7h7", "13.2"},
		{"other pair, rear", xiangqiTandemFENs[3], "g6f6", "23.4"},
		{"one pair: front", xiangqiTandemFENs[4], "c7c8", "P++1"},
		{"one pair: rear", xiangqiTandemFENs[4], "c6b6", "P-.8"},
		{"one pair: single soldier", xiangqiTandemFENs[4], "g6g7", "P3+1"},
		{"black pair: front", xiangqiTandemFENs[5], "e4e3", "P++1"},
		{"black pair: rear", xiangqiTandemFENs[5], "e5d5", "P-.4"},
		// Of two advisors or elephants on a file, only the rear one can
		// advance and only the front one retreat: records give the file,
		// where these were once written A-+5 and A+-5.
		{"advisors: rear", xiangqiTandemFENs[6], "f1e2", "A4+5"},
		{"advisors: front", xiangqiTandemFENs[6], "f3e2", "A4-5"},
		{"elephants: rear", "4k4/9/9/9/9/2B6/9/9/9/2BK5 w - - 0 1", "c1e3", "E7+5"},
		{"elephants: front", "4k4/9/9/9/9/2B6/9/9/9/2BK5 w - - 0 1", "c5a3", "E7-9"},
		{"black advisors: rear", "3ak4/9/3a5/9/9/9/9/9/9/3K5 b - - 0 1", "d10e9", "A4+5"},
		{"black elephants: front", "4k1b2/9/9/9/6b2/9/9/9/9/3K5 b - - 0 1", "g6e8", "E7-5"},
		{"five soldiers: fifth", xiangqiTandemFENs[7], "f6e6", "54.5"},
		{"five soldiers: first", xiangqiTandemFENs[7], "f10e10", "14.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFEN(t, Xiangqi, tt.fen)
			m := mustMove(t, tt.move)
			got, err := WXF(p, m)
			if err != nil || got != tt.want {
				t.Fatalf("WXF(%v) = %q, %v; want %q", m, got, err, tt.want)
			}
			if back, err := ParseWXF(p, got); err != nil || back != m {
				t.Errorf("ParseWXF(%q) = %v, %v; want %v", got, back, err, m)
			}
			if n, err := Notation(p, m); err != nil || n != tt.want {
				t.Errorf("Notation = %q, %v; want %q", n, err, tt.want)
			}
		})
	}
}

func TestParseWXF(t *testing.T) {
	start := StartFEN(Xiangqi)
	tests := []struct {
		name     string
		variant  Variant
		fen      string
		text     string
		wantMove string
		wantErr  error
	}{
		{"lower case", Xiangqi, start, "c2.5", "h3e3", nil},
		{"equals sign", Xiangqi, start, "C2=5", "h3e3", nil},
		{"N for the horse", Xiangqi, start, "N2+3", "h1g3", nil},
		{"B for the elephant", Xiangqi, start, "B3+5", "g1e3", nil},
		{"spaces around", Xiangqi, start, " C2.5 ", "h3e3", nil},
		{"tandem sign first", Xiangqi, xiangqiTandemFENs[0], "+R.8", "a5b5", nil},
		{"rear tandem advisor by sign, as once written", Xiangqi, xiangqiTandemFENs[6], "A-+5", "f1e2", nil},
		{"front tandem advisor by sign, as once written", Xiangqi, xiangqiTandemFENs[6], "A+-5", "f3e2", nil},
		{"front of three soldiers by sign", Xiangqi, xiangqiTandemFENs[2], "P+.6", "e8d8", nil},
		{"rear of three soldiers by sign", Xiangqi, xiangqiTandemFENs[2], "P-.6", "e6d6", nil},
		{"empty", Xiangqi, start, "", "", ErrBadMove},
		{"too long", Xiangqi, start, "C2.5+", "", ErrBadMove},
		{"unknown letter", Xiangqi, start, "X2.5", "", ErrBadMove},
		{"zero destination", Xiangqi, start, "C2.0", "", ErrBadMove},
		{"bad direction", Xiangqi, start, "C2x5", "", ErrBadMove},
		{"place beyond five", Xiangqi, start, "65+1", "", ErrBadMove},
		{"non-ascii", Xiangqi, start, "炮二平五", "", ErrBadMove},
		{"no such piece on the file", Xiangqi, start, "C3.5", "", ErrIllegalMove},
		{"no such move", Xiangqi, start, "C2+9", "", ErrIllegalMove},
		{"no tandem", Xiangqi, start, "R+.8", "", ErrIllegalMove},
		{"no tandem soldier", Xiangqi, start, "25+1", "", ErrIllegalMove},
		{"ambiguous front soldier of two pairs", Xiangqi, xiangqiTandemFENs[3], "P++1", "", ErrBadMove},
		{"wrong variant", Janggi, StartFEN(Janggi), "C2.5", "", ErrBadMove},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFEN(t, tt.variant, tt.fen)
			got, err := ParseWXF(p, tt.text)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ParseWXF(%q) = %v, %v; want error %v", tt.text, got, err, tt.wantErr)
				}
				t.Log(err)
				return
			}
			if err != nil || got != mustMove(t, tt.wantMove) {
				t.Fatalf("ParseWXF(%q) = %v, %v; want %v", tt.text, got, err, tt.wantMove)
			}
		})
	}
}

// A refused WXF text says what is wrong with it. Chinese notation, which a
// Xiangqi player may well type, and full-width letters are four characters
// too: told "not four characters", their writer would count and find four.
func TestParseWXFRefusalSaysWhatIsWrong(t *testing.T) {
	p := mustFEN(t, Xiangqi, StartFEN(Xiangqi))
	tests := []struct{ text, want string }{
		{"炮二平五", "ASCII"},
		{"Ｃ2.5", "ASCII"},
		{"C2.5+", "not four characters"},
		{"C2.", "not four characters"},
	}
	for _, tt := range tests {
		_, err := ParseWXF(p, tt.text)
		if !errors.Is(err, ErrBadMove) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseWXF(%q) error %v, want ErrBadMove saying %q", tt.text, err, tt.want)
		}
	}
}

// A refused WXF move names the piece as Xiangqi players do: the advisor,
// not the guard it shares a Kind with in Janggi.
func TestParseWXFRefusalNamesThePiece(t *testing.T) {
	start := StartFEN(Xiangqi)
	tests := []struct {
		name string
		fen  string
		text string
		want string
	}{
		{"no advisor on the file", start, "A5+4", "there is no Red advisor on file 5"},
		{"no tandem advisors", start, "A+.5", "Red has no two advisors on one file"},
		{"black's turn", "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR b - - 1 1", "A5+4", "there is no Black advisor on file 5"},
		{"a piece with no such move", start, "A4+4", "the Red advisor on f1 has no such legal move"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWXF(mustFEN(t, Xiangqi, tt.fen), tt.text)
			if !errors.Is(err, ErrIllegalMove) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseWXF(%q) error %v, want ErrIllegalMove saying %q", tt.text, err, tt.want)
			}
		})
	}
}

func TestJanggiNotation(t *testing.T) {
	start := StartFEN(Janggi)
	afterB1C3 := "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1CN4C1/4K4/R1BA1ABNR b - - 1 1"
	tests := []struct {
		name string
		fen  string
		move string
		want string
	}{
		{"horse", start, "b1c3", "02마83"},
		{"soldier sideways", start, "a4b4", "71졸72"},
		{"chariot", start, "i1i2", "09차99"},
		{"guard", start, "d1d2", "04사94"},
		{"general", start, "e2f3", "95궁86"},
		{"pass", start, "e2e2", "한수쉼"},
		{"han horse", afterB1C3, "b10c8", "12마33"},
		{"han soldier", afterB1C3, "a7a6", "41병51"},
		{"han general", afterB1C3, "e9e10", "25궁15"},
		{"han pass", afterB1C3, "e9e9", "한수쉼"},
		{"soldier in the enemy palace", janggiFENs[2], "d8e9", "34졸25"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFEN(t, Janggi, tt.fen)
			m := mustMove(t, tt.move)
			got, err := JanggiNotation(p, m)
			if err != nil || got != tt.want {
				t.Fatalf("JanggiNotation(%v) = %q, %v; want %q", m, got, err, tt.want)
			}
			if back, err := ParseJanggiNotation(p, got); err != nil || back != m {
				t.Errorf("ParseJanggiNotation(%q) = %v, %v; want %v", got, back, err, m)
			}
		})
	}
}

func TestParseJanggiNotation(t *testing.T) {
	start := StartFEN(Janggi)
	tests := []struct {
		name     string
		fen      string
		text     string
		wantMove string
		wantErr  error
		wantText string
	}{
		{"spaces", start, " 02 마 83 ", "b1c3", nil, ""},
		{"hanja", start, "02馬83", "b1c3", nil, ""},
		{"letter first with a dash", start, "H02-83", "b1c3", nil, ""},
		{"letter first with x", start, "h02x83", "b1c3", nil, ""},
		{"fen letter in the middle", start, "02N83", "b1c3", nil, ""},
		{"other soldier name", start, "71병72", "a4b4", nil, ""},
		{"hanja soldier", start, "71卒72", "a4b4", nil, ""},
		{"general named 장", start, "95장86", "e2f3", nil, ""},
		{"pass in English", start, "pass", "e2e2", nil, ""},
		{"pass in capitals", start, "PASS", "e2e2", nil, ""},
		{"pass with a space", start, "한수 쉼", "e2e2", nil, ""},
		{"pass as the general's square", start, "95궁95", "e2e2", nil, ""},
		{"empty", start, "", "", ErrBadMove, ""},
		{"short square", start, "0마83", "", ErrBadMove, ""},
		{"short destination", start, "02마8", "", ErrBadMove, ""},
		{"long destination", start, "02마830", "", ErrBadMove, ""},
		{"column zero", start, "00차01", "", ErrBadMove, ""},
		{"unknown piece", start, "02말83", "", ErrBadMove, ""},
		{"broken utf-8", start, "02\xff83", "", ErrBadMove, ""},
		{"wrong piece named", start, "02차83", "", ErrIllegalMove, "is a horse, not a chariot"},
		{"an elephant named a horse", start, "03마83", "", ErrIllegalMove, "is an elephant, not a horse"},
		{"no piece there", start, "92마83", "", ErrIllegalMove, ""},
		{"opponent's piece", start, "12마33", "", ErrIllegalMove, "the horse on 12 (b10) is Han's, and it is Cho's turn"},
		{"impossible move", start, "02마84", "", ErrIllegalMove, ""},
		{"pass in check", "4k4/9/9/9/9/9/9/9/9/3K1r3 w - - 0 1", "한수쉼", "", ErrIllegalMove, ""},
		{"wrong variant", StartFEN(Xiangqi), "02마83", "", ErrBadMove, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Janggi
			if tt.name == "wrong variant" {
				v = Xiangqi
			}
			p := mustFEN(t, v, tt.fen)
			got, err := ParseJanggiNotation(p, tt.text)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ParseJanggiNotation(%q) = %v, %v; want error %v", tt.text, got, err, tt.wantErr)
				}
				if tt.wantText != "" && !strings.Contains(err.Error(), tt.wantText) {
					t.Fatalf("ParseJanggiNotation(%q): %q does not say %q", tt.text, err, tt.wantText)
				}
				return
			}
			if err != nil || got != mustMove(t, tt.wantMove) {
				t.Fatalf("ParseJanggiNotation(%q) = %v, %v; want %v", tt.text, got, err, tt.wantMove)
			}
		})
	}
}

// randomPositions returns the positions met by seeded random games from
// each start FEN.
func randomPositions(tb testing.TB, v Variant, starts []string, games, maxPlies int) []*Position {
	tb.Helper()
	var out []*Position
	for gi := 0; gi < games; gi++ {
		for _, fen := range starts {
			rng := rand.New(rand.NewPCG(uint64(gi), uint64(len(fen))))
			rp := &randomPolicy{rng: rng, pTake: 0.3}
			g := mustGame(tb, v, fen)
			for !g.Outcome().Ended && g.Plies() < maxPlies {
				out = append(out, g.Position())
				if _, err := g.Play(rp.choose(g)); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	return out
}

func TestNotationRoundTrip(t *testing.T) {
	games := 30
	if testing.Short() {
		games = 8
	}
	tests := []struct {
		name    string
		variant Variant
		starts  []string
	}{
		{"xiangqi", Xiangqi, append([]string{StartFEN(Xiangqi)}, xiangqiTandemFENs...)},
		{"janggi", Janggi, append([]string{StartFEN(Janggi), JanggiStartFEN(SangMaMaSang, MaSangMaSang)}, janggiFENs...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moves := 0
			for _, p := range randomPositions(t, tt.variant, tt.starts, games, 150) {
				seen := map[string]Move{}
				for _, m := range p.LegalMoves(nil) {
					s, err := Notation(p, m)
					if err != nil {
						t.Fatalf("%s: Notation(%v): %v", p.FEN(), m, err)
					}
					if other, dup := seen[s]; dup {
						t.Fatalf("%s: %v and %v are both written %q", p.FEN(), other, m, s)
					}
					seen[s] = m
					if back, err := ParseNotation(p, s); err != nil || back != m {
						t.Fatalf("%s: %v is written %q, which reads back as %v, %v", p.FEN(), m, s, back, err)
					}
					moves++
				}
			}
			t.Logf("%d moves round-tripped", moves)
		})
	}
}

func TestNotationRefusesIllegalMoves(t *testing.T) {
	for _, v := range []Variant{Janggi, Xiangqi} {
		p := mustFEN(t, v, StartFEN(v))
		m := mustMove(t, "a1a5")
		for name, f := range map[string]func(*Position, Move) (string, error){"Notation": Notation, "WXF": WXF, "JanggiNotation": JanggiNotation} {
			if s, err := f(p, m); err == nil {
				t.Errorf("%v %s(a1a5) = %q, want an error", v, name, s)
			}
		}
		if _, err := Notation(p, m); !errors.Is(err, ErrIllegalMove) || !strings.Contains(err.Error(), "blocked at a4") {
			t.Errorf("%v Notation(a1a5): %v, want the reason", v, err)
		}
	}
}

// TestTandemElephantsOffTheirPointsWereWrittenAlike: a position ParseFEN
// accepts (and the Rules service's ApplyMove serves) may hold two
// elephants of a side on one file that can both advance: Red's on c1 and
// c3 (off the seven points). Written by file, c1a3 and c3a5 were both
// E7+9; such moves keep the sign (E-+9, E++9).
func TestTandemElephantsOffTheirPointsWereWrittenAlike(t *testing.T) {
	cases := []struct{ name, fen string }{
		// Red elephants on c1 and c3: c1a3 and c3a5 are both E7+9.
		{"elephants c1 c3", "3k5/9/9/9/9/9/9/2B6/9/2B1K4 w - - 0 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParseFEN(Xiangqi, c.fen)
			if err != nil {
				t.Fatalf("ParseFEN: %v", err)
			}
			for _, m := range p.LegalMoves(nil) {
				s, err := WXF(p, m)
				if err != nil {
					t.Fatalf("WXF(%v): %v", m, err)
				}
				back, err := ParseWXF(p, s)
				if err != nil || back != m {
					t.Errorf("WXF(%v) = %q, read back as %v, %v", m, s, back, err)
				}
			}
		})
	}
}
