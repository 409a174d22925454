package engine

import (
	"slices"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// moveOverhead is kept back from every clock-based budget for the time the
// move takes to reach the game (UCI round trip, network).
const moveOverhead = 30 * time.Millisecond

// budget returns the time the search may take: soft is when no new
// iteration should start, hard when the search must stop.
func (lim *Limits) budget(us rules.Side) (soft, hard time.Duration, timed bool) {
	switch {
	case lim.MoveTime > 0:
		return lim.MoveTime, lim.MoveTime, true
	case lim.Time[us] > 0:
		left := lim.Time[us]
		mtg := lim.MovesToGo
		if mtg <= 0 || mtg > 40 {
			mtg = 40
		}
		alloc := left/time.Duration(mtg) + lim.Inc[us]*3/4
		hard = min(alloc*3, left/2) - moveOverhead
		hard = max(hard, time.Millisecond)
		soft = min(alloc*6/10, hard)
		return soft, hard, true
	case lim.Infinite || lim.Depth > 0 || lim.Nodes > 0:
		return 0, 0, false
	}
	return DefaultMoveTime, DefaultMoveTime, true
}

func (s *searcher) setBest(m rules.Move, score int, pv []rules.Move, depth int) {
	s.best, s.bestScore, s.bestDepth = m, score, depth
	s.bestPV = append(s.bestPV[:0], pv...)
}

// splitmix64 is a fixed, portable mixer: the same seed gives the same noise
// on every machine and Go version.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// noiseFor is root move m's offset in [-amp, amp], triangular so that large
// offsets are rarer, fixed for a seed, a position and a move.
func noiseFor(seed, pos uint64, m rules.Move, amp int) int {
	x := splitmix64(seed ^ splitmix64(pos^uint64(m)<<48))
	w := uint64(2*amp + 1)
	a := int(x%w) - amp
	b := int((x>>32)%w) - amp
	return (a + b) / 2
}

// pickNoisy chooses among the exactly scored root moves the one with the
// best score plus noise. A decided game is never traded for noise: noise is
// added only to ordinary evaluations.
func (s *searcher) pickNoisy(depth int) {
	posKey := s.top().hash ^ uint64(len(s.st))
	best, bestVal := -1, 0
	for i := range s.rootMoves {
		rm := &s.rootMoves[i]
		v := rm.score
		if v > -mateBound && v < mateBound {
			v += noiseFor(s.seed, posKey, rm.move, s.noise)
		}
		if best < 0 || v > bestVal {
			best, bestVal = i, v
		}
	}
	rm := &s.rootMoves[best]
	s.setBest(rm.move, rm.score, rm.pv, depth)
}

func (s *searcher) aspiration(depth, prev int) int {
	delta := 40
	alpha, beta := -infinity, infinity
	if depth >= 4 && s.noise == 0 && prev > -mateBound && prev < mateBound {
		alpha, beta = prev-delta, prev+delta
	}
	for {
		v := s.searchRoot(depth, alpha, beta)
		switch {
		case s.stopped:
			return v
		case v <= alpha && alpha > -infinity:
			beta = (alpha + beta) / 2
			alpha = max(v-delta, -infinity)
		case v >= beta && beta < infinity:
			beta = min(v+delta, infinity)
		default:
			return v
		}
		delta += delta / 2
		if delta > 600 {
			alpha, beta = -infinity, infinity
		}
	}
}

// run is iterative deepening over the root position set up by setup.
func (s *searcher) run(lim Limits, onInfo func(Info)) (Result, error) {
	s.start = time.Now()
	s.nodes, s.stopped, s.firstDone, s.seldepth = 0, false, false, 0
	s.noise = max(lim.Noise, 0)
	s.nodeLimit = lim.Nodes
	s.killers = [maxPly + 1][2]rules.Move{}
	for i := range s.history {
		for j := range s.history[i] {
			s.history[i][j] /= 8
		}
	}
	us := s.pos.Turn()
	soft, hard, timed := lim.budget(us)
	s.hard, s.timed = hard, timed

	legal := s.pos.LegalMoves(make([]rules.Move, 0, 128))
	if len(legal) == 0 {
		return Result{Move: rules.NoMove, Score: -mateScore, Time: time.Since(s.start)}, ErrNoLegalMove
	}
	ttMove := rules.NoMove
	if e, ok := s.tt.probe(s.ttKey()); ok {
		ttMove = e.move
	}
	s.scoreMoves(0, legal, ttMove)
	keys := s.mscore[0][:len(legal)]
	order := make([]int, len(legal))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(keys[b]) - int(keys[a]) })
	s.rootMoves = s.rootMoves[:0]
	for _, i := range order {
		s.rootMoves = append(s.rootMoves, rootMove{move: legal[i], score: -infinity})
	}
	s.setBest(s.rootMoves[0].move, 0, []rules.Move{s.rootMoves[0].move}, 0)

	maxDepth := maxPly - 4
	if lim.Depth > 0 {
		maxDepth = min(lim.Depth, maxDepth)
	}
	if len(legal) == 1 && !lim.Infinite && !lim.Analysis {
		maxDepth = 1 // the move is forced; one ply gives it a score
	}
	prev := 0
	var done Result // the last completed iteration's, for Analysis
	for depth := 1; depth <= maxDepth; depth++ {
		s.rootDepth = depth
		v := s.aspiration(depth, prev)
		if s.stopped {
			break
		}
		s.firstDone = true
		if s.noise > 0 {
			s.pickNoisy(depth)
		} else {
			rm := &s.rootMoves[0]
			s.setBest(rm.move, rm.score, rm.pv, depth)
			v = rm.score
		}
		prev = v
		if lim.Analysis {
			done = Result{Move: s.best, Score: s.bestScore, PV: slices.Clone(s.bestPV), Depth: s.bestDepth}
		}
		if onInfo != nil {
			onInfo(s.info())
		}
		if s.nodeLimit != 0 && s.nodes >= s.nodeLimit {
			break
		}
		if timed && time.Since(s.start) >= soft {
			break
		}
		if !lim.Infinite && (v >= mateBound || v <= -mateBound) && depth > mateScore-abs(v) {
			break // the game's end is in sight and deeper search will not move it
		}
		// Stop() or the context may have ended the search between checks.
		if s.stop.Load() {
			break
		}
	}
	r := Result{Move: s.best, Score: s.bestScore, PV: slices.Clone(s.bestPV), Depth: s.bestDepth}
	if lim.Analysis && done.Depth > 0 {
		r = done
	}
	r.Mate, r.Nodes, r.SelDepth, r.Time = mateIn(r.Score), s.nodes, s.seldepth, time.Since(s.start)
	return r, nil
}

func (s *searcher) info() Info {
	el := time.Since(s.start)
	nps := uint64(0)
	if el > 0 {
		nps = uint64(float64(s.nodes) / el.Seconds())
	}
	return Info{
		Depth:    s.bestDepth,
		SelDepth: s.seldepth,
		Score:    s.bestScore,
		Mate:     mateIn(s.bestScore),
		Nodes:    s.nodes,
		NPS:      nps,
		HashFull: s.tt.hashfull(),
		PV:       slices.Clone(s.bestPV),
		Time:     el,
	}
}

// mateIn converts a score into signed plies to the decided end, 0 if none.
func mateIn(v int) int {
	switch {
	case v >= mateBound:
		return mateScore - v
	case v <= -mateBound:
		return -(mateScore + v)
	}
	return 0
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
