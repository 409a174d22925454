package aijobs

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// failDeliveriesOnce fails, once, Queue.deliveries' XPENDING (the
// look at a job's count right after taking it over) with a connection
// error, without sending it.
type failDeliveriesOnce struct{ once sync.Once }

func (h *failDeliveriesOnce) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failDeliveriesOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *failDeliveriesOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if cmd.Name() == "xpending" && len(a) == 6 && a[3] == a[4] && a[3] != "-" {
			failed := false
			h.once.Do(func() { failed = true })
			if failed {
				err := errors.New("connection reset by peer")
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// losingConn is a connection whose first reply to an EVALSHA is
// lost: Redis runs the script, the connection is reset before its answer
// is read (a Redis failing over, a proxy dropping the connection).
type losingConn struct {
	net.Conn
	armed *atomic.Bool // the next read after an EVALSHA is to fail
	lost  *atomic.Int32
}

func (c *losingConn) Write(b []byte) (int, error) {
	if c.lost.Load() == 0 && bytes.Contains(bytes.ToLower(b), []byte("evalsha")) {
		c.armed.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *losingConn) Read(b []byte) (int, error) {
	if c.armed.CompareAndSwap(true, false) {
		c.lost.Add(1)
		time.Sleep(100 * time.Millisecond) // Redis runs the script meanwhile
		_ = c.Conn.Close()
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return c.Conn.Read(b)
}

// TestAStrayHandedBackTwiceKeepsItsEarlierTries: a job taken over whose
// delivery count could not be read is a stray of its consumer, handed back
// never tried (Postpone). Its hand back took one off the count in Redis,
// each time it ran: the production client (redisx, go-redis' default
// MaxRetries 3) sends a script again whose answer was lost on a reset
// connection, and a job tried and failed once came back at its first
// attempt, tried more times than MaxAttempts allows and its retry backoff
// restarted. The count is set from the stray's listed attempt.
func TestAStrayHandedBackTwiceKeepsItsEarlierTries(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	armed, lost := &atomic.Bool{}, &atomic.Int32{}
	// As redisx builds it: go-redis' default retries (MaxRetries 0 = 3).
	rdb := redis.NewClient(&redis.Options{Addr: addr,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &losingConn{Conn: c, armed: armed, lost: lost}, nil
		}})
	t.Cleanup(func() { rdb.Close() })
	q := New(rdb, redistest.Prefix(t))
	q.ClaimAfter, q.Lease = time.Hour, 0
	t.Cleanup(func() { rdb.Del(ctx, q.key, q.bgKey, q.dead, q.lanesKey()) })
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	// No reply is lost until the postponement below.
	lost.Store(1)
	if err := q.Enqueue(ctx, Job{GameID: "g", Version: 1, Kind: KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatal(err)
	}
	// w1 tries the job once; the try fails and it hands it back (Retry) for
	// the next worker to take now: one try counted.
	d, err := q.Next(ctx, "w1", 10*time.Millisecond)
	if err != nil || d == nil || d.Attempt != 1 {
		t.Fatalf("first delivery %+v %v", d, err)
	}
	if err := q.Retry(ctx, "w1", d, 0); err != nil {
		t.Fatal(err)
	}
	// w2 takes it over; its look at the count fails: a stray.
	rdb.AddHook(&failDeliveriesOnce{})
	if d, err := q.Next(ctx, "w2", 10*time.Millisecond); err == nil || d != nil {
		t.Fatalf("w2's Next: %+v %v, want the deliveries look to fail", d, err)
	}
	s, err := q.Strays(ctx, "w2")
	if err != nil || len(s) != 1 || s[0].Attempt != 2 {
		t.Fatalf("strays %+v %v, want the job, at its second attempt", s, err)
	}
	// Redis answers again: the worker's settle postpones it (uncounted);
	// the script's first answer is lost on a reset connection.
	lost.Store(0)
	if err := q.Postpone(ctx, "w2", s[0], 0); err != nil {
		t.Logf("postpone: %v", err)
	}
	if lost.Load() != 1 {
		t.Fatalf("no answer was lost (%d)", lost.Load())
	}
	third, err := q.Next(ctx, "w3", 10*time.Millisecond)
	if err != nil || third == nil {
		t.Fatalf("w3's Next: %+v %v", third, err)
	}
	if third.Attempt != 2 {
		t.Fatalf("the job, tried once by w1 then a stray (untried) of w2, is delivered to w3 at attempt %d, want 2: "+
			"the stray's hand back takes one off the count in Redis each time it runs, "+
			"and the client ran it again after its answer was lost; the earlier try is forgotten", third.Attempt)
	}
}

// TestAHandedBackJobRetakenByAFailedNextIsAStray: a worker retries a job
// (Retry, after 0: "the next worker to scan, consumer included"); its own
// next Next takes it over again (XAUTOCLAIM), but the look at its count
// fails, so the Next fails: the job is pending with the worker, unknown to
// it, a stray. The book held it as handed back all the same, so Strays
// left it out, and it waited out the whole claim timeout while the AI's
// clock ran. A count grown since the hand back says it was taken again.
func TestAHandedBackJobRetakenByAFailedNextIsAStray(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { rdb.Close() })
	q := New(rdb, redistest.Prefix(t))
	q.ClaimAfter, q.Lease = time.Hour, 0
	t.Cleanup(func() { rdb.Del(ctx, q.key, q.bgKey, q.dead, q.lanesKey()) })
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, Job{GameID: "g", Version: 1, Kind: KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatal(err)
	}
	d, err := q.Next(ctx, "w", 10*time.Millisecond)
	if err != nil || d == nil {
		t.Fatalf("first delivery %+v %v", d, err)
	}
	// The try fails; the worker hands it back for a retry now.
	if err := q.Retry(ctx, "w", d, 0); err != nil {
		t.Fatal(err)
	}
	// The same worker's next look takes it over; the count look fails.
	rdb.AddHook(&failDeliveriesOnce{})
	if got, err := q.Next(ctx, "w", 10*time.Millisecond); err == nil || got != nil {
		t.Fatalf("w's Next: %+v %v, want the deliveries look to fail", got, err)
	}
	p, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: q.key, Group: q.group, Start: "-", End: "+", Count: 10, Consumer: "w"}).Result()
	if err != nil || len(p) != 1 || p[0].ID != d.ID || p[0].Idle > time.Minute {
		t.Fatalf("pending with w: %+v %v; want the job, just taken over", p, err)
	}
	s, err := q.Strays(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 1 || s[0].ID != d.ID {
		t.Errorf("strays of w: %+v, want the job it took over in the failed Next (pending with it, idle %v, unknown to it): "+
			"it is still booked as handed back, so nobody hands it back and it waits out ClaimAfter (%v)", s, p[0].Idle, q.ClaimAfter)
	}
	// The worker hands back its strays (noteStrays, settle: Postpone);
	// then the next worker to look takes the job at once.
	for _, d := range s {
		if err := q.Postpone(ctx, "w", d, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := q.Next(ctx, "w2", 10*time.Millisecond); err != nil || got == nil {
		t.Errorf("w2's Next: %+v %v: the job waits out the claim timeout", got, err)
	}
}
