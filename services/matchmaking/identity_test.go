package matchmaking_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking"
)

func TestCreateGuest(t *testing.T) {
	e := newEnv(t, 1, nil)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		nickname string
		wantCode codes.Code
	}{
		{name: "ok", nickname: "Minji", wantCode: codes.OK},
		{name: "blanks around", nickname: "  Minji Kim ", wantCode: codes.OK},
		{name: "unicode", nickname: "장기왕", wantCode: codes.OK},
		{name: "empty", nickname: "  ", wantCode: codes.InvalidArgument},
		{name: "too long", nickname: strings.Repeat("x", 25), wantCode: codes.InvalidArgument},
		// 24 characters of any script fit the game service's seat names.
		{name: "longest in Hangul", nickname: strings.Repeat("장", 24), wantCode: codes.OK},
		{name: "longest in emoji", nickname: strings.Repeat("🀄", 24), wantCode: codes.OK},
		{name: "unprintable", nickname: "a\x00b", wantCode: codes.InvalidArgument},
		// Emoji are written with invisible joiners and selectors.
		{name: "emoji with joiners", nickname: "장기 👨\u200d👩\u200d👧 ❤\ufe0f", wantCode: codes.OK},
		{name: "a joiner alone", nickname: "\u200d", wantCode: codes.InvalidArgument},
		{name: "a bidi override", nickname: "a\u202eb", wantCode: codes.InvalidArgument},
		// Blank characters that Unicode counts as letters or symbols.
		{name: "Hangul fillers alone", nickname: "\u3164\u3164", wantCode: codes.InvalidArgument},
		{name: "a halfwidth Hangul filler alone", nickname: "\uffa0", wantCode: codes.InvalidArgument},
		{name: "a blank braille pattern alone", nickname: "\u2800", wantCode: codes.InvalidArgument},
		{name: "a filler beside a letter", nickname: "\u3164장", wantCode: codes.OK},
		// Tags belong in subdivision flags only.
		{name: "the flag of Scotland", nickname: "Minji \U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", wantCode: codes.OK},
		{name: "tags after a letter", nickname: "Minji\U000E0067\U000E0062", wantCode: codes.InvalidArgument},
		{name: "tags after a flag's end", nickname: "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F\U000E0067", wantCode: codes.InvalidArgument},
		{name: "combining and Khmer blanks alone", nickname: "\u034f\u17b4\u17b5", wantCode: codes.InvalidArgument},
		{name: "a null notehead alone", nickname: "\U0001D159", wantCode: codes.InvalidArgument},
		{name: "cancelled context", ctx: cancelled, nickname: "Minji", wantCode: codes.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			r, err := e.mm[0].CreateGuest(ctx, &matchmakingv1.CreateGuestRequest{Nickname: tt.nickname})
			wantCode(t, err, tt.wantCode)
			if err != nil {
				return
			}
			if !strings.HasPrefix(r.GetPlayerId(), "guest-") || r.GetToken() == "" || r.GetDisplayName() != strings.TrimSpace(tt.nickname) {
				t.Fatalf("got %v", r)
			}
			// The name is the player's own in a game.
			g, err := e.mm[0].PlayAi(as(r.GetToken()), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1})
			if err != nil || g.GetSeat().GetGameId() == "" {
				t.Fatalf("a game for %q: %v %v", tt.nickname, g, err)
			}
		})
	}
}

const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func TestSignInWithGoogle(t *testing.T) {
	e := newEnv(t, 1, nil)
	r, err := e.mm[0].SignInWithGoogle(context.Background(), &matchmakingv1.SignInWithGoogleRequest{IdToken: e.issuer.token(t, "1001", "Kim Minji", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetPlayerId() != "google-1001" || r.GetDisplayName() != "Kim Minji" {
		t.Fatalf("got %v", r)
	}
	// The same Google account is the same player every time.
	again := e.account("1001", "")
	if again.id != r.GetPlayerId() {
		t.Fatalf("second sign-in: id %s, want %s", again.id, r.GetPlayerId())
	}
	// The account credential works where an account is needed.
	if _, err := e.mm[0].GetRating(as(r.GetToken()), &matchmakingv1.GetRatingRequest{Kind: janggi}); err != nil {
		t.Fatalf("GetRating as an account: %v", err)
	}

	forger := e.issuer.addKey(t, "forger-only")
	e.issuer.mu.Lock()
	delete(e.issuer.keys, "forger-only")
	e.issuer.mu.Unlock()
	tests := []struct {
		name  string
		token func() string
	}{
		{name: "forged signature", token: func() string {
			// Right kid, wrong key: what an attacker without Google's key makes.
			return signJWT(t, forger, map[string]any{"alg": "RS256", "kid": "k1"}, map[string]any{
				"iss": "https://accounts.google.com", "aud": clientID, "sub": "1001", "exp": time.Now().Add(time.Hour).Unix(),
			})
		}},
		{name: "expired", token: func() string {
			return e.issuer.token(t, "1001", "x", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() })
		}},
		{name: "other audience", token: func() string {
			return e.issuer.token(t, "1001", "x", func(c map[string]any) { c["aud"] = "someone-else" })
		}},
		{name: "other issuer", token: func() string {
			return e.issuer.token(t, "1001", "x", func(c map[string]any) { c["iss"] = "https://evil.example" })
		}},
		{name: "no subject", token: func() string {
			return e.issuer.token(t, "", "x", nil)
		}},
		{name: "alg none", token: func() string {
			tok := e.issuer.token(t, "1001", "x", nil)
			parts := strings.Split(tok, ".")
			return b64([]byte(`{"alg":"none","kid":"k1"}`)) + "." + parts[1] + "."
		}},
		{name: "tampered claims", token: func() string {
			tok := e.issuer.token(t, "1001", "x", nil)
			parts := strings.Split(tok, ".")
			other := strings.Split(e.issuer.token(t, "1002", "x", nil), ".")
			return parts[0] + "." + other[1] + "." + parts[2]
		}},
		{name: "unknown key", token: func() string {
			return signJWT(t, forger, map[string]any{"alg": "RS256", "kid": "nobody"}, map[string]any{
				"iss": "https://accounts.google.com", "aud": clientID, "sub": "1001", "exp": time.Now().Add(time.Hour).Unix(),
			})
		}},
		{name: "garbage", token: func() string { return "not.a.jwt" }},
		// One token has one spelling: base64 that skips line breaks, or
		// ignores the unused bits of its last character, would let a
		// valid signature be written several ways.
		{name: "line break in the signature", token: func() string {
			tok := e.issuer.token(t, "1001", "x", nil)
			return tok[:len(tok)-8] + "\n" + tok[len(tok)-8:]
		}},
		{name: "signature with unused bits set", token: func() string {
			tok := e.issuer.token(t, "1001", "x", nil)
			// A 256-byte RSA signature is 342 characters whose last
			// carries 4 unused bits; the signature is the same with
			// them set.
			last := strings.IndexByte(base64URL, tok[len(tok)-1])
			return tok[:len(tok)-1] + string(base64URL[last|0x0f])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.mm[0].SignInWithGoogle(context.Background(), &matchmakingv1.SignInWithGoogleRequest{IdToken: tt.token()})
			wantCode(t, err, codes.Unauthenticated)
		})
	}
}

func TestGoogleKeyRotation(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.account("2001", "A") // caches k1
	fetches := e.issuer.fetch.Load()
	// Google publishes a new key and signs with it: the unknown key id
	// makes the verifier fetch the key set again (unknown ids trigger at
	// most one fetch per 30 s, so forged ids cannot flood the endpoint).
	k2 := e.issuer.addKey(t, "k2")
	tok0 := signJWT(t, k2, map[string]any{"alg": "RS256", "kid": "k2"}, map[string]any{
		"iss": "accounts.google.com", "aud": clientID, "sub": "2002", "exp": time.Now().Add(time.Hour).Unix(),
	})
	_, err := e.mm[0].SignInWithGoogle(context.Background(), &matchmakingv1.SignInWithGoogleRequest{IdToken: tok0})
	wantCode(t, err, codes.Unauthenticated)
	if got := e.issuer.fetch.Load() - fetches; got != 0 {
		t.Fatalf("%d key fetches within 30 s of the last, want 0", got)
	}
	e.clock.Advance(31 * time.Second)
	tok := signJWT(t, k2, map[string]any{"alg": "RS256", "kid": "k2"}, map[string]any{
		"iss": "accounts.google.com", "aud": []string{"other", clientID}, "sub": "2002", "exp": time.Now().Add(time.Hour).Unix(),
	})
	if _, err := e.mm[0].SignInWithGoogle(context.Background(), &matchmakingv1.SignInWithGoogleRequest{IdToken: tok, Nickname: "Rotated"}); err != nil {
		t.Fatalf("token signed with the new key: %v", err)
	}
	if got := e.issuer.fetch.Load() - fetches; got != 1 {
		t.Fatalf("%d key fetches after rotation, want 1", got)
	}
	// Cached now: no further fetch.
	e.account("2003", "C")
	if got := e.issuer.fetch.Load() - fetches; got != 1 {
		t.Fatalf("%d key fetches, want the cached keys to be used", got)
	}
}

func TestGoogleSignInOff(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.GoogleClientIDs = "" })
	_, err := e.mm[0].SignInWithGoogle(context.Background(), &matchmakingv1.SignInWithGoogleRequest{IdToken: e.issuer.token(t, "1", "x", nil)})
	wantCode(t, err, codes.FailedPrecondition)
}

func TestCredentialsRequired(t *testing.T) {
	e := newEnv(t, 1, nil)
	g := e.guest("Guest")
	seatLike := player{token: g.token + "x"}
	tests := []struct {
		name     string
		ctx      context.Context
		wantCode codes.Code
	}{
		{name: "no credential", ctx: context.Background(), wantCode: codes.Unauthenticated},
		{name: "bad signature", ctx: seatLike.ctx(), wantCode: codes.Unauthenticated},
		{name: "guest", ctx: g.ctx(), wantCode: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.mm[0].CreateInvite(tt.ctx, &matchmakingv1.CreateInviteRequest{RequestId: rid(), Kind: janggi})
			wantCode(t, err, tt.wantCode)
		})
	}
}

// TestASeatCredentialIsNamedAsOne: a game's seat credential sent where a
// player's belongs is refused with its kind named, not as signed with
// keys that differ between processes.
func TestASeatCredentialIsNamedAsOne(t *testing.T) {
	e := newEnv(t, 1, nil)
	g := e.guest("Guest")
	r, err := e.mm[0].PlayAi(g.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: janggi, Level: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.mm[0].CreateInvite(as(r.GetSeat().GetToken()), &matchmakingv1.CreateInviteRequest{RequestId: rid(), Kind: janggi})
	wantCode(t, err, codes.Unauthenticated)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "this is a seat credential") || strings.Contains(msg, "keys") {
		t.Errorf("refused with %q, want the seat credential named", msg)
	}
}

// TestExpiredPlayerCredentialCarriesItsReason: an app tells a player
// credential that ran out, which it replaces by signing in again, by the
// refusal's reason, as it does a seat's with the game service, and one
// whose key was removed by its own reason; a forged one has no reason.
func TestExpiredPlayerCredentialCarriesItsReason(t *testing.T) {
	e := newEnv(t, 1, nil)
	g := e.guest("Guest")
	forged := player{token: g.token + "x"}
	// Signed with a key these processes do not hold, as after its removal.
	removedKey, err := auth.NewKeyring(auth.Key{ID: "removed", Secret: []byte(strings.Repeat("r", 32))})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(e.cfg.GuestTTL + time.Minute)
	now := e.clock.Now()
	tok, err := removedKey.Sign(auth.Claims{Kind: auth.KindGuest, Subject: g.id, Name: "Guest", IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[player]string{g: auth.ExpiredReason, forged: "", {token: tok}: auth.KeyUnknownReason} {
		_, err := e.mm[0].CreateInvite(p.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: rid(), Kind: janggi})
		wantCode(t, err, codes.Unauthenticated)
		if got := apierr.ReasonOf(err); got != want {
			t.Errorf("refused with reason %q (%v), want %q", got, err, want)
		}
		// The message says the way out too, where there is one.
		if way := strings.Contains(err.Error(), "sign in again"); way != (want != "") {
			t.Errorf("refused with %v: says how to sign in again %v, want %v", err, way, want != "")
		}
	}
}

// TestEveryGoogleSubjectMakesAUsablePlayer: OpenID allows subjects of 255
// ASCII characters of any kind, longer than the game service's player ids
// and with characters ids refuse. Such an account still gets a player id
// every service takes, the same at each sign-in, and its games are made.
func TestEveryGoogleSubjectMakesAUsablePlayer(t *testing.T) {
	e := newEnv(t, 1, nil)
	for _, sub := range []string{strings.Repeat("7", 150), "12 34", "a{b}c"} {
		a := e.account(sub, "Long")
		if again := e.account(sub, "Long"); again.id != a.id {
			t.Fatalf("subject %q: player %q, then %q", sub, a.id, again.id)
		}
		if _, err := e.mm[0].GetRating(a.ctx(), &matchmakingv1.GetRatingRequest{Kind: janggi, PlayerId: a.id}); codeOf(err) != codes.OK && codeOf(err) != codes.NotFound {
			t.Fatalf("subject %q: the rating of %q: %v", sub, a.id, err)
		}
		g, err := e.mm[0].PlayAi(a.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1})
		if err != nil || g.GetSeat().GetGameId() == "" {
			t.Fatalf("subject %q: a game against the AI: %v %v", sub, g, err)
		}
	}
	// An ordinary subject keeps its plain id.
	if a := e.account("1001", "Kim"); a.id != "google-1001" {
		t.Fatalf("subject 1001: player %q", a.id)
	}
}
