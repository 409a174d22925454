package auth

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/palacehq/palace/pkg/apierr"
)

// RequireService admits a call that only Palace services and operators
// may make (rpc names it in the refusal): one that carries a valid service
// credential in ServiceHeader. Players reach the services directly, so
// such calls cannot rely on where they come from.
func RequireService(ctx context.Context, v *Verified, rpc string) error {
	vals := metadata.ValueFromIncomingContext(ctx, ServiceHeader)
	switch len(vals) {
	case 0:
		return apierr.New(apierr.Unauthenticated, "%s is an internal call: send a service credential in the %q header (signed with the services' --service-keys; `palace service-token` prints one)", rpc, ServiceHeader)
	case 1:
	default:
		return apierr.New(apierr.Unauthenticated, "%s: %d %q headers sent; send one", rpc, len(vals), ServiceHeader)
	}
	tok := strings.TrimSpace(vals[0])
	if _, ok := BearerToken(tok); ok {
		// Copied from an authorization header, where a player's goes.
		return apierr.New(apierr.Unauthenticated, "%s: the %q header holds a service credential itself, without the \"Bearer \" of an authorization header", rpc, ServiceHeader)
	}
	_, err := VerifyService(v, tok, time.Now())
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotService) {
		return apierr.New(apierr.PermissionDenied, "%s is an internal call: a player's credential does not allow it, only a service credential", rpc)
	}
	if hint := KindHint(tok, KindService); hint != "" {
		// Another kind of credential, signed with other keys: say so,
		// rather than suggest that the keys differ between processes.
		return apierr.New(apierr.Unauthenticated, "%s is an internal call: %s", rpc, hint)
	}
	if errors.Is(err, ErrExpired) {
		return apierr.New(apierr.Unauthenticated, "service credential: %v: sign a new one (`palace service-token`)", err).WithInfo(ExpiredReason, nil)
	}
	refused := apierr.New(apierr.Unauthenticated, "service credential: %v (is --service-keys the same in every process?)", err)
	if errors.Is(err, ErrUnknownKey) {
		// Marked as a seat's or player's of a key removed: a caller signs
		// a new one after a rotation without reading the message.
		refused.WithInfo(KeyUnknownReason, nil)
	}
	return refused
}

// Refused is the Unauthenticated answer to a credential (what names its
// kind) that Verify refused, with the ExpiredReason detail when it has
// expired and the KeyUnknownReason one when its key is not held: every
// service words and marks a refusal alike, and a client replaces such a
// credential without reading the message.
func Refused(what string, err error) *apierr.Error {
	e := apierr.New(apierr.Unauthenticated, "%s: %v", what, err)
	switch {
	case errors.Is(err, ErrExpired):
		e.WithInfo(ExpiredReason, nil)
	case errors.Is(err, ErrUnknownKey):
		e.WithInfo(KeyUnknownReason, nil)
	}
	return e
}

// Bearer reads the bearer token of a call's authorization header; ok is
// false without one. what names the credential wanted, for refusals. A call
// with several authorization headers is refused: which one to act for
// would be a guess.
func Bearer(ctx context.Context, what string) (tok string, ok bool, err error) {
	vals := metadata.ValueFromIncomingContext(ctx, "authorization")
	switch len(vals) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", false, apierr.New(apierr.Unauthenticated, "authorization: %d headers sent; send one, with the %s", len(vals), what)
	}
	tok, ok = BearerToken(vals[0])
	if !ok {
		return "", false, apierr.New(apierr.Unauthenticated, "authorization: want \"Bearer <%s>\"", what)
	}
	return tok, true, nil
}
