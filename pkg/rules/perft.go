package rules

import "context"

// perftStride is the room each ply gets in Perft's move buffer: more than
// positions of either game have. Were it exceeded, the three-index slice
// makes append reallocate instead of overwriting the next ply's moves.
const perftStride = 256

// Perft counts the leaves of the legal-move tree of the given depth, passes
// included. The last ply is counted, not played. p is not changed.
//
// Two passes in a row end the game inside the tree: the second pass is a
// leaf with no children. That is Fairy-Stockfish's janggicasual semantics,
// the source of the reference counts in docs/rules.md, which hold only with it
// (Janggi start, depth 3: 33316; without it 33348). LegalMoves has no
// history and knows nothing of this; the game layer adjudicates two passes.
func Perft(p *Position, depth int) uint64 {
	if depth <= 0 {
		return 1
	}
	q := p.Clone()
	buf := make([]Move, depth*perftStride)
	return q.perft(depth, false, buf, nil)
}

// perftStop ends a count early once its context is done, looked at every
// perftCheckEvery nodes.
type perftStop struct {
	ctx     context.Context
	nodes   uint64
	stopped bool
}

const perftCheckEvery = 1 << 10

// perft counts; with a non-nil st it returns a partial count as soon as
// st stops.
func (p *Position) perft(depth int, passed bool, buf []Move, st *perftStop) uint64 {
	if st != nil {
		if st.nodes++; st.nodes%perftCheckEvery == 0 && st.ctx.Err() != nil {
			st.stopped = true
		}
		if st.stopped {
			return 0
		}
	}
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
		n += p.perft(depth-1, pass, rest, st)
		p.Unmake(m, u)
	}
	return n
}

// DivideEach is Divide for a count someone may interrupt: it hands each
// first move's count to each as soon as it is done, and gives up with
// ctx's error once ctx ends. p is not changed.
func DivideEach(ctx context.Context, p *Position, depth int, each func(Move, uint64)) error {
	if depth <= 0 {
		return nil
	}
	q := p.Clone()
	buf := make([]Move, depth*perftStride)
	st := &perftStop{ctx: ctx}
	for _, m := range q.LegalMoves(nil) {
		u := q.Make(m)
		n := uint64(1)
		if depth > 1 {
			n = q.perft(depth-1, m.IsPass(), buf, st)
		}
		q.Unmake(m, u)
		if st.stopped {
			return ctx.Err()
		}
		each(m, n)
	}
	return nil
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
			out[m] = q.perft(depth-1, m.IsPass(), buf, nil)
		}
		q.Unmake(m, u)
	}
	return out
}
