package rules

// Position is a board, the side to move and the two move counters. It is a
// plain value (no pointers except to shared read-only tables), so Clone is a
// copy and a search can keep one Position per thread.
//
// Obtain one with ParseFEN; the zero Position is not usable. A Position is
// not safe for concurrent use, even by calls that look read-only:
// LegalMoves tries moves on the board in place (cheaper than copying).
type Position struct {
	board   [NumSquares]Piece
	tb      *tables
	variant Variant
	turn    Side
	general [2]Square
	// pl[side][kind][:pn[side][kind]] are the squares of side's pieces of a
	// kind, so move generation and the attack test visit pieces instead of
	// scanning squares; index maps an occupied square to its slot.
	pn       [2][8]uint8
	pl       [2][8][maxOfKind]Square
	index    [NumSquares]uint8
	hash     uint64
	halfmove uint32
	fullmove uint32
}

func (p *Position) Variant() Variant { return p.variant }

// Turn is the side to move.
func (p *Position) Turn() Side { return p.turn }

// PieceAt returns NoPiece for an empty or off-board square.
func (p *Position) PieceAt(sq Square) Piece {
	if !sq.Valid() {
		return NoPiece
	}
	return p.board[sq]
}

// GeneralSquare returns NoSquare only for positions reached by an illegal Make.
func (p *Position) GeneralSquare(s Side) Square {
	if s > Second {
		return NoSquare
	}
	return p.general[s]
}

// HalfmoveClock is the FEN halfmove counter: plies since the last capture.
// It is carried along only; no rule here ends a game on it.
func (p *Position) HalfmoveClock() int { return int(p.halfmove) }

// FullmoveNumber is the FEN move number, incremented after Second moves.
func (p *Position) FullmoveNumber() int { return int(p.fullmove) }

func (p *Position) Clone() *Position {
	q := *p
	return &q
}

// Hash is a Zobrist hash of the board and the side to move (not the
// counters), so equal hashes mean the same position for repetition.
func (p *Position) Hash() uint64 { return p.hash }

// InCheck reports whether the side to move's general is attacked. In Xiangqi
// facing generals count too, though no legal play can produce that.
func (p *Position) InCheck() bool {
	g := p.general[p.turn]
	if g < 0 {
		return false
	}
	if p.attacked(int(g), p.turn^1) {
		return true
	}
	return !p.tb.janggi && p.facing(int(g), int(p.general[p.turn^1]))
}

// GeneralsFacing reports whether both generals stand on one file with
// nothing between them (bikjang in Janggi, forbidden in Xiangqi).
func (p *Position) GeneralsFacing() bool {
	return p.general[First] >= 0 && p.facing(int(p.general[First]), int(p.general[Second]))
}

// facing reports whether the generals on g and other face each other.
func (p *Position) facing(g, other int) bool {
	if other < 0 || g%NumFiles != other%NumFiles {
		return false
	}
	lo, hi := g, other
	if lo > hi {
		lo, hi = hi, lo
	}
	for s := lo + NumFiles; s < hi; s += NumFiles {
		if p.board[s] != NoPiece {
			return false
		}
	}
	return true
}

// Points is the Janggi score of side's pieces on the board (chariot 13,
// cannon 7, horse 5, elephant 3, guard 3, soldier 2), with Han's 1.5
// compensation added in Janggi.
func (p *Position) Points(s Side) float64 {
	if s > Second {
		return 0
	}
	total := 0
	for k := General; k <= Soldier; k++ {
		total += janggiValue[k] * int(p.pn[s][k])
	}
	pts := float64(total)
	if s == Second && p.variant == Janggi {
		pts += 1.5
	}
	return pts
}

// put places pc on an empty square, keeping the piece lists and general
// squares; only the FEN parser builds positions this way.
func (p *Position) put(sq int, pc Piece) {
	s, k := pc.Side(), pc.Kind()
	p.board[sq] = pc
	p.index[sq] = p.pn[s][k]
	p.pl[s][k][p.pn[s][k]] = Square(sq)
	p.pn[s][k]++
	if k == General {
		p.general[s] = Square(sq)
	}
}
