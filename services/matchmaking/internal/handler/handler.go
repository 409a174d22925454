// Package handler implements palace.matchmaking.v1.MatchmakingService.
package handler

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	"github.com/palacehq/palace/pkg/clientaddr"
	"github.com/palacehq/palace/pkg/displayname"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/ident"
	"github.com/palacehq/palace/pkg/newest"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/google"
	"github.com/palacehq/palace/services/matchmaking/internal/notify"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// MaxNicknameRunes bounds a nickname as the game service bounds a seat's
// name. Names are checked when a credential is issued, and fitted again
// when a game is made (displayname.Fit): one signed before that check, or
// under another limit, must not make every game of its holder fail.
const MaxNicknameRunes = displayname.MaxRunes

// Config holds the lifetimes the handler works with.
type Config struct {
	GuestTTL   time.Duration
	AccountTTL time.Duration
	// TicketTTL is how long a ticket waits for an opponent.
	TicketTTL time.Duration
	// InviteTTL is how long a friend link is valid (24 h).
	InviteTTL time.Duration
	// RematchWindow is how long a rematch offer stands.
	RematchWindow time.Duration
	// GameKeep is how long created games are remembered (rematches).
	GameKeep time.Duration
	// WatchPoll is how often watch streams re-read their state even
	// without a notification (a lost one, an expiry).
	WatchPoll time.Duration
	// WatchHeartbeat is how long a watch stream may go without sending:
	// then it sends the state again, unchanged, so that its client can
	// tell a quiet watch from a lost connection, and proxies that close
	// idle streams leave it open.
	WatchHeartbeat time.Duration
	// MaxWatches bounds the watch streams of this process (default
	// 50000); MaxPlayerWatches those of one player in it (default 8), a
	// newer one ending the player's oldest.
	MaxWatches       int
	MaxPlayerWatches int
	// AIGames and Invites bound the games against the AI and the invites
	// (and apart the rematch offers) one player makes in a window; each
	// holds a game or a link for weeks, and the AI's games take its
	// workers' time. Entries bounds the new queue tickets, each kept past
	// its end for its retries and each a game to come, kept for weeks,
	// even if aborted at once. A zero Bound bounds nothing.
	AIGames, Invites, Entries store.Bound
	// Guests bounds the guests created from one client address in a
	// window: each is a new player, free of the bounds of the others.
	Guests store.Bound
	// Proxies are the proxies believed when they name a call's client.
	Proxies clientaddr.Trusted
	// MaxAborts is how many rated games of a kind a player may abort in
	// store.AbortWindow: with that many, the player waits to enter a rated
	// queue of that kind; 0: no bound. Aborting until the queue gives a
	// wished-for opponent costs the others their time.
	MaxAborts int
}

// Defaults of the watch streams' bounds and of what a player makes in
// an hour.
const (
	DefaultMaxWatches       = 50000
	DefaultMaxPlayerWatches = 8
	DefaultMaxAIGames       = 60
	DefaultMaxInvites       = 60
	// DefaultMaxEntries leaves room for a player who enters, cancels
	// and enters again, a game every few minutes, all hour long.
	DefaultMaxEntries = 120
	// DefaultMaxGuests leaves room for the many players behind one
	// address (a school, a carrier's NAT), each of whom keeps a guest
	// credential for a month.
	DefaultMaxGuests = 100
	// DefaultMaxAborts leaves room for a lost connection or two before
	// a first move.
	DefaultMaxAborts = 3
)

// LimitedReason is the ErrorInfo reason of a refusal for a player's bound
// on what it makes in a window; metadata retry_after_ms says when there
// is room again.
const LimitedReason = "RATE_LIMITED"

// TicketExistsReason is the ErrorInfo reason of an entry refused for the
// player's ticket already in a queue; metadata ticket_id names it.
const TicketExistsReason = "TICKET_EXISTS"

// admit counts request m against one of its player's bounds, and refuses
// it with ResourceExhausted, saying when there is room, once the bound is
// reached. A request admitted before (a retry) is admitted again; one
// whose request id was used with another request is InvalidArgument.
// who names the one bound ("you"); thing and things name one and many of
// what m makes.
func (h *Handler) admit(ctx context.Context, m store.Made, b store.Bound, who, thing, things string) error {
	wait, err := h.store.Admit(ctx, m, b, h.now())
	if errors.Is(err, store.ErrOtherRequest) {
		return apierr.New(apierr.Invalid, "request_id %q was used for another request: a retry repeats its request; use a new request_id for new %s", m.Request, things)
	}
	if err != nil || wait <= 0 {
		return err
	}
	made := things
	if b.Most == 1 {
		made = thing
	}
	return limited(wait, "%s made the most allowed, %d %s, in the last %v: the next may be made in %v", who, b.Most, made, b.Window)
}

// limited is the ResourceExhausted refusal of a bound that has room again
// after wait, which format's last verb and retry_after_ms both give in
// whole seconds, rounded up, so that a retry after the time said finds
// room.
func limited(wait time.Duration, format string, args ...any) error {
	wait = (wait + time.Second - 1).Truncate(time.Second)
	return apierr.New(apierr.ResourceExhausted, format, append(args, wait)...).
		WithInfo(LimitedReason, map[string]string{"retry_after_ms": strconv.FormatInt(wait.Milliseconds(), 10)})
}

// Deps are the handler's collaborators.
type Deps struct {
	Log   *slog.Logger
	Ring  *auth.Keyring
	Store *store.Store
	Hub   *notify.Hub
	Games *games.Creator
	// Google is nil when Google sign-in is not configured.
	Google *google.Verifier
	Now    func() time.Time
	// Entered, when set, is told of every pool a ticket entered, so this
	// replica's pairing loop visits a new pool at once.
	Entered func(store.Pool)
}

// Handler serves the matchmaking service.
type Handler struct {
	matchmakingv1.UnimplementedMatchmakingServiceServer
	cfg     Config
	log     *slog.Logger
	ring    *auth.Keyring
	store   *store.Store
	hub     *notify.Hub
	games   *games.Creator
	google  *google.Verifier
	now     func() time.Time
	entered func(store.Pool)
	// watches holds a place per watch stream; playerWatches keeps each
	// player's newest.
	watches       chan struct{}
	playerWatches *newest.Limit[string]
	// proxyWarned paces the warning that guests are refused to a proxy.
	proxyWarned seldom
}

var _ matchmakingv1.MatchmakingServiceServer = (*Handler)(nil)

// New returns a handler.
func New(cfg Config, d Deps) *Handler {
	if d.Now == nil {
		d.Now = time.Now
	}
	if cfg.WatchPoll <= 0 {
		cfg.WatchPoll = 5 * time.Second
	}
	if cfg.WatchHeartbeat <= 0 {
		cfg.WatchHeartbeat = DefaultWatchHeartbeat
	}
	if d.Entered == nil {
		d.Entered = func(store.Pool) {}
	}
	if cfg.MaxWatches <= 0 {
		cfg.MaxWatches = DefaultMaxWatches
	}
	if cfg.MaxPlayerWatches <= 0 {
		cfg.MaxPlayerWatches = DefaultMaxPlayerWatches
	}
	return &Handler{cfg: cfg, log: d.Log, ring: d.Ring, store: d.Store, hub: d.Hub, games: d.Games, google: d.Google, now: d.Now, entered: d.Entered,
		watches: make(chan struct{}, cfg.MaxWatches), playerWatches: newest.New[string](cfg.MaxPlayerWatches)}
}

// takeWatch takes one of the process's places, or says it is full (see
// newest.TakePlace).
func (h *Handler) takeWatch(ctx context.Context, replacing bool) error {
	err := newest.TakePlace(ctx, h.watches, replacing)
	if errors.Is(err, newest.ErrFull) {
		return apierr.New(apierr.ResourceExhausted, "too many watch streams on this server; retry later")
	}
	return err
}

// DefaultWatchHeartbeat is the game service's default heartbeat too.
const DefaultWatchHeartbeat = 15 * time.Second

func (h *Handler) fail(ctx context.Context, err error) error { return apierr.ToStatus(ctx, h.log, err) }

// ValidNickname reports what is wrong with a nickname, or nil.
func ValidNickname(s string) error { return displayname.Check("nickname", s) }

// CheckAccount validates an account that an operator mints a credential
// for with the player signing keys (`palace player-token`): an id the
// services take, and not one of those that sign-ins make (a Google
// account's, a guest's), which the credential would act as; and a
// nickname as CreateGuest takes it.
func CheckAccount(id, name string) error {
	if err := checkID("player_id", id, games.MaxPlayerIDBytes); err != nil {
		return err
	}
	for _, p := range []string{"google-", "google#", "guest-"} {
		if strings.HasPrefix(id, p) {
			return apierr.New(apierr.Invalid, "player_id: %q begins %q, as the ids sign-ins make do: choose another", id, p)
		}
	}
	// "ai" names the AI's seat; a colon would let two players' request
	// keys read alike (a player id and a request id are joined by one).
	if id == games.AIPlayerID || strings.Contains(id, ":") {
		return apierr.New(apierr.Invalid, "player_id: %q is the AI's, or contains ':': choose another", id)
	}
	// The ratings RPCs take "me" for the caller: nobody could read such a
	// player's rating, history or place on the leaderboard by its id.
	if id == callerID {
		return apierr.New(apierr.Invalid, "player_id: %q stands for the caller in GetRating, GetRatingHistory and GetLeaderboard: choose another", id)
	}
	return ValidNickname(name)
}

// checkID validates a client-chosen or server-issued id that becomes part
// of Redis keys (ident.Check), and of lists joined by commas in the
// notifications: no comma either.
func checkID(field, id string, limit int) error { return ident.Check(field, id, limit, ",") }

// player returns the caller's player credential.
func (h *Handler) player(ctx context.Context) (auth.Claims, error) {
	tok, ok, err := auth.Bearer(ctx, "player credential")
	if err != nil {
		return auth.Claims{}, err
	}
	if !ok {
		return auth.Claims{}, apierr.New(apierr.Unauthenticated, "a player credential is required: send \"authorization: Bearer <token>\"")
	}
	c, err := h.ring.Verify(tok, h.now())
	if err != nil {
		if hint := auth.KindHint(tok, auth.KindGuest, auth.KindAccount); hint != "" {
			// Another kind of credential, signed with other keys: say so,
			// rather than suggest that the keys differ between processes.
			return auth.Claims{}, apierr.New(apierr.Unauthenticated, "player credential: %s", hint)
		}
		// An expired one is marked: an app renews it by signing in again.
		e := auth.Refused("player credential", err)
		if errors.Is(err, auth.ErrExpired) || errors.Is(err, auth.ErrUnknownKey) {
			e.Msg += ": sign in again (an account: SignInWithGoogle, or a new credential from whoever signed it; a guest cannot be renewed, and CreateGuest makes a new player)"
		}
		return auth.Claims{}, e
	}
	if c.Kind != auth.KindGuest && c.Kind != auth.KindAccount {
		return auth.Claims{}, apierr.New(apierr.Unauthenticated, "player credential: a %s credential is not a player's", c.Kind)
	}
	return c, nil
}

// account returns the caller's credential when it is an account's.
func (h *Handler) account(ctx context.Context, what string) (auth.Claims, error) {
	c, err := h.player(ctx)
	if err != nil {
		return c, err
	}
	if c.Kind != auth.KindAccount {
		return c, apierr.New(apierr.PermissionDenied, "%s need a Google account: sign in with Google", what)
	}
	return c, nil
}

// watch sends state whenever it may have changed, and again unchanged
// after each heartbeat interval without a send (beat), until step reports
// the end; step reports whether it sent. It subscribes before the first
// read, so no change is missed.
func (h *Handler) watch(ctx context.Context, player, id string, check func(context.Context) error, step func(ctx context.Context, beat bool) (sent, done bool, wake time.Duration, err error)) error {
	// A request that fails its checks takes no place, and ends none of
	// the player's watches.
	if check != nil {
		if err := check(ctx); err != nil {
			return h.fail(ctx, err)
		}
	}
	// A player holds a few, its newest: a reconnecting client leaves
	// streams behind that the server has not yet seen die, and on a full
	// server its new watch takes the place of the one it ends.
	replaced, evicted, remove, err := h.playerWatches.Add(ctx, player)
	if errors.Is(err, newest.ErrLeaving) {
		return h.fail(ctx, apierr.New(apierr.ResourceExhausted, "this player's %d watches that newer ones replaced on this server have not ended, as their client reads none of them: close the watches it does not read, then retry", h.cfg.MaxPlayerWatches))
	}
	if err != nil {
		return h.fail(ctx, err)
	}
	defer remove()
	if err := h.takeWatch(ctx, evicted); err != nil {
		return h.fail(ctx, err)
	}
	defer func() { <-h.watches }()
	sub := h.hub.Subscribe(id)
	defer h.hub.Unsubscribe(sub)
	lastSent := time.Now()
	for {
		sent, done, wake, err := step(ctx, time.Since(lastSent) >= h.cfg.WatchHeartbeat)
		if err != nil {
			return h.fail(ctx, err)
		}
		if done {
			return nil
		}
		if sent {
			lastSent = time.Now()
		}
		if wake <= 0 || wake > h.cfg.WatchPoll {
			wake = h.cfg.WatchPoll
		}
		wake = max(min(wake, h.cfg.WatchHeartbeat-time.Since(lastSent)), 0)
		t := time.NewTimer(wake)
		select {
		case <-ctx.Done():
			t.Stop()
			// Not nil: an OK status would tell the client that the watch
			// is over, which only the end of what it watches makes it.
			return h.fail(ctx, ctx.Err())
		case <-replaced:
			t.Stop()
			return h.fail(ctx, apierr.New(apierr.ResourceExhausted, "this player opened another watch stream on this server, over its limit of %d open at once: its oldest, this one, is closed; read the newest, and do not open this one again", h.cfg.MaxPlayerWatches).WithInfo(newest.ReplacedReason, nil))
		case <-sub.C:
		case <-t.C:
		}
		t.Stop()
	}
}
