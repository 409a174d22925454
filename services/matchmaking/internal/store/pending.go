package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
)

// Pending is a rated game whose rating is not applied yet. Matchmaking
// records it before the players learn of the game, so no ending can be
// missed; it stays until the ending is applied (or the game is gone).
type Pending struct {
	Game string `json:"-"`
	// Kind is the commonv1.GameKind number.
	Kind   int32  `json:"kind"`
	First  string `json:"p1"`
	FName  string `json:"n1"`
	Second string `json:"p2"`
	SName  string `json:"n2"`
	// FNamedAt and SNamedAt are when each player was given the name
	// (Player.NamedAt), in Unix ms; 0 when unknown, as in the records of
	// older releases.
	FNamedAt int64 `json:"a1,omitempty"`
	SNamedAt int64 `json:"a2,omitempty"`
	// Token is a seat credential of the game, still recorded for older
	// releases, which read a private game with it; this one reads with its
	// own service credential, which does not run out with the game's.
	Token string `json:"tok"`
}

// readable reports whether p names what a rating needs: a record of
// another form decodes without error, its fields left empty.
func (p Pending) readable() error {
	if p.First == "" || p.Second == "" {
		return errors.New("no players (p1, p2)")
	}
	if k := commonv1.GameKind(p.Kind); k != commonv1.GameKind_GAME_KIND_JANGGI && k != commonv1.GameKind_GAME_KIND_XIANGQI {
		return fmt.Errorf("game kind %d", p.Kind)
	}
	return nil
}

// Players are the game's players by side, as its rating takes them.
func (p Pending) Players() (first, second Player) {
	return Player{ID: p.First, Name: p.FName, NamedAt: fromMilli(p.FNamedAt)},
		Player{ID: p.Second, Name: p.SName, NamedAt: fromMilli(p.SNamedAt)}
}

// fromMilli reads Unix ms, 0 being the zero time (unknown).
func fromMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func (s *Store) pendingKeys() (z, info string) {
	return s.prefix + "mm:{pending}:z", s.prefix + "mm:{pending}:info"
}

// AddPending records a rated game to watch; adding it again changes
// nothing.
func (s *Store) AddPending(ctx context.Context, p Pending) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode pending game: %w", err)
	}
	z, info := s.pendingKeys()
	err = s.write(ctx, z, func(c redis.Cmdable) error {
		_, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			// The details first: a claimer that finds the id finds its details.
			pipe.HSetNX(ctx, info, p.Game, raw)
			pipe.ZAddNX(ctx, z, redis.Z{Score: 0, Member: p.Game})
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("add pending game: %w", err)
	}
	return nil
}

// ClaimPending leases up to limit pending games whose lease ran out (or
// that nobody watched yet) until leaseUntil. Records it cannot read
// (damaged, or of a release that writes them otherwise) are named in an
// error returned beside the games it read: they stay leased, claimed
// again after the lease, and keep none of their batch from its rating.
func (s *Store) ClaimPending(ctx context.Context, now, leaseUntil time.Time, limit int) ([]Pending, error) {
	z, info := s.pendingKeys()
	ids, err := claimScript.Run(ctx, s.rdb, []string{z}, now.UnixMilli(), leaseUntil.UnixMilli(), limit).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("claim pending games: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	raws, err := s.rdb.HMGet(ctx, info, ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("read pending games: %w", err)
	}
	out := make([]Pending, 0, len(ids))
	var unread []error
	for i, r := range raws {
		str, ok := r.(string)
		if !ok {
			// No details: nothing to rate it with; forget it.
			_ = s.RemovePending(ctx, ids[i])
			continue
		}
		var p Pending
		err := json.Unmarshal([]byte(str), &p)
		if err == nil {
			err = p.readable()
		}
		if err != nil {
			unread = append(unread, fmt.Errorf("decode pending game %s: %w", ids[i], err))
			continue
		}
		p.Game = ids[i]
		out = append(out, p)
	}
	return out, errors.Join(unread...)
}

// RenewPending extends the lease of games this process watches.
func (s *Store) RenewPending(ctx context.Context, ids []string, until time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	z, _ := s.pendingKeys()
	members := make([]redis.Z, len(ids))
	for i, id := range ids {
		members[i] = redis.Z{Score: float64(until.UnixMilli()), Member: id}
	}
	if err := s.rdb.ZAddXX(ctx, z, members...).Err(); err != nil {
		return fmt.Errorf("renew pending leases: %w", err)
	}
	return nil
}

// RemovePending forgets a game once its ending was applied.
func (s *Store) RemovePending(ctx context.Context, id string) error {
	z, info := s.pendingKeys()
	pipe := s.rdb.TxPipeline()
	pipe.ZRem(ctx, z, id)
	pipe.HDel(ctx, info, id)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("remove pending game: %w", err)
	}
	return nil
}

// IsPending reports whether a game still waits for its rating.
func (s *Store) IsPending(ctx context.Context, id string) (bool, error) {
	z, _ := s.pendingKeys()
	_, err := s.rdb.ZScore(ctx, z, id).Result()
	if err == redis.Nil {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read pending: %w", err)
	}
	return true, nil
}
