package handler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// beganUnconfirmed runs began.lua and then answers it failed, as a write
// whose wait for replicas (--redis-wait-replicas) timed out is answered:
// it ran on the master, and the caller is told it failed.
type beganUnconfirmed struct{}

func (beganUnconfirmed) DialHook(next redis.DialHook) redis.DialHook { return next }

func (beganUnconfirmed) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		a := cmd.Args()
		if err == nil && (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(a) >= 4 {
			if k, ok := a[3].(string); ok && strings.HasSuffix(k, "}:began") {
				err = errors.New("simulated: the write was not confirmed by replicas in time")
				cmd.SetErr(err)
			}
		}
		return err
	}
}

func (beganUnconfirmed) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAFailedGameBeganRecordStoppedTheWithdrawal: a withdrawal first
// records the game's start, for an entry still on its way, and gave up
// when that write failed (a Redis hiccup, a wait for replicas timed out):
// the ticket that plainly waited stayed in its pool, and its player was
// paired into a second game.
func TestAFailedGameBeganRecordStoppedTheWithdrawal(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(beganUnconfirmed{})
	st := store.New(rdb, redistest.Prefix(t))
	h := New(Config{}, Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: st})
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default()}

	entered := time.Now().Add(-time.Minute)
	id, out, err := st.Enter(ctx, pool, store.Ticket{Player: "p", Name: "p", Rating: 1200, Entered: entered,
		Expires: entered.Add(time.Hour), State: store.StateWaiting}, "r1", time.Hour, nil)
	if err != nil || out != store.Entered {
		t.Fatalf("enter: %v %v", out, err)
	}
	// A game of p's starts elsewhere, a minute after the ticket was
	// entered.
	h.withdrawTickets(ctx, time.Now(), "p")
	tk, err := st.Ticket(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != store.StateCancelled {
		t.Errorf("ticket %s, entered a minute before the game began, is %s after the withdrawal: want cancelled "+
			"(the failed write of the game-began record, only an aid for entries on their way, stopped the withdrawal "+
			"of the ticket that waits; it is paired into a second game)", id, tk.State)
	}
}
