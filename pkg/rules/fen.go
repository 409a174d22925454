package rules

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

func fenError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadFEN}, args...)...)
}

// ParseFEN reads `board side - - halfmove fullmove`. The side is w (First;
// r is accepted too) or b. The counters may be omitted (0 and 1). A
// fullmove number of 0, which many tools write, is read as 1: moves are
// numbered from 1, and nothing here depends on the counters. Besides
// syntax it rejects positions no game can reach and that would break move
// generation: a missing or doubled general, a general or guard outside its
// palace, more pieces of a kind than a side starts with, a Xiangqi elephant
// across the river, the side not to move in check, and facing generals in
// Xiangqi.
func ParseFEN(v Variant, fen string) (*Position, error) {
	tb := tablesFor(v)
	if tb == nil {
		return nil, fenError("unknown variant %v", v)
	}
	fields := strings.Fields(fen)
	switch {
	case len(fields) == 0:
		return nil, fenError("empty FEN")
	case len(fields) == 1:
		return nil, fenError("missing side to move after the board")
	case len(fields) > 6:
		return nil, fenError("%d fields, want at most 6: board side - - halfmove fullmove", len(fields))
	}
	p := &Position{tb: tb, variant: v, general: [2]Square{NoSquare, NoSquare}, fullmove: 1}
	if err := p.parseBoard(fields[0]); err != nil {
		return nil, err
	}
	switch fields[1] {
	case "w", "r":
		p.turn = First
	case "b":
		p.turn = Second
	default:
		return nil, fenError("side to move %q, want w or b", fields[1])
	}
	for i, name := range [2]string{"castling", "en passant"} {
		if len(fields) > 2+i && fields[2+i] != "-" {
			return nil, fenError("%s field %q, want - (neither game has %s)", name, fields[2+i], name)
		}
	}
	if len(fields) > 4 {
		n, err := strconv.ParseUint(fields[4], 10, 31) // maxCounter
		if err != nil {
			return nil, fenError("halfmove clock %q is not a number from 0 to 2147483647", fields[4])
		}
		p.halfmove = uint32(n)
	}
	if len(fields) > 5 {
		n, err := strconv.ParseUint(fields[5], 10, 31)
		if err != nil {
			return nil, fenError("fullmove number %q is not a number from 0 to 2147483647", fields[5])
		}
		p.fullmove = uint32(max(n, 1))
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	p.hash = p.computeHash()
	return p, nil
}

func (p *Position) parseBoard(board string) error {
	ranks := strings.Split(board, "/")
	if len(ranks) != NumRanks {
		return fenError("board has %d ranks, want %d separated by /", len(ranks), NumRanks)
	}
	var counts [2][8]int
	for i, text := range ranks {
		rank := NumRanks - 1 - i
		file := 0
		prevDigit := false
		for j := 0; j < len(text); j++ {
			c := text[j]
			if c >= '1' && c <= '9' {
				if prevDigit {
					return fenError("rank %d (%q): two digits in a row", rank+1, text)
				}
				prevDigit = true
				file += int(c - '0')
				if file > NumFiles {
					return fenError("rank %d (%q) has more than %d files", rank+1, text, NumFiles)
				}
				continue
			}
			prevDigit = false
			pc := pieceFromLetter(c)
			if pc == NoPiece {
				// The whole character, not its first byte, and where it
				// starts counted in characters.
				r, _ := utf8.DecodeRuneInString(text[j:])
				return fenError("rank %d (%q): unknown character %q at position %d", rank+1, text, r, utf8.RuneCountInString(text[:j])+1)
			}
			if file >= NumFiles {
				return fenError("rank %d (%q) has more than %d files", rank+1, text, NumFiles)
			}
			s, k := pc.Side(), pc.Kind()
			counts[s][k]++
			if counts[s][k] > maxPerKind[k] {
				if k == General {
					return fenError("%s has two generals (%c)", SideName(p.variant, s), pc.Letter())
				}
				return fenError("%s has more than %d %ss (%c)", SideName(p.variant, s), maxPerKind[k], k.displayName(p.variant), pc.Letter())
			}
			p.put(file+NumFiles*rank, pc)
			file++
		}
		if file != NumFiles {
			return fenError("rank %d (%q) has %d files, want %d", rank+1, text, file, NumFiles)
		}
	}
	return nil
}

func (p *Position) validate() error {
	palaceName := [2]string{"d1-f3", "d8-f10"}
	for s := First; s <= Second; s++ {
		if p.general[s] < 0 {
			return fenError("missing %s general (%c)", SideName(p.variant, s), mkPiece(s, General).Letter())
		}
		for _, k := range [2]Kind{General, Guard} {
			for _, sq := range p.pl[s][k][:p.pn[s][k]] {
				if palaceOf(int(sq)) != int(s) {
					return fenError("%s %s (%c) on %v is outside its palace (%s)", SideName(p.variant, s), k.displayName(p.variant), p.board[sq].Letter(), sq, palaceName[s])
				}
			}
		}
		if p.variant == Xiangqi {
			for _, sq := range p.pl[s][Elephant][:p.pn[s][Elephant]] {
				if !ownHalf(s, int(sq)) {
					return fenError("%s elephant (%c) on %v is across the river", SideName(p.variant, s), p.board[sq].Letter(), sq)
				}
			}
		}
	}
	them := p.turn ^ 1
	if g := p.general[them]; p.attacked(int(g), p.turn) {
		return fenError("the side not to move (%s) is in check: its general on %v is attacked", SideName(p.variant, them), g)
	}
	if p.variant == Xiangqi && p.GeneralsFacing() {
		return fenError("the generals face each other on the %c-file, which xiangqi forbids", 'a'+byte(p.general[First].File()))
	}
	return nil
}

// Reachable returns an error, ErrBadFEN, naming a piece on a point that no
// game from the start position can bring it to: a soldier behind the rank
// soldiers start on (or, in Xiangqi, off the files it keeps to before the
// river, or on one with another before the river), a Xiangqi advisor off
// the palace's diagonals, a Xiangqi elephant off its seven points. Such a piece would move as no game lets it (an
// elephant off its points jumps to others). ParseFEN accepts these
// positions, which studies of a single rule use; a game played from a
// custom start refuses them.
func (p *Position) Reachable() error {
	for s := First; s <= Second; s++ {
		for _, k := range [3]Kind{Guard, Elephant, Soldier} {
			for _, sq := range p.pl[s][k][:p.pn[s][k]] {
				if why := unreachable(p.variant, s, k, sq); why != "" {
					return fenError("%s %s (%c) on %v is %s, where no game can bring it", SideName(p.variant, s), k.displayName(p.variant), p.board[sq].Letter(), sq, why)
				}
			}
		}
		if p.variant != Xiangqi {
			continue
		}
		// A Xiangqi soldier keeps to its file until it crosses the river,
		// and each file starts with one at most.
		var before [NumFiles]Square
		for i := range before {
			before[i] = NoSquare
		}
		for _, sq := range p.pl[s][Soldier][:p.pn[s][Soldier]] {
			if !ownHalf(s, int(sq)) {
				continue
			}
			if other := before[sq.File()]; other != NoSquare {
				return fenError("%s soldiers (%c) on %v and %v share a file before the river, where no game can bring them", SideName(p.variant, s), p.board[sq].Letter(), other, sq)
			}
			before[sq.File()] = sq
		}
	}
	return nil
}

// xiangqiPoints are the points, counted from the owner's side of the board
// ({file, rank}, 0-based), that a Xiangqi advisor and elephant can stand on.
var xiangqiPoints = map[Kind][][2]int{
	Guard:    {{3, 0}, {5, 0}, {4, 1}, {3, 2}, {5, 2}},
	Elephant: {{2, 0}, {6, 0}, {0, 2}, {4, 2}, {8, 2}, {2, 4}, {6, 4}},
}

// unreachable tells why side s's piece of kind k cannot stand on sq in a
// game of variant v, or "" when it can (within what validate checks
// elsewhere: palaces, the river).
func unreachable(v Variant, s Side, k Kind, sq Square) string {
	file, rank := sq.File(), sq.Rank()
	if s == Second {
		rank = NumRanks - 1 - rank
	}
	switch {
	case k == Soldier && rank < 3:
		return "behind the rank soldiers start on"
	case k == Soldier && v == Xiangqi && rank < 5 && file%2 == 1:
		return "on a file soldiers keep to until they cross the river (a, c, e, g, i)"
	case k == Soldier || v == Janggi:
		return ""
	}
	for _, pt := range xiangqiPoints[k] {
		if pt == [2]int{file, rank} {
			return ""
		}
	}
	if k == Guard {
		return "off the palace's diagonals"
	}
	return "off the seven points elephants move between"
}

// FEN writes the canonical form: `board side - - halfmove fullmove`, with b
// and n for elephant and horse.
func (p *Position) FEN() string {
	buf := make([]byte, 0, 96)
	for r := NumRanks - 1; r >= 0; r-- {
		empty := 0
		for f := 0; f < NumFiles; f++ {
			pc := p.board[f+NumFiles*r]
			if pc == NoPiece {
				empty++
				continue
			}
			if empty > 0 {
				buf = append(buf, byte('0'+empty))
				empty = 0
			}
			buf = append(buf, pc.Letter())
		}
		if empty > 0 {
			buf = append(buf, byte('0'+empty))
		}
		if r > 0 {
			buf = append(buf, '/')
		}
	}
	if p.turn == First {
		buf = append(buf, " w - - "...)
	} else {
		buf = append(buf, " b - - "...)
	}
	buf = strconv.AppendUint(buf, uint64(p.halfmove), 10)
	buf = append(buf, ' ')
	buf = strconv.AppendUint(buf, uint64(p.fullmove), 10)
	return string(buf)
}

func (p *Position) String() string { return p.FEN() }
