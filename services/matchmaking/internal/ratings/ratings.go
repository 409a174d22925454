// Package ratings applies Elo ratings when rated games end. Matchmaking
// records every rated game it creates as pending (store.AddPending) before
// anyone learns of the game. Any number of replicas run a Consumer: each
// leases pending games (a Redis zset scored by lease expiry), follows them
// through the game service's event stream, and on the GameEnded event
// applies both players' new ratings in one Lua script that also records the
// game as done, then forgets the game. A crash loses only a lease: the game
// is leased again when it runs out, and an ending seen twice (two
// watchers, a retry, a restart) is applied once, by game id.
package ratings

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/server"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// Config tunes a Consumer.
type Config struct {
	// Lease is how long a replica owns a pending game without renewing.
	Lease time.Duration
	// ClaimEvery is how often new or orphaned pending games are leased.
	ClaimEvery time.Duration
	// MaxWatch bounds the games one replica follows.
	MaxWatch int
	// PollEvery is the GetGame polling interval for private games, whose
	// event stream would need a seat credential (and count as the player
	// being connected).
	PollEvery time.Duration
	// RetryAfter is the first wait after a game's stream fails; it doubles
	// up to 30 s while failures follow one another.
	RetryAfter time.Duration
	Now        func() time.Time
}

// warnAfter is how many failures in a row of one game's follow are taken
// as routine (a rollout of the game service, a dropped connection) before
// they are logged as a warning: after that the game's rating is late, and
// an operator at the default log level must be able to see why.
const warnAfter = 5

// Consumer follows pending rated games and rates them when they end.
type Consumer struct {
	cfg   Config
	log   *slog.Logger
	store *store.Store
	game  gamev1.GameServiceClient
	// id names this consumer to the rating and abort scripts, so that a
	// retry of its own after a reply was lost is told the game was applied.
	id string

	applied  metric.Int64Counter
	failures metric.Int64Counter

	mu       sync.Mutex
	watching map[string]bool
	wg       sync.WaitGroup
}

// New returns a consumer; Run starts it.
func New(cfg Config, log *slog.Logger, st *store.Store, game gamev1.GameServiceClient, meter metric.Meter) (*Consumer, error) {
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.ClaimEvery <= 0 {
		cfg.ClaimEvery = time.Second
	}
	if cfg.MaxWatch <= 0 {
		cfg.MaxWatch = 20000
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = 10 * time.Second
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 500 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	applied, err := meter.Int64Counter("palace.matchmaking.ratings_applied", metric.WithDescription("rated game endings applied (result: rated, aborted, duplicate)"))
	if err != nil {
		return nil, err
	}
	failures, err := meter.Int64Counter("palace.matchmaking.ratings_follow_failures", metric.WithDescription("failed attempts to follow or rate a rated game, each retried (code: the gRPC code of the failure)"))
	if err != nil {
		return nil, err
	}
	return &Consumer{cfg: cfg, log: log, store: st, game: game, id: rand.Text(), applied: applied, failures: failures, watching: map[string]bool{}}, nil
}

// Run leases and follows pending games until ctx ends.
func (c *Consumer) Run(ctx context.Context) {
	defer c.wg.Wait()
	claim := time.NewTicker(c.cfg.ClaimEvery)
	defer claim.Stop()
	renew := time.NewTicker(c.cfg.Lease / 3)
	defer renew.Stop()
	c.claim(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-claim.C:
			c.claim(ctx)
		case <-renew.C:
			c.renew(ctx)
		}
	}
}

func (c *Consumer) claim(ctx context.Context) {
	c.mu.Lock()
	room := c.cfg.MaxWatch - len(c.watching)
	c.mu.Unlock()
	if room <= 0 {
		return
	}
	now := c.cfg.Now()
	// An error may come with games: those claimed beside records that
	// could not be read, which are watched all the same.
	ps, err := c.store.ClaimPending(ctx, now, now.Add(c.cfg.Lease), min(room, 500))
	if err != nil && ctx.Err() == nil {
		c.log.WarnContext(ctx, "claim pending rated games", "err", err)
	}
	for _, p := range ps {
		c.mu.Lock()
		already := c.watching[p.Game]
		c.watching[p.Game] = true
		c.mu.Unlock()
		if already {
			continue
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.watch(ctx, p)
			c.mu.Lock()
			delete(c.watching, p.Game)
			c.mu.Unlock()
		}()
	}
}

func (c *Consumer) renew(ctx context.Context) {
	c.mu.Lock()
	ids := make([]string, 0, len(c.watching))
	for id := range c.watching {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		if err := c.store.RenewPending(ctx, ids[:n], c.cfg.Now().Add(c.cfg.Lease)); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "renew rated game leases", "err", err)
		}
		ids = ids[n:]
	}
}

// watch follows one game, from its start, until its ending is applied,
// retrying failures with backoff; it gives up only when ctx ends (the
// lease then runs out and another replica takes over).
func (c *Consumer) watch(ctx context.Context, p store.Pending) {
	c.watchFrom(ctx, p, resumePoint{})
}

// watchFrom is watch resuming after reached: where the game's stream has
// reached, so that a stream cut (a renewal, a rollout) resumes after it
// rather than replaying the whole game.
func (c *Consumer) watchFrom(ctx context.Context, p store.Pending, reached resumePoint) {
	backoff := c.cfg.RetryAfter
	failed := 0
	for ctx.Err() == nil {
		began := time.Now()
		err := c.follow(ctx, p, &reached)
		if err == nil {
			return
		}
		if server.Renewed(err) {
			// The game service renewed the connection (its
			// --max-connection-age), which is no failure: follow on a
			// new one at once.
			backoff, failed = c.cfg.RetryAfter, 0
			continue
		}
		if status.Code(err) == codes.OutOfRange && reached.version > 0 {
			// The game no longer holds what the stream reached: its Redis
			// lost its latest writes, and the game went on, or will, from
			// before them. Read its log anew from the start, which holds
			// the ending however it comes.
			c.log.WarnContext(ctx, "rated game is behind what its stream had reached; reading it from the start", "game", p.Game, "reached", reached.version, "err", err)
			reached = resumePoint{}
			continue
		}
		if status.Code(err) == codes.NotFound {
			// The game is gone (expired): nothing will ever end it.
			c.log.WarnContext(ctx, "pending rated game no longer exists; dropping it", "game", p.Game)
			if err := c.store.RemovePending(ctx, p.Game); err != nil {
				c.log.WarnContext(ctx, "drop pending game", "game", p.Game, "err", err)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > 30*time.Second {
			// The stream had been up a while: this is a new disconnection
			// (a rollout, say), not the same failure again, so a long game
			// through several rollouts is not rated 30 s late.
			backoff, failed = c.cfg.RetryAfter, 0
		}
		failed++
		c.failures.Add(ctx, 1, metric.WithAttributes(attribute.String("code", status.Code(err).String())))
		if failed%(4*warnAfter) == warnAfter {
			c.log.WarnContext(ctx, "rated game cannot be followed; its rating waits, retrying", "game", p.Game, "failures", failed, "err", err)
		} else {
			c.log.DebugContext(ctx, "following rated game; retrying", "game", p.Game, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// resumePoint is where a game's stream has reached: the version, and the
// commit of the event there ("" when not known), by which the game service
// tells a game that went on from before writes its Redis lost: the same
// version may then hold another event, such as the game's ending.
type resumePoint struct {
	version uint64
	commit  string
}

// follow streams a game's events after *reached, which it advances up to
// the game's ending, and settles the game at its end. It returns nil once
// settled.
func (c *Consumer) follow(ctx context.Context, p store.Pending, reached *resumePoint) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// No snapshot: the log replayed from the start holds the GameEnded of a
	// game that already ended, and replaying it costs the game service a
	// read, where a snapshot would cost it a full view of the position.
	stream, err := c.game.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: p.Game, AfterVersion: reached.version, AfterCommit: reached.commit})
	if err != nil {
		return err
	}
	for {
		msg, err := stream.Recv()
		if status.Code(err) == codes.PermissionDenied {
			return c.poll(ctx, p)
		}
		if errors.Is(err, io.EOF) {
			// A stream resumed at the end of an ended game ends at once, so
			// the game ended at the version reached with another event than
			// the one seen there (a write lost, of a game whose events name
			// no commit): the next follow reads the log from the start.
			*reached = resumePoint{}
			return errors.New("event stream ended before the game did")
		}
		if err != nil {
			return err
		}
		if e := msg.GetEvent().GetGameEnded(); e != nil {
			// *reached stays before the ending, so that a settle that
			// fails (Redis, its replicas) reads it again.
			return c.Settle(ctx, p, e.GetResult(), e.GetSide(), msg.GetEvent().GetTime().AsTime())
		}
		if e := msg.GetEvent(); e.GetVersion() > reached.version {
			*reached = resumePoint{e.GetVersion(), e.GetCommit()}
		}
		if v := msg.GetHeartbeat().GetVersion(); v > reached.version {
			*reached = resumePoint{version: v}
		}
	}
}

// poll reads a private game until it ends, with matchmaking's own
// service credential: the seat credential stored at creation may run out,
// or its key be removed, before a long game ends.
func (c *Consumer) poll(ctx context.Context, p store.Pending) error {
	t := time.NewTicker(c.cfg.PollEvery)
	defer t.Stop()
	for {
		resp, err := c.game.GetGames(ctx, &gamev1.GetGamesRequest{GameIds: []string{p.Game}})
		if err != nil {
			return err
		}
		if len(resp.GetGames()) == 0 {
			return status.Errorf(codes.NotFound, "game %s is no longer kept by the game service", p.Game)
		}
		if g := resp.GetGames()[0]; finished(g.GetStatus()) {
			return c.Settle(ctx, p, g.GetResult(), g.GetEndedBy(), g.GetEndedAt().AsTime())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func finished(s commonv1.GameStatus) bool {
	return s == commonv1.GameStatus_GAME_STATUS_ENDED || s == commonv1.GameStatus_GAME_STATUS_ABORTED
}

// Settle applies a finished game's result, once per game however often it
// is called, and forgets the pending game. The players' rating changes are
// dated when the game ended (endedAt; the zero time or before 1970: now),
// which may be long before a matchmaker that was not running rates it. An
// aborted game changes no rating; it is counted against the player who
// aborted it, or let it abort without a first move (endedBy), so that apps
// may show who aborts often, and so that many aborts within an hour of
// when the game ended keep the player out of the rated queue.
func (c *Consumer) Settle(ctx context.Context, p store.Pending, res *commonv1.Result, endedBy commonv1.Side, endedAt time.Time) error {
	if endedAt.UnixMilli() <= 0 {
		endedAt = c.cfg.Now()
	}
	// A game no longer pending was settled already (a lease changing
	// hands delivers its end twice), or was made for a match given up
	// meanwhile, whose players were never told of it: neither counts.
	switch pending, err := c.store.IsPending(ctx, p.Game); {
	case err != nil:
		return err
	case !pending:
		c.applied.Add(ctx, 1, metric.WithAttributes(attribute.String("result", "duplicate")))
		return nil
	}
	var scoreFirst float64
	outcome := "rated"
	switch {
	case res.GetMethod() == commonv1.EndMethod_END_METHOD_ABORTED:
		outcome = "aborted"
	case res.GetWinner() == commonv1.Winner_WINNER_FIRST:
		scoreFirst = 1
	case res.GetWinner() == commonv1.Winner_WINNER_SECOND:
		scoreFirst = 0
	case res.GetWinner() == commonv1.Winner_WINNER_DRAW:
		scoreFirst = 0.5
	default:
		outcome = "aborted"
		c.log.WarnContext(ctx, "finished rated game without a winner; not rated", "game", p.Game, "method", res.GetMethod())
	}
	if res.GetMethod() == commonv1.EndMethod_END_METHOD_ABORTED {
		duplicate, err := c.countAbort(ctx, p, endedBy, endedAt)
		if err != nil {
			return err
		}
		if duplicate {
			outcome = "duplicate"
		}
	}
	var a store.Applied
	if outcome == "rated" {
		first, second := p.Players()
		var err error
		a, err = c.store.ApplyRating(ctx, store.Outcome{
			GameID: p.Game, Kind: commonv1.GameKind(p.Kind), A: first, B: second,
			ScoreA: scoreFirst, At: endedAt, Applier: c.id,
		})
		if err != nil {
			return err
		}
		if !a.Done {
			outcome = "duplicate"
		}
	}
	// Told once the game has left pending: a retry after a failure before
	// then is answered by its own marker as applied, and tells it.
	if err := c.store.RemovePending(ctx, p.Game); err != nil {
		return err
	}
	if a.Done {
		c.log.InfoContext(ctx, "rated game applied", "game", p.Game,
			"first", p.First, "first_before", a.ABefore, "first_after", a.AAfter,
			"second", p.Second, "second_before", a.BBefore, "second_after", a.BAfter)
	}
	c.applied.Add(ctx, 1, metric.WithAttributes(attribute.String("result", outcome)))
	return nil
}

// countAbort counts an aborted rated game against the player of side by;
// duplicate is true when an earlier delivery of the ending counted it.
func (c *Consumer) countAbort(ctx context.Context, p store.Pending, by commonv1.Side, at time.Time) (duplicate bool, err error) {
	player := ""
	switch by {
	case commonv1.Side_SIDE_FIRST:
		player = p.First
	case commonv1.Side_SIDE_SECOND:
		player = p.Second
	default:
		// Every abort names its side, but for a game service older than
		// Game.ended_by, read on the poll path.
		c.log.WarnContext(ctx, "aborted rated game not counted: the game service named no side that aborted it", "game", p.Game)
		return false, nil
	}
	counted, err := c.store.CountAbort(ctx, commonv1.GameKind(p.Kind), p.Game, player, c.id, at, c.cfg.Now())
	if err != nil {
		return false, err
	}
	if counted {
		c.log.InfoContext(ctx, "aborted rated game counted", "game", p.Game, "player", player)
	}
	return !counted, nil
}
