package engine

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

const (
	maxPly   = 100
	maxMoves = 256 // more than any position of either game has (rules' perft uses the same stride)
	infinity = 32000
	// mateScore - n is a win n plies from the root. Any |score| at or
	// above mateBound is a decided game, never an evaluation.
	mateScore = 31000
	mateBound = mateScore - 1000
)

// futilityMargin[depth] is how much a quiet move is assumed to gain at most.
var futilityMargin = [3]int{0, 160, 320}

// passKey is mixed into the transposition key of a position reached by a
// Janggi pass: there a second pass ends the game, after a move it does not.
const passKey = 0x6a09e667f3bcc909

// state is what the adjudication rules need to know about one position of
// the game (history and search path alike); st[i] is the position after i
// plies from the game's start.
type state struct {
	hash     uint64
	move     rules.Move // the move that led here
	captured rules.Piece
	check    bool // the side to move here is in check (the move gave check)
	facing   bool // Janggi: the generals face each other here
	pass     bool // the move that led here was a Janggi pass
	null     bool // the move that led here was a Xiangqi null move
	// floor is the earliest index a repetition of this position can be
	// found at: positions before a capture cannot come back, and positions
	// before a null move are not on a real game path.
	floor   int32
	lastCap int32 // index of the position after the last capture (0: none)
	caps    int32 // captures so far in the game
}

type rootMove struct {
	move  rules.Move
	score int // this iteration; -infinity when only a bound is known
	pv    []rules.Move
}

type searcher struct {
	pos     *rules.Position
	variant rules.Variant
	janggi  bool
	tt      *table
	stop    *atomic.Bool
	seed    uint64

	st     []state
	root   int
	counts [2][8]int8
	// board mirrors pos, and psq is each side's material and table score,
	// both kept by make and unmake for the evaluation.
	board [90]rules.Piece
	psq   [2]int32
	// plist[side][:pcount[side]] are the squares of side's pieces, in no
	// particular order; pindex maps an occupied square to its slot.
	plist  [2][16]int8
	pcount [2]uint8
	pindex [90]uint8

	nodes     uint64
	nodeLimit uint64
	start     time.Time
	hard      time.Duration
	timed     bool
	stopped   bool
	firstDone bool // depth 1 is complete: limits may now stop the search
	seldepth  int
	rootDepth int
	noise     int

	rootMoves []rootMove
	// best is the move to play if the search stopped now.
	best      rules.Move
	bestScore int
	bestPV    []rules.Move
	bestDepth int

	moves  [maxPly + 1][maxMoves]rules.Move
	mscore [maxPly + 1][maxMoves]int32
	undo   [maxPly + 1]rules.Undo
	// histUndo are the undos of the game's moves before the root.
	histUndo []rules.Undo
	killers  [maxPly + 1][2]rules.Move
	history  [2][90 * 90]int32
	pv       [maxPly + 1][maxPly + 1]rules.Move
	pvLen    [maxPly + 1]int
	// quickFrom[side] is the square of the piece of side that quickMove
	// last found a move for (a hint only: it may hold anything now).
	quickFrom [2]int8
}

func newSearcher() *searcher { return &searcher{} }

func (s *searcher) clearHeuristics() {
	s.killers = [maxPly + 1][2]rules.Move{}
	s.history = [2][90 * 90]int32{}
}

func (s *searcher) top() *state { return &s.st[len(s.st)-1] }

// make plays m at search ply ply and records the new position's state.
func (s *searcher) make(m rules.Move, ply int) {
	prev := s.top()
	n := int32(len(s.st))
	from, to := int(m.From()), int(m.To())
	u := s.pos.Make(m)
	if from != to {
		pc := s.board[from]
		side := pc.Side()
		s.psq[side] += int32(psqValue(s.variant, pc, to) - psqValue(s.variant, pc, from))
		if c := u.Captured; c != rules.NoPiece {
			s.psq[side^1] -= int32(psqValue(s.variant, c, to))
			ci := s.pindex[to]
			s.pcount[side^1]--
			last := s.plist[side^1][s.pcount[side^1]]
			s.plist[side^1][ci] = last
			s.pindex[last] = ci
		}
		i := s.pindex[from]
		s.plist[side][i] = int8(to)
		s.pindex[to] = i
		s.board[to], s.board[from] = pc, rules.NoPiece
	}
	s.undo[ply] = u
	st := state{
		hash:     s.pos.Hash(),
		move:     m,
		captured: u.Captured,
		check:    s.pos.InCheck(),
		pass:     s.janggi && m.IsPass(),
		null:     !s.janggi && m.IsPass(),
		floor:    prev.floor,
		lastCap:  prev.lastCap,
		caps:     prev.caps,
	}
	if s.janggi {
		st.facing = s.pos.GeneralsFacing()
	}
	if u.Captured != rules.NoPiece {
		st.floor, st.lastCap = n, n
		st.caps++
		s.counts[u.Captured.Side()][u.Captured.Kind()]--
	}
	if st.null {
		st.floor = n
	}
	s.st = append(s.st, st)
}

func (s *searcher) unmake(ply int) {
	n := len(s.st) - 1
	st := &s.st[n]
	m := st.move
	s.pos.Unmake(m, s.undo[ply])
	if from, to := int(m.From()), int(m.To()); from != to {
		pc := s.board[to]
		side := pc.Side()
		s.psq[side] -= int32(psqValue(s.variant, pc, to) - psqValue(s.variant, pc, from))
		i := s.pindex[to]
		s.plist[side][i] = int8(from)
		s.pindex[from] = i
		if c := st.captured; c != rules.NoPiece {
			s.psq[side^1] += int32(psqValue(s.variant, c, to))
			n := s.pcount[side^1]
			s.plist[side^1][n] = int8(to)
			s.pindex[to] = n
			s.pcount[side^1]++
		}
		s.board[from], s.board[to] = pc, st.captured
	}
	if st.captured != rules.NoPiece {
		s.counts[st.captured.Side()][st.captured.Kind()]++
	}
	s.st = s.st[:n]
}

// makeNull hands the move to the opponent: in Janggi the legal pass, in
// Xiangqi a search-only null move (see the package comment).
func (s *searcher) makeNull(ply int) {
	g := s.pos.GeneralSquare(s.pos.Turn())
	s.make(rules.NewMove(g, g), ply)
}

func (s *searcher) nullAllowed() bool {
	cur := s.top()
	if s.janggi {
		return !cur.pass
	}
	if cur.null {
		return false
	}
	c := &s.counts[s.pos.Turn()]
	return c[rules.Chariot] > 0 || c[rules.Horse]+c[rules.Cannon] >= 2
}

func (s *searcher) ttKey() uint64 {
	cur := s.top()
	if cur.pass {
		return cur.hash ^ passKey
	}
	return cur.hash
}

func (s *searcher) shouldStop() bool {
	if s.stopped {
		return true
	}
	if s.nodes&1023 == 0 {
		if s.stop.Load() || (s.timed && s.firstDone && time.Since(s.start) >= s.hard) {
			s.stopped = true
		}
	}
	if s.nodeLimit != 0 && s.firstDone && s.nodes >= s.nodeLimit {
		s.stopped = true
	}
	return s.stopped
}

// winScore is a decided game at ply: won for the side to move if won.
func winScore(won bool, ply int) int {
	if won {
		return mateScore - ply
	}
	return -mateScore + ply
}

// pointsScore is the Janggi result on points for the side to move; Han's
// 1.5 makes a tie impossible.
func (s *searcher) pointsScore(ply int) int {
	us := s.pos.Turn()
	return winScore(s.pos.Points(us) > s.pos.Points(us^1), ply)
}

func (s *searcher) noLegalMoves(ply int) bool {
	return len(s.pos.LegalMoves(s.moves[ply][:0])) == 0
}

// The plies that end a game (docs/rules.md): a Janggi game's, decided on
// points, and Xiangqi's without a capture, drawn.
const (
	janggiPlies       = 200
	xiangqiQuietPlies = 120
)

// adjudicate applies the ending rules that need the game's history, in the
// order of docs/rules.md "Order and counting", to the position at ply > 0. It
// reports the score if the game has ended here. A side to move without a
// legal move is left to the caller, except where another ending would
// otherwise hide it.
func (s *searcher) adjudicate(ply int) (int, bool) {
	n := len(s.st) - 1
	cur := &s.st[n]
	var score int
	var ended bool
	if s.janggi {
		if cur.pass && n >= 2 && s.st[n-1].pass {
			return s.pointsScore(ply), true
		}
		switch {
		case cur.facing && n >= 2 && s.st[n-1].facing && cur.caps > 0:
			score, ended = s.pointsScore(ply), true
		default:
			score, ended = s.repetition(n, ply)
			if !ended && n >= janggiPlies {
				score, ended = s.pointsScore(ply), true
			}
		}
		if !ended {
			return 0, false
		}
		// Only a side in check can be without a move (it may pass else).
		if cur.check && s.noLegalMoves(ply) {
			return -mateScore + ply, true
		}
		return score, true
	}
	score, ended = s.repetition(n, ply)
	if !ended && n-int(cur.lastCap) >= xiangqiQuietPlies {
		score, ended = 0, true
	}
	if !ended && cur.captured != rules.NoPiece && s.noAttackers() {
		score, ended = 0, true
	}
	if !ended {
		return 0, false
	}
	if s.noLegalMoves(ply) {
		return -mateScore + ply, true
	}
	return score, true
}

// noAttackers: neither Xiangqi side has a piece that can cross the river.
func (s *searcher) noAttackers() bool {
	for side := range s.counts {
		c := &s.counts[side]
		if c[rules.Chariot]+c[rules.Horse]+c[rules.Cannon]+c[rules.Soldier] > 0 {
			return false
		}
	}
	return true
}

// repetition scores position n if it ends the game by repetition: its third
// occurrence in the game, or its second when the earlier one is inside the
// search tree (the side that could avoid the cycle could have done so the
// first time round, so the search treats the first return as final). A side
// that gave check with every move of the cycle while the other did not
// loses; otherwise Janggi is decided on points, and in Xiangqi a side that
// chased one piece on every move of the cycle while the other did not
// force loses (rules.PerpetualChaser), else it is a draw.
func (s *searcher) repetition(n, ply int) (int, bool) {
	cur := &s.st[n]
	h := cur.hash
	count, recent, earliest := 0, -1, -1
	for i := n - 2; i >= int(cur.floor); i -= 2 {
		if s.st[i].hash == h {
			count++
			if recent < 0 {
				recent = i
			}
			earliest = i
		}
	}
	// end is the ply of the game's end: a second occurrence scored as
	// final ends it one cycle later, at the third, so that a decided
	// score's distance (AIService's mate_in) is never short of the rules'.
	// The rules judge the plies from the first occurrence of the position
	// that comes back a third time to that occurrence: first on to n, and
	// for a second occurrence scored as final, the replay plies of the
	// cycle played again.
	var first, end, replay int
	switch {
	case count >= 2:
		first, end = earliest, ply
	case count == 1 && recent > s.root:
		k, from := s.toThird(n, recent)
		first, end, replay = from, ply+k, k
		// A limit that ends the game before the third occurrence decides
		// it instead (adjudicate).
		third := n + k
		if s.janggi && third >= janggiPlies || !s.janggi && third-int(cur.lastCap) >= xiangqiQuietPlies {
			return 0, false
		}
	default:
		return 0, false
	}
	us := s.pos.Turn()
	allCheck := [2]bool{true, true}
	for k := first + 1; k <= n; k++ {
		mover := us ^ rules.Side((n-k+1)&1)
		allCheck[mover] = allCheck[mover] && s.st[k].check
	}
	for side := rules.First; side <= rules.Second; side++ {
		if allCheck[side] && !allCheck[side^1] {
			return winScore(side != us, end), true
		}
	}
	if s.janggi {
		return s.pointsScore(end), true
	}
	if loser, ok := s.chaser(first, n, recent, replay); ok {
		return winScore(loser != us, end), true
	}
	return 0, true
}

// toThird is how many plies after position n, the second occurrence of
// position recent, the cycle between them played again brings a position
// back a third time: that of n, a cycle later, unless one of the cycle's
// own positions had come before it (at the root or in the game's
// history), which comes back a third time sooner. It returns too the
// first occurrence of the position that comes back: recent, or that
// earlier one.
func (s *searcher) toThird(n, recent int) (plies, first int) {
	floor := int(s.st[n].floor)
	for j := 1; j < n-recent; j++ {
		h := s.st[recent+j].hash
		for i := recent + j - 2; i >= floor; i -= 2 {
			if s.st[i].hash == h {
				// The rules judge that third occurrence over the plies
				// from the first one: every ply from i on (the cycle's
				// replay repeats plies already among them).
				return j, i
			}
		}
	}
	return n - recent, recent
}

// chaser finds the loser by perpetual chase of the plies from position
// first to position n, the current one, then the first replay plies after
// position recent, n's earlier occurrence, played again.
func (s *searcher) chaser(first, n, recent, replay int) (rules.Side, bool) {
	at := s.pos.Clone()
	for k := n; k > first; k-- {
		at.Unmake(s.st[k].move, s.undoOf(k))
	}
	moves := make([]rules.Move, 0, n-first+replay)
	checks := make([]bool, 0, n-first+replay)
	for k := first + 1; k <= n; k++ {
		moves = append(moves, s.st[k].move)
		checks = append(checks, s.st[k].check)
	}
	for k := recent + 1; k <= recent+replay; k++ {
		moves = append(moves, s.st[k].move)
		checks = append(checks, s.st[k].check)
	}
	return rules.PerpetualChaser(at, moves, checks)
}

// undoOf is the undo of the move that led to position k: a move of the
// game's history, or one made at search ply k-root-1.
func (s *searcher) undoOf(k int) rules.Undo {
	if k <= s.root {
		return s.histUndo[k-1]
	}
	return s.undo[k-s.root-1]
}

// scoreMoves fills the ordering keys of moves at ply: the hash move, then
// captures by MVV/LVA, killers, quiet moves by history, and the pass last.
func (s *searcher) scoreMoves(ply int, moves []rules.Move, ttMove rules.Move) {
	sc := s.mscore[ply][:len(moves)]
	hist := &s.history[s.pos.Turn()]
	k := &s.killers[ply]
	for i, m := range moves {
		switch {
		case m == ttMove:
			sc[i] = 1 << 30
		case m.IsPass():
			sc[i] = -1 << 20
		default:
			from, to := m.From(), m.To()
			if victim := s.pos.PieceAt(to); victim != rules.NoPiece {
				sc[i] = 1<<28 + int32(orderValue[victim.Kind()]*64-orderValue[s.pos.PieceAt(from).Kind()])
			} else if m == k[0] {
				sc[i] = 1<<27 + 1
			} else if m == k[1] {
				sc[i] = 1 << 27
			} else {
				sc[i] = hist[int(from)*90+int(to)]
			}
		}
	}
}

// pick moves the best-keyed move of moves[i:] to i (selection sort: most
// nodes cut off after a move or two, so sorting everything is waste).
func (s *searcher) pick(ply int, moves []rules.Move, i int) rules.Move {
	sc := &s.mscore[ply]
	best := i
	for j := i + 1; j < len(moves); j++ {
		if sc[j] > sc[best] {
			best = j
		}
	}
	if best != i {
		moves[i], moves[best] = moves[best], moves[i]
		sc[i], sc[best] = sc[best], sc[i]
	}
	return moves[i]
}

func (s *searcher) updatePV(ply int, m rules.Move) {
	s.pv[ply][ply] = m
	n := s.pvLen[ply+1]
	copy(s.pv[ply][ply+1:n], s.pv[ply+1][ply+1:n])
	s.pvLen[ply] = max(n, ply+1)
}

func (s *searcher) goodQuiet(ply int, m rules.Move, depth int) {
	k := &s.killers[ply]
	if k[0] != m {
		k[1], k[0] = k[0], m
	}
	h := &s.history[s.pos.Turn()][int(m.From())*90+int(m.To())]
	*h += int32(depth * depth)
	if *h > 1<<24 {
		for i := range s.history {
			for j := range s.history[i] {
				s.history[i][j] /= 2
			}
		}
	}
}

// search is the alpha-beta (PVS) search of the position at ply > 0.
func (s *searcher) search(depth, ply, alpha, beta int) int {
	s.pvLen[ply] = ply
	if s.shouldStop() {
		return 0
	}
	if v, ok := s.adjudicate(ply); ok {
		return v
	}
	// A node of the principal variation stays one when the bounds
	// below narrow its window: a table cut there would cut the pv short.
	wasPV := beta-alpha > 1
	// Mate distance pruning: nothing here can beat a shorter mate found.
	alpha = max(alpha, -mateScore+ply)
	beta = min(beta, mateScore-ply-1)
	if alpha >= beta {
		return alpha
	}
	if depth <= 0 {
		return s.qsearch(ply, alpha, beta)
	}
	s.nodes++
	s.seldepth = max(s.seldepth, ply)
	if ply >= maxPly {
		return s.evaluate()
	}
	inCheck := s.top().check
	pvNode := beta-alpha > 1
	key := s.ttKey()
	ttMove := rules.NoMove
	if e, ok := s.tt.probe(key); ok {
		ttMove = e.move
		if !wasPV && int(e.depth) >= depth {
			v := scoreFromTT(int(e.score), ply)
			switch b := e.genBound & 3; {
			case b == boundExact, b == boundLower && v >= beta, b == boundUpper && v <= alpha:
				return v
			}
		}
	}
	staticEval := -infinity
	if !inCheck {
		staticEval = s.evaluate()
	}
	if !pvNode && !inCheck && beta < mateBound && beta > -mateBound {
		// Reverse futility: far above beta near the leaves, a quiet
		// move will not bring the score back down.
		if depth <= 3 && staticEval-110*depth >= beta {
			if s.stalemated(ply) {
				return -mateScore + ply // stalemate loses in Xiangqi
			}
			return staticEval
		}
		if depth >= 3 && staticEval >= beta && s.nullAllowed() {
			r := 2 + depth/4
			s.makeNull(ply)
			v := -s.search(depth-1-r, ply+1, -beta, -beta+1)
			s.unmake(ply)
			if s.stopped {
				return 0
			}
			if v >= beta {
				if s.stalemated(ply) {
					return -mateScore + ply // stalemate loses in Xiangqi
				}
				if v >= mateBound {
					v = beta // a reduced search does not prove a mate
				}
				return v
			}
		}
	}

	moves := s.pos.LegalMoves(s.moves[ply][:0])
	if len(moves) == 0 {
		return -mateScore + ply // checkmate, or stalemate, which loses in Xiangqi
	}
	s.scoreMoves(ply, moves, ttMove)
	k := &s.killers[ply]
	best, bestMove := -infinity, rules.NoMove
	origAlpha := alpha
	for i := range moves {
		m := s.pick(ply, moves, i)
		capture := !m.IsPass() && s.pos.PieceAt(m.To()) != rules.NoPiece
		s.make(m, ply)
		givesCheck := s.top().check
		// Futility pruning: near the leaves, a quiet move cannot lift a
		// position this far below alpha. Passes and moves that leave the
		// Janggi generals facing are never pruned: they may end the game.
		if depth <= 2 && i > 0 && !pvNode && !inCheck && !givesCheck && !capture && !m.IsPass() &&
			!s.top().facing && best > -mateBound && staticEval+futilityMargin[depth] <= alpha {
			s.unmake(ply)
			continue
		}
		nd := depth - 1
		if givesCheck && ply < 2*s.rootDepth {
			nd++
		}
		var v int
		if i == 0 {
			v = -s.search(nd, ply+1, -beta, -alpha)
		} else {
			r := 0
			if depth >= 3 && i >= 3 && !capture && !inCheck && !givesCheck && m != k[0] && m != k[1] {
				r = 1
				if i >= 8 && depth >= 5 {
					r = 2
				}
				if pvNode {
					r--
				}
			}
			v = -s.search(nd-r, ply+1, -alpha-1, -alpha)
			if v > alpha && r > 0 {
				v = -s.search(nd, ply+1, -alpha-1, -alpha)
			}
			if v > alpha && v < beta {
				v = -s.search(nd, ply+1, -beta, -alpha)
			}
		}
		s.unmake(ply)
		if s.stopped {
			return 0
		}
		if v > best {
			best = v
			if v > alpha {
				alpha, bestMove = v, m
				s.updatePV(ply, m)
				if v >= beta {
					if !capture {
						s.goodQuiet(ply, m, depth)
					}
					break
				}
			}
		}
	}
	bound := boundUpper
	switch {
	case best >= beta:
		bound = boundLower
	case best > origAlpha:
		bound = boundExact
	}
	s.tt.store(key, bestMove, scoreToTT(best, ply), staticEval, depth, bound)
	return best
}

// qsearch resolves captures (and, in check, every evasion) until the
// position is quiet enough for the evaluation to be trusted.
func (s *searcher) qsearch(ply, alpha, beta int) int {
	s.pvLen[ply] = ply
	if s.shouldStop() {
		return 0
	}
	if v, ok := s.adjudicate(ply); ok {
		return v
	}
	s.nodes++
	s.seldepth = max(s.seldepth, ply)
	if ply >= maxPly {
		return s.evaluate()
	}
	cur := s.top()
	inCheck := cur.check
	best, stand := -infinity, 0
	if !inCheck {
		stand = s.evaluate()
		if s.janggi && (cur.pass || cur.facing && cur.caps > 0) {
			// A pass here ends the game on points: after the opponent's
			// pass (two passes), or when the opponent's move left the
			// generals facing once a piece has been captured, since the
			// pass leaves them facing (bikjang). That is an exact
			// result that standing pat must not hide.
			us := s.pos.Turn()
			if w := winScore(s.pos.Points(us) > s.pos.Points(us^1), ply+1); w > stand {
				stand = w
				// The line ends with that pass: show it.
				g := s.pos.GeneralSquare(us)
				s.pv[ply][ply] = rules.NewMove(g, g)
				s.pvLen[ply] = ply + 1
			}
		}
		if stand >= beta {
			if s.stalemated(ply) {
				return -mateScore + ply // stalemate loses in Xiangqi
			}
			return stand
		}
		alpha = max(alpha, stand)
		best = stand
	}
	all := s.pos.LegalMoves(s.moves[ply][:0])
	if len(all) == 0 {
		return -mateScore + ply
	}
	moves := all[:0]
	sc := &s.mscore[ply]
	mat := &material[s.variant]
	hist := &s.history[s.pos.Turn()]
	for _, m := range all {
		victim := rules.NoPiece
		if !m.IsPass() {
			victim = s.pos.PieceAt(m.To())
		}
		key := int32(0)
		if victim != rules.NoPiece {
			// Delta pruning: even winning this piece cannot reach alpha.
			if !inCheck && stand+mat[victim.Kind()]+200 <= alpha && victim.Kind() != rules.General {
				continue
			}
			key = 1<<28 + int32(orderValue[victim.Kind()]*64-orderValue[s.pos.PieceAt(m.From()).Kind()])
		} else if !inCheck {
			continue
		} else {
			key = hist[int(m.From())*90+int(m.To())]
		}
		sc[len(moves)] = key
		moves = append(moves, m)
	}
	for i := range moves {
		m := s.pick(ply, moves, i)
		s.make(m, ply)
		v := -s.qsearch(ply+1, -beta, -alpha)
		s.unmake(ply)
		if s.stopped {
			return 0
		}
		if v > best {
			best = v
			if v > alpha {
				alpha = v
				s.updatePV(ply, m)
				if v >= beta {
					break
				}
			}
		}
	}
	return best
}

// searchRoot searches every root move once at depth and returns the best
// score; rootMoves ends up sorted best first.
func (s *searcher) searchRoot(depth, alpha, beta int) int {
	s.pvLen[0] = 0
	best := -infinity
	for i := range s.rootMoves {
		s.rootMoves[i].score = -infinity
	}
	for i := range s.rootMoves {
		rm := &s.rootMoves[i]
		m := rm.move
		s.make(m, 0)
		nd := depth - 1
		if s.top().check {
			nd++
		}
		var v int
		switch {
		case s.noise > 0:
			v = -s.search(nd, 1, -infinity, infinity)
		case i == 0:
			v = -s.search(nd, 1, -beta, -alpha)
		default:
			v = -s.search(nd, 1, -alpha-1, -alpha)
			if v > alpha && v < beta && !s.stopped {
				v = -s.search(nd, 1, -beta, -alpha)
			}
		}
		s.unmake(0)
		if s.stopped {
			break
		}
		if i == 0 || v > alpha || s.noise > 0 {
			rm.score = v
			rm.pv = append(append(rm.pv[:0], m), s.pv[1][1:s.pvLen[1]]...)
		}
		best = max(best, v)
		if v > alpha {
			alpha = v
			if s.noise == 0 {
				// Searched to the end and better than anything else at
				// this depth: worth playing even if the iteration is cut.
				s.setBest(m, v, rm.pv, depth)
			}
			if v >= beta {
				break
			}
		}
	}
	if !s.stopped {
		slices.SortStableFunc(s.rootMoves, func(a, b rootMove) int { return b.score - a.score })
	}
	return best
}
