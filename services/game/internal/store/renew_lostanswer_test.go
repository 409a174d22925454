package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/game/internal/store"
)

// TestARenewalWhoseAnswerIsLostIsTakenForFresh: a process whose lease is
// gone (its seats released by another, after a pause) renews it: the
// renewal is fresh, and the process must hold its seats again. The
// process's client (redisx.New: go-redis' retries) sends the script again
// when the connection breaks after Redis ran it, and the second run found
// the lease in place: the renewal answered not fresh, without error, and
// the seats stayed released while their players' streams were open.
func TestARenewalWhoseAnswerIsLostIsTakenForFresh(t *testing.T) {
	ctx := context.Background()
	direct, prefix := redistest.Client(t), redistest.Prefix(t)
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	rdb, err := redisx.New(ctx, proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	procs := prefix + "{presence}:procs"
	// The script in Redis' cache, so that the answer lost is of its run,
	// not of a NOSCRIPT refusal: another process renews first.
	now := time.Now()
	warm, err := store.New(direct, store.Config{Prefix: prefix, LiveTTL: time.Hour, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Renew(ctx, "other", now.Add(time.Minute), now, now, nil, 0); err != nil {
		t.Fatal(err)
	}
	rdb.AddHook(&redistest.LoseFirstAnswer{
		Proxy: proxy,
		Match: func(args []any) bool {
			// renewlease.lua: seven keys, the first the leases.
			return len(args) > 3 && fmt.Sprint(args[2]) == "7" && args[3] == procs
		},
		Landed: func() bool { return direct.ZScore(ctx, procs, "p").Err() == nil },
	})
	st, err := store.New(rdb, store.Config{Prefix: prefix, LiveTTL: time.Hour, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Renew(ctx, "p", now.Add(15*time.Second), now, now, nil, 0)
	if err != nil {
		t.Fatalf("renewal: %v (the client sends a script again after a lost answer)", err)
	}
	if !r.Fresh {
		t.Fatal("the renewal that made p's lease anew, its answer lost and the script sent again, answered not fresh: p never holds its seats again")
	}
	// A renewal of a lease in place, answered at once, is not fresh.
	r, err = st.Renew(ctx, "p", now.Add(16*time.Second), now.Add(time.Second), now, nil, 0)
	if err != nil || r.Fresh {
		t.Fatalf("the next renewal: %+v, %v; want not fresh", r, err)
	}
}
