package auth

import (
	"errors"
	"testing"
	"time"
)

func TestVerifiedAnswersAsTheKeyringDoes(t *testing.T) {
	ring, err := NewKeyring(key("k1", 1))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewKeyring(key("k1", 9))
	now := time.Unix(1_800_000_000, 0)
	claims := Claims{Kind: KindSeat, Subject: "p1", Game: "g1", Side: "first", IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()}
	tok, _ := ring.Sign(claims)
	forged, _ := other.Sign(claims)
	v := NewVerified(ring, 2)
	for range 2 { // the second round is answered from memory
		got, err := v.Verify(tok, now)
		if err != nil || got != claims {
			t.Fatalf("valid token: %+v, %v", got, err)
		}
		if _, err := v.Verify(forged, now); !errors.Is(err, ErrBadSig) {
			t.Fatalf("forged token: %v, want ErrBadSig", err)
		}
	}
	// A remembered token still expires.
	if _, err := v.Verify(tok, now.Add(time.Hour)); !errors.Is(err, ErrExpired) {
		t.Fatalf("remembered token after its expiry: %v, want ErrExpired", err)
	}
	// Past the limit, tokens are forgotten and verified again.
	for i := range 5 {
		c := claims
		c.Subject = string(rune('a' + i))
		tk, _ := ring.Sign(c)
		if got, err := v.Verify(tk, now); err != nil || got != c {
			t.Fatalf("token %d: %+v, %v", i, got, err)
		}
	}
	if len(v.m) > 2 {
		t.Fatalf("%d tokens remembered, limit 2", len(v.m))
	}
}
