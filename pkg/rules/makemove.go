package rules

// Undo holds what Make destroys, so Unmake can restore the position exactly
// (board, piece-list order, hash and counters) without allocating.
type Undo struct {
	Captured           Piece
	capIdx             uint8
	halfmove, fullmove uint32
	hash               uint64
}

// maxCounter is the largest halfmove clock and fullmove number a FEN may
// carry (ParseFEN): the counters stop there, so that every position
// prints as a FEN that parses.
const maxCounter = 1<<31 - 1

// Make plays m, which must be legal (CheckMove returns nil, or it came from
// LegalMoves); Make does not check. A pass (from == to) only changes the side
// to move and the counters. It panics if m is not a move on the board.
func (p *Position) Make(m Move) Undo {
	from, to := int(m&127), int(m>>7&127)
	if from >= NumSquares || to >= NumSquares {
		panic("rules: Make called with " + m.String())
	}
	u := Undo{hash: p.hash, halfmove: p.halfmove, fullmove: p.fullmove}
	us := p.turn
	if p.halfmove < maxCounter {
		p.halfmove++
	}
	if from != to {
		pc := p.board[from]
		if c := p.board[to]; c != NoPiece {
			them := us ^ 1
			// Remove the captured piece by moving the last list entry into
			// its slot; Unmake reverses exactly this, so list order survives.
			ck := c.Kind()
			ci := p.index[to]
			n := p.pn[them][ck] - 1
			last := p.pl[them][ck][n]
			p.pl[them][ck][ci] = last
			p.index[last] = ci
			p.pn[them][ck] = n
			u.Captured, u.capIdx = c, ci
			p.hash ^= zobristPiece[c][to]
			p.halfmove = 0
			if c.Kind() == General {
				p.general[them] = NoSquare
			}
		}
		i := p.index[from]
		p.pl[us][pc.Kind()][i] = Square(to)
		p.index[to] = i
		p.board[to], p.board[from] = pc, NoPiece
		p.hash ^= zobristPiece[pc][from] ^ zobristPiece[pc][to]
		if pc.Kind() == General {
			p.general[us] = Square(to)
		}
	}
	if us == Second && p.fullmove < maxCounter {
		p.fullmove++
	}
	p.turn = us ^ 1
	p.hash ^= zobristSide
	return u
}

// Unmake takes back m, which must be the last move made, with its Undo.
func (p *Position) Unmake(m Move, u Undo) {
	from, to := int(m&127), int(m>>7&127)
	if from >= NumSquares || to >= NumSquares {
		panic("rules: Unmake called with " + m.String())
	}
	them := p.turn
	us := them ^ 1
	p.turn = us
	p.hash, p.halfmove, p.fullmove = u.hash, u.halfmove, u.fullmove
	if from == to {
		return
	}
	pc := p.board[to]
	p.board[from] = pc
	i := p.index[to]
	p.pl[us][pc.Kind()][i] = Square(from)
	p.index[from] = i
	if pc.Kind() == General {
		p.general[us] = Square(from)
	}
	c := u.Captured
	p.board[to] = c
	if c != NoPiece {
		ck := c.Kind()
		ci := u.capIdx
		n := p.pn[them][ck]
		moved := p.pl[them][ck][ci]
		p.pl[them][ck][n] = moved
		p.index[moved] = n
		p.pl[them][ck][ci] = Square(to)
		p.index[to] = ci
		p.pn[them][ck] = n + 1
		if c.Kind() == General {
			p.general[them] = Square(to)
		}
	}
}
