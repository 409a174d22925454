package store

import (
	"context"
	"time"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
)

// SetRatingForTest overwrites a rating, for tests of the Elo arithmetic.
func (s *Store) SetRatingForTest(ctx context.Context, kind commonv1.GameKind, player string, r int) error {
	b := s.ratingBase(kind)
	return s.rdb.HSet(ctx, b+"rating", player, r).Err()
}

// RegisteredForTest counts the pools this process remembers registering.
func (s *Store) RegisteredForTest() int {
	n := 0
	s.registered.Range(func(any, any) bool { n++; return true })
	return n
}

// SetClaimGraceForTest shortens the claim grace, for tests of entries
// slower than it.
func (s *Store) SetClaimGraceForTest(d time.Duration) { s.claimGrace = d }
