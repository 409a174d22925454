package store_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// atEnter runs fn around the enter script of requestKey, once.
type atEnter struct {
	requestKey string
	armed      atomic.Bool
	fn         func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error
}

func (h *atEnter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *atEnter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *atEnter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(a) > 7 && fmt.Sprint(a[2]) == "5" && a[7] == h.requestKey &&
			h.armed.CompareAndSwap(true, false) {
			return h.fn(ctx, cmd, next)
		}
		return next(ctx, cmd)
	}
}

// TestARetryAnsweredDupByTheScriptLetsTheTicketWait: entry E1 of
// request r1 runs its script, and its process dies (or its connection
// stays down past go-redis' re-sends) before the answer comes back. A
// retry E2 of the same request, which claimed the player's record before
// E1's script ran (so its own read of the request found nothing), runs
// its script after E1's: the script answers "dup" with E1's ticket, which
// Enter answered Duplicate at once, without letting it wait as a retry
// that reads the request first does (duplicate). The handler showed that
// entering ticket as WAITING, but nothing ever let it wait: the player was
// never paired, and the ticket read EXPIRED after twice the claim grace.
func TestARetryAnsweredDupByTheScriptLetsTheTicketWait(t *testing.T) {
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	direct := redistest.Client(t)
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default()}
	requestKey := prefix + "mm:{p:" + pool.Tag() + "}:r:p:r1"

	newClient := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c1, c2 := newClient(), newClient()
	st1, st2 := store.New(c1, prefix), store.New(c2, prefix)

	// Warm the script cache, so that the hooks see the script's one run.
	now := time.Now()
	w := store.Ticket{Player: "w", Name: "w", Rating: 3000, Entered: now, Expires: now.Add(time.Hour)}
	if _, out, err := st1.Enter(ctx, pool, w, "rw", 2*time.Hour, nil); err != nil || out != store.Entered {
		t.Fatal(out, err)
	}
	if _, err := st1.Cancel(ctx, mustLive(t, st1, "w"), "w"); err != nil {
		t.Fatal(err)
	}

	tk := store.Ticket{Player: "p", Name: "p", Rating: 1200, Entered: now, Expires: now.Add(time.Hour)}
	e2AtScript, e1Landed := make(chan struct{}), make(chan struct{})
	type answer struct {
		id  string
		out store.EnterOutcome
		err error
	}
	e2 := make(chan answer, 1)

	h2 := &atEnter{requestKey: requestKey, fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		close(e2AtScript)
		<-e1Landed
		return next(ctx, cmd)
	}}
	h2.armed.Store(true)
	c2.AddHook(h2)

	killed := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	h1 := &atEnter{requestKey: requestKey, fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		// E1 has checked its claim; the client's retry E2 arrives now.
		go func() {
			tk2 := tk
			tk2.Entered = time.Now()
			id, out, err := st2.Enter(ctx, pool, tk2, "r1", 2*time.Hour, nil)
			e2 <- answer{id, out, err}
		}()
		<-e2AtScript
		err := next(ctx, cmd) // E1's script runs in Redis ...
		close(e1Landed)
		if err != nil {
			return err
		}
		cmd.SetErr(killed) // ... and its answer never comes back
		return killed
	}}
	h1.armed.Store(true)
	c1.AddHook(h1)

	_, _, err1 := st1.Enter(ctx, pool, tk, "r1", 2*time.Hour, nil)
	a2 := <-e2
	if err1 == nil || a2.err != nil || a2.id == "" {
		t.Fatalf("the interleaving did not happen: E1 %v, E2 %v", err1, a2.err)
	}
	ticket, err := st2.Ticket(ctx, a2.id)
	if err != nil {
		t.Fatal(err)
	}
	_, inQueue := direct.ZScore(ctx, prefix+"mm:{p:"+pool.Tag()+"}:q", a2.id).Result()
	if ticket.State != store.StateWaiting || inQueue != nil {
		t.Fatalf("the retry was answered %v with ticket %s (shown WAITING), but the ticket is %q and in the queue: %v: nothing will ever let it wait",
			a2.out, a2.id, ticket.State, inQueue == nil)
	}
}

func mustLive(t *testing.T, st *store.Store, player string) string {
	t.Helper()
	id, err := st.LiveTicket(context.Background(), player, time.Now())
	if err != nil || id == "" {
		t.Fatalf("live ticket of %s: %q %v", player, id, err)
	}
	return id
}
