package store

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed made.lua
var madeLua string

var madeScript = redis.NewScript(madeLua)

// ErrOtherRequest means a request id was used before with another
// request.
var ErrOtherRequest = errors.New("request id used for another request")

// Bound is how many things of one kind a player may make in a window.
type Bound struct {
	Most   int
	Window time.Duration
}

// On reports whether the bound applies (Most > 0).
func (b Bound) On() bool { return b.Most > 0 && b.Window > 0 }

// Made is one request of a player to make something.
type Made struct {
	Player string
	// What is the kind of thing made ("ai", "invite").
	What    string
	Request string
	// Fingerprint, when set, is what the request asks: the same request
	// id with another fingerprint is ErrOtherRequest for Keep after it
	// was admitted. Empty: the request id is not held to anything.
	Fingerprint string
	Keep        time.Duration
}

func (s *Store) madeKey(player, what string) string {
	return s.playerKey(player, "made:"+what)
}

func (s *Store) requestKey(player, what, request string) string {
	return s.playerKey(player, "req:"+what+":"+request)
}

// Admit counts m against its player's bound b, and returns zero when it
// is admitted, else how long until there is room. A request admitted
// before is admitted again without counting twice, so a retry of a call
// whose answer was lost is not refused for itself; a request id used
// before with another fingerprint is ErrOtherRequest.
func (s *Store) Admit(ctx context.Context, m Made, b Bound, now time.Time) (time.Duration, error) {
	if !b.On() && m.Fingerprint == "" {
		return 0, nil
	}
	most := b.Most
	if !b.On() {
		most = 0
	}
	keys := []string{s.madeKey(m.Player, m.What), s.requestKey(m.Player, m.What, m.Request)}
	var wait int64
	err := s.write(ctx, keys[0], func(c redis.Cmdable) (err error) {
		wait, err = madeScript.Run(ctx, c, keys, m.Request, now.UnixMilli(), b.Window.Milliseconds(), most, m.Fingerprint, m.Keep.Milliseconds()).Int64()
		return err
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("admit %s: %w", m.What, err)
	case wait < 0:
		return 0, ErrOtherRequest
	}
	return time.Duration(wait) * time.Millisecond, nil
}

// Unadmit takes back m's count under its bound: a request refused after
// its admission (no pool served for it, say) made nothing.
func (s *Store) Unadmit(ctx context.Context, m Made) error {
	key := s.madeKey(m.Player, m.What)
	err := s.write(ctx, key, func(c redis.Cmdable) error { return c.ZRem(ctx, key, m.Request).Err() })
	if err != nil {
		return fmt.Errorf("take back %s: %w", m.What, err)
	}
	return nil
}

// MadeGame is the game an admitted request made, kept for the request's
// retries: once the game service keeps the game no longer, sending the
// same creation again would make a new game under its id.
type MadeGame struct {
	ID      string
	Seat    Grant
	Created time.Time
}

func (s *Store) madeGameKey(m Made) string {
	return s.playerKey(m.Player, "game:"+m.What+":"+m.Request)
}

// RecordMadeGame keeps g as the game m made, as long as m's request is
// kept.
func (s *Store) RecordMadeGame(ctx context.Context, m Made, g MadeGame) error {
	b, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("record made game: %w", err)
	}
	key := s.madeGameKey(m)
	if err := s.write(ctx, key, func(c redis.Cmdable) error { return c.Set(ctx, key, b, m.Keep).Err() }); err != nil {
		return fmt.Errorf("record made game: %w", err)
	}
	return nil
}

// MadeGame returns the game m made, if it is recorded.
func (s *Store) MadeGame(ctx context.Context, m Made) (MadeGame, bool, error) {
	b, err := s.rdb.Get(ctx, s.madeGameKey(m)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return MadeGame{}, false, nil
	case err != nil:
		return MadeGame{}, false, fmt.Errorf("read made game: %w", err)
	}
	var g MadeGame
	if err := json.Unmarshal(b, &g); err != nil {
		return MadeGame{}, false, fmt.Errorf("read made game: %w", err)
	}
	return g, true, nil
}
