package rules

import (
	"slices"
	"testing"
)

func TestChases(t *testing.T) {
	tests := []struct {
		name string
		fen  string
		move string
		want []string // squares of the chased pieces
	}{
		{"chariot attacks an unprotected horse", "4k4/7R1/9/2n6/9/9/9/9/9/3K5 w - - 0 1", "h9h7", []string{"c7"}},
		{"a protected piece is not chased", "2r1k4/7R1/9/2n6/9/9/9/9/9/3K5 w - - 0 1", "h9h7", nil},
		{"a check is not a chase of the general", "4k4/9/9/9/9/9/9/9/9/R2K5 w - - 0 1", "a1a10", nil},
		{"a soldier on its own side may be attacked", "4k4/7R1/9/2p6/9/9/9/9/9/3K5 w - - 0 1", "h9h7", nil},
		{"a soldier across the river may not", "4k4/9/9/9/9/7R1/2p6/9/9/3K5 w - - 0 1", "h5h4", []string{"c4"}},
		// The river lies between ranks 5 and 6: a soldier on its own bank
		// has not crossed, one on the far bank has.
		{"a red soldier on its own bank may be attacked", "4k4/9/9/9/9/2P6/7r1/9/9/3K5 b - - 0 1", "h4h5", nil},
		{"a black soldier on its own bank may be attacked", "4k4/9/9/9/2p6/7R1/9/9/9/3K5 w - - 0 1", "h5h6", nil},
		{"a red soldier on the far bank may not", "4k4/9/9/9/2P6/7r1/9/9/9/3K5 b - - 0 1", "h5h6", []string{"c6"}},
		{"a black soldier on the far bank may not", "4k4/9/9/9/9/2p6/7R1/9/9/3K5 w - - 0 1", "h4h5", []string{"c5"}},
		{"soldiers chase freely", "4k4/9/2n6/2P6/9/9/9/9/9/3K5 w - - 0 1", "c7c8", nil},
		{"generals chase freely", "3k5/9/9/9/9/9/9/9/3n5/4K4 w - - 0 1", "e1e2", nil},
		{"a discovered attack is a chase", "4k4/9/c8/9/9/9/9/N8/9/R2K5 w - - 0 1", "a3b5", []string{"a8"}},
		{"an attack that was there before is no chase", "4k4/9/9/2n4R1/9/9/9/9/9/3K5 w - - 0 1", "d1d2", nil},
		// The chariot stays pinned on rank 1: it may not take the horse, and
		// it attacked the pinning chariot already.
		{"a pinned chariot threatens nothing new", "3k5/9/9/9/2n6/9/9/9/9/rR2K4 w - - 0 1", "b1c1", nil},
		{"the same chariot unpinned", "3k5/9/9/9/2n6/9/9/9/9/1R2K4 w - - 0 1", "b1c1", []string{"c6"}},
		// The chariot leaving the d-file pinned the horse (the generals
		// would face each other); its return frees it to take the elephant.
		{"a move that unpins a piece makes its attacks new", "c1bk5/9/3N5/9/9/9/2R6/9/3K5/9 w - - 0 1", "c4d4", []string{"c10"}},
		// In check, the same: the king steps out of the horse's check and
		// off the file where its horse was pinned.
		{"a move out of check that unpins a piece makes its attacks new", "c1bk5/9/3N5/9/4n4/9/9/1n7/3K5/4R4 w - - 0 1", "d2e2", []string{"e6", "c10"}},
		// Red blocks the black chariot's check; the chariot on h7 had the
		// horse in sight before, when Red's only legal moves were evasions.
		{"an attack held while in check is no chase", "4k4/9/9/2n4R1/9/3r5/9/9/1C7/3K5 w - - 0 1", "b2d2", nil},
		{"two pieces chased at once", "4k4/9/9/9/9/9/2c6/7R1/3K5/2n6 w - - 0 1", "h3c3", []string{"c1", "c4"}},
		{"a protector that may recapture", "9/3r1k3/9/3n5/9/9/9/9/9/4K2R1 w - - 0 1", "h1h7", nil},
		{"a pinned protector does not protect", "9/R2r1k3/9/3n5/9/9/9/9/9/4K2R1 w - - 0 1", "h1h7", []string{"d7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFEN(t, Xiangqi, tt.fen)
			m := mustMove(t, tt.move)
			if err := p.CheckMove(m); err != nil {
				t.Fatal(err)
			}
			var ids [NumSquares]int8
			var sqOf []Square
			for sq := range ids {
				ids[sq] = -1
				if p.PieceAt(Square(sq)) != NoPiece {
					ids[sq] = int8(len(sqOf))
					sqOf = append(sqOf, Square(sq))
				}
			}
			before := p.FEN()
			set := chases(p, m, &ids)
			if p.FEN() != before {
				t.Fatal("chases changed the position")
			}
			var got []string
			for id, sq := range sqOf {
				if set&(1<<uint(id)) != 0 {
					got = append(got, sq.String())
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("chased %v, want %v", got, tt.want)
			}
		})
	}
}
