package rules

// firstOfThree returns the ply after which the current position first
// occurred, if the current position is its third occurrence, or -1.
//
// Positions are compared by Zobrist hash (board and side to move), as
// docs/rules.md defines a position for repetition; a 64-bit collision is
// ignored. Only positions since the last capture can match, because a
// capture removes a piece for good, so the scan is short (at most 120 plies
// in Xiangqi, 200 in Janggi). The game ends at the first third occurrence
// of any position, so none occurs more than three times and the first of
// the three is the first ever.
func (g *Game) firstOfThree() int {
	n := len(g.moves)
	h := g.hashes[n]
	seen, first := 0, -1
	for i := n - 1; i >= g.lastCap; i-- {
		if g.hashes[i] == h {
			seen++
			first = i
		}
	}
	if seen < 2 {
		return -1
	}
	return first
}

// moverOf returns the side that played ply k (1-based). Every ply, pass
// included, hands the turn over, so sides alternate from the start.
func (g *Game) moverOf(k int) Side {
	return g.start.Turn() ^ Side((k-1)&1)
}

// repetition ends the game if the current position occurs for the third
// time, and reports whether it did.
//
// Both games first look for perpetual check: one side gave check with every
// move between the first and the third occurrence and the other side did
// not, so the checking side loses. A Janggi pass counts as a move that gives
// no check. Otherwise Janggi is decided on points; Xiangqi looks for
// perpetual chase (see chase.go) and else draws.
func (g *Game) repetition() bool {
	first := g.firstOfThree()
	if first < 0 {
		return false
	}
	n := len(g.moves)
	allCheck := [2]bool{true, true}
	for k := first + 1; k <= n; k++ {
		s := g.moverOf(k)
		allCheck[s] = allCheck[s] && g.plies[k-1].check
	}
	for s := First; s <= Second; s++ {
		if allCheck[s] && !allCheck[s.Opponent()] {
			g.end(winnerFor(s.Opponent()), PerpetualCheck)
			return true
		}
	}
	if g.Variant() == Janggi {
		g.endOnPoints(Repetition)
		return true
	}
	if loser, ok := g.perpetualChaser(first); ok {
		g.end(winnerFor(loser.Opponent()), PerpetualChase)
		return true
	}
	g.end(Draw, Repetition)
	return true
}
