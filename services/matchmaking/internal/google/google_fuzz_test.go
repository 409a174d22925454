package google

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// fuzzVerifier is a verifier whose key endpoint serves key's public half
// as "k1", with the clock at now.
func fuzzVerifier(tb testing.TB, key *rsa.PrivateKey, now time.Time) *Verifier {
	tb.Helper()
	set, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
		"n": b64.EncodeToString(key.N.Bytes()),
		"e": b64.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	if err != nil {
		tb.Fatal(err)
	}
	serve := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(set)), Request: r}, nil
	})
	return New(Config{
		ClientIDs: []string{"app"}, Issuers: strings.Split(DefaultIssuers, ","),
		JWKSURL: "https://keys.invalid/certs", HTTP: &http.Client{Transport: serve},
		Now: func() time.Time { return now },
	})
}

func sign(tb testing.TB, key *rsa.PrivateKey, header, claims string) string {
	tb.Helper()
	signed := tokenB64.EncodeToString([]byte(header)) + "." + tokenB64.EncodeToString([]byte(claims))
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		tb.Fatal(err)
	}
	return signed + "." + tokenB64.EncodeToString(sig)
}

// FuzzVerify: Verify never panics, refuses with ErrInvalid, and accepts
// only a token in its one spelling, signed with the published key, whose
// claims name an accepted issuer and audience, a subject and an expiry not
// passed. signed picks whether the fuzzer's header and claims are signed
// with the key (so that the claims checks are reached) or the text is
// taken as the whole token.
func FuzzVerify(f *testing.F) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	v := fuzzVerifier(f, key, now)
	h := `{"alg":"RS256","kid":"k1"}`
	f.Add(true, h, `{"iss":"accounts.google.com","aud":"app","sub":"1","exp":1800000100,"email_verified":true}`)
	f.Add(true, h, `{"iss":"https://accounts.google.com","aud":["x","app"],"sub":"1","exp":1800000100,"nbf":1799999999,"iat":1799999999}`)
	f.Add(true, h, `{"iss":"accounts.google.com","aud":"app","sub":"1","exp":1e300}`)
	f.Add(true, h, `{"iss":"accounts.google.com","aud":"app","sub":"1","exp":1800000100,"nbf":1e300}`)
	f.Add(true, `{"alg":"none","kid":"k1"}`, `{}`)
	f.Add(true, `{"alg":"RS256","kid":"other"}`, `{}`)
	f.Add(false, sign(f, key, h, `{"iss":"accounts.google.com","aud":"app","sub":"1","exp":1800000100}`), "")
	f.Add(false, "a.b.c", "")
	f.Fuzz(func(t *testing.T, signed bool, header, claims string) {
		raw := header
		if signed {
			raw = sign(t, key, header, claims)
		}
		id, err := v.Verify(context.Background(), raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: error %v does not wrap ErrInvalid", raw, err)
			}
			return
		}
		parts := strings.Split(raw, ".")
		if len(parts) != 3 {
			t.Fatalf("%q accepted with %d parts", raw, len(parts))
		}
		dec := make([][]byte, 3)
		for i, p := range parts {
			if dec[i], err = tokenB64.DecodeString(p); err != nil || tokenB64.EncodeToString(dec[i]) != p {
				t.Fatalf("%q accepted, part %d is not canonical base64url", raw, i)
			}
		}
		sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		if rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, sum[:], dec[2]) != nil {
			t.Fatalf("%q accepted without a valid signature", raw)
		}
		var c struct {
			Iss string   `json:"iss"`
			Sub string   `json:"sub"`
			Exp *float64 `json:"exp"`
		}
		if err := json.Unmarshal(dec[1], &c); err != nil {
			t.Fatalf("%q accepted with claims that do not decode: %v", raw, err)
		}
		if c.Sub == "" || c.Sub != id.Subject || c.Exp == nil || *c.Exp < float64(now.Unix()) || (c.Iss != "accounts.google.com" && c.Iss != "https://accounts.google.com") {
			t.Fatalf("%q accepted as %+v", raw, id)
		}
	})
}
