// Package google verifies Google ID tokens (OpenID Connect JWTs signed with
// RS256): the signature against the issuer's published JWKS keys, the
// issuer, the audience (this app's client ids) and the expiry. Keys are
// cached for as long as the key endpoint's Cache-Control allows and
// fetched again when a token names a key the cache does not hold (Google
// rotates its keys), at most once per MinRefresh so forged key ids cannot
// make the server hammer the endpoint.
package google

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors of Verify. ErrInvalid wraps every problem of the token itself;
// ErrKeys means the keys could not be fetched.
var (
	ErrInvalid = errors.New("invalid Google ID token")
	ErrKeys    = errors.New("cannot fetch Google's signing keys")
)

// Defaults of Google's production issuer.
const (
	DefaultJWKSURL = "https://www.googleapis.com/oauth2/v3/certs"
	DefaultIssuers = "https://accounts.google.com,accounts.google.com"
)

// Config configures a Verifier.
type Config struct {
	// ClientIDs are the accepted audiences (OAuth client ids of the apps).
	ClientIDs []string
	// Issuers are the accepted "iss" values.
	Issuers []string
	JWKSURL string
	HTTP    *http.Client
	Now     func() time.Time
	// Leeway tolerates clock skew on exp, nbf and iat.
	Leeway time.Duration
	// MinRefresh bounds key fetches triggered by unknown key ids.
	MinRefresh time.Duration
}

// Identity is what a valid token says about its holder.
type Identity struct {
	Subject       string
	Email         string
	EmailVerified bool
	Name          string
}

// Verifier checks tokens. It is safe for concurrent use.
type Verifier struct {
	cfg Config

	mu        sync.RWMutex
	keys      map[string]*rsa.PublicKey
	fetchedAt time.Time  // of the last fetch begun, failed or not
	fetchErr  error      // of the last fetch, nil when it succeeded
	inflight  *fetchCall // the fetch under way, if any
	expires   time.Time
}

// New returns a verifier; it fetches keys on first use.
func New(cfg Config) *Verifier {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.HTTP.CheckRedirect == nil {
		c := *cfg.HTTP
		c.CheckRedirect = keepHTTPS
		cfg.HTTP = &c
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MinRefresh <= 0 {
		cfg.MinRefresh = 30 * time.Second
	}
	if cfg.Leeway < 0 {
		cfg.Leeway = 0
	}
	return &Verifier{cfg: cfg}
}

// keepHTTPS follows a key endpoint's redirects (as the standard client
// does, up to 10) but not from https to plain http: the keys decide who
// signs in, and --google-jwks-url takes plain http only on loopback.
func keepHTTPS(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("refused a redirect of the keys from https to %s", req.URL.Redacted())
	}
	return nil
}

type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

type claims struct {
	Iss           string          `json:"iss"`
	Aud           json.RawMessage `json:"aud"`
	Sub           string          `json:"sub"`
	Exp           *float64        `json:"exp"`
	Iat           *float64        `json:"iat"`
	Nbf           *float64        `json:"nbf"`
	Email         string          `json:"email"`
	EmailVerified any             `json:"email_verified"`
	Name          string          `json:"name"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// b64 reads the keys Google publishes.
var b64 = base64.RawURLEncoding

// tokenB64 reads a token's parts, so that a token has one spelling: even
// strict decoding skips line breaks, which Verify refuses first.
var tokenB64 = base64.RawURLEncoding.Strict()

// Verify checks raw and returns the identity it proves.
func (v *Verifier) Verify(ctx context.Context, raw string) (Identity, error) {
	if len(raw) > 8192 {
		return Identity{}, invalid("too long")
	}
	if strings.ContainsAny(raw, "\r\n") {
		return Identity{}, invalid("line break in the token")
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return Identity{}, invalid("not a JWT")
	}
	var h header
	if err := decodeJSON(parts[0], &h); err != nil {
		return Identity{}, invalid("header: %v", err)
	}
	// Only RS256: accepting "none" or an HMAC algorithm would let anyone
	// sign tokens (the classic JWT algorithm confusion).
	if h.Alg != "RS256" {
		return Identity{}, invalid("algorithm %q is not RS256", h.Alg)
	}
	sig, err := tokenB64.DecodeString(parts[2])
	if err != nil {
		return Identity{}, invalid("signature encoding: %v", err)
	}
	key, err := v.key(ctx, h.Kid)
	if err != nil {
		return Identity{}, err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig); err != nil {
		return Identity{}, invalid("bad signature")
	}
	var c claims
	if err := decodeJSON(parts[1], &c); err != nil {
		return Identity{}, invalid("claims: %v", err)
	}
	now := v.cfg.Now()
	switch {
	case !slices.Contains(v.cfg.Issuers, c.Iss):
		return Identity{}, invalid("issuer %q is not accepted", c.Iss)
	case !audienceOK(c.Aud, v.cfg.ClientIDs):
		return Identity{}, invalid("audience is not this app")
	case c.Sub == "":
		return Identity{}, invalid("no subject")
	case c.Exp == nil:
		return Identity{}, invalid("no expiry")
	case now.After(unix(*c.Exp).Add(v.cfg.Leeway)):
		return Identity{}, invalid("expired")
	case c.Nbf != nil && now.Add(v.cfg.Leeway).Before(unix(*c.Nbf)):
		return Identity{}, invalid("not valid yet")
	case c.Iat != nil && now.Add(v.cfg.Leeway).Before(unix(*c.Iat)):
		return Identity{}, invalid("issued in the future")
	}
	return Identity{Subject: c.Sub, Email: c.Email, EmailVerified: c.EmailVerified == true || c.EmailVerified == "true", Name: c.Name}, nil
}

func unix(f float64) time.Time { return time.Unix(int64(f), 0) }

func decodeJSON(part string, v any) error {
	raw, err := tokenB64.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// audienceOK accepts "aud" as a string or an array of strings.
func audienceOK(raw json.RawMessage, ids []string) bool {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one != "" && slices.Contains(ids, one)
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		for _, a := range many {
			if a != "" && slices.Contains(ids, a) {
				return true
			}
		}
	}
	return false
}

// key returns the key kid. A key the cache holds is answered at once,
// even past its max-age, while a fetch refreshes the cache beside it. A
// kid the cache lacks waits for a fetch: at most one runs at a time, and
// one starts at most once per MinRefresh, failed ones included. The fetch
// is not the caller's: one that gives up does not cut it short, so that
// callers with short deadlines cannot have the endpoint fetched again and
// again. A kid still unknown after a failed fetch is ErrKeys, since the
// token may be signed by a key Google has just published.
func (v *Verifier) key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	v.mu.Lock()
	now := v.cfg.Now()
	k, held := v.keys[kid]
	if held && now.Before(v.expires) {
		v.mu.Unlock()
		return k, nil
	}
	f := v.inflight
	if f == nil && (v.fetchedAt.IsZero() || now.Sub(v.fetchedAt) >= v.cfg.MinRefresh) {
		f = &fetchCall{done: make(chan struct{})}
		v.inflight = f
		go v.refresh(context.WithoutCancel(ctx), f, now)
	}
	fetchErr := v.fetchErr
	v.mu.Unlock()
	if held {
		// Google's keys overlap in time: one past its max-age still
		// verifies while the fetch runs, or after it failed.
		return k, nil
	}
	if f != nil {
		select {
		case <-f.done:
			fetchErr = f.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrKeys, ctx.Err())
		}
	}
	v.mu.RLock()
	k, held = v.keys[kid]
	v.mu.RUnlock()
	switch {
	case held:
		return k, nil
	case fetchErr != nil:
		return nil, fetchErr
	}
	return nil, invalid("unknown signing key %q", kid)
}

// fetchCall is a fetch under way: done closes once err is set.
type fetchCall struct {
	done chan struct{}
	err  error
}

// fetchTimeout bounds a fetch, whatever Config.HTTP's own timeout.
const fetchTimeout = 10 * time.Second

// refresh fetches the key set for f, begun at now, and keeps it; on a
// failure it keeps the keys it has.
func (v *Verifier) refresh(ctx context.Context, f *fetchCall, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	keys, maxAge, err := v.fetch(ctx)
	v.mu.Lock()
	if err == nil {
		v.keys, v.expires = keys, now.Add(maxAge)
	}
	v.fetchedAt, v.fetchErr, v.inflight = now, err, nil
	v.mu.Unlock()
	f.err = err
	close(f.done)
}

type jwks struct {
	Keys []struct {
		Kty string `json:"kty"`
		Kid string `json:"kid"`
		Alg string `json:"alg"`
		Use string `json:"use"`
		N   string `json:"n"`
		E   string `json:"e"`
	} `json:"keys"`
}

func (v *Verifier) fetch(ctx context.Context) (map[string]*rsa.PublicKey, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrKeys, err)
	}
	resp, err := v.cfg.HTTP.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrKeys, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("%w: %s answered %s", ErrKeys, v.cfg.JWKSURL, resp.Status)
	}
	var set jwks
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return nil, 0, fmt.Errorf("%w: decode: %w", ErrKeys, err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" || (k.Use != "" && k.Use != "sig") || (k.Alg != "" && k.Alg != "RS256") {
			continue
		}
		n, err1 := b64.DecodeString(k.N)
		e, err2 := b64.DecodeString(k.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			continue
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < 2048 {
			continue
		}
		keys[k.Kid] = pub
	}
	if len(keys) == 0 {
		return nil, 0, fmt.Errorf("%w: no usable RSA key at %s", ErrKeys, v.cfg.JWKSURL)
	}
	return keys, maxAge(resp.Header.Get("Cache-Control")), nil
}

// maxAge reads Cache-Control's max-age, bounded to [1 min, 24 h]; 1 h
// when absent.
func maxAge(cc string) time.Duration {
	d := time.Hour
	for part := range strings.SplitSeq(cc, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "max-age="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				d = time.Duration(n) * time.Second
			}
		}
	}
	return min(max(d, time.Minute), 24*time.Hour)
}
