package rules

import (
	"fmt"
	"strings"
)

// Formation is a Janggi set-up of horses (ma) and elephants (sang) on the back
// rank, named from the player's own left.
type Formation uint8

const (
	MaSangSangMa Formation = 1 + iota
	SangMaSangMa
	MaSangMaSang
	SangMaMaSang
)

var formationInfo = [...]struct {
	name, hanja, hangul string
	cho                 string // Cho's rank 1, files a..i
}{
	MaSangSangMa: {"ma-sang-sang-ma", "馬象象馬", "마상상마", "RNBA1ABNR"},
	SangMaSangMa: {"sang-ma-sang-ma", "象馬象馬", "상마상마", "RBNA1ABNR"},
	MaSangMaSang: {"ma-sang-ma-sang", "馬象馬象", "마상마상", "RNBA1ANBR"},
	SangMaMaSang: {"sang-ma-ma-sang", "象馬馬象", "상마마상", "RBNA1ANBR"},
}

// Valid reports whether f is one of the four formations.
func (f Formation) Valid() bool { return f >= MaSangSangMa && f <= SangMaMaSang }

func (f Formation) String() string {
	if !f.Valid() {
		return fmt.Sprintf("Formation(%d)", uint8(f))
	}
	return formationInfo[f].name
}

// ParseFormation accepts the String names in any case, with or without
// hyphens, and the hanja and hangul spellings (馬象象馬, 마상상마).
func ParseFormation(s string) (Formation, error) {
	norm := strings.NewReplacer("-", "", " ", "", "_", "").Replace(strings.ToLower(strings.TrimSpace(s)))
	for f := MaSangSangMa; f <= SangMaMaSang; f++ {
		in := formationInfo[f]
		if norm == strings.ReplaceAll(in.name, "-", "") || norm == in.hanja || norm == in.hangul {
			return f, nil
		}
	}
	return 0, fmt.Errorf("unknown formation %q (want ma-sang-sang-ma, sang-ma-sang-ma, ma-sang-ma-sang or sang-ma-ma-sang)", s)
}

// backRank returns the FEN text of side's back rank. Han faces Cho, so its
// own left is the i-file: its rank is Cho's for the same formation, mirrored.
func (f Formation) backRank(side Side) string {
	cho := formationInfo[f].cho
	if side == First {
		return cho
	}
	b := []byte(strings.ToLower(cho))
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

const xiangqiStartFEN = "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 0 1"

// JanggiStartFEN is the Janggi start position for the two chosen formations,
// or "" if either is invalid (ParseFEN then reports the mistake).
func JanggiStartFEN(cho, han Formation) string {
	if !cho.Valid() || !han.Valid() {
		return ""
	}
	return han.backRank(Second) + "/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/" + cho.backRank(First) + " w - - 0 1"
}

// StartFEN is the standard start position; Janggi uses ma-sang-sang-ma for both.
func StartFEN(v Variant) string {
	switch v {
	case Janggi:
		return JanggiStartFEN(MaSangSangMa, MaSangSangMa)
	case Xiangqi:
		return xiangqiStartFEN
	}
	return ""
}
