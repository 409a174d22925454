package uci

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/palacehq/palace/pkg/engine"
	"github.com/palacehq/palace/pkg/rules"
)

// GoParams are the limits a Client sends with every go command. All zero
// means movetime 1000.
type GoParams struct {
	Depth    int
	Nodes    uint64
	MoveTime time.Duration
}

// command is the go command of g, its time capped at most when most is
// positive: a search limited by depth or nodes alone gets that movetime
// too, which engines take as one more limit.
func (g GoParams) command(most time.Duration) string {
	var b strings.Builder
	b.WriteString("go")
	if g.Depth > 0 {
		fmt.Fprintf(&b, " depth %d", g.Depth)
	}
	if g.Nodes > 0 {
		fmt.Fprintf(&b, " nodes %d", g.Nodes)
	}
	if mt := g.moveTime(most); mt > 0 {
		// UCI counts whole milliseconds; a cap below one still searches.
		fmt.Fprintf(&b, " movetime %d", max(mt.Milliseconds(), 1))
	}
	return b.String()
}

// moveTime is the movetime command(most) sends; 0 for none.
func (g GoParams) moveTime(most time.Duration) time.Duration {
	mt := g.MoveTime
	if mt <= 0 && g.Depth == 0 && g.Nodes == 0 {
		mt = time.Second
	}
	if most > 0 && (mt <= 0 || most < mt) {
		mt = most
	}
	return mt
}

// ErrClosed is returned by a Client whose engine has gone away.
var ErrClosed = errors.New("uci: engine closed")

// Client drives a UCI engine (an external binary, or any pair of streams)
// and is an engine.Player, so it can play Matches.
type Client struct {
	// Label, if set, is the Name used in match records instead of the
	// engine's "id name".
	Label string
	// Go is sent with every move request.
	Go GoParams

	name  string
	w     io.Writer
	lines chan string   // the engine's output, line by line
	done  chan struct{} // closed when no one reads lines any more
	// readErr is why the engine's output could not be read on, set
	// before lines is closed: nil at its end.
	readErr error
	closeFn func() error

	mu      sync.Mutex // one request at a time
	variant rules.Variant
	closed  bool
	// owedBest and owedReady count the answers the engine still owes to
	// requests whose callers stopped waiting (their ctx ended): a
	// bestmove for each go, a readyok for each isready. The next request
	// reads them first (begin), so that it does not take them for its
	// own.
	owedBest, owedReady int
}

// Start runs the engine binary at path and performs the UCI handshake,
// which ctx bounds. The process runs until Close: ending it with ctx
// would kill it before Close could ask it to quit, and a shutdown would
// then report the engine as killed. If the handshake fails (or ctx ends
// first), the process is killed at once and Start returns no Client.
func Start(ctx context.Context, path string, args ...string) (*Client, error) {
	cmd := exec.Command(path, args...)
	ownGroup(cmd)
	kill := func() { killGroup(cmd) }
	// What it says before it fails to start (a network file missing) is
	// the operator's clue. Copied by a goroutine that Wait waits for: a
	// process outside the group that holds the engine's stderr open (a
	// daemon its wrapper started) must not hold Wait for ever.
	stderr := &tail{max: 4 << 10}
	cmd.Stderr = stderr
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	closeFn := func() error {
		_ = stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Second):
			kill()
			return <-done
		}
	}
	c, err := NewClient(ctx, stdout, stdin, closeFn)
	if err != nil {
		// An engine that failed its handshake (or whose ctx ended) is of
		// no use: it is killed at once rather than asked to quit, and its
		// output ends with it, and so the goroutine reading it.
		kill()
		_ = stdin.Close()
		if werr := cmd.Wait(); werr != nil {
			err = fmt.Errorf("%w (%v)", err, werr)
		}
		if said := stderr.String(); said != "" {
			err = fmt.Errorf("%w; it said: %s", err, said)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// NewClient speaks UCI over r (the engine's output) and w (its input) and
// performs the handshake. closeFn, if not nil, is called by Close after
// quit is sent.
//
// A goroutine reads r until it ends (EOF or an error), also after Close
// or a failed handshake, when it discards what it reads: an engine asked
// to quit is never blocked writing. If NewClient fails, it returns no
// Client and does not call closeFn: the caller ends the engine, and with
// it r.
func NewClient(ctx context.Context, r io.Reader, w io.Writer, closeFn func() error) (*Client, error) {
	c := &Client{w: w, lines: make(chan string, 256), done: make(chan struct{}), closeFn: closeFn}
	go c.read(r)
	if err := c.handshake(ctx); err != nil {
		close(c.done)
		return nil, err
	}
	return c, nil
}

// read sends r's lines to c.lines until r ends, or discards them once
// c.done is closed.
func (c *Client) read(r io.Reader) {
	defer close(c.lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		select {
		case c.lines <- sc.Text():
		case <-c.done:
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		c.readErr = errors.New("the engine wrote a line too long to read (over 1 MiB)")
	} else if err != nil {
		c.readErr = err
	}
}

func (c *Client) handshake(ctx context.Context) error {
	if err := c.send("uci"); err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := c.readUntil(hctx, func(l string) bool {
		if name, ok := strings.CutPrefix(l, "id name "); ok {
			c.name = strings.TrimSpace(name)
		}
		return l == "uciok"
	})
	if err != nil {
		return fmt.Errorf("uci handshake: %w", err)
	}
	if c.name == "" {
		c.name = "uci-engine"
	}
	return c.isReady(hctx)
}

func (c *Client) send(format string, args ...any) error {
	if c.closed {
		return ErrClosed
	}
	_, err := fmt.Fprintf(c.w, format+"\n", args...)
	return err
}

// readUntil reads lines until stop returns true, or ctx ends.
func (c *Client) readUntil(ctx context.Context, stop func(string) bool) error {
	for {
		if err := ctx.Err(); err != nil { // before any line already read
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case l, ok := <-c.lines:
			if !ok {
				if c.readErr != nil {
					return fmt.Errorf("%w: %w", ErrClosed, c.readErr)
				}
				return ErrClosed
			}
			if stop(strings.TrimSpace(l)) {
				return nil
			}
		}
	}
}

// isReady sends isready and waits for readyok. If ctx ends first, the
// readyok is owed.
func (c *Client) isReady(ctx context.Context) error {
	if err := c.send("isready"); err != nil {
		return err
	}
	err := c.readUntil(ctx, func(l string) bool { return l == "readyok" })
	if err != nil && !errors.Is(err, ErrClosed) {
		c.owedReady++
	}
	return err
}

// begin readies the engine for a new request: it reads the answers owed
// to requests given up on (a stopped search's bestmove, a readyok), so
// that the new request does not take them for its own. An engine that
// never gives them holds the request until ctx ends, as a hung engine
// would anyway.
func (c *Client) begin(ctx context.Context) error {
	if c.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.owedBest == 0 && c.owedReady == 0 {
		return nil
	}
	return c.readUntil(ctx, func(l string) bool {
		if _, ok := bestMove(l); ok && c.owedBest > 0 {
			c.owedBest--
		} else if l == "readyok" && c.owedReady > 0 {
			c.owedReady--
		}
		return c.owedBest == 0 && c.owedReady == 0
	})
}

// bestMove reads a bestmove line: its move ("" if it has none) and true.
func bestMove(l string) (string, bool) {
	rest, ok := strings.CutPrefix(l, "bestmove")
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return "", false
	}
	if f := strings.Fields(rest); len(f) > 0 {
		return f[0], true
	}
	return "", true
}

// Name is Label, or the engine's id name.
func (c *Client) Name() string {
	if c.Label != "" {
		return c.Label
	}
	return c.name
}

// SetOption sends setoption and waits until the engine is ready again.
func (c *Client) SetOption(ctx context.Context, name, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx); err != nil {
		return err
	}
	if err := c.send("setoption name %s value %s", name, value); err != nil {
		return err
	}
	return c.isReady(ctx)
}

// NewGame selects the variant (UCI_Variant) and starts a new game.
func (c *Client) NewGame(ctx context.Context, v rules.Variant) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.begin(ctx); err != nil {
		return err
	}
	if v != c.variant {
		if err := c.send("setoption name UCI_Variant value %v", v); err != nil {
			return err
		}
		c.variant = v
	}
	if err := c.send("ucinewgame"); err != nil {
		return err
	}
	return c.isReady(ctx)
}

// Move asks the engine for its move after moves from startFEN, with the
// limits in Go. If ctx ends first, the search is stopped and ctx's error
// returned at once; the stopped search's bestmove, whenever it comes, is
// read and dropped by the next request. Reply.Score is the last exact
// score of the first PV (multipv 1).
func (c *Client) Move(ctx context.Context, v rules.Variant, startFEN string, moves []rules.Move) (engine.Reply, error) {
	return c.MoveWithin(ctx, v, startFEN, moves, 0)
}

// MoveWithin is Move with the engine's time capped at most (when
// positive), as a game's clock caps it. An engine still searching past
// the movetime it was sent is asked to stop.
func (c *Client) MoveWithin(ctx context.Context, v rules.Variant, startFEN string, moves []rules.Move, most time.Duration) (engine.Reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	none := engine.Reply{Move: rules.NoMove}
	p, err := rules.ParseFEN(v, startFEN)
	if err != nil {
		return none, err
	}
	var b strings.Builder
	b.WriteString("position fen ")
	b.WriteString(startFEN)
	if len(moves) > 0 {
		b.WriteString(" moves")
		for _, m := range moves {
			b.WriteByte(' ')
			b.WriteString(m.String())
			p.Make(m)
		}
	}
	if err := c.begin(ctx); err != nil {
		return none, err
	}
	if err := c.send("%s", b.String()); err != nil {
		return none, err
	}
	if err := c.send("%s", c.Go.command(most)); err != nil {
		return none, err
	}
	var best string
	var reply engine.Reply
	read := func(ctx context.Context) error {
		return c.readUntil(ctx, func(l string) bool {
			if score, ok := infoScore(l); ok {
				reply.Score, reply.Scored = score, true
			}
			var ok bool
			best, ok = bestMove(l)
			return ok
		})
	}
	if mt := c.Go.moveTime(most); mt > 0 {
		// An engine may take its movetime as advice: past it, it is asked
		// to stop, and answers with the best move it has.
		octx, cancel := context.WithTimeout(ctx, max(mt, time.Millisecond)+overrunGrace)
		err = read(octx)
		cancel()
		if err != nil && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
			if err = c.send("stop"); err == nil {
				err = read(ctx)
			}
		}
	} else {
		err = read(ctx)
	}
	if err != nil {
		if !errors.Is(err, ErrClosed) {
			// ctx ended: stop the search, but do not wait for its
			// bestmove (a hung engine would hold the caller past ctx);
			// the next request reads it first.
			c.owedBest++
			_ = c.send("stop")
		}
		return none, err
	}
	reply.Move, err = c.checkBest(p, best)
	if err != nil {
		return none, err
	}
	return reply, nil
}

// overrunGrace is how long past its movetime an engine may take to answer
// before it is asked to stop.
const overrunGrace = 50 * time.Millisecond

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// ErrBadMove is returned when the engine's bestmove is not a legal move
// in the position it was given (or is "(none)" where there are moves): a
// caller must not play it, and should not trust that engine again.
var ErrBadMove = errors.New("uci: the engine's bestmove is not a legal move")

// checkBest reads the engine's bestmove in p. The engine's word is not
// enough: a move the rules refuse would be refused again by whoever the
// caller hands it to, and "(none)" in an open position would pass for
// the end of the game.
func (c *Client) checkBest(p *rules.Position, best string) (rules.Move, error) {
	if best == "" || best == "(none)" {
		if n := len(p.LegalMoves(nil)); n > 0 {
			return rules.NoMove, fmt.Errorf("%s: bestmove %q with %d legal moves: %w", c.Name(), best, n, ErrBadMove)
		}
		return rules.NoMove, fmt.Errorf("%s: %w", c.Name(), engine.ErrNoLegalMove)
	}
	m, err := parseMoveIn(p, best)
	if err == nil {
		err = p.CheckMove(m)
	}
	if err != nil {
		return rules.NoMove, fmt.Errorf("%s: bestmove %q: %w: %w", c.Name(), best, ErrBadMove, err)
	}
	return m, nil
}

// infoScore reads the score of an info line, in engine.Reply's terms: "score
// cp X" is X; "score mate N" (N moves, negative when the side to move is
// mated) is a mate N·2-1 or N·2 plies away. A mate too far away for a
// score (MateScore plies or more) is not read: its score would be the
// other side's win, or wrap around.
//
// Only the first PV's score is the position's: a line of another PV
// ("multipv N", N > 1; no multipv is the first) is not read, and neither
// is a bound ("lowerbound", "upperbound"), which is no exact score.
func infoScore(line string) (int, bool) {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "info" {
		return 0, false
	}
	score, scored := 0, false
	for i := 1; i < len(f); i++ {
		switch f[i] {
		case "string": // the rest of the line is free text
			return score, scored
		case "lowerbound", "upperbound":
			return 0, false
		case "multipv":
			if i+1 >= len(f) {
				return 0, false
			}
			if n, err := strconv.Atoi(f[i+1]); err != nil || n != 1 {
				return 0, false
			}
			i++
		case "score":
			if scored { // the first score is the line's
				continue
			}
			if i+2 >= len(f) {
				return 0, false
			}
			n, err := strconv.Atoi(f[i+2])
			if err != nil {
				return 0, false
			}
			switch f[i+1] {
			case "cp":
				score = n
			case "mate":
				switch {
				case n > 0 && n <= engine.MateScore/2:
					score = engine.MateScore - (2*n - 1)
				case n <= 0 && n > -engine.MateScore/2:
					score = -engine.MateScore + 2*-n
				default:
					return 0, false
				}
			default:
				return 0, false
			}
			scored = true
			i += 2
		}
	}
	return score, scored
}

// Close sends quit and ends the engine process, if Start made one.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	_ = c.send("quit")
	c.closed = true
	close(c.done) // the reader discards however much is left
	if c.closeFn != nil {
		return c.closeFn()
	}
	return nil
}

var _ engine.Player = (*Client)(nil)
