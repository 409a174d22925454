// Package matchmaking binds the matchmaking service
// (palace.matchmaking.v1.MatchmakingService) to a Palace process: player
// identity (guests, Google accounts), the queue and its pairing loop,
// friend invites, games against the AI, rematches, and Elo ratings fed by
// the endings of rated games.
package matchmaking

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/clientaddr"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/google"
	"github.com/palacehq/palace/services/matchmaking/internal/handler"
	"github.com/palacehq/palace/services/matchmaking/internal/matcher"
	"github.com/palacehq/palace/services/matchmaking/internal/notify"
	"github.com/palacehq/palace/services/matchmaking/internal/ratings"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// Config configures the matchmaking service.
type Config struct {
	// KeyPrefix is prepended to every Redis key.
	KeyPrefix string
	// SigningKeys signs player credentials: "id:hexsecret,...", the first
	// signs, all verify. Empty: a random key for this process only. Every
	// replica must have the same keys.
	SigningKeys string
	// GuestTTL and AccountTTL are the lifetimes of player credentials.
	GuestTTL   time.Duration
	AccountTTL time.Duration
	// GameAddr is the game service; empty: this process.
	GameAddr string

	// GoogleClientIDs are the accepted audiences of Google ID tokens
	// (comma-separated); empty turns Google sign-in off.
	GoogleClientIDs string
	GoogleIssuers   string
	GoogleJWKSURL   string

	// PairingInterval is the time between pairing passes.
	PairingInterval time.Duration
	// PairingWindow is the rating difference accepted at once; it widens
	// by PairingWiden points per second of waiting, up to
	// PairingMaxWindow (0: no bound, so any two tickets of a pool are
	// paired eventually).
	PairingWindow    float64
	PairingWiden     float64
	PairingMaxWindow float64
	// TicketTTL is how long a ticket waits before it expires.
	TicketTTL time.Duration
	// MaxPools bounds the distinct queues (kind and time control): each
	// costs every replica a pairing pass per interval, and a time control
	// is anyone's to choose.
	MaxPools int
	// InviteTTL is how long a friend link is valid.
	InviteTTL time.Duration
	// RematchWindow is how long a rematch offer stands.
	RematchWindow time.Duration
	// GameKeep is how long the games matchmaking made are remembered,
	// from their creation: their records (rematches), the players' lists
	// of games, the answers to PlayAi retries. The game service keeps a
	// game as long as it goes on and then for its --retention, so this
	// only approximates that: longer, it keeps records of games gone;
	// shorter, it forgets games still there.
	GameKeep time.Duration
	// WatchHeartbeat is how long a watch stream goes without sending
	// before it sends its state again.
	WatchHeartbeat time.Duration
	// MaxWatches and MaxPlayerWatches bound the watch streams: see
	// handler.Config.
	MaxWatches       int
	MaxPlayerWatches int
	// MaxAIGames, MaxInvites and MaxEntries bound the games against the
	// AI, the invites (and apart the rematch offers), and the queue
	// entries one player makes in an hour; 0: no bound.
	MaxAIGames int
	MaxInvites int
	MaxEntries int
	// MaxGuests bounds the guests created from one client address (an
	// IPv6 /56) in an hour; 0: no bound. Every guest is a new player, so
	// without it the bounds per player bound nothing.
	MaxGuests int
	// MaxAborts is how many rated games of a kind one player may abort in
	// an hour: with that many, the player waits to enter a rated queue of
	// that kind; 0: no bound.
	MaxAborts int
	// TrustedProxies are the address ranges of the proxies whose
	// X-Forwarded-For names the client (clientaddr.Parse); "none" or
	// empty: the peer is the client (the flag's default trusts the
	// private ranges).
	TrustedProxies string
	// TrustedProxyHops is how many entries of X-Forwarded-For, from its
	// end, a trusted peer speaks for.
	TrustedProxyHops int
	// CreateConcurrency bounds a replica's game creations in flight.
	CreateConcurrency int
	// GiveUpAfter is how long a paired ticket waits for its game before
	// the match is given up and both tickets expire.
	GiveUpAfter time.Duration
	// RatingLease is how long a replica owns a rated game it follows
	// without renewing; another replica takes over after it.
	RatingLease time.Duration
	// WaitReplicas is how many Redis replicas must hold a write before
	// it is acknowledged (store.Store.Replication); 0: the master's word.
	WaitReplicas int
	// WaitTimeout bounds that wait; a write not confirmed within it
	// fails with Unavailable, and its retry confirms it.
	WaitTimeout time.Duration
	// CallTimeout bounds one call to the game service: a game service
	// that holds calls unanswered costs a caller that long, then
	// Unavailable, or a ListGames without where the games are.
	CallTimeout time.Duration

	// Now is the clock; nil is time.Now. Tests move it to expire invites.
	Now func() time.Time
}

// RegisterFlags defines every flag of the matchmaking service, those it
// shares with the game service included (matchmakingd). In `palace serve`
// the game service defines those and is in the process; use
// RegisterOwnFlags there and copy the shared values over (one prefix and
// one durability for all).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	app.KeyPrefixFlag(fs, &c.KeyPrefix)
	app.WaitReplicasFlags(fs, &c.WaitReplicas, &c.WaitTimeout)
	app.GameAddrFlag(fs, &c.GameAddr)
	c.RegisterOwnFlags(fs)
}

// RegisterOwnFlags defines the flags only the matchmaking service has.
func (c *Config) RegisterOwnFlags(fs *flag.FlagSet) {
	app.StringFlag(fs, &c.SigningKeys, "player-signing-keys", "", "player credential keys id:hexsecret[,id:hexsecret]; the first signs, the others only verify (keep an old key there until what it signed has expired); empty: random, this process only")
	app.DurationFlag(fs, &c.GuestTTL, "guest-ttl", 30*24*time.Hour, "lifetime of a guest credential")
	app.DurationFlag(fs, &c.AccountTTL, "account-ttl", 30*24*time.Hour, "lifetime of an account credential")
	app.StringFlag(fs, &c.GoogleClientIDs, "google-client-ids", "", "OAuth client ids accepted as Google ID token audiences, comma-separated; empty: Google sign-in off")
	app.StringFlag(fs, &c.GoogleIssuers, "google-issuers", google.DefaultIssuers, "accepted Google ID token issuers, comma-separated")
	app.StringFlag(fs, &c.GoogleJWKSURL, "google-jwks-url", google.DefaultJWKSURL, "https URL of the issuer's JWKS signing keys (plain http only on loopback)")
	app.DurationFlag(fs, &c.PairingInterval, "pairing-interval", 100*time.Millisecond, "time between pairing passes")
	app.FloatFlag(fs, &c.PairingWindow, "pairing-window", 200, "rating difference paired at once (200: the stronger player is expected to score 0.76)")
	app.FloatFlag(fs, &c.PairingWiden, "pairing-widen", 100, "rating points the window widens per second of waiting")
	app.FloatFlag(fs, &c.PairingMaxWindow, "pairing-max-window", 0, "largest rating window; 0: no bound")
	app.DurationFlag(fs, &c.TicketTTL, "ticket-ttl", 10*time.Minute, "how long a ticket waits for an opponent")
	app.DurationFlag(fs, &c.InviteTTL, "invite-ttl", 24*time.Hour, "how long a friend link is valid")
	app.DurationFlag(fs, &c.RematchWindow, "rematch-window", 60*time.Second, "how long a rematch offer stands")
	app.DurationFlag(fs, &c.GameKeep, "game-keep", 30*24*time.Hour, "how long the games matchmaking made are remembered from their creation (their records, players' lists of games, rematch offers): the game service's --retention plus how long games last; a game still there once forgotten is no longer listed nor rematched")
	app.DurationFlag(fs, &c.WatchHeartbeat, "watch-heartbeat", handler.DefaultWatchHeartbeat, "how long a WatchTicket, WatchInvite or WatchRematch stream goes without sending before it sends its state again, unchanged, so that clients notice a lost connection")
	app.IntFlag(fs, &c.MaxWatches, "max-watches", handler.DefaultMaxWatches, "most WatchTicket, WatchInvite and WatchRematch streams one process serves at once; one more is refused with ResourceExhausted until one ends")
	app.IntFlag(fs, &c.MaxPlayerWatches, "max-player-watches", handler.DefaultMaxPlayerWatches, "most watch streams one player holds in one process; a newer one ends the oldest, with ResourceExhausted, and is refused while as many ended ones have not left (their client reads none of them)")
	app.IntFlag(fs, &c.MaxAIGames, "max-ai-games-per-hour", handler.DefaultMaxAIGames, "most games against the AI one player starts in an hour; one more is refused with ResourceExhausted saying when there is room; 0: no bound")
	app.IntFlag(fs, &c.MaxInvites, "max-invites-per-hour", handler.DefaultMaxInvites, "most friend invites one player creates in an hour, and most rematch offers, each refused alike; 0: no bound")
	app.IntFlag(fs, &c.MaxEntries, "max-queue-entries-per-hour", handler.DefaultMaxEntries, "most new queue tickets one player enters in an hour, refused alike (a retry of an entry is answered with its ticket); 0: no bound")
	app.IntFlag(fs, &c.MaxGuests, "max-guests-per-hour", handler.DefaultMaxGuests, "most guests created from one client address (for IPv6, one /56) in an hour, refused alike; 0: no bound")
	app.IntFlag(fs, &c.MaxAborts, "max-aborts-per-hour", handler.DefaultMaxAborts, "rated games of a kind one player may abort, or let abort without a first move, in an hour: a player who has aborted that many is refused a new ticket of that kind's rated queue with ResourceExhausted saying when there is room; 0: no bound")
	app.StringFlag(fs, &c.TrustedProxies, "trusted-proxies", clientaddr.DefaultTrusted, "address ranges (CIDR) of the proxies in front of the service, comma-separated: the client of a call from one of them is read from X-Forwarded-For; none: the peer is the client")
	app.IntFlag(fs, &c.TrustedProxyHops, "trusted-proxy-hops", clientaddr.DefaultHops, "how many X-Forwarded-For entries, from the end, a call from a trusted proxy is read back through, passing the trusted ones: 1 for one proxy that appends the address it was called from; 2 when a load balancer in --trusted-proxies appends before it; 0: none")
	app.IntFlag(fs, &c.CreateConcurrency, "create-concurrency", 64, "game creations in flight per replica")
	app.DurationFlag(fs, &c.GiveUpAfter, "give-up-after", 30*time.Second, "how long a paired ticket waits for its game (the game service may be away) before the match is given up and both tickets expire, within 7.5s after it; 10s to 30m")
	app.IntFlag(fs, &c.MaxPools, "max-pools", 200, "most distinct queues (game kind and time control) served at once; a ticket for another is refused until one is idle, since every replica pairs every queue ten times a second; the default time control's queues are always served")
	app.DurationFlag(fs, &c.RatingLease, "rating-lease", 30*time.Second, "lease of a replica on a rated game it follows")
	app.DurationFlag(fs, &c.CallTimeout, "matchmaking-call-timeout", 5*time.Second, "timeout of one call to the game service (a game's creation, a ListGames or rematch read, a seat credential): a game service that answers none is given up after it, the call answered Unavailable or ListGames without where the games are")
}

// CheckAccount validates the player id and nickname of an account whose
// credential an operator mints with the player signing keys.
func CheckAccount(id, name string) error { return handler.CheckAccount(id, name) }

// DefaultConfig is the configuration the flags default to, the
// environment left out.
func DefaultConfig() Config {
	var c Config
	fs := flag.NewFlagSet("defaults", flag.ContinueOnError)
	c.RegisterFlags(fs)
	app.ResetToDefaults(fs)
	return c
}

// matchKeep is how long a match and its tickets are kept from their
// pairing (a match at least as long as its tickets), and then from its
// game's creation or its giving up.
const matchKeep = time.Hour

// maxGiveUpAfter leaves a match given up at its latest half of matchKeep.
const maxGiveUpAfter = matchKeep / 2

// stallAfter is when another replica takes over a game's creation; a
// match is given up only once its creation is taken over, up to half as
// long again after --give-up-after (the matcher looks every stallAfter/2).
const stallAfter = 5 * time.Second

// minGiveUpAfter keeps that lateness below the time asked for: a match
// given up after a second would be given up after 5 to 7.5 s.
const minGiveUpAfter = 2 * stallAfter

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{
		"guest-ttl": c.GuestTTL, "account-ttl": c.AccountTTL, "pairing-interval": c.PairingInterval,
		"ticket-ttl": c.TicketTTL, "invite-ttl": c.InviteTTL, "rematch-window": c.RematchWindow, "game-keep": c.GameKeep, "rating-lease": c.RatingLease,
		"give-up-after": c.GiveUpAfter, "watch-heartbeat": c.WatchHeartbeat, "matchmaking-call-timeout": c.CallTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive", name))
		}
	}
	if c.GiveUpAfter > 0 && c.GiveUpAfter < minGiveUpAfter {
		errs = append(errs, fmt.Errorf("--give-up-after %v: at least %v (a stalled game creation is noticed after %v)", c.GiveUpAfter, minGiveUpAfter, stallAfter))
	}
	if c.GiveUpAfter > maxGiveUpAfter {
		// A match's record lives matchKeep from its pairing: one given up
		// later would be gone, and its tickets held paired until they expire.
		errs = append(errs, fmt.Errorf("--give-up-after %v: at most %v", c.GiveUpAfter, maxGiveUpAfter))
	}
	if c.MaxWatches < 1 || c.MaxPlayerWatches < 1 {
		errs = append(errs, errors.New("--max-watches and --max-player-watches must be at least 1"))
	}
	if c.RatingLease > 0 && c.RatingLease < 100*time.Millisecond {
		// Renewed every third of it: a lease of a few nanoseconds is no
		// lease, and would tick at no interval.
		errs = append(errs, fmt.Errorf("--rating-lease %v: at least 100ms", c.RatingLease))
	}
	if c.WatchHeartbeat > 0 && c.WatchHeartbeat < 100*time.Millisecond {
		// Each heartbeat of each watch is a read and a message.
		errs = append(errs, fmt.Errorf("--watch-heartbeat %v: at least 100ms", c.WatchHeartbeat))
	}
	if err := redisx.CheckKeyPrefix(c.KeyPrefix); err != nil {
		errs = append(errs, fmt.Errorf("--key-prefix: %w", err))
	}
	if err := app.CheckTarget(c.GameAddr); err != nil {
		errs = append(errs, fmt.Errorf("--game-addr: %w", err))
	}
	if c.MaxAIGames < 0 || c.MaxInvites < 0 || c.MaxEntries < 0 || c.MaxGuests < 0 || c.MaxAborts < 0 {
		errs = append(errs, errors.New("--max-ai-games-per-hour, --max-invites-per-hour, --max-queue-entries-per-hour, --max-guests-per-hour and --max-aborts-per-hour must not be negative (0: no bound)"))
	}
	if _, err := clientaddr.Parse(c.TrustedProxies, c.TrustedProxyHops); err != nil {
		errs = append(errs, fmt.Errorf("--trusted-proxies, --trusted-proxy-hops: %w", err))
	}
	if c.MaxPools < 1 {
		errs = append(errs, errors.New("--max-pools must be at least 1"))
	}
	// Written so that NaN, for which every comparison is false, fails too:
	// a NaN window pairs no two tickets ever.
	if !(c.PairingWindow >= 0 && c.PairingWiden >= 0 && c.PairingMaxWindow >= 0) || math.IsInf(c.PairingWindow+c.PairingWiden+c.PairingMaxWindow, 0) {
		errs = append(errs, errors.New("--pairing-window, --pairing-widen and --pairing-max-window must be finite and not negative"))
	}
	if err := c.replication().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--redis-wait-replicas, --redis-wait-timeout: %w", err))
	}
	if c.CreateConcurrency < 1 {
		errs = append(errs, errors.New("--create-concurrency must be at least 1"))
	}
	if c.GoogleClientIDs != "" && c.GoogleJWKSURL != "" {
		if err := checkKeysURL(c.GoogleJWKSURL); err != nil {
			errs = append(errs, fmt.Errorf("--google-jwks-url: %w", err))
		}
	}
	if c.GoogleClientIDs != "" && (c.GoogleJWKSURL == "" || c.GoogleIssuers == "") {
		errs = append(errs, errors.New("Google sign-in needs --google-jwks-url and --google-issuers"))
	}
	return errors.Join(errs...)
}

// checkKeysURL refuses a key set fetched in the clear from another
// machine: whoever could change it on the way could sign in as anyone.
// Loopback may be plain HTTP (a local issuer, in tests and staging).
func checkKeysURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	host := u.Hostname()
	switch {
	case u.Scheme == "https" && host != "":
		return nil
	case u.Scheme == "http" && (host == "localhost" || isLoopback(host)):
		return nil
	}
	return fmt.Errorf("%q: want an https URL (plain http only on loopback), since the keys decide who signs in", raw)
}

func isLoopback(host string) bool {
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func (c Config) replication() redisx.Replication {
	return redisx.Replication{Replicas: c.WaitReplicas, Timeout: c.WaitTimeout}
}

func split(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Bind registers the matchmaking service and starts its pairing loop and
// rating consumer; the returned closer stops them.
func Bind(cfg Config) app.Binder {
	return func(ctx context.Context, rt *app.Runtime) (func() error, error) {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("matchmaking config: %w", err)
		}
		if cfg.Now == nil {
			cfg.Now = time.Now
		}
		proxies, err := clientaddr.Parse(cfg.TrustedProxies, cfg.TrustedProxyHops)
		if err != nil {
			return nil, fmt.Errorf("matchmaking: --trusted-proxies, --trusted-proxy-hops: %w", err)
		}
		log := rt.Log.With("component", "matchmaking")
		ring, ephemeral, err := rt.SigningKeys("player-signing-keys", cfg.SigningKeys)
		if err != nil {
			return nil, fmt.Errorf("matchmaking: %w", err)
		}
		if ephemeral {
			log.Warn("no --player-signing-keys: player credentials are signed with a random key and die with this process")
		}
		cc, err := rt.Dial(cfg.GameAddr, app.CallTimeout(cfg.CallTimeout))
		if err != nil {
			return nil, fmt.Errorf("matchmaking: game service: %w", err)
		}
		if cfg.GameAddr != "" {
			rt.WarnIfServiceKeysRandom(log, "the game service at "+cfg.GameAddr+" refuses to create this process's games")
		}
		gameClient := gamev1.NewGameServiceClient(cc)
		cfg.replication().WarnIfShort(ctx, rt.Redis, log)
		st := store.New(rt.Redis, cfg.KeyPrefix)
		st.Replication = cfg.replication()
		st.MaxPools = cfg.MaxPools
		st.RequestGrace = cfg.GiveUpAfter + matchKeep + time.Minute
		// Background work outlives the request that started nothing; it stops
		// when the closer runs, after the server stopped taking calls.
		bg, stop := context.WithCancel(context.WithoutCancel(ctx))
		hub, err := notify.New(bg, rt.Redis, log, st.Channel())
		if err != nil {
			stop()
			_ = cc.Close()
			return nil, fmt.Errorf("matchmaking: %w", err)
		}
		meter := rt.Tel.Meter.Meter("palace/matchmaking")
		gc := games.New(gameClient, st, cfg.GameKeep, cfg.Now)
		m, err := matcher.New(matcher.Config{
			Interval: cfg.PairingInterval, BaseWindow: cfg.PairingWindow, WidenPerSecond: cfg.PairingWiden, MaxWindow: cfg.PairingMaxWindow,
			Keep: matchKeep, StallAfter: stallAfter, GiveUpAfter: cfg.GiveUpAfter, Concurrency: cfg.CreateConcurrency,
			IdleAfter: cfg.TicketTTL + time.Minute, Now: cfg.Now,
		}, log.With("part", "matcher"), st, gc, meter)
		var rc *ratings.Consumer
		if err == nil {
			rc, err = ratings.New(ratings.Config{Lease: cfg.RatingLease, Now: cfg.Now}, log.With("part", "ratings"), st, gameClient, meter)
		}
		if err != nil {
			stop()
			_ = hub.Close()
			_ = cc.Close()
			return nil, fmt.Errorf("matchmaking: %w", err)
		}
		var gv *google.Verifier
		if ids := split(cfg.GoogleClientIDs); len(ids) > 0 {
			gv = google.New(google.Config{ClientIDs: ids, Issuers: split(cfg.GoogleIssuers), JWKSURL: cfg.GoogleJWKSURL, Now: cfg.Now, Leeway: 30 * time.Second})
		}
		h := handler.New(handler.Config{
			GuestTTL: cfg.GuestTTL, AccountTTL: cfg.AccountTTL, TicketTTL: cfg.TicketTTL, InviteTTL: cfg.InviteTTL,
			RematchWindow: cfg.RematchWindow, GameKeep: cfg.GameKeep, WatchHeartbeat: cfg.WatchHeartbeat,
			MaxWatches: cfg.MaxWatches, MaxPlayerWatches: cfg.MaxPlayerWatches,
			AIGames: store.Bound{Most: cfg.MaxAIGames, Window: time.Hour}, Invites: store.Bound{Most: cfg.MaxInvites, Window: time.Hour},
			Entries: store.Bound{Most: cfg.MaxEntries, Window: time.Hour},
			Guests:  store.Bound{Most: cfg.MaxGuests, Window: time.Hour}, Proxies: proxies, MaxAborts: cfg.MaxAborts,
		}, handler.Deps{Log: log, Ring: ring, Store: st, Hub: hub, Games: gc, Google: gv, Now: cfg.Now, Entered: m.Touch})
		rt.Server.RegisterService(&matchmakingv1.MatchmakingService_ServiceDesc, h)

		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); m.Run(bg) }()
		go func() { defer wg.Done(); rc.Run(bg) }()
		return func() error {
			stop()
			wg.Wait()
			return errors.Join(hub.Close(), cc.Close())
		}, nil
	}
}
