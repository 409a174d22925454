package rules

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSquare(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Square
		wantErr string
	}{
		{"a1", "a1", 0, ""},
		{"e2", "e2", SquareAt(4, 1), ""},
		{"b10", "b10", SquareAt(1, 9), ""},
		{"i10", "i10", 89, ""},
		{"empty", "", NoSquare, "missing square"},
		{"file only", "e", NoSquare, "missing rank"},
		{"rank zero", "e0", NoSquare, "rank 0 is not 1-10"},
		{"rank eleven", "b11", NoSquare, "unexpected text"},
		{"file j", "j1", NoSquare, "file 'j' is not a-i"},
		{"upper case", "E2", NoSquare, "file 'E'"},
		{"a letter of two bytes", "é1", NoSquare, "file 'é' is not a-i"},
		{"not UTF-8", "\xff1", NoSquare, "file '\ufffd' is not a-i"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSquare(tt.in)
			if got != tt.want {
				t.Errorf("ParseSquare(%q) = %v, want %v", tt.in, got, tt.want)
			}
			if tt.wantErr == "" {
				if err != nil || got.String() != tt.in {
					t.Errorf("ParseSquare(%q) error %v, String %q", tt.in, err, got)
				}
				return
			}
			if !errors.Is(err, ErrBadMove) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSquare(%q) error %v, want ErrBadMove containing %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestParseMove(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantFrom string
		wantTo   string
		wantPass bool
		wantErr  string
	}{
		{"cannon to centre", "h3e3", "h3", "e3", false, ""},
		{"from rank ten", "b10c8", "b10", "c8", false, ""},
		{"to rank ten", "a1a10", "a1", "a10", false, ""},
		{"rank ten twice", "i10i9", "i10", "i9", false, ""},
		{"pass", "e2e2", "e2", "e2", true, ""},
		{"empty", "", "", "", false, "missing square"},
		{"one square", "h3", "", "", false, "missing square"},
		{"half square", "h3e", "", "", false, "missing rank"},
		{"trailing text", "h3e3x", "", "", false, "unexpected text"},
		{"rank eleven", "a11a1", "", "", false, "file '1'"},
		{"space", "h3 e3", "", "", false, "file ' '"},
		{"null move", "0000", "", "", false, "file '0'"},
		{"upper case", "H3E3", "", "", false, "file 'H'"},
		// The likely slip, named for the client developer.
		{"upper case named", "B3E3", "", "", false, "coordinates are lower case"},
		{"a dash named", "b3-e3", "", "", false, "the two squares are written together"},
		{"a space named", "b3 e3", "", "", false, "the two squares are written together"},
		{"WXF named", "C8.5", "", "", false, "for display only"},
		{"WXF advance named", "H2+3", "", "", false, "for display only"},
		{"Korean named", "02마83", "", "", false, "for display only"},
		{"no hint for noise", "zz", "", "", false, "b10c8)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMove(tt.in)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrBadMove) || !strings.Contains(err.Error(), tt.wantErr) || m != NoMove {
					t.Errorf("ParseMove(%q) = %v, %v; want NoMove and ErrBadMove containing %q", tt.in, m, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMove(%q): %v", tt.in, err)
			}
			if m.From().String() != tt.wantFrom || m.To().String() != tt.wantTo || m.IsPass() != tt.wantPass || m.String() != tt.in {
				t.Errorf("ParseMove(%q) = %v (from %v to %v pass %v)", tt.in, m, m.From(), m.To(), m.IsPass())
			}
		})
	}
}

func TestValueStrings(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"no move", NoMove.String(), "0000"},
		{"bad move", Move(0xffff).String(), "0000"},
		{"no square", NoSquare.String(), "-"},
		{"janggi", Janggi.String(), "janggi"},
		{"xiangqi", Xiangqi.String(), "xiangqi"},
		{"first", First.String(), "first"},
		{"second", Second.String(), "second"},
		{"cannon", Cannon.String(), "cannon"},
		{"guard", Guard.String(), "guard"},
		{"second horse letter", MakePiece(Second, Horse).String(), "n"},
		{"first elephant letter", MakePiece(First, Elephant).String(), "B"},
		{"invalid piece", MakePiece(First, Kind(9)).String(), "."},
		{"formation", SangMaMaSang.String(), "sang-ma-ma-sang"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	if NewMove(NoSquare, 3) != NoMove || NoMove.From() != NoSquare || NoMove.IsPass() {
		t.Errorf("NoMove handling")
	}
	if v, err := ParseVariant(" Xiangqi "); v != Xiangqi || err != nil {
		t.Errorf("ParseVariant = %v, %v", v, err)
	}
	if _, err := ParseVariant("chess"); err == nil {
		t.Errorf("ParseVariant(chess) succeeded")
	}
	pc := MakePiece(Second, Cannon)
	if pc.Side() != Second || pc.Kind() != Cannon || pc.Letter() != 'c' {
		t.Errorf("MakePiece(Second, Cannon) = %v side %v kind %v", pc, pc.Side(), pc.Kind())
	}
}

// TestMoveAppendTextMatchesString writes every legal move of a few
// positions, and the invalid moves, into one buffer.
func TestMoveAppendTextMatchesString(t *testing.T) {
	for _, v := range []Variant{Janggi, Xiangqi} {
		g, err := NewGame(v, StartFEN(v))
		if err != nil {
			t.Fatal(err)
		}
		moves := append(g.LegalMoves(), NoMove, Move(0xffff))
		var buf []byte
		var want string
		for _, m := range moves {
			buf, _ = m.AppendText(buf)
			want += m.String()
		}
		if string(buf) != want {
			t.Fatalf("%v: AppendText wrote %q, String gives %q", v, buf, want)
		}
	}
}

// TestParseMoveQuotesLittle: a refusal quotes a few bytes of what it was
// sent, not kilobytes.
func TestParseMoveQuotesLittle(t *testing.T) {
	_, err := ParseMove(strings.Repeat("장", 700))
	if err == nil || len(err.Error()) > 160 || !strings.Contains(err.Error(), "장") {
		t.Fatalf("ParseMove of 2 KB: %d bytes of message: %.200v", len(err.Error()), err)
	}
}

func TestParseSide(t *testing.T) {
	for _, s := range []Side{First, Second} {
		if got, err := ParseSide(s.String()); got != s || err != nil {
			t.Errorf("ParseSide(%q) = %v, %v", s.String(), got, err)
		}
	}
	for _, v := range []Variant{Janggi, Xiangqi} {
		for _, s := range []Side{First, Second} {
			if got, err := ParseSide(SideName(v, s)); got != s || err != nil {
				t.Errorf("ParseSide(%q) = %v, %v", SideName(v, s), got, err)
			}
		}
	}
	for in, want := range map[string]Side{"cho": First, "HAN": Second, " red ": First, "black": Second} {
		if got, err := ParseSide(in); got != want || err != nil {
			t.Errorf("ParseSide(%q) = %v, %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "third", "w", "1"} {
		if _, err := ParseSide(in); err == nil || !strings.Contains(err.Error(), "want first or second") {
			t.Errorf("ParseSide(%q) = %v, want an error saying what it wants", in, err)
		}
	}
}
