// Package store keeps matchmaking state in Redis. Keys are grouped by hash
// tag so that each Lua script touches one slot (Redis Cluster):
//
//	mm:{pools}                  zset: pool id -> last entry (ms), the pools to pair
//	mm:{p:<tag>}:q              zset: waiting ticket id -> rating
//	mm:{p:<tag>}:meta           hash: waiting ticket id -> "entered:expires:player"
//	mm:{p:<tag>}:pl             hash: player -> waiting ticket id
//	mm:{p:<tag>}:t:<ticket>     hash: the ticket
//	mm:{p:<tag>}:r:<player>:<request id>  string: the ticket of a request
//	mm:{p:<tag>}:creating       zset: match id -> time its game creation began
//	mm:{p:<tag>}:m:<match>      hash: a, b (ticket ids), at, made (its game, once
//	                            created), game (once on the tickets), void
//	mm:{p:<tag>}:seq            match counter
//	mm:{i:<token>}              hash: a friend invite
//	mm:{ireq:<player>:<request id>}  string: the invite of a request
//	mm:{gm:<game id>}           hash: a game matchmaking created (players, seats)
//	mm:{gm:<game id>}:rm        hash: its rematch
//	mm:{pl:<player>}:g          zset: game id -> created (ms), the newest 100 games
//	                            matchmaking made for the player
//	mm:{pl:<player>}:gi         hash: game id -> the player's entry of it,
//	                            "kind|side|rated|control|created ms|opponent|name"
//	mm:{pl:<player>}:made:<what>  zset: request id -> when admitted (ms), the
//	                            games against the AI ("ai") or invites ("invite")
//	                            the player made in the last window (Admit)
//	mm:{pl:addr <bucket>}:made:guest  zset: the guests created from one client
//	                            address (an IPv4 address or IPv6 /56) in the last
//	                            window; the space keeps it apart from every player
//	mm:{pl:<player>}:req:<what>:<request id>  string: what the request asked,
//	                            held for the life of what it made, so that a
//	                            retry is never counted again (Admit)
//	mm:{r:<kind>}:rating|games|names|aborts  hashes: player -> Elo, rated
//	                            games, name, rated games aborted
//	mm:{r:<kind>}:lb            zset: player -> Elo (the leaderboard)
//	mm:{r:<kind>}:recentaborts:<player>  zset: game id -> when its abort was
//	                            counted (ms), for an hour (AbortWait)
//	mm:{r:<kind>}:h:<player>    list: rating changes, latest first
//	mm:{r:<kind>}:done:<game>   string: the game's rating, or its abort, was
//	                            counted
//	mm:{pending}:z              zset: rated game id -> lease expiry (ms)
//	mm:{pending}:info           hash: rated game id -> players (JSON)
//	mm:n                        pub/sub channel: "look again" for ids
//
// Every key starts with the configured prefix (tests and deployments
// sharing one Redis isolate themselves with it).
//
// With Store.Replication, every write whose success a caller is told of,
// or that a later step takes as done, is answered only once replicas hold
// it and whatever its answer rests on: entering and cancelling tickets,
// pairing passes, invites, rematches, the record of a created game and its
// pending rating, a game's entries in its players' lists, a match's
// completion (its tickets' watchers are told once it is confirmed), a
// rating, and the count of an abort. Leases and sweeps do not wait: a lost lease is taken again when
// it runs out, a lost sweep runs again.
package store

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redisx"
)

// ErrNotFound means the thing asked for does not exist (or expired).
var ErrNotFound = errors.New("not found")

// ErrTooManyPools means a ticket's pool is new and the most pools served
// (Store.MaxPools) already have tickets.
var ErrTooManyPools = errors.New("too many pools")

var (
	//go:embed enter.lua
	enterLua string
	//go:embed activate.lua
	activateLua string
	//go:embed cancel.lua
	cancelLua string
	//go:embed pair.lua
	pairLua string
	//go:embed finish.lua
	finishLua string
	//go:embed claim.lua
	claimLua string
	//go:embed void.lua
	voidLua string
	//go:embed markmade.lua
	markMadeLua string
	//go:embed dropidle.lua
	dropIdleLua string
	//go:embed register.lua
	registerLua string
	//go:embed invite.lua
	inviteLua string
	//go:embed rematch.lua
	rematchLua string
	//go:embed rate.lua
	rateLua string
	//go:embed swaplive.lua
	swapLiveLua string
	//go:embed began.lua
	beganLua string
	//go:embed addgame.lua
	addGameLua string
	//go:embed abort.lua
	abortLua string
	//go:embed unrate.lua
	unrateLua string
	//go:embed history.lua
	historyLua string
	//go:embed rename.lua
	renameLua string
	//go:embed leaderboard.lua
	leaderboardLua string
	//go:embed rating.lua
	ratingLua string

	enterScript       = redis.NewScript(enterLua)
	activateScript    = redis.NewScript(activateLua)
	cancelScript      = redis.NewScript(cancelLua)
	pairScript        = redis.NewScript(pairLua)
	finishScript      = redis.NewScript(finishLua)
	claimScript       = redis.NewScript(claimLua)
	voidScript        = redis.NewScript(voidLua)
	markMadeScript    = redis.NewScript(markMadeLua)
	dropIdleScript    = redis.NewScript(dropIdleLua)
	registerScript    = redis.NewScript(registerLua)
	inviteScript      = redis.NewScript(inviteLua)
	rematchScript     = redis.NewScript(rematchLua)
	rateScript        = redis.NewScript(rateLua)
	swapLiveScript    = redis.NewScript(swapLiveLua)
	beganScript       = redis.NewScript(beganLua)
	addGameScript     = redis.NewScript(addGameLua)
	abortScript       = redis.NewScript(abortLua)
	unrateScript      = redis.NewScript(unrateLua)
	historyScript     = redis.NewScript(historyLua)
	renameScript      = redis.NewScript(renameLua)
	leaderboardScript = redis.NewScript(leaderboardLua)
	ratingScript      = redis.NewScript(ratingLua)
)

// Store reads and writes matchmaking state.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	// registered remembers when this process last touched a pool's
	// registry entry (pool id -> time), to skip a write per ticket.
	// Entries older than registryRefresh skip nothing and are pruned, so
	// the map holds only the pools of the last moments, not every pool
	// the process ever saw.
	registered sync.Map
	// pruned is when registered was last pruned (Unix ms).
	pruned atomic.Int64
	// Replication holds back the answers of writes until replicas have
	// them (see the package comment); zero: the master's word is enough.
	Replication redisx.Replication
	// MaxPools bounds the registered pools; Enter refuses a ticket for a
	// new pool beyond it (ErrTooManyPools). Zero: no bound.
	MaxPools int
	// RequestGrace is how much longer than its ticket's first keep an
	// entry's request is remembered. Making its match's game, or giving
	// it up, keeps the ticket an hour from then (Finish, Void), past its
	// first keep by as much as --give-up-after; a request remembered
	// longer than that answers a retry with its ticket while it is kept,
	// and with its absence after (NotFound), never with a second ticket.
	// New sets DefaultRequestGrace.
	RequestGrace time.Duration

	// claimGrace: defaultClaimGrace, shorter in tests.
	claimGrace time.Duration
}

// DefaultRequestGrace covers give-up times up to an hour, and an hour in
// which a late retry hears its ticket is gone.
const DefaultRequestGrace = 2 * time.Hour

// write runs fn on the master of key; with Replication, it returns once
// replicas hold what fn wrote and every earlier write of that master, so
// that an answer read from another call's unconfirmed write (a retry's)
// is confirmed too. Keys that fn touches share key's hash slot.
func (s *Store) write(ctx context.Context, key string, fn func(redis.Cmdable) error) error {
	return s.Replication.WriteCovering(ctx, s.rdb, key, fn)
}

// waits reports whether writes wait for replicas (Replication).
func (s *Store) waits() bool { return s.Replication.Replicas > 0 }

// New returns a store whose keys start with prefix.
func New(rdb redis.UniversalClient, prefix string) *Store {
	return &Store{rdb: rdb, prefix: prefix, RequestGrace: DefaultRequestGrace, claimGrace: defaultClaimGrace}
}

// Redis is the client, for the notification hub.
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

// Channel is the pub/sub channel of change notifications.
func (s *Store) Channel() string { return s.prefix + "mm:n" }

// Publish tells every process that the named things changed.
func (s *Store) Publish(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.rdb.Publish(ctx, s.Channel(), strings.Join(ids, ",")).Err()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b)
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s != ""
}
