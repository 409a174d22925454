package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed made.lua
var madeLua string

var madeScript = redis.NewScript(madeLua)

// Bound is how many things of one kind a player may make in a window.
type Bound struct {
	Most   int
	Window time.Duration
}

// On reports whether the bound applies (Most > 0).
func (b Bound) On() bool { return b.Most > 0 && b.Window > 0 }

func (s *Store) madeKey(player, what string) string {
	return s.prefix + "mm:{pl:" + player + "}:made:" + what
}

// Admit counts request against player's bound for what (say "ai"), and
// returns zero when it is admitted, else how long until the oldest of the
// window leaves it. A request admitted before is admitted again without
// counting twice, so a retry of a call whose answer was lost is not
// refused for itself.
func (s *Store) Admit(ctx context.Context, player, what, request string, b Bound, now time.Time) (time.Duration, error) {
	if !b.On() {
		return 0, nil
	}
	key := s.madeKey(player, what)
	var wait int64
	err := s.write(ctx, key, func(c redis.Cmdable) (err error) {
		wait, err = madeScript.Run(ctx, c, []string{key}, request, now.UnixMilli(), b.Window.Milliseconds(), b.Most).Int64()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("admit %s: %w", what, err)
	}
	return time.Duration(wait) * time.Millisecond, nil
}
