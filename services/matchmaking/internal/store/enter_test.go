package store_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestARefusedEntryLeavesTheWaitingTicketLive: a player whose ticket waits
// in a pool sends another entry to it, refused by its bound, while a
// third entry of theirs has claimed the live-ticket record for a ticket
// it never writes. The entry is answered Busy with the waiting ticket, and
// the live record names that ticket again, so the player cannot enter a
// second pool while it waits.
func TestARefusedEntryLeavesTheWaitingTicketLive(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	rated := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default(), Rated: true}
	casual := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default()}
	ticket := func(at time.Time) store.Ticket {
		return store.Ticket{Player: "p", Name: "p", Rating: 1200, Entered: at, Expires: at.Add(time.Hour)}
	}
	waiting, out, err := st.Enter(ctx, rated, ticket(now), "r0", 2*time.Hour, nil)
	if err != nil || out != store.Entered {
		t.Fatal(out, err)
	}
	// The other entry's claim, for a ticket it will never write.
	key := prefix + "mm:{u:p}:live"
	ghost := rated.Tag() + ".00000000deadbeef|" + strconv.FormatInt(now.UnixMilli(), 10)
	if err := rdb.Set(ctx, key, ghost, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	id, out, err := st.Enter(ctx, rated, ticket(now), "r1", 2*time.Hour, func() error { return refused })
	if err != nil || out != store.Busy || id != waiting {
		t.Fatalf("an entry while %s waits: %s %v %v, want Busy with it", waiting, id, out, err)
	}
	later := now.Add(11 * time.Second)
	if id, out, err := st.Enter(ctx, casual, ticket(later), "r2", 2*time.Hour, nil); out != store.BusyElsewhere || id != waiting {
		t.Fatalf("an entry of another pool while %s waits: %s %v %v, want BusyElsewhere with it", waiting, id, out, err)
	}
}

// TestARetryRacingItsRequestGetsItsTicket: a retry of an entry, sent
// while the first attempt is still being made (its check of the player's
// aborts is under way), is answered with the first attempt's ticket as a
// duplicate, not refused as a second ticket of the player.
func TestARetryRacingItsRequestGetsItsTicket(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	now := time.Now()
	rated := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default(), Rated: true}
	ticket := store.Ticket{Player: "p", Name: "p", Rating: 1200, Entered: now, Expires: now.Add(time.Hour)}
	var first string
	id, out, err := st.Enter(ctx, rated, ticket, "r", 2*time.Hour, func() error {
		// The first attempt completes while the retry is checked.
		var out store.EnterOutcome
		var err error
		first, out, err = st.Enter(ctx, rated, ticket, "r", 2*time.Hour, nil)
		if err != nil || out != store.Entered {
			t.Fatalf("first attempt: %s %v %v", first, out, err)
		}
		return nil
	})
	if err != nil || out != store.Duplicate || id != first {
		t.Fatalf("retry: %s %v %v, want Duplicate with %s", id, out, err, first)
	}
}
