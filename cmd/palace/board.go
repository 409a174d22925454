package main

import (
	"strings"

	"github.com/palacehq/palace/pkg/rules"
)

// Hanja of each piece kind per side: the first player's (Cho / Red) then
// the second's (Han / Black), as printed on the pieces.
var hanja = map[rules.Variant][2]map[rules.Kind]string{
	rules.Janggi: {
		{rules.General: "楚", rules.Guard: "士", rules.Elephant: "象", rules.Horse: "馬", rules.Chariot: "車", rules.Cannon: "包", rules.Soldier: "卒"},
		{rules.General: "漢", rules.Guard: "士", rules.Elephant: "象", rules.Horse: "馬", rules.Chariot: "車", rules.Cannon: "包", rules.Soldier: "兵"},
	},
	rules.Xiangqi: {
		{rules.General: "帥", rules.Guard: "仕", rules.Elephant: "相", rules.Horse: "傌", rules.Chariot: "俥", rules.Cannon: "炮", rules.Soldier: "兵"},
		{rules.General: "將", rules.Guard: "士", rules.Elephant: "象", rules.Horse: "馬", rules.Chariot: "車", rules.Cannon: "砲", rules.Soldier: "卒"},
	},
}

// drawBoard renders the position with rank 10 on top, files a..i below,
// the palaces' points marked with '+', and the general in check bracketed,
// or in hanja followed by '!'. Every cell is 3 columns wide, a hanja taking
// two: a bracketed hanja would take 4 and push the rest of its rank right,
// and the general's hanja already names its side, so it can give up the
// mark for Han and Black.
func drawBoard(p *rules.Position, useHanja bool) string {
	var b strings.Builder
	check := rules.NoSquare
	if p.InCheck() {
		check = p.GeneralSquare(p.Turn())
	}
	for r := rules.NumRanks - 1; r >= 0; r-- {
		b.WriteString(padLeft(r+1, 2))
		b.WriteString(" ")
		for f := range rules.NumFiles {
			sq := rules.SquareAt(f, r)
			pc := p.PieceAt(sq)
			cell := " . "
			switch {
			case sq == check && useHanja:
				cell = hanja[p.Variant()][pc.Side()][pc.Kind()] + "!"
			case sq == check:
				cell = "[" + pc.String() + "]"
			case pc != rules.NoPiece && useHanja:
				mark := " "
				if pc.Side() == rules.Second {
					mark = "'"
				}
				cell = hanja[p.Variant()][pc.Side()][pc.Kind()] + mark
			case pc != rules.NoPiece:
				cell = " " + pc.String() + " "
			case inPalace(f, r):
				cell = " + "
			}
			b.WriteString(cell)
		}
		b.WriteString("\n")
		if r == 5 && p.Variant() == rules.Xiangqi {
			b.WriteString("   ~~~~~~~~~~~~~~~~~~~~~~~~~~~\n")
		}
	}
	b.WriteString("    a  b  c  d  e  f  g  h  i\n")
	side := p.Turn().String()
	b.WriteString(side + " to move")
	if p.InCheck() {
		b.WriteString(", in check")
	}
	b.WriteString("\n")
	return b.String()
}

func inPalace(f, r int) bool { return f >= 3 && f <= 5 && (r <= 2 || r >= 7) }

func padLeft(n, w int) string {
	s := strings.Repeat(" ", w) + itoa(n)
	return s[len(s)-w:]
}

func itoa(n int) string {
	if n >= 10 {
		return string(rune('0'+n/10)) + string(rune('0'+n%10))
	}
	return string(rune('0' + n))
}
