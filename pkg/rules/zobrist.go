package rules

// Zobrist keys come from a fixed seed so hashes are stable across runs and
// processes (the game service may store them).
var zobristPiece, zobristSide = zobristKeys()

// zobristKeys draws every square's key for one piece before the next piece's,
// then the side key, all from splitmix64: changing the order or the seed
// changes every stored hash.
func zobristKeys() (piece [16][NumSquares]uint64, side uint64) {
	x := uint64(0x9e3779b97f4a7c15)
	next := func() uint64 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	for pc := range piece {
		for sq := range piece[pc] {
			piece[pc][sq] = next()
		}
	}
	return piece, next()
}

// computeHash recomputes the hash from scratch; Make keeps it incrementally.
func (p *Position) computeHash() uint64 {
	var h uint64
	for sq, pc := range p.board {
		if pc != NoPiece {
			h ^= zobristPiece[pc][sq]
		}
	}
	if p.turn == Second {
		h ^= zobristSide
	}
	return h
}
