package matchmaking_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
)

// TestSignInWhileGoogleKeysCannotBeFetched: Google rotates in a new
// signing key, and its key endpoint cannot be reached when the first
// token signed with it arrives (past the 30 s between fetches). The
// answer is Unavailable, as the proto promises "when Google's keys cannot
// be fetched", so an app retries the sign-in instead of throwing it away.
func TestSignInWhileGoogleKeysCannotBeFetched(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.account("5001", "A") // caches k1
	k2 := e.issuer.addKey(t, "k2")
	e.clock.Advance(31 * time.Second)
	e.issuer.srv.Close() // Google's key endpoint is out of reach
	tok := signJWT(t, k2, map[string]any{"alg": "RS256", "kid": "k2"}, map[string]any{
		"iss": "https://accounts.google.com", "aud": clientID, "sub": "5002", "exp": time.Now().Add(time.Hour).Unix(),
	})
	_, err := e.mm[0].SignInWithGoogle(context.Background(), &matchmakingv1.SignInWithGoogleRequest{IdToken: tok})
	if codeOf(err) != codes.Unavailable {
		t.Fatalf("sign-in with a token of a newly published key while the key endpoint is down: %v; want Unavailable (retry), not a refusal of the token", err)
	}
}
