// Package rulespb converts between the rules library's types and their
// protobuf forms, so every service speaks the same vocabulary.
package rulespb

import (
	"errors"
	"fmt"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/rules"
)

// Variant maps a game kind to the rules' variant.
func Variant(k commonv1.GameKind) (rules.Variant, error) {
	switch k {
	case commonv1.GameKind_GAME_KIND_JANGGI:
		return rules.Janggi, nil
	case commonv1.GameKind_GAME_KIND_XIANGQI:
		return rules.Xiangqi, nil
	}
	if k == commonv1.GameKind_GAME_KIND_UNSPECIFIED {
		// JSON decoding drops an unknown enum name ("XIANGQI") as it drops
		// unknown fields, so a misspelt kind arrives unset: say so.
		return 0, errors.New("kind: unset, or a name that is not a game kind; want GAME_KIND_JANGGI or GAME_KIND_XIANGQI (in JSON, these full names)")
	}
	return 0, fmt.Errorf("kind: %v is not a game kind (want GAME_KIND_JANGGI or GAME_KIND_XIANGQI)", k)
}

// Kind maps a variant to its game kind.
func Kind(v rules.Variant) commonv1.GameKind {
	switch v {
	case rules.Janggi:
		return commonv1.GameKind_GAME_KIND_JANGGI
	case rules.Xiangqi:
		return commonv1.GameKind_GAME_KIND_XIANGQI
	}
	return commonv1.GameKind_GAME_KIND_UNSPECIFIED
}

// Formation maps a proto formation; unspecified is ma-sang-sang-ma. Its
// error names no field: the caller knows which one it read.
func Formation(f commonv1.Formation) (rules.Formation, error) {
	switch f {
	case commonv1.Formation_FORMATION_UNSPECIFIED, commonv1.Formation_FORMATION_MA_SANG_SANG_MA:
		return rules.MaSangSangMa, nil
	case commonv1.Formation_FORMATION_SANG_MA_SANG_MA:
		return rules.SangMaSangMa, nil
	case commonv1.Formation_FORMATION_MA_SANG_MA_SANG:
		return rules.MaSangMaSang, nil
	case commonv1.Formation_FORMATION_SANG_MA_MA_SANG:
		return rules.SangMaMaSang, nil
	}
	return 0, fmt.Errorf("%v is not a formation", f)
}

// FormationPB maps a rules formation to its proto form.
func FormationPB(f rules.Formation) commonv1.Formation {
	switch f {
	case rules.MaSangSangMa:
		return commonv1.Formation_FORMATION_MA_SANG_SANG_MA
	case rules.SangMaSangMa:
		return commonv1.Formation_FORMATION_SANG_MA_SANG_MA
	case rules.MaSangMaSang:
		return commonv1.Formation_FORMATION_MA_SANG_MA_SANG
	case rules.SangMaMaSang:
		return commonv1.Formation_FORMATION_SANG_MA_MA_SANG
	}
	return commonv1.Formation_FORMATION_UNSPECIFIED
}

// Side maps a rules side to its proto form.
func Side(s rules.Side) commonv1.Side {
	if s == rules.First {
		return commonv1.Side_SIDE_FIRST
	}
	return commonv1.Side_SIDE_SECOND
}

// SideFrom maps a proto side; unspecified is an error.
func SideFrom(s commonv1.Side) (rules.Side, error) {
	switch s {
	case commonv1.Side_SIDE_FIRST:
		return rules.First, nil
	case commonv1.Side_SIDE_SECOND:
		return rules.Second, nil
	}
	if s == commonv1.Side_SIDE_UNSPECIFIED {
		// JSON decoding drops a side's name it does not know, as it
		// drops unknown fields: a misspelt side arrives unset.
		return 0, errors.New("side: required, SIDE_FIRST or SIDE_SECOND (in JSON, any other name is dropped and arrives unset)")
	}
	return 0, fmt.Errorf("side: %v is not a side (want SIDE_FIRST or SIDE_SECOND)", s)
}

// Moves converts moves to their proto form.
func Moves(ms []rules.Move) []*commonv1.Move {
	out := make([]*commonv1.Move, len(ms))
	for i, m := range ms {
		out[i] = &commonv1.Move{Coordinate: m.String()}
	}
	return out
}

// CapturedLetter is the FEN letter of a captured piece, "" for none.
func CapturedLetter(p rules.Piece) string {
	if p == rules.NoPiece {
		return ""
	}
	return string(p.Letter())
}

// Winner maps a rules winner; the enums share their numbers.
func Winner(w rules.Winner) commonv1.Winner { return commonv1.Winner(w) }

// Method maps a rules method; the enums share their numbers.
func Method(m rules.Method) commonv1.EndMethod { return commonv1.EndMethod(m) }
