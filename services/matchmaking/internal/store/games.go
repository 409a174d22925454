package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/rules"
)

// Player is one seat's player of a game matchmaking created.
type Player struct {
	ID, Name string
	// NamedAt is when the player was given Name: the sign-in that issued
	// the credential carrying it. A rating shows the name on the
	// leaderboard only when it is newer than the one shown (rate.lua), so
	// a game that began before a sign-in does not put the former name
	// back. Zero when unknown (records of older releases): the rating
	// then changes no name shown.
	NamedAt time.Time
	Seat    Grant
}

// Game is what matchmaking remembers of a game it created: enough to offer
// a rematch with the same settings and to rate it.
type Game struct {
	ID      string
	Kind    commonv1.GameKind
	Control clock.Control
	Rated   bool
	Public  bool
	// First and Second are the players by side.
	First, Second Player
}

func (s *Store) gameKey(id string) string    { return s.prefix + "mm:{gm:" + id + "}" }
func (s *Store) rematchKey(id string) string { return s.prefix + "mm:{gm:" + id + "}:rm" }

func b2s(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// SaveGame remembers a created game for keep and then, when pending is
// set, records it as a rated game to watch. Every write is idempotent, so
// a retry after a partial failure completes it.
func (s *Store) SaveGame(ctx context.Context, g Game, keep time.Duration, pending *Pending) error {
	key := s.gameKey(g.ID)
	err := s.write(ctx, key, func(c redis.Cmdable) error {
		_, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.HSet(ctx, key,
				"kind", int32(g.Kind), "tc", g.Control.String(), "rated", b2s(g.Rated), "public", b2s(g.Public),
				"p1", g.First.ID, "n1", g.First.Name, "t1", g.First.Seat.Token, "e1", g.First.Seat.Expires.UnixMilli(),
				"p2", g.Second.ID, "n2", g.Second.Name, "t2", g.Second.Seat.Token, "e2", g.Second.Seat.Expires.UnixMilli(),
				"a1", unixMilli(g.First.NamedAt), "a2", unixMilli(g.Second.NamedAt))
			pipe.Expire(ctx, key, keep)
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("save game: %w", err)
	}
	if pending != nil {
		return s.AddPending(ctx, *pending)
	}
	return nil
}

// ForgetGame drops the record of a game matchmaking created, and its
// pending rating: a game nobody was told of.
func (s *Store) ForgetGame(ctx context.Context, id string) error {
	if err := s.RemovePending(ctx, id); err != nil {
		return err
	}
	if err := s.rdb.Del(ctx, s.gameKey(id)).Err(); err != nil {
		return fmt.Errorf("forget game: %w", err)
	}
	return nil
}

// LoadGame reads a game matchmaking created.
func (s *Store) LoadGame(ctx context.Context, id string) (Game, error) {
	m, err := s.rdb.HGetAll(ctx, s.gameKey(id)).Result()
	if err != nil {
		return Game{}, fmt.Errorf("load game: %w", err)
	}
	if len(m) == 0 {
		return Game{}, ErrNotFound
	}
	kind, _ := strconv.Atoi(m["kind"])
	c, err := clock.ParseControl(m["tc"])
	if err != nil {
		return Game{}, fmt.Errorf("game %s: %w", id, err)
	}
	return Game{
		ID: id, Kind: commonv1.GameKind(kind), Control: c, Rated: m["rated"] == "1", Public: m["public"] == "1",
		First:  Player{ID: m["p1"], Name: m["n1"], NamedAt: ms(m["a1"]), Seat: Grant{Side: rules.First.String(), Token: m["t1"], Expires: ms(m["e1"])}},
		Second: Player{ID: m["p2"], Name: m["n2"], NamedAt: ms(m["a2"]), Seat: Grant{Side: rules.Second.String(), Token: m["t2"], Expires: ms(m["e2"])}},
	}, nil
}

// Rematch is the rematch state of a game as stored.
type Rematch struct {
	State string // "", offered, accepting, accepted, declined
	By    string
	// DeclinedBy is who declined or withdrew the offer (state declined).
	DeclinedBy string
	// Offer numbers the offer, with Expires its id.
	Offer   int64
	Expires time.Time
	Game    string
	// AcceptingSince is when the offer was accepted (state accepting).
	AcceptingSince time.Time
	// Seats in the new game by player id, once accepted.
	Seats map[string]Grant
}

// ReadRematch reads the rematch state of game id.
func (s *Store) ReadRematch(ctx context.Context, id string) (Rematch, error) {
	m, err := s.rdb.HGetAll(ctx, s.rematchKey(id)).Result()
	if err != nil {
		return Rematch{}, fmt.Errorf("read rematch: %w", err)
	}
	r := Rematch{State: m["state"], By: m["by"], Expires: ms(m["exp"]), Game: m["game"], AcceptingSince: ms(m["accat"]), DeclinedBy: m["decl"], Offer: int64(atoi(m["n"])), Seats: map[string]Grant{}}
	for k, v := range m {
		if len(k) > 2 && k[:2] == "s:" {
			p := k[2:]
			r.Seats[p] = Grant{Side: v, Token: m["k:"+p], Expires: ms(m["x:"+p])}
		}
	}
	return r, nil
}

// RematchOutcome is the answer of OfferRematch and AcceptRematch.
type RematchOutcome struct {
	// Go: the caller must create (or re-create) the rematch game.
	Go bool
	// Offered: an offer is pending, by By until Expires, numbered Offer.
	By      string
	Expires time.Time
	Offer   int64
}

// rematch runs one op of rematch.lua on the rematch of game id.
func (s *Store) rematch(ctx context.Context, id string, args ...any) ([]string, error) {
	var res []string
	err := s.write(ctx, s.rematchKey(id), func(c redis.Cmdable) (err error) {
		res, err = rematchScript.Run(ctx, c, []string{s.rematchKey(id)}, args...).StringSlice()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rematch %s: %w", args[0], err)
	}
	return res, nil
}

func (s *Store) rematchOp(ctx context.Context, id string, args ...any) (RematchOutcome, error) {
	res, err := s.rematch(ctx, id, args...)
	if err != nil {
		return RematchOutcome{}, err
	}
	switch res[0] {
	case "go":
		return RematchOutcome{Go: true}, nil
	case "offered":
		return RematchOutcome{By: res[1], Expires: ms(res[2]), Offer: int64(atoi(res[3]))}, nil
	}
	return RematchOutcome{}, nil
}

// OfferRematch records player's offer, or accepts the opponent's.
func (s *Store) OfferRematch(ctx context.Context, id, player string, now time.Time, window, keep time.Duration) (RematchOutcome, error) {
	return s.rematchOp(ctx, id, "offer", player, now.UnixMilli(), window.Milliseconds(), keep.Milliseconds())
}

// AcceptRematch accepts the opponent's pending offer; the accepted
// rematch is kept for keep.
func (s *Store) AcceptRematch(ctx context.Context, id, player string, now time.Time, keep time.Duration) (RematchOutcome, error) {
	return s.rematchOp(ctx, id, "accept", player, now.UnixMilli(), keep.Milliseconds())
}

// DeclineOutcome is the answer of DeclineRematch.
type DeclineOutcome int

const (
	// Declined: the offer is declined (now, or by an earlier call).
	Declined DeclineOutcome = iota
	// NothingPending: the offer named is not pending: none was made, it
	// expired, or another replaced it.
	NothingPending
	// AlreadyAccepted: the rematch was accepted.
	AlreadyAccepted
)

// DeclineRematch ends the offer of the rematch of game id that expires
// at expires and is numbered offer, declined by the opponent or withdrawn
// by its maker, and returns the offer declined.
func (s *Store) DeclineRematch(ctx context.Context, id, player string, expires, offer int64, now time.Time) (Rematch, DeclineOutcome, error) {
	res, err := s.rematch(ctx, id, "decline", player, now.UnixMilli(), expires, offer)
	if err != nil {
		return Rematch{}, 0, err
	}
	switch res[0] {
	case "declined":
		return Rematch{State: "declined", By: res[1], DeclinedBy: res[2], Expires: ms(res[3]), Offer: int64(atoi(res[4]))}, Declined, nil
	case "accepted":
		return Rematch{}, AlreadyAccepted, nil
	}
	return Rematch{}, NothingPending, nil
}

// CompleteRematch records the new game.
func (s *Store) CompleteRematch(ctx context.Context, id, newGame string, a, b Player) error {
	_, err := s.rematchOp(ctx, id, "complete", newGame,
		a.ID, a.Seat.Side, a.Seat.Token, a.Seat.Expires.UnixMilli(),
		b.ID, b.Seat.Side, b.Seat.Token, b.Seat.Expires.UnixMilli())
	return err
}
