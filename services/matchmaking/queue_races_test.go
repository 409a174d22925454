package matchmaking_test

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking"
)

// TestARetryOfAnEntryStillBeingServedGetsItsTicket: a mobile client's
// EnterQueue times out on its side while replica A is still serving it,
// and the client resends it, with the same request_id, to replica B
// (DESIGN.md invariant 2: "a retry returns the first answer"). Replica B
// reads the request id as unused just before A writes the ticket, then
// finds the player's ticket waiting: it answers that ticket, not
// AlreadyExists "you already have ticket X" of this very request's ticket.
func TestARetryOfAnEntryStillBeingServedGetsItsTicket(t *testing.T) {
	e := newEnv(t, 1, nil)
	proxy, b := replicaThroughProxy(t, e)
	a := e.mm[0]

	p := e.guest("Retrier")
	req := &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi}
	requestKey := []byte(":r:" + p.id + ":" + req.GetRequestId())
	liveKey := []byte("mm:{u:" + p.id + "}:live")

	retried, wait := enterHeld(t, proxy, b, p, req)
	// B reads the request id (unused yet), and is slow before its next read.
	wait(requestKey)
	proxy.Pass(func(h []byte) bool { return bytes.Contains(h, requestKey) })
	wait(liveKey)

	// Meanwhile replica A completes the first call.
	first, err := a.EnterQueue(p.ctx(), req)
	proxy.Restore()
	if err != nil {
		t.Fatalf("first call on replica A: %v", err)
	}
	r := <-retried
	if codeOf(r.err) != codes.OK || r.tk.GetTicketId() != first.GetTicket().GetTicketId() {
		t.Fatalf("retry of EnterQueue (same request_id %q) on replica B while replica A served the first call (ticket %s): got %v, %v; want ticket %s, the retry's answer being the first's",
			req.GetRequestId(), first.GetTicket().GetTicketId(), r.tk, r.err, first.GetTicket().GetTicketId())
	}
}

// TestAnEntryRacingAnotherPoolsEntryIsToldToRetry: a player's app sends
// two entries at once (two time controls tapped, or two devices): one to a
// custom-time-control pool through replica B, one to the default pool
// through replica A. B's entry claims the player's live-ticket record
// first, and is then refused, since the most pools are served
// (--max-pools): ResourceExhausted. A's entry, made while B's was in
// flight, was told AlreadyExists "you already have ticket X in another
// pool" of a ticket X that never existed (the player waited nowhere, and
// CancelTicket of X said NotFound). It is told Aborted, to retry, as the
// proto says for racing entries of one player; its retry enters.
func TestAnEntryRacingAnotherPoolsEntryIsToldToRetry(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxPools = 1 })
	proxy, b := replicaThroughProxy(t, e)
	a := e.mm[0]

	// Someone else's ticket takes the one custom pool served.
	e.enter(a, e.guest("Other"), &matchmakingv1.EnterQueueRequest{TimeControl: fischer(15*time.Minute, 0)})

	p := e.guest("DoubleTap")
	customPool := []byte("janggi/10m+5s/casual")
	registering := func(h []byte) bool { return bytes.Contains(h, []byte("mm:{pools}")) && bytes.Contains(h, customPool) }
	proxy.Hold()
	refused := make(chan error, 1)
	go func() {
		_, err := b.EnterQueue(p.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi, TimeControl: fischer(10*time.Minute, 5*time.Second)})
		refused <- err
	}()
	// Let B's entry through up to its registration of the custom pool:
	// it has claimed the player's live-ticket record.
	deadline := time.Now().Add(5 * time.Second)
	for !proxy.Holds(registering) {
		if time.Now().After(deadline) {
			proxy.Restore()
			t.Fatal("replica B's entry never reached the pool registry")
		}
		proxy.Pass(func(h []byte) bool { return bytes.Contains(h, []byte(p.id)) || connectionHello(h) })
		time.Sleep(time.Millisecond)
	}
	_, errA := a.EnterQueue(p.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi})
	proxy.Restore()
	errB := <-refused
	if codeOf(errB) != codes.ResourceExhausted {
		t.Fatalf("B's entry to the custom pool: %v, want ResourceExhausted (--max-pools 1 is taken)", errB)
	}
	if codeOf(errA) != codes.Aborted {
		t.Fatalf("entry to the default pool racing an entry (later refused) to a custom pool: %v; want Aborted (entries of the same player race: retry), not a ticket that never existed", errA)
	}
	if _, err := a.EnterQueue(p.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi}); err != nil {
		t.Fatalf("the retry of the entry told to retry: %v, want it entered", err)
	}
}

// entryAnswer is an EnterQueue's answer.
type entryAnswer struct {
	tk  *matchmakingv1.Ticket
	err error
}

// enterHeld sends p's req to replica b, whose Redis commands proxy holds
// from now on, and returns its answer to come and a wait for b's first
// held command naming what.
func enterHeld(t *testing.T, proxy *redistest.Proxy, b matchmakingv1.MatchmakingServiceClient, p player, req *matchmakingv1.EnterQueueRequest) (<-chan entryAnswer, func(what []byte)) {
	proxy.Hold()
	answer := make(chan entryAnswer, 1)
	go func() {
		r, err := b.EnterQueue(p.ctx(), req)
		answer <- entryAnswer{r.GetTicket(), err}
	}()
	wait := func(what []byte) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !proxy.Holds(func(h []byte) bool { return bytes.Contains(h, what) }) {
			if time.Now().After(deadline) {
				proxy.Restore()
				t.Fatalf("replica B never sent a command naming %s", what)
			}
			// A connection dialled meanwhile says hello first.
			proxy.Pass(connectionHello)
			time.Sleep(time.Millisecond)
		}
	}
	return answer, wait
}

// connectionHello matches the commands go-redis opens a connection with,
// which a held proxy lets pass.
func connectionHello(h []byte) bool {
	l := bytes.ToLower(h)
	return bytes.Contains(l, []byte("hello")) || bytes.Contains(l, []byte("setinfo")) || bytes.Contains(l, []byte("$4\r\nping"))
}

// replicaThroughProxy starts replica B of e, which reaches Redis through a
// proxy that can hold its commands, and returns the proxy and B's client.
func replicaThroughProxy(t *testing.T, e *env) (*redistest.Proxy, matchmakingv1.MatchmakingServiceClient) {
	t.Helper()
	proxy := redistest.NewProxy(t, e.redis)
	addr, _ := runReplicaLogging(t, proxy.Addr(), e.cfg, e.logs)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return proxy, matchmakingv1.NewMatchmakingServiceClient(cc)
}
