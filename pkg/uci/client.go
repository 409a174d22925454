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
	mt := g.MoveTime
	if mt <= 0 && g.Depth == 0 && g.Nodes == 0 {
		mt = time.Second
	}
	if most > 0 && (mt <= 0 || most < mt) {
		mt = most
	}
	if mt > 0 {
		// UCI counts whole milliseconds; a cap below one still searches.
		fmt.Fprintf(&b, " movetime %d", max(mt.Milliseconds(), 1))
	}
	return b.String()
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

	name    string
	w       io.Writer
	lines   chan string
	closeFn func() error

	mu      sync.Mutex // one request at a time
	variant rules.Variant
	closed  bool
}

// Start runs the engine binary at path and performs the UCI handshake,
// which ctx bounds. The process runs until Close: ending it with ctx
// would kill it before Close could ask it to quit, and a shutdown would
// then report the engine as killed.
func Start(ctx context.Context, path string, args ...string) (*Client, error) {
	cmd := exec.Command(path, args...)
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
			_ = cmd.Process.Kill()
			return <-done
		}
	}
	c, err := NewClient(ctx, stdout, stdin, closeFn)
	if err != nil {
		_ = closeFn()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// NewClient speaks UCI over r (the engine's output) and w (its input) and
// performs the handshake. closeFn, if not nil, is called by Close after
// quit is sent.
func NewClient(ctx context.Context, r io.Reader, w io.Writer, closeFn func() error) (*Client, error) {
	c := &Client{w: w, lines: make(chan string, 256), closeFn: closeFn}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	if err := c.send("uci"); err != nil {
		return nil, err
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
		return nil, fmt.Errorf("uci handshake: %w", err)
	}
	if c.name == "" {
		c.name = "uci-engine"
	}
	return c, c.isReady(hctx)
}

func (c *Client) send(format string, args ...any) error {
	if c.closed {
		return ErrClosed
	}
	_, err := fmt.Fprintf(c.w, format+"\n", args...)
	return err
}

// readUntil reads lines until stop returns true.
func (c *Client) readUntil(ctx context.Context, stop func(string) bool) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case l, ok := <-c.lines:
			if !ok {
				return ErrClosed
			}
			if stop(strings.TrimSpace(l)) {
				return nil
			}
		}
	}
}

func (c *Client) isReady(ctx context.Context) error {
	if err := c.send("isready"); err != nil {
		return err
	}
	return c.readUntil(ctx, func(l string) bool { return l == "readyok" })
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
	if err := c.send("setoption name %s value %s", name, value); err != nil {
		return err
	}
	return c.isReady(ctx)
}

// NewGame selects the variant (UCI_Variant) and starts a new game.
func (c *Client) NewGame(ctx context.Context, v rules.Variant) error {
	c.mu.Lock()
	defer c.mu.Unlock()
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
// returned.
func (c *Client) Move(ctx context.Context, v rules.Variant, startFEN string, moves []rules.Move) (engine.Reply, error) {
	return c.MoveWithin(ctx, v, startFEN, moves, 0)
}

// MoveWithin is Move with the engine's time capped at most (when
// positive), as a game's clock caps it.
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
	if err := c.send("%s", b.String()); err != nil {
		return none, err
	}
	if err := c.send("%s", c.Go.command(most)); err != nil {
		return none, err
	}
	var best string
	var reply engine.Reply
	err = c.readUntil(ctx, func(l string) bool {
		if score, ok := infoScore(l); ok {
			reply.Score, reply.Scored = score, true
		}
		rest, ok := strings.CutPrefix(l, "bestmove")
		if ok {
			if f := strings.Fields(rest); len(f) > 0 {
				best = f[0]
			}
		}
		return ok
	})
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ErrClosed) {
			// Stop the search and swallow its bestmove, so the engine is
			// in a known state for the next request.
			_ = c.send("stop")
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = c.readUntil(sctx, func(l string) bool { return strings.HasPrefix(l, "bestmove") })
			cancel()
		}
		return none, err
	}
	reply.Move, err = c.checkBest(p, best)
	if err != nil {
		return none, err
	}
	return reply, nil
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
func infoScore(line string) (int, bool) {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "info" {
		return 0, false
	}
	for i := 1; i+2 < len(f); i++ {
		if f[i] == "string" { // the rest of the line is free text
			return 0, false
		}
		if f[i] != "score" {
			continue
		}
		n, err := strconv.Atoi(f[i+2])
		if err != nil {
			return 0, false
		}
		switch f[i+1] {
		case "cp":
			return n, true
		case "mate":
			switch {
			case n > 0 && n <= engine.MateScore/2:
				return engine.MateScore - (2*n - 1), true
			case n <= 0 && n > -engine.MateScore/2:
				return -engine.MateScore + 2*-n, true
			}
		}
		return 0, false
	}
	return 0, false
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
	go func() {
		for range c.lines { // let the reader finish however much is left
		}
	}()
	if c.closeFn != nil {
		return c.closeFn()
	}
	return nil
}

var _ engine.Player = (*Client)(nil)
