package google

import (
	"context"
	"crypto/rsa"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestCallersThatGiveUpDoNotFetchAgain: anyone can send tokens naming
// unknown key ids with a short deadline (grpc-timeout is the client's to
// choose). The fetch they start is not theirs: it runs to its end and
// counts, so there is still at most one per MinRefresh.
func TestCallersThatGiveUpDoNotFetchAgain(t *testing.T) {
	is := &slowIssuer{keyIssuer: &keyIssuer{keys: map[string]*rsa.PrivateKey{}}, delay: 300 * time.Millisecond}
	k1 := is.add(t, "k1")
	clk := &testClock{}
	v := keyVerifier(is.keyIssuer, clk)
	// started counts the requests sent to the endpoint, answered or not
	// (keyIssuer counts only those it answers).
	started := &countingTransport{next: is}
	v.cfg.HTTP = &http.Client{Transport: started}
	if _, err := v.Verify(context.Background(), keyToken(t, k1, "k1", "1", clk.now())); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Minute) // past MinRefresh: one fetch is allowed
	is.slow.Store(true)      // Google's endpoint takes 300 ms to answer
	forged := is.add(t, "forged")
	is.mu.Lock()
	delete(is.keys, "forged")
	is.mu.Unlock()

	before := started.n.Load()
	const calls = 20
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, _ = v.Verify(ctx, keyToken(t, forged, "nobody-"+strconv.Itoa(i), "2", clk.now()))
		cancel()
	}
	if got := started.n.Load() - before; got > 1 {
		t.Fatalf("%d forged tokens with a 20 ms deadline, within one MinRefresh (%v, the test clock stood still), started %d fetches of Google's key endpoint; want at most 1", calls, v.cfg.MinRefresh, got)
	}
}

// TestAStaleCachedKeyIsAnsweredDuringAFetch: a key the cache holds past
// its max-age still verifies at once while the refresh waits on a slow
// endpoint (Google's keys overlap in time).
func TestAStaleCachedKeyIsAnsweredDuringAFetch(t *testing.T) {
	is := &slowIssuer{keyIssuer: &keyIssuer{keys: map[string]*rsa.PrivateKey{}}, delay: 3 * time.Second}
	k1 := is.add(t, "k1")
	clk := &testClock{}
	v := keyVerifier(is.keyIssuer, clk)
	v.cfg.HTTP = &http.Client{Transport: is}
	if _, err := v.Verify(context.Background(), keyToken(t, k1, "k1", "1", clk.now())); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Hour + time.Minute) // the cache is past its max-age
	is.slow.Store(true)                  // and the endpoint hangs
	go func() { _, _ = v.Verify(context.Background(), keyToken(t, k1, "k1", "1", clk.now())) }()
	time.Sleep(100 * time.Millisecond) // its refresh is under way

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	begun := time.Now()
	_, err := v.Verify(ctx, keyToken(t, k1, "k1", "2", clk.now()))
	if d := time.Since(begun); err != nil || d > 500*time.Millisecond {
		t.Fatalf("a token of a key the cache holds (past max-age) took %v and got err=%v while another caller's refresh waited on the endpoint; want it answered at once with the cached key", d.Round(time.Millisecond), err)
	}
}

// countingTransport counts the requests it is given.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}
