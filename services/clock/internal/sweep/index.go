package sweep

import (
	"context"
	"time"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// A clock replica started with another --key-prefix (or shard count)
// than the game service's sweeps an index nobody writes: it finds nothing
// due, so no call fails and nothing looks wrong, while no game is ever
// flagged. So the replica asks the game service which index it writes,
// at start and then every indexCheckEvery, and reports the clock service
// NOT_SERVING (OnIndex) for as long as the two differ.

// indexCheckEvery spaces the checks once one was answered; an unanswered
// one is retried after probeEvery.
const indexCheckEvery = time.Minute

// checkIndex runs the checks until ctx ends.
func (s *Service) checkIndex(ctx context.Context) {
	agrees := true
	for {
		wait := probeEvery
		resp, err := s.askProbe(ctx)
		if err == nil {
			wait = indexCheckEvery
			if now := s.indexAgrees(resp.GetDeadlineIndex()); now != agrees {
				agrees = now
				if s.cfg.OnIndex != nil {
					s.cfg.OnIndex(agrees)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// indexAgrees reports whether the game service writes the index swept
// here, and logs an error when not. A game service older than the field
// names none, and is taken to agree.
func (s *Service) indexAgrees(theirs *gamev1.DeadlineIndex) bool {
	if theirs == nil {
		return true
	}
	if theirs.GetKeyPrefix() == s.idx.Prefix() && int(theirs.GetShards()) == s.idx.Shards() {
		return true
	}
	s.log.Error("the game service writes its deadlines to another index than this clock service sweeps: no timeout of its games is flagged here; give both services the same --key-prefix and --deadline-shards (PALACE_KEY_PREFIX, PALACE_DEADLINE_SHARDS)",
		"game_key_prefix", theirs.GetKeyPrefix(), "game_shards", theirs.GetShards(),
		"clock_key_prefix", s.idx.Prefix(), "clock_shards", s.idx.Shards())
	return false
}
