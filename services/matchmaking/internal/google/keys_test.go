package google

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// keyIssuer serves a JWKS of its keys until down is set, then answers
// 503, counting every fetch.
type keyIssuer struct {
	mu      sync.Mutex
	keys    map[string]*rsa.PrivateKey
	down    atomic.Bool
	fetches atomic.Int64
}

func (is *keyIssuer) add(tb testing.TB, kid string) *rsa.PrivateKey {
	tb.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	is.mu.Lock()
	is.keys[kid] = k
	is.mu.Unlock()
	return k
}

func (is *keyIssuer) RoundTrip(r *http.Request) (*http.Response, error) {
	is.fetches.Add(1)
	if is.down.Load() {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	}
	is.mu.Lock()
	var set []map[string]string
	for kid, k := range is.keys {
		set = append(set, map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
			"n": b64.EncodeToString(k.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
	}
	is.mu.Unlock()
	raw, _ := json.Marshal(map[string]any{"keys": set})
	h := http.Header{}
	h.Set("Cache-Control", "public, max-age=3600")
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: h, Body: io.NopCloser(bytes.NewReader(raw)), Request: r}, nil
}

type testClock struct{ off atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *testClock) advance(d time.Duration) { c.off.Add(int64(d)) }

func keyToken(tb testing.TB, key *rsa.PrivateKey, kid, sub string, now time.Time) string {
	tb.Helper()
	h := `{"alg":"RS256","kid":"` + kid + `"}`
	c, _ := json.Marshal(map[string]any{"iss": "https://accounts.google.com", "aud": "app", "sub": sub,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	return sign(tb, key, h, string(c))
}

func keyVerifier(is *keyIssuer, clk *testClock) *Verifier {
	return New(Config{
		ClientIDs: []string{"app"}, Issuers: strings.Split(DefaultIssuers, ","),
		JWKSURL: "https://keys.invalid/certs", HTTP: &http.Client{Transport: is}, Now: clk.now,
	})
}

// TestStaleKeysAreNotFetchedOnEveryCall: once the cached key set has
// outlived its max-age and the endpoint fails, the verifier keeps serving
// the keys it has and tries the endpoint again only after MinRefresh, so
// that an outage of Google's key endpoint does not queue every sign-in
// behind a fetch of its own.
func TestStaleKeysAreNotFetchedOnEveryCall(t *testing.T) {
	is := &keyIssuer{keys: map[string]*rsa.PrivateKey{}}
	k1 := is.add(t, "k1")
	clk := &testClock{}
	v := keyVerifier(is, clk)
	if _, err := v.Verify(context.Background(), keyToken(t, k1, "k1", "1", clk.now())); err != nil {
		t.Fatal(err)
	}
	// The cache's max-age passes, and the endpoint goes down.
	clk.advance(time.Hour + time.Minute)
	is.down.Store(true)
	before := is.fetches.Load()
	for i := range 5 {
		if _, err := v.Verify(context.Background(), keyToken(t, k1, "k1", "1", clk.now())); err != nil {
			t.Fatalf("call %d: %v (the cached keys should still serve)", i, err)
		}
	}
	if got := is.fetches.Load() - before; got > 1 {
		t.Fatalf("%d fetches of a failing key endpoint for 5 sign-ins within a second, want at most 1 per MinRefresh (%v)", got, v.cfg.MinRefresh)
	}
}

// TestAFailedFetchIsUnavailableNotInvalid: a token signed with a key Google
// has just published names a kid the cache lacks, and the fetch of the key
// set fails. The token may be good, so the answer is ErrKeys (Unavailable,
// retry), not ErrInvalid (Unauthenticated), which makes an app sign its
// user out.
func TestAFailedFetchIsUnavailableNotInvalid(t *testing.T) {
	is := &keyIssuer{keys: map[string]*rsa.PrivateKey{}}
	k1 := is.add(t, "k1")
	clk := &testClock{}
	v := keyVerifier(is, clk)
	if _, err := v.Verify(context.Background(), keyToken(t, k1, "k1", "1", clk.now())); err != nil {
		t.Fatal(err)
	}
	k2 := is.add(t, "k2")
	clk.advance(time.Minute) // past MinRefresh: a fetch is allowed
	is.down.Store(true)
	before := is.fetches.Load()
	_, err := v.Verify(context.Background(), keyToken(t, k2, "k2", "2", clk.now()))
	if is.fetches.Load() == before {
		t.Fatal("no fetch was tried")
	}
	if !errors.Is(err, ErrKeys) {
		t.Fatalf("Verify after a failed key fetch = %v; want an error wrapping ErrKeys (Unavailable), not ErrInvalid (Unauthenticated)", err)
	}
}

// slowIssuer is keyIssuer whose endpoint takes delay to answer once
// slow is set.
type slowIssuer struct {
	*keyIssuer
	slow  atomic.Bool
	delay time.Duration
}

func (s *slowIssuer) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.slow.Load() {
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return s.keyIssuer.RoundTrip(r)
}

// TestACachedKeyDoesNotWaitForAFetch: anyone can send a token naming an
// unknown key id, once per MinRefresh, to start a fetch. While that fetch
// runs against a slow endpoint, a token whose key is cached and fresh is
// still answered at once.
func TestACachedKeyDoesNotWaitForAFetch(t *testing.T) {
	is := &slowIssuer{keyIssuer: &keyIssuer{keys: map[string]*rsa.PrivateKey{}}, delay: 2 * time.Second}
	k1 := is.add(t, "k1")
	clk := &testClock{}
	v := New(Config{
		ClientIDs: []string{"app"}, Issuers: strings.Split(DefaultIssuers, ","),
		JWKSURL: "https://keys.invalid/certs", HTTP: &http.Client{Transport: is}, Now: clk.now,
	})
	if _, err := v.Verify(context.Background(), keyToken(t, k1, "k1", "1", clk.now())); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Minute) // past MinRefresh, keys still fresh (max-age 1 h)
	is.slow.Store(true)
	forged := is.add(t, "forged")
	is.mu.Lock()
	delete(is.keys, "forged")
	is.mu.Unlock()
	go func() { _, _ = v.Verify(context.Background(), keyToken(t, forged, "nobody", "2", clk.now())) }()
	time.Sleep(100 * time.Millisecond) // the forged token's fetch is under way
	begun := time.Now()
	if _, err := v.Verify(context.Background(), keyToken(t, k1, "k1", "1", clk.now())); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begun); d > 500*time.Millisecond {
		t.Fatalf("a token of a cached, fresh key took %v: it waited for another token's key fetch", d.Round(time.Millisecond))
	}
}

// TestACancelledFetchDoesNotDelayTheNext: a fetch cut short by its
// caller's cancellation says nothing of the endpoint, so the next caller
// may fetch at once instead of waiting MinRefresh.
func TestACancelledFetchDoesNotDelayTheNext(t *testing.T) {
	is := &slowIssuer{keyIssuer: &keyIssuer{keys: map[string]*rsa.PrivateKey{}}, delay: 2 * time.Second}
	k1 := is.add(t, "k1")
	clk := &testClock{}
	v := keyVerifier(is.keyIssuer, clk)
	v.cfg.HTTP = &http.Client{Transport: is}
	if _, err := v.Verify(context.Background(), keyToken(t, k1, "k1", "1", clk.now())); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Minute)
	k2 := is.add(t, "k2")
	is.slow.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := v.Verify(ctx, keyToken(t, k2, "k2", "2", clk.now())); !errors.Is(err, ErrKeys) {
		t.Fatalf("Verify with a context that ends during the fetch = %v, want ErrKeys", err)
	}
	is.slow.Store(false)
	if _, err := v.Verify(context.Background(), keyToken(t, k2, "k2", "2", clk.now())); err != nil {
		t.Fatalf("the next caller, right after a cancelled fetch: %v; want its fetch to find k2", err)
	}
}

// downgrading redirects the https fetch of the keys to plain http, where
// the issuer serves them.
type downgrading struct{ *keyIssuer }

func (d downgrading) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "https" {
		h := http.Header{}
		h.Set("Location", "http://keys.invalid/certs")
		return &http.Response{StatusCode: http.StatusFound, Status: "302 Found", Header: h, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	}
	return d.keyIssuer.RoundTrip(r)
}

// TestKeysAreNotTakenOverPlainHTTP: an https key endpoint redirecting to
// plain http was followed, and keys anyone on the path could replace
// decided who signed in; --google-jwks-url itself takes plain http only
// on loopback. Such a redirect fails the fetch (Unavailable, retry).
func TestKeysAreNotTakenOverPlainHTTP(t *testing.T) {
	is := &keyIssuer{keys: map[string]*rsa.PrivateKey{}}
	k1 := is.add(t, "k1")
	clk := &testClock{}
	v := New(Config{
		ClientIDs: []string{"app"}, Issuers: strings.Split(DefaultIssuers, ","),
		JWKSURL: "https://keys.invalid/certs", HTTP: &http.Client{Transport: downgrading{is}}, Now: clk.now,
	})
	_, err := v.Verify(context.Background(), keyToken(t, k1, "k1", "1", clk.now()))
	if !errors.Is(err, ErrKeys) {
		t.Fatalf("Verify with keys redirected to plain http = %v; want the fetch refused (ErrKeys)", err)
	}
}
