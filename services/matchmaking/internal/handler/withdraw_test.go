package handler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// An entry to the queue sent before a game of the player started
// elsewhere (an invite accepted from another device, say), its ticket
// written only after the withdrawal first looked, is withdrawn all the
// same: the withdrawal waits for an entry on its way. It once found no
// ticket, and the ticket, entered before the game began, then waited to
// be paired into a second game.
func TestAnEntryOnItsWayWhenTheGameStartsIsWithdrawn(t *testing.T) {
	st := store.New(redistest.Client(t), redistest.Prefix(t))
	h := New(Config{}, Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: st})
	ctx := context.Background()
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default()}
	entered := time.Now()
	claimed, release := make(chan struct{}), make(chan struct{})
	type entry struct {
		id  string
		out store.EnterOutcome
		err error
	}
	done := make(chan entry, 1)
	go func() {
		// admit runs after the entry's claim, before its ticket is written.
		id, out, err := st.Enter(ctx, pool, store.Ticket{Player: "p", Name: "p", Rating: 1200, Entered: entered, Expires: entered.Add(time.Hour)}, "r1", time.Hour, func() error {
			close(claimed)
			<-release
			return nil
		})
		done <- entry{id, out, err}
	}()
	<-claimed
	time.Sleep(5 * time.Millisecond)
	since := time.Now() // the game starts elsewhere
	withdrawn := make(chan struct{})
	go func() {
		h.withdrawTickets(ctx, since, "p")
		close(withdrawn)
	}()
	time.Sleep(100 * time.Millisecond)
	close(release)
	<-withdrawn
	// The entry is answered entered (its watchers then told of the
	// withdrawal), withdrawn (finding the game's start itself) or,
	// withdrawn before it let its ticket wait, raced (Aborted: its retry
	// learns of the ticket).
	switch e := <-done; {
	case e.err == nil && (e.out == store.Entered || e.out == store.Withdrawn):
		if tk, err := st.Ticket(ctx, e.id); err != nil || tk.State != store.StateCancelled {
			t.Fatalf("the entry's ticket after the withdrawal: %+v %v, want cancelled", tk, err)
		}
	case !errors.Is(e.err, store.ErrRacedEntries):
		t.Fatalf("the entry whose ticket was withdrawn on its way answered %v %v %v", e.id, e.out, e.err)
	}
	id, err := st.LiveTicket(ctx, "p", time.Now())
	if err != nil || id != "" {
		t.Fatalf("after the withdrawal, the player's live ticket is %q (%v), want none", id, err)
	}
}

// TestAnEntryDatedBeforeTheGameClaimingAfterItsWithdrawalWaited: an entry
// dates its ticket before it claims the player's live-ticket record, with
// Redis round trips in between (the request's read, waiting for replicas
// under --redis-wait-replicas; a rated entry's admission). A game started
// elsewhere in that gap found no claim to wait for and withdrew nothing:
// the ticket, dated before the game, waited to be paired into a second
// game. The entry now finds the game's start and withdraws its ticket.
func TestAnEntryDatedBeforeTheGameClaimingAfterItsWithdrawalWaited(t *testing.T) {
	st := store.New(redistest.Client(t), redistest.Prefix(t))
	h := New(Config{}, Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: st})
	ctx := context.Background()
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default()}
	ticket := func(entered time.Time) store.Ticket {
		return store.Ticket{Player: "p", Name: "p", Rating: 1200, Entered: entered, Expires: entered.Add(time.Hour), State: store.StateWaiting}
	}

	entered := time.Now() // EnterQueue's h.now()
	since := entered.Add(5 * time.Millisecond)
	h.withdrawTickets(ctx, since, "p") // the game starts elsewhere
	// The entry goes on to its claim and ticket.
	id, out, err := st.Enter(ctx, pool, ticket(entered), "r1", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := st.Ticket(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if out != store.Withdrawn || tk.State != store.StateCancelled {
		t.Fatalf("an entry dated %v before the game began answered %v, its ticket %s: want it withdrawn", since.Sub(entered), out, tk.State)
	}
	// A retry is answered so.
	if again, out, err := st.Enter(ctx, pool, ticket(time.Now()), "r1", time.Hour, nil); err != nil || again != id || out != store.Duplicate {
		t.Fatalf("retry: %s %v %v; want %s, a duplicate", again, out, err, id)
	}
	// An entry asked for after the game began waits.
	id, out, err = st.Enter(ctx, pool, ticket(since.Add(time.Millisecond)), "r2", time.Hour, nil)
	if err != nil || out != store.Entered {
		t.Fatalf("an entry after the game began: %v %v; want it entered", out, err)
	}
	if tk, err := st.Ticket(ctx, id); err != nil || tk.State != store.StateWaiting {
		t.Fatalf("its ticket: %+v %v; want it waiting", tk, err)
	}
}
