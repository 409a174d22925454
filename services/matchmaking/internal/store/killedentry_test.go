package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestAnEntryKilledWhileThePlayerWaitsKeepsThemInOnePool: player p waits
// in pool X, and another device of theirs sends an entry to X, bounded
// (a rated pool's abort check) or not, whose replica is killed as soon as
// it changes p's live-ticket record. The entry is answered busy without
// changing it, so the record still names the waiting ticket once
// claimGrace is past: an entry to pool Y is answered BusyElsewhere with
// it, and p is never paired in two pools at once, handed two games.
func TestAnEntryKilledWhileThePlayerWaitsKeepsThemInOnePool(t *testing.T) {
	for _, bounded := range []bool{false, true} {
		t.Run(map[bool]string{false: "unbounded", true: "bounded"}[bounded], func(t *testing.T) {
			rdb, prefix := redistest.Client(t), redistest.Prefix(t)
			st := store.New(rdb, prefix)
			ctx := context.Background()
			now := time.Now()
			x := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default()}
			y := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default()}
			ticket := func(p string, at time.Time) store.Ticket {
				return store.Ticket{Player: p, Name: p, Rating: 1200, Entered: at, Expires: at.Add(time.Hour)}
			}
			tX, out, err := st.Enter(ctx, x, ticket("p", now), "r0", 2*time.Hour, nil)
			if err != nil || out != store.Entered {
				t.Fatal(out, err)
			}

			// The other device's entry, on a replica killed once it writes the
			// live-ticket record.
			dying := redistest.Client(t)
			dying.AddHook(&redistest.KilledAfterWriting{Key: prefix + "mm:{u:p}:live"})
			var admit func() error
			if bounded {
				admit = func() error { return nil }
			}
			if id, out, err := store.New(dying, prefix).Enter(ctx, x, ticket("p", now), "r1", 2*time.Hour, admit); err == nil && (out != store.Busy || id != tX) {
				t.Fatalf("an entry to %s while %s waits there: %s %v, want Busy with it", x.ID(), tX, id, out)
			}

			later := now.Add(11 * time.Second) // past claimGrace
			tY, out, err := st.Enter(ctx, y, ticket("p", later), "r2", 2*time.Hour, nil)
			if err != nil {
				t.Fatal(err)
			}
			if out == store.BusyElsewhere && tY == tX {
				return
			}
			t.Fatalf("while %s waits in %s, p's entry to %s is %v with %s; p is then paired %d times at once", tX, x.ID(), y.ID(), out, tY, pairingsOf(t, st, x, y, later))
		})
	}
}

// TestARetryKilledAfterReplacingItsFirstAttemptsClaimKeepsThePlayerInOnePool:
// a player's entry (request "r") to rated pool X is made on replica A: it
// claims the player's live-ticket record and checks the player's aborts.
// Meanwhile the client, timed out, resends it to replica B, which reads
// the request as unused, finds A's claim (pool X, its ticket not written
// yet), replaces it with its own claim, and is killed right then. Before,
// A wrote its ticket while the record named B's claim, a ticket that would
// never be: once claimGrace was past, an entry of the player to pool Y was
// entered, the player waiting in two pools at once. A no longer holds its
// claim and writes nothing (Aborted: retry); the client's next retry
// enters, and entries to Y are told AlreadyExists (BusyElsewhere) with it.
func TestARetryKilledAfterReplacingItsFirstAttemptsClaimKeepsThePlayerInOnePool(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default(), Rated: true}
	y := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default()}
	ticket := func(at time.Time) store.Ticket {
		return store.Ticket{Player: "p", Name: "p", Rating: 1200, Entered: at, Expires: at.Add(time.Hour)}
	}
	var retryErr error
	_, _, err := st.Enter(ctx, x, ticket(now), "r", 2*time.Hour, func() error {
		// While A checks the aborts, the retry runs on replica B, killed
		// once it writes the live-ticket record.
		dying := redistest.Client(t)
		dying.AddHook(&redistest.KilledAfterWriting{Key: prefix + "mm:{u:p}:live"})
		_, _, retryErr = store.New(dying, prefix).Enter(ctx, x, ticket(now.Add(50*time.Millisecond)), "r", 2*time.Hour, nil)
		return nil
	})
	if retryErr == nil {
		t.Fatal("the retry on B was not killed: it never wrote the live-ticket record (the scenario did not happen)")
	}
	if !errors.Is(err, store.ErrRacedEntries) {
		t.Fatalf("first attempt on A, its claim replaced by its retry's: %v, want ErrRacedEntries (nothing written)", err)
	}
	tX, out, err := st.Enter(ctx, x, ticket(now.Add(100*time.Millisecond)), "r", 2*time.Hour, nil)
	if err != nil || out != store.Entered {
		t.Fatalf("the client's next retry: %s %v %v, want Entered", tX, out, err)
	}

	soon := now.Add(time.Second)
	idSoon, outSoon, errSoon := st.Enter(ctx, y, ticket(soon), "r2", 2*time.Hour, nil)
	later := now.Add(11 * time.Second) // past claimGrace
	idLater, outLater, errLater := st.Enter(ctx, y, ticket(later), "r2b", 2*time.Hour, nil)
	if errSoon == nil && outSoon == store.BusyElsewhere && idSoon == tX && errLater == nil && outLater == store.BusyElsewhere && idLater == tX {
		return
	}
	if outLater == store.Entered && errLater == nil {
		if _, err := st.Ticket(ctx, tX); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("while %s waits in %s, the player's entry to %s: within claimGrace %s %v %v (Aborted: retry, ErrRacedEntries=%v); its retry past claimGrace ENTERED %s: the player waits in two pools at once; want BusyElsewhere with %s (AlreadyExists) both times",
			tX, x.ID(), y.ID(), idSoon, outSoon, errSoon, errors.Is(errSoon, store.ErrRacedEntries), idLater, tX)
	}
	t.Fatalf("while %s waits in %s, the player's entry to %s: within claimGrace %s %v %v, past it %s %v %v; want BusyElsewhere with %s",
		tX, x.ID(), y.ID(), idSoon, outSoon, errSoon, idLater, outLater, errLater, tX)
}
