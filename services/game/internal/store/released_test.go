package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/game/internal/store"
)

// claimedFrom has "r" claim proc's lease, run out, with a seat of game g1
// on proc's list.
func claimedFrom(t *testing.T, proc string) (*store.Store, redis.UniversalClient, string) {
	t.Helper()
	ctx := context.Background()
	st, rdb, prefix := newStoreOn(t)
	now := time.Now()
	if _, err := st.Renew(ctx, proc, now.Add(-time.Second), now.Add(-time.Minute), now.Add(-time.Minute), nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Holding(ctx, proc, "g1", rules.First); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Claim(ctx, proc, now, now.Add(time.Minute)); err != nil || got != proc {
		t.Fatalf("claim: %q, %v", got, err)
	}
	return st, rdb, prefix + "{presence}:procs"
}

func TestAReleasedProcessIsForgotten(t *testing.T) {
	ctx := context.Background()
	st, rdb, procs := claimedFrom(t, "p")
	if err := st.Released(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if left, err := rdb.ZRange(ctx, procs, 0, -1).Result(); err != nil || len(left) != 0 {
		t.Errorf("leases after the release: %v, %v; want none", left, err)
	}
	if held, err := st.Held(ctx, "p"); err != nil || len(held) != 0 {
		t.Errorf("games listed after the release: %v, %v; want none", held, err)
	}
}

// TestAProcessBackBeforeItsReleaseEndedKeepsItsLease: a process that
// renewed its lease while another released its seats lost its lease and
// its list when the release ended, although it served on.
func TestAProcessBackBeforeItsReleaseEndedKeepsItsLease(t *testing.T) {
	ctx := context.Background()
	st, rdb, procs := claimedFrom(t, "p")
	now := time.Now()
	if _, err := st.Renew(ctx, "p", now.Add(time.Minute), now, now, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Released(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.ZScore(ctx, procs, "p").Result(); err != nil {
		t.Errorf("the lease renewed during the release: %v", err)
	}
	if held, err := st.Held(ctx, "p"); err != nil || len(held) != 1 {
		t.Errorf("games listed: %v, %v; want g1", held, err)
	}
	// Its next renewal holds its seats again, those the release let go
	// included, and ends the claim.
	r, err := st.Renew(ctx, "p", now.Add(time.Minute), now, now, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Fresh {
		t.Error("the renewal after the release does not hold the seats again")
	}
	if _, err := rdb.ZScore(ctx, procs, store.ClaimOf("p")).Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("the claim outlived the renewal after the release: %v", err)
	}
}
