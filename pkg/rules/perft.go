package rules

// perftStride is the room each ply gets in Perft's move buffer: more than
// positions of either game have. Were it exceeded, the three-index slice
// makes append reallocate instead of overwriting the next ply's moves.
const perftStride = 256

// Perft counts the leaves of the legal-move tree of the given depth, passes
// included. The last ply is counted, not played. p is not changed.
//
// Two passes in a row end the game inside the tree: the second pass is a
// leaf with no children. That is Fairy-Stockfish's janggicasual semantics,
// the source of the reference counts in RULES.md, which hold only with it
// (Janggi start, depth 3: 33316; without it 33348). LegalMoves has no
// history and knows nothing of this; the game layer adjudicates two passes.
func Perft(p *Position, depth int) uint64 {
	if depth <= 0 {
		return 1
	}
	q := p.Clone()
	buf := make([]Move, depth*perftStride)
	return q.perft(depth, false, buf)
}

func (p *Position) perft(depth int, passed bool, buf []Move) uint64 {
	moves := p.LegalMoves(buf[:0:perftStride])
	if depth == 1 {
		return uint64(len(moves))
	}
	rest := buf[perftStride:]
	var n uint64
	for _, m := range moves {
		pass := m.IsPass()
		if pass && passed {
			continue // two passes in a row end the game: a leaf with no children
		}
		u := p.Make(m)
		n += p.perft(depth-1, pass, rest)
		p.Unmake(m, u)
	}
	return n
}

// Divide is Perft split by first move, for finding where two move
// generators disagree.
func Divide(p *Position, depth int) map[Move]uint64 {
	out := map[Move]uint64{}
	if depth <= 0 {
		return out
	}
	q := p.Clone()
	buf := make([]Move, depth*perftStride)
	for _, m := range q.LegalMoves(nil) {
		u := q.Make(m)
		if depth == 1 {
			out[m] = 1
		} else {
			out[m] = q.perft(depth-1, m.IsPass(), buf)
		}
		q.Unmake(m, u)
	}
	return out
}
