// Package uci runs Palace's engine behind the Universal Chess Interface as
// Fairy-Stockfish speaks it for Janggi and Xiangqi (UCI_Variant option,
// coordinate moves such as h3e3 and b10c8, a Janggi pass written as the
// general's square twice), and drives other UCI engines (Client).
//
// Run understands uci, isready, ucinewgame, setoption (UCI_Variant janggi
// or xiangqi, Hash, Threads (1 only), Skill Level 1-10 (10, the default,
// leaves the go limits alone; lower levels impose engine.Level's limits
// and noise), Clear Hash), position startpos|fen ... [moves ...], go with
// depth, nodes, movetime, wtime, btime, winc, binc, movestogo, infinite
// and perft N (1 to maxPerftDepth, run like a search: stop and quit end
// it), stop, d (prints the FEN as info string) and quit. Unknown
// commands are ignored, as UCI asks. The moves of position are replayed
// through rules.Game: a move after the game's end (two passes, repetition,
// bikjang, a ply limit...) is refused like an illegal one, and go on an
// ended game answers "bestmove (none)" after an info string naming the
// ending. Scores are "cp" from the side to move, or "mate N" in moves for
// any decided ending the engine sees (checkmate, and in Janggi the endings
// on points; see package engine).
// "go ponder" searches like "go infinite"; ponderhit stops it.
package uci

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/palacehq/palace/pkg/engine"
	"github.com/palacehq/palace/pkg/rules"
)

const (
	defaultHashMB = 16
	maxHashMB     = 4096
	// maxPerftDepth caps go perft: deeper counts take hours in either game.
	maxPerftDepth = 8
)

// lineWriter serializes whole lines from the command loop and the search
// goroutine, so an info line never interleaves with readyok.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func (o *lineWriter) printf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return
	}
	_, o.err = fmt.Fprintf(o.w, format+"\n", args...)
}

// search is a running go command.
type search struct {
	cancel   context.CancelFunc
	stopped  chan struct{} // closed by stop or quit: ends the wait of go infinite
	done     chan struct{} // closed once bestmove is printed
	infinite bool
	stopOnce sync.Once
}

func (s *search) stop() {
	s.stopOnce.Do(func() {
		s.cancel()
		close(s.stopped)
	})
}

type session struct {
	ctx     context.Context
	out     *lineWriter
	eng     *engine.Engine
	hashMB  int
	variant rules.Variant
	level   int
	start   *rules.Position
	game    *rules.Game // start and moves replayed: knows whether the game ended
	cur     *search
}

// Run reads UCI commands from in and writes the answers to out until quit,
// the end of in, or the end of ctx (then it returns ctx's error). A search
// started by go runs in its own goroutine, so stop and isready are answered
// while it runs; at the end of in a running finite search is finished and
// its bestmove written, an infinite one is stopped.
func Run(ctx context.Context, in io.Reader, out io.Writer) error {
	s := &session{
		ctx:     ctx,
		out:     &lineWriter{w: out},
		hashMB:  defaultHashMB,
		variant: rules.Xiangqi,
		level:   engine.MaxLevel,
	}
	s.eng = engine.New(engine.Options{HashMB: s.hashMB})
	s.setStart()

	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
		close(lines)
	}()

	for {
		select {
		case <-ctx.Done():
			s.stopSearch()
			return ctx.Err()
		case line, ok := <-lines:
			if !ok {
				// End of input: let a finite search finish, as a
				// piped "go depth 8" expects its bestmove.
				s.waitSearch()
				return <-readErr
			}
			if quit := s.handle(line); quit {
				s.stopSearch()
				return s.out.err
			}
		}
	}
}

func (s *session) setStart() {
	s.game, _ = rules.NewGame(s.variant, "")
	s.start = s.game.Position()
}

// stopSearch ends the running search, if any, and waits for its bestmove.
func (s *session) stopSearch() {
	if s.cur != nil {
		s.cur.stop()
		<-s.cur.done
		s.cur = nil
	}
}

// waitSearch lets a finite search finish (an infinite one is stopped)
// before a command that changes the engine's state.
func (s *session) waitSearch() {
	if s.cur == nil {
		return
	}
	if s.cur.infinite {
		s.cur.stop()
	}
	select {
	case <-s.cur.done:
	case <-s.ctx.Done():
		s.cur.stop()
		<-s.cur.done
	}
	s.cur = nil
}

func (s *session) handle(line string) (quit bool) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return false
	}
	switch f[0] {
	case "uci":
		s.out.printf("id name Palace")
		s.out.printf("id author the Palace authors")
		s.out.printf("option name UCI_Variant type combo default xiangqi var janggi var xiangqi")
		s.out.printf("option name Hash type spin default %d min 1 max %d", defaultHashMB, maxHashMB)
		s.out.printf("option name Threads type spin default 1 min 1 max 1")
		s.out.printf("option name Skill Level type spin default %d min %d max %d", engine.MaxLevel, engine.MinLevel, engine.MaxLevel)
		s.out.printf("option name Clear Hash type button")
		s.out.printf("uciok")
	case "isready":
		s.out.printf("readyok")
	case "ucinewgame":
		s.waitSearch()
		s.eng.Clear()
		s.setStart()
	case "setoption":
		s.waitSearch()
		s.setOption(f[1:])
	case "position":
		s.waitSearch()
		s.position(f[1:])
	case "go":
		s.waitSearch()
		s.goCmd(f[1:])
	case "stop":
		if s.cur != nil {
			s.cur.stop()
		}
	case "ponderhit":
		// Pondering is not offered; treat it like stop for safety.
		if s.cur != nil {
			s.cur.stop()
		}
	case "d":
		s.out.printf("info string fen %s", s.current().FEN())
	case "quit":
		return true
	}
	return false
}

func (s *session) setOption(args []string) {
	var name, value []string
	target := &name
	for _, a := range args {
		switch a {
		case "name":
			target = &name
		case "value":
			target = &value
		default:
			*target = append(*target, a)
		}
	}
	n, v := strings.ToLower(strings.Join(name, " ")), strings.Join(value, " ")
	switch n {
	case "uci_variant":
		variant, err := parseVariant(v)
		if err != nil {
			s.out.printf("info string error: %v", err)
			return
		}
		if variant != s.variant {
			s.variant = variant
			s.eng.Clear()
		}
		s.setStart()
	case "hash":
		mb, err := strconv.Atoi(v)
		if err != nil || mb < 1 || mb > maxHashMB {
			s.out.printf("info string error: Hash %q: want 1 to %d", v, maxHashMB)
			return
		}
		s.hashMB = mb
		s.eng.SetHashMB(mb)
	case "skill level":
		lv, err := strconv.Atoi(v)
		if err != nil || lv < engine.MinLevel || lv > engine.MaxLevel {
			s.out.printf("info string error: Skill Level %q: want %d to %d", v, engine.MinLevel, engine.MaxLevel)
			return
		}
		s.level = lv
	case "clear hash":
		s.eng.Clear()
	case "threads":
		// One search thread only; the option exists for GUIs that set it.
	}
}

func parseVariant(v string) (rules.Variant, error) {
	v = strings.ToLower(strings.TrimSpace(v))
	switch {
	case v == "xiangqi":
		return rules.Xiangqi, nil
	case strings.HasPrefix(v, "janggi"):
		// janggicasual, janggimodern...: same board and moves; Palace
		// adjudicates by docs/rules.md whatever the name.
		return rules.Janggi, nil
	}
	return 0, fmt.Errorf("unknown UCI_Variant %q (want janggi or xiangqi)", v)
}

// current is the position after the moves of the last position command.
func (s *session) current() *rules.Position { return s.game.Position() }

// position sets up "startpos|fen FEN [moves m1 m2 ...]". A bad FEN leaves
// the position unchanged; moves are applied up to the first bad one, which
// is reported, as Fairy-Stockfish does. The moves are replayed through
// rules.Game, so a move after the game ended (two passes, repetition...)
// is bad too.
func (s *session) position(args []string) {
	if len(args) == 0 {
		s.out.printf("info string error: position needs startpos or fen")
		return
	}
	i := slices.Index(args, "moves")
	if i < 0 {
		i = len(args)
	}
	var fen string
	switch args[0] {
	case "startpos":
		fen = rules.StartFEN(s.variant)
	case "fen":
		fen = strings.Join(args[1:i], " ")
	default:
		s.out.printf("info string error: position %q: want startpos or fen", args[0])
		return
	}
	g, err := rules.NewGame(s.variant, fen)
	if err != nil {
		s.out.printf("info string error: %v", err)
		return
	}
	s.start, s.game = g.Position(), g
	p := g.Position() // kept in step with g, for parsing and the reasons of illegal moves
	var buf []rules.Move
	for _, tok := range args[min(i+1, len(args)):] {
		m, err := parseMoveIn(p, tok)
		if err == nil {
			if o := g.Outcome(); o.Ended {
				err = fmt.Errorf("%w: %s", rules.ErrGameOver, ending(o))
			}
		}
		if err == nil {
			buf = p.LegalMoves(buf[:0])
			if !slices.Contains(buf, m) {
				err = p.CheckMove(m)
				if err == nil {
					err = fmt.Errorf("%w: %s", rules.ErrIllegalMove, tok)
				}
			}
		}
		if err == nil {
			_, err = g.Play(m) // cannot fail now; stay safe if it does
		}
		if err != nil {
			s.out.printf("info string error: move %d (%s): %v", s.game.Plies()+1, tok, err)
			return
		}
		p.Make(m)
	}
}

// ending describes how an ended game ended, e.g. "it ended by two_passes,
// first wins" or "it ended by repetition, a draw".
func ending(o rules.Outcome) string {
	switch o.Winner {
	case rules.Draw:
		return fmt.Sprintf("it ended by %v, a draw", o.Method)
	case rules.FirstWins, rules.SecondWins:
		return fmt.Sprintf("it ended by %v, %v wins", o.Method, o.Winner)
	}
	return fmt.Sprintf("it ended by %v", o.Method)
}

// parseMoveIn reads a coordinate move; in Janggi "0000" and "pass" are
// accepted for the pass too, as some tools write it so.
func parseMoveIn(p *rules.Position, tok string) (rules.Move, error) {
	if p.Variant() == rules.Janggi && (tok == "0000" || tok == "pass" || tok == "@@@@") {
		g := p.GeneralSquare(p.Turn())
		return rules.NewMove(g, g), nil
	}
	return rules.ParseMove(tok)
}

func (s *session) goCmd(args []string) {
	var lim engine.Limits
	infinite := false
	perft := -1 // no perft
	num := func(i int) int64 {
		if i+1 >= len(args) {
			return 0
		}
		n, err := strconv.ParseInt(args[i+1], 10, 64)
		if err != nil {
			s.out.printf("info string error: go %s %q: not a number", args[i], args[i+1])
			return 0
		}
		return max(n, 0)
	}
	ms := func(i int) time.Duration { return time.Duration(num(i)) * time.Millisecond }
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "depth":
			lim.Depth = int(num(i))
		case "nodes":
			lim.Nodes = uint64(num(i))
		case "movetime":
			lim.MoveTime = ms(i)
		case "wtime":
			lim.Time[rules.First] = ms(i)
		case "btime":
			lim.Time[rules.Second] = ms(i)
		case "winc":
			lim.Inc[rules.First] = ms(i)
		case "binc":
			lim.Inc[rules.Second] = ms(i)
		case "movestogo":
			lim.MovesToGo = int(num(i))
		case "perft":
			perft = int(num(i))
		case "mate":
			// A mate in n moves lies within 2n-1 plies: a search that deep
			// finds one if there is one, and ends, as a GUI waits for it to.
			if n := num(i); n > 0 {
				lim.Depth = minNonZero(lim.Depth, int(2*min(n, 1000)-1))
			}
		case "infinite", "ponder":
			infinite = true
			continue
		case "searchmoves":
			// The moves listed are skipped as unknown words.
			s.out.printf("info string searchmoves is not supported: every move is searched")
			continue
		default:
			continue
		}
		i++
	}
	if perft >= 0 {
		if perft < 1 || perft > maxPerftDepth {
			s.out.printf("info string error: go perft %d: want a depth of 1 to %d", perft, maxPerftDepth)
			return
		}
		s.perft(perft)
		return
	}
	if lim == (engine.Limits{}) {
		infinite = true // a bare "go" searches until stop
	}
	lim.Infinite = infinite
	if s.level < engine.MaxLevel {
		l := engine.Level(s.level)
		lim.Depth = minNonZero(lim.Depth, l.Depth)
		lim.Nodes = uint64(minNonZero(int(lim.Nodes), int(l.Nodes)))
		lim.Noise = l.Noise
		lim.Seed = uint64(s.game.Plies())
		if !infinite && lim.MoveTime == 0 && lim.Time == [2]time.Duration{} {
			lim.MoveTime = l.MoveTime
		}
	}

	start, moves, out, eng := s.start, s.game.Moves(), s.out, s.eng
	outcome := s.game.Outcome()
	s.spawn(infinite, func(ctx context.Context, cur *search) {
		if outcome.Ended {
			// No move to give: the game is over, whatever the board allows.
			out.printf("info string game over: %s", ending(outcome))
			if outcome.Method == rules.Checkmate || outcome.Method == rules.Stalemate {
				out.printf("info depth 0 score mate 0")
			}
			if infinite {
				<-cur.stopped // UCI: no bestmove before stop in infinite mode
			}
			out.printf("bestmove (none)")
			return
		}
		res, err := eng.Search(ctx, start, moves, lim, func(in engine.Info) { out.printf("%s", infoLine(in)) })
		if infinite {
			<-cur.stopped // UCI: no bestmove before stop in infinite mode
		}
		switch {
		case errors.Is(err, engine.ErrNoLegalMove):
			out.printf("info depth 0 score mate 0")
			out.printf("bestmove (none)")
		case err != nil:
			out.printf("info string error: %v", err)
			out.printf("bestmove (none)")
		default:
			out.printf("bestmove %v", res.Move)
		}
	})
}

// spawn runs work as the session's search, in its own goroutine: stop,
// quit and the end of the session's context end it (through ctx).
func (s *session) spawn(infinite bool, work func(ctx context.Context, cur *search)) {
	ctx, cancel := context.WithCancel(context.Background())
	cur := &search{cancel: cancel, stopped: make(chan struct{}), done: make(chan struct{}), infinite: infinite}
	s.cur = cur
	go func() {
		defer close(cur.done)
		defer cancel()
		work(ctx, cur)
	}()
}

func minNonZero(a, b int) int {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// perft counts the legal-move tree of the current position like
// rules.Divide, printing each root move's count as it is done. It runs in
// its own goroutine like a search, so stop, quit and the end of the
// context end it; a stopped perft prints no total.
func (s *session) perft(depth int) {
	p, out := s.current(), s.out
	s.spawn(false, func(ctx context.Context, _ *search) {
		start := time.Now()
		var total uint64
		err := rules.DivideEach(ctx, p, depth, func(m rules.Move, n uint64) {
			out.printf("%v: %d", m, n)
			total += n
		})
		if err != nil {
			out.printf("info string perft %d stopped after %v", depth, time.Since(start).Round(time.Millisecond))
			return
		}
		out.printf("")
		out.printf("Nodes searched: %d", total)
		out.printf("info string perft %d in %v", depth, time.Since(start).Round(time.Millisecond))
	})
}

// infoLine formats an iteration the way UCI GUIs read it; mate distances
// are in moves, as UCI counts them, while Info.Mate is in plies.
func infoLine(in engine.Info) string {
	var b strings.Builder
	fmt.Fprintf(&b, "info depth %d seldepth %d multipv 1 ", in.Depth, in.SelDepth)
	switch {
	case in.Mate > 0:
		fmt.Fprintf(&b, "score mate %d", (in.Mate+1)/2)
	case in.Mate < 0:
		fmt.Fprintf(&b, "score mate %d", -((-in.Mate + 1) / 2))
	default:
		fmt.Fprintf(&b, "score cp %d", in.Score)
	}
	fmt.Fprintf(&b, " nodes %d nps %d hashfull %d time %d pv", in.Nodes, in.NPS, in.HashFull, in.Time.Milliseconds())
	for _, m := range in.PV {
		b.WriteByte(' ')
		b.WriteString(m.String())
	}
	return b.String()
}
