package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/palacehq/palace/pkg/rules"
)

// Player is one side of a Match: a built-in level (LevelPlayer) or an
// external engine (uci.Client).
type Player interface {
	Name() string
	// NewGame is called before every game.
	NewGame(ctx context.Context, v rules.Variant) error
	// Move returns the move to play after moves from startFEN.
	Move(ctx context.Context, v rules.Variant, startFEN string, moves []rules.Move) (Reply, error)
}

// Reply is a player's move and, if it reports one, its evaluation.
type Reply struct {
	Move rules.Move
	// Score is the position's value for the side that moves, in
	// centipawns (a mate in n plies: ±(MateScore-n)); meaningful only when
	// Scored. Match uses it to adjudicate (see Adjudication).
	Score  int
	Scored bool
}

// LevelPlayer plays a built-in level with its own engine.
type LevelPlayer struct {
	spec LevelSpec
	seed uint64
	name string
	e    *Engine
	game uint64
}

// NewLevelPlayer returns a player of the given level. It plays by the
// level's depth, node and noise limits but not its wall-time cap, and its
// random choices follow seed and the number of games it has played, so a
// match replays exactly on any machine, however busy.
func NewLevelPlayer(level int, seed uint64, hashMB int) *LevelPlayer {
	spec := Level(level)
	return &LevelPlayer{
		spec: spec,
		seed: seed,
		name: "palace-level-" + strconv.Itoa(spec.Level),
		e:    New(Options{HashMB: hashMB, Seed: seed}),
	}
}

func (p *LevelPlayer) Name() string { return p.name }

// NewGame clears the engine so that a game does not depend on the ones
// before it.
func (p *LevelPlayer) NewGame(context.Context, rules.Variant) error {
	p.e.Clear()
	p.game++
	return nil
}

func (p *LevelPlayer) Move(ctx context.Context, v rules.Variant, startFEN string, moves []rules.Move) (Reply, error) {
	start, err := rules.ParseFEN(v, startFEN)
	if err != nil {
		return Reply{Move: rules.NoMove}, err
	}
	lim := p.spec.Limits(p.game)
	lim.MoveTime = 0
	res, err := p.e.Search(ctx, start, moves, lim, nil)
	return Reply{Move: res.Move, Score: res.Score, Scored: err == nil}, err
}

// Opening is a start position and moves both players play first.
type Opening struct {
	Name     string
	StartFEN string
	Moves    []rules.Move
}

// RandomOpenings returns n openings of the given number of plies, played by
// a weak noisy search from the standard start (Janggi: from a random pair
// of formations), so they are varied but not absurd. Equal seeds give
// equal openings.
func RandomOpenings(v rules.Variant, n, plies int, seed uint64) []Opening {
	e := New(Options{HashMB: 1, Seed: seed})
	out := make([]Opening, 0, n)
	for i := 0; i < n; i++ {
		r := splitmix64(seed + uint64(i)*0x9e3779b97f4a7c15)
		fen := rules.StartFEN(v)
		name := ""
		if v == rules.Janggi {
			cho, han := formations[r%4], formations[r>>8%4]
			fen = rules.JanggiStartFEN(cho, han)
			name = cho.String() + "/" + han.String()
		}
		g, err := rules.NewGame(v, fen)
		if err != nil {
			continue
		}
		for ply := 0; ply < plies && !g.Outcome().Ended; ply++ {
			res, err := e.SearchGame(context.Background(), g, Limits{Depth: 2, Noise: 60, Seed: r + uint64(ply)}, nil)
			if err != nil || res.Move.IsPass() {
				break
			}
			if _, err := g.Play(res.Move); err != nil {
				break
			}
		}
		if g.Outcome().Ended {
			continue
		}
		for _, m := range g.Moves() {
			if name != "" {
				name += " "
			}
			name += m.String()
		}
		out = append(out, Opening{Name: name, StartFEN: fen, Moves: g.Moves()})
	}
	return out
}

// GameRecord is one finished game of a match.
type GameRecord struct {
	Index   int
	First   string // name of the player who moved first (Cho / Red)
	Second  string
	Opening string
	Start   string
	Moves   []rules.Move
	Outcome rules.Outcome
	// ScoreA is the first-named player of the match's score: 1, 0.5 or 0.
	ScoreA float64
	// Note explains an ending the rules did not decide: a forfeit for an
	// illegal move or a player error, or the match's ply cap.
	Note string
}

// MatchResult counts from player A's side.
type MatchResult struct {
	Games, Wins, Draws, Losses int
	// Score is A's points per game (win 1, draw 0.5).
	Score float64
	// Elo is A's rating difference over B; EloLow and EloHigh bound its 95%
	// confidence interval (a bound is ±Inf when the score is 0 or 1).
	Elo, EloLow, EloHigh float64
	Records              []GameRecord
}

// Adjudication ends decided games early, as engine testers do, so that long
// matches spend their time on the games still in doubt. It trusts both
// players' own scores: a game ends only when they agree.
type Adjudication struct {
	// ResignScore and ResignMoves: a side that scores itself at or below
	// -ResignScore on ResignMoves of its moves in a row, while its opponent
	// scores itself at or above +ResignScore on each move in between, loses
	// by resignation. Zero turns resignation off.
	ResignScore, ResignMoves int
	// DrawScore, DrawMoves and DrawAfter: in Xiangqi, a game past ply
	// DrawAfter in which both sides have scored within ±DrawScore on their
	// last DrawMoves moves each is drawn by agreement. Never in Janggi,
	// which the rules end on points instead. Zero DrawMoves turns it off.
	DrawScore, DrawMoves, DrawAfter int
}

// DefaultAdjudication resigns a game both engines see as lost by more than
// a chariot for four moves each, and draws a Xiangqi game both see as level
// for ten moves each after ply 120.
func DefaultAdjudication() Adjudication {
	return Adjudication{ResignScore: 1000, ResignMoves: 4, DrawScore: 15, DrawMoves: 10, DrawAfter: 120}
}

// judge tracks the scores of a game for its Adjudication.
type judge struct {
	adj     Adjudication
	variant rules.Variant
	// losing counts, per side, its moves in a row scored as lost while the
	// other side's last move scored it as won; level counts plies in a row
	// scored as level.
	losing [2]int
	level  int
	last   [2]int // each side's last score, when scored says it has one
	scored [2]bool
}

// record notes side s's reply and returns the side that should resign, or
// whether the game is a draw.
func (j *judge) record(s rules.Side, r Reply, ply int) (resign rules.Side, draw, decided bool) {
	other := 1 - s
	if !r.Scored {
		j.losing, j.level, j.scored[s] = [2]int{}, 0, false
		return 0, false, false
	}
	j.last[s], j.scored[s] = r.Score, true
	a := j.adj
	if a.ResignMoves > 0 {
		if r.Score <= -a.ResignScore && j.scored[other] && j.last[other] >= a.ResignScore {
			j.losing[s]++
		} else {
			j.losing[s] = 0
		}
		if r.Score < a.ResignScore {
			j.losing[other] = 0 // s no longer agrees that other is lost
		}
		if j.losing[s] >= a.ResignMoves {
			return s, false, true
		}
	}
	if a.DrawMoves > 0 && j.variant == rules.Xiangqi {
		if r.Score >= -a.DrawScore && r.Score <= a.DrawScore {
			j.level++
		} else {
			j.level = 0
		}
		if ply >= a.DrawAfter && j.level >= 2*a.DrawMoves {
			return 0, true, true
		}
	}
	return 0, false, false
}

// maxMatchPlies ends a game the rules have not ended by then as a draw. The
// rules end every Janggi game by ply 200; a Xiangqi game could in theory
// run thousands of plies with a capture every 119.
const maxMatchPlies = 600

// Match plays games games between a and b, alternating who moves first and
// playing each opening twice (once from each side) in turn; with no
// openings it uses the standard start. Games are adjudicated by
// rules.Game, and early by adj when both players' scores agree. A player
// that returns an illegal move or an error other than the context's loses
// that game. onProgress, if not nil, is called after every game with the
// record and the running result.
func Match(ctx context.Context, a, b Player, games int, v rules.Variant, openings []Opening, adj Adjudication, onProgress func(GameRecord, MatchResult)) (MatchResult, error) {
	if len(openings) == 0 {
		openings = []Opening{{Name: "start", StartFEN: rules.StartFEN(v)}}
	}
	var res MatchResult
	for i := 0; i < games; i++ {
		op := openings[(i/2)%len(openings)]
		aFirst := i%2 == 0
		first, second := a, b
		if !aFirst {
			first, second = b, a
		}
		rec, err := playGame(ctx, first, second, v, op, adj)
		if err != nil {
			return res, err
		}
		rec.Index = i
		switch rec.Outcome.Winner {
		case rules.FirstWins:
			rec.ScoreA = 1
		case rules.Draw:
			rec.ScoreA = 0.5
		}
		if !aFirst && rec.Outcome.Winner != rules.Draw {
			rec.ScoreA = 1 - rec.ScoreA
		}
		res.Add(rec)
		if onProgress != nil {
			onProgress(rec, res)
		}
	}
	return res, nil
}

// Add counts one more game and updates the score and Elo.
func (r *MatchResult) Add(rec GameRecord) {
	r.Games++
	switch rec.ScoreA {
	case 1:
		r.Wins++
	case 0:
		r.Losses++
	default:
		r.Draws++
	}
	r.Records = append(r.Records, rec)
	r.Score = (float64(r.Wins) + float64(r.Draws)/2) / float64(r.Games)
	r.Elo, r.EloLow, r.EloHigh = EloDiff(r.Wins, r.Draws, r.Losses)
}

func playGame(ctx context.Context, first, second Player, v rules.Variant, op Opening, adj Adjudication) (GameRecord, error) {
	rec := GameRecord{First: first.Name(), Second: second.Name(), Opening: op.Name, Start: op.StartFEN}
	g, err := rules.NewGame(v, op.StartFEN)
	if err != nil {
		return rec, fmt.Errorf("opening %q: %w", op.Name, err)
	}
	for _, m := range op.Moves {
		if _, err := g.Play(m); err != nil {
			return rec, fmt.Errorf("opening %q: %w", op.Name, err)
		}
	}
	for _, p := range [2]Player{first, second} {
		if err := p.NewGame(ctx, v); err != nil {
			return rec, fmt.Errorf("%s: new game: %w", p.Name(), err)
		}
	}
	players := [2]Player{first, second}
	forfeit := func(s rules.Side, why string) {
		_ = g.Resign(s)
		rec.Note = why
	}
	j := judge{adj: adj, variant: v}
	for !g.Outcome().Ended {
		if g.Plies() >= maxMatchPlies {
			_ = g.AgreeDraw()
			rec.Note = fmt.Sprintf("drawn by the match's %d-ply cap", maxMatchPlies)
			break
		}
		s := g.Position().Turn()
		p := players[s]
		r, err := p.Move(ctx, v, op.StartFEN, g.Moves())
		if ctx.Err() != nil {
			// A search cut short by the end of the match still answers
			// with its best move so far: that game does not count.
			return rec, ctx.Err()
		}
		if err != nil {
			if errors.Is(err, ErrNoLegalMove) {
				return rec, fmt.Errorf("%s: %w in an open game", p.Name(), err)
			}
			forfeit(s, fmt.Sprintf("%s forfeits: %v", p.Name(), err))
			break
		}
		if _, err := g.Play(r.Move); err != nil {
			forfeit(s, fmt.Sprintf("%s forfeits: %v", p.Name(), err))
			break
		}
		if g.Outcome().Ended {
			break
		}
		switch loser, draw, decided := j.record(s, r, g.Plies()); {
		case !decided:
		case draw:
			_ = g.AgreeDraw()
			rec.Note = "adjudicated a draw: both sides scored it level"
		default:
			_ = g.Resign(loser)
			rec.Note = fmt.Sprintf("adjudicated: %s resigns, both sides scored it lost", players[loser].Name())
		}
	}
	rec.Moves = g.Moves()
	rec.Outcome = g.Outcome()
	return rec, nil
}

// EloDiff returns the rating difference implied by a score, with the 95%
// confidence interval from the per-game score variance (trinomial model):
// elo(s) = -400·log10(1/s - 1), bounds elo(s ± 1.96·σ/√n). When every game
// had the same result that variance is 0 and says nothing, so the bounds
// come from the Wilson score interval instead (8 wins of 8: [+127, +Inf]).
func EloDiff(wins, draws, losses int) (elo, low, high float64) {
	const z = 1.96
	n := float64(wins + draws + losses)
	if n == 0 {
		return 0, math.Inf(-1), math.Inf(1)
	}
	w, d, l := float64(wins)/n, float64(draws)/n, float64(losses)/n
	s := w + d/2
	variance := w*(1-s)*(1-s) + d*(0.5-s)*(0.5-s) + l*s*s
	if variance == 0 {
		c := s + z*z/(2*n)
		h := z * math.Sqrt(s*(1-s)/n+z*z/(4*n*n))
		k := 1 + z*z/n
		low, high := eloOf((c-h)/k), eloOf((c+h)/k)
		// At a score of 0 or 1 the interval's outer end is exactly that
		// score; rounding must not turn it into a finite rating.
		if s == 1 {
			high = math.Inf(1)
		}
		if s == 0 {
			low = math.Inf(-1)
		}
		return eloOf(s), low, high
	}
	margin := z * math.Sqrt(variance/n)
	return eloOf(s), eloOf(s - margin), eloOf(s + margin)
}

func eloOf(s float64) float64 {
	switch {
	case s <= 0:
		return math.Inf(-1)
	case s >= 1:
		return math.Inf(1)
	}
	return -400 * math.Log10(1/s-1)
}
