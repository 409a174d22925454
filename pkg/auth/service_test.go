package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/palacehq/palace/pkg/apierr"
)

func TestServiceCredentialsAreSignedAgainBeforeTheyExpire(t *testing.T) {
	ring, err := NewKeyring(key("s1", 7))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	creds := NewServiceCredentials(ring, "matchmaking", time.Hour)
	creds.now = func() time.Time { return now }
	md, err := creds.GetRequestMetadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	first := md[ServiceHeader]
	c, err := VerifyService(NewVerified(ring, 4), first, now)
	if err != nil || c.Subject != "matchmaking" || c.Expires() != now.Add(time.Hour) {
		t.Fatalf("credential reads %+v, %v", c, err)
	}
	now = now.Add(40 * time.Minute)
	if tok, _ := creds.Token(); tok != first {
		t.Fatal("signed again with more than a quarter of its life left")
	}
	now = now.Add(6 * time.Minute)
	again, err := creds.Token()
	if err != nil || again == first {
		t.Fatalf("not signed again with 14 minutes of an hour left: %v", err)
	}
	if _, err := VerifyService(NewVerified(ring, 4), again, now.Add(59*time.Minute)); err != nil {
		t.Fatalf("the new credential: %v", err)
	}
}

func TestVerifyServiceRefusesOtherCredentials(t *testing.T) {
	ring, _ := NewKeyring(key("s1", 7))
	other, _ := NewKeyring(key("s2", 8))
	now := time.Unix(1_800_000_000, 0)
	seat, _ := ring.Sign(Claims{Kind: KindSeat, Game: "g", Side: "first", ExpiresAt: now.Add(time.Hour).Unix()})
	foreign, _ := ServiceToken(other, "x", now, time.Hour)
	expired, _ := ServiceToken(ring, "x", now.Add(-2*time.Hour), time.Hour)
	for name, tc := range map[string]struct {
		tok  string
		want error
	}{
		"a seat credential":      {seat, ErrNotService},
		"signed with other keys": {foreign, ErrUnknownKey},
		"expired":                {expired, ErrExpired},
		"not a credential":       {"x.y", ErrMalformed},
	} {
		if _, err := VerifyService(NewVerified(ring, 4), tc.tok, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// TestRefusedServiceCredentialCarriesItsReason: a caller tells an expired
// credential, and one of a key since removed, from a forged one by the
// refusal's reason, not its text, as for seats' and players'. One of a
// removed key carried no reason.
func TestRefusedServiceCredentialCarriesItsReason(t *testing.T) {
	ring, _ := NewKeyring(key("s1", 7))
	expired, _ := ServiceToken(ring, "x", time.Now().Add(-2*time.Hour), time.Hour)
	other, _ := NewKeyring(key("s2", 8))
	removed, _ := ServiceToken(other, "x", time.Now(), time.Hour)
	impostor, _ := NewKeyring(key("s1", 9))
	forged, _ := ServiceToken(impostor, "x", time.Now(), time.Hour)
	for tok, want := range map[string]string{expired: ExpiredReason, removed: KeyUnknownReason, forged: ""} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(ServiceHeader, tok))
		var e *apierr.Error
		if err := RequireService(ctx, NewVerified(ring, 4), "CreateGame"); !errors.As(err, &e) || e.Code != apierr.Unauthenticated || e.Reason != want {
			t.Errorf("RequireService = %v, want Unauthenticated with reason %q", err, want)
		}
	}
}

// TestServiceCredentialWithABearerScheme: a service credential sent as an
// authorization header's value is refused with that said, not as signed
// with unknown keys.
func TestServiceCredentialWithABearerScheme(t *testing.T) {
	ring, _ := NewKeyring(key("s1", 7))
	tok, _ := ServiceToken(ring, "x", time.Now(), time.Hour)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(ServiceHeader, "Bearer "+tok))
	err := RequireService(ctx, NewVerified(ring, 4), "CreateGame")
	if apierr.CodeOf(err) != apierr.Unauthenticated || !strings.Contains(err.Error(), `without the "Bearer "`) {
		t.Errorf("RequireService = %v, want Unauthenticated naming the Bearer scheme", err)
	}
}

// TestOneCredentialPerCall: a call carrying two credentials of one kind is
// refused, not acted on with the first: which to act for is a guess, and a
// proxy that adds its own header would decide it.
func TestOneCredentialPerCall(t *testing.T) {
	ring, _ := NewKeyring(key("s1", 7))
	tok, _ := ServiceToken(ring, "x", time.Now(), time.Hour)
	two := metadata.NewIncomingContext(context.Background(), metadata.Pairs(ServiceHeader, tok, ServiceHeader, tok))
	if err := RequireService(two, NewVerified(ring, 4), "CreateGame"); apierr.CodeOf(err) != apierr.Unauthenticated {
		t.Errorf("two service credentials: %v, want Unauthenticated", err)
	}
	for _, c := range []struct {
		name   string
		values []string
		tok    string
		ok     bool
		// refused: Unauthenticated, else no error
		refused bool
	}{
		{"none", nil, "", false, false},
		{"one", []string{"Bearer abc"}, "abc", true, false},
		{"lower-case scheme", []string{"bearer abc"}, "abc", true, false},
		{"two", []string{"Bearer abc", "Bearer def"}, "", false, true},
		{"not bearer", []string{"Basic abc"}, "", false, true},
	} {
		md := metadata.MD{}
		for _, v := range c.values {
			md.Append("authorization", v)
		}
		tok, ok, err := Bearer(metadata.NewIncomingContext(context.Background(), md), "seat credential")
		if tok != c.tok || ok != c.ok || (err != nil) != c.refused || err != nil && apierr.CodeOf(err) != apierr.Unauthenticated {
			t.Errorf("%s: %q %v %v, want %q %v, refused %v", c.name, tok, ok, err, c.tok, c.ok, c.refused)
		}
	}
}

// TestRefusedCarriesWhatTheClientActsOn: a player's or seat's credential
// that expired, or whose key the service does not hold (removed since),
// is refused with a reason the app acts on; a bad signature with none.
func TestRefusedCarriesWhatTheClientActsOn(t *testing.T) {
	ring, _ := NewKeyring(key("k1", 7))
	other, _ := NewKeyring(key("k2", 8))
	now := time.Now()
	claims := Claims{Kind: KindSeat, Game: "g", Side: "first", IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()}
	good, _ := ring.Sign(claims)
	removed, _ := other.Sign(claims)
	claims.ExpiresAt = now.Add(-time.Minute).Unix()
	expired, _ := ring.Sign(claims)
	for name, c := range map[string]struct{ tok, want string }{
		"expired":              {expired, ExpiredReason},
		"of a key not held":    {removed, KeyUnknownReason},
		"with a bad signature": {good[:len(good)-2] + "xx", ""},
	} {
		_, err := ring.Verify(c.tok, now)
		if err == nil {
			t.Fatalf("%s: verified", name)
		}
		if e := Refused("seat credential", err); e.Code != apierr.Unauthenticated || e.Reason != c.want {
			t.Errorf("%s: %v with reason %q, want %q", name, e, e.Reason, c.want)
		}
	}
}
