package handler

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	"github.com/palacehq/palace/pkg/clientaddr"
	"github.com/palacehq/palace/pkg/displayname"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/google"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// CreateGuest issues a guest credential, so many from one client address
// in a window.
func (h *Handler) CreateGuest(ctx context.Context, req *matchmakingv1.CreateGuestRequest) (*matchmakingv1.CreateGuestResponse, error) {
	if err := ValidNickname(req.GetNickname()); err != nil {
		return nil, h.fail(ctx, err)
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, h.fail(ctx, err)
	}
	if err := h.admitGuest(ctx, hex.EncodeToString(id[:])); err != nil {
		return nil, h.fail(ctx, err)
	}
	now := h.now()
	c := auth.Claims{
		Kind:      auth.KindGuest,
		Subject:   "guest-" + hex.EncodeToString(id[:]),
		Name:      strings.TrimSpace(req.GetNickname()),
		IssuedAt:  now.Unix(),
		ExpiresAt: now.Add(h.cfg.GuestTTL).Unix(),
	}
	tok, err := h.ring.Sign(c)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return &matchmakingv1.CreateGuestResponse{PlayerId: c.Subject, Token: tok, ExpiresAt: timestamppb.New(c.Expires()), DisplayName: c.Name}, nil
}

// admitGuest counts guest id against the bound of its client's address.
// A call without a network address (made in process) is not bounded:
// every call from a client has one.
func (h *Handler) admitGuest(ctx context.Context, id string) error {
	if !h.cfg.Guests.On() {
		return nil
	}
	addr, ok := h.cfg.Proxies.Of(ctx)
	if !ok {
		return nil
	}
	bucket := clientaddr.Bucket(addr)
	// A space keeps the address's counts apart from every player's, since
	// no player id has one.
	m := store.Made{Player: "addr " + bucket, What: "guest", Request: id}
	err := h.admit(ctx, m, h.cfg.Guests, "your network address ("+bucket+")", "guest", "guests")
	if err != nil && h.cfg.Proxies.Proxy(addr) && h.proxyWarned.Allow(h.now()) {
		// Every client behind that proxy shares its bound.
		h.log.WarnContext(ctx, "guests refused to a proxy's address: the proxies in front do not pass the client's address on (see --trusted-proxies, --trusted-proxy-hops)", "address", addr.String())
	}
	return err
}

// SignInWithGoogle turns a verified Google ID token into an account
// credential. The player id is Google's stable subject, so the same
// Google account always gets the same ratings.
func (h *Handler) SignInWithGoogle(ctx context.Context, req *matchmakingv1.SignInWithGoogleRequest) (*matchmakingv1.SignInWithGoogleResponse, error) {
	if h.google == nil {
		return nil, h.fail(ctx, apierr.New(apierr.Precondition, "Google sign-in is not configured on this server (--google-client-ids)"))
	}
	if req.GetIdToken() == "" {
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "id_token: required"))
	}
	if req.GetNickname() != "" {
		if err := ValidNickname(req.GetNickname()); err != nil {
			return nil, h.fail(ctx, err)
		}
	}
	id, err := h.google.Verify(ctx, req.GetIdToken())
	switch {
	case errors.Is(err, google.ErrInvalid):
		return nil, h.fail(ctx, &apierr.Error{Code: apierr.Unauthenticated, Msg: err.Error(), Err: err})
	case errors.Is(err, google.ErrKeys):
		return nil, h.fail(ctx, &apierr.Error{Code: apierr.Unavailable, Msg: "cannot check the token with Google right now; retry", Err: err})
	case err != nil:
		return nil, h.fail(ctx, err)
	}
	name := strings.TrimSpace(req.GetNickname())
	if name == "" {
		name = cleanName(id.Name)
	}
	now := h.now()
	c := auth.Claims{
		Kind: auth.KindAccount, Subject: accountID(id.Subject), Name: name,
		IssuedAt: now.Unix(), ExpiresAt: now.Add(h.cfg.AccountTTL).Unix(),
	}
	tok, err := h.ring.Sign(c)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	// The credential carries the name, and when it was given, into every
	// game and rating from now on; the leaderboards learn it here. Failing
	// that, they learn it when the first rated game made under this
	// credential ends (a game that began before the sign-in names the
	// player as they were): not a reason to refuse the sign-in.
	if err := h.store.Rename(ctx, c.Subject, name, namedAt(c)); err != nil {
		h.log.WarnContext(ctx, "the leaderboards keep a renamed player's former name until a rated game made under the new one ends", "player", c.Subject, "err", err)
	}
	return &matchmakingv1.SignInWithGoogleResponse{PlayerId: c.Subject, Token: tok, ExpiresAt: timestamppb.New(c.Expires()), DisplayName: name}, nil
}

// namedAt is when the player was given the name c carries: the sign-in
// that issued c; zero when c does not say.
func namedAt(c auth.Claims) time.Time {
	if c.IssuedAt == 0 {
		return time.Time{}
	}
	return time.Unix(c.IssuedAt, 0)
}

// accountID is the player id of a Google account: "google-" and its
// subject, unless that would be no valid player id (OpenID allows 255
// ASCII characters of any kind, matchmaking's ids are at most the game
// service's 128 bytes, without spaces, braces, commas or '|'; see
// checkID): then "google#" and a digest of the
// subject, the same at every sign-in, and apart from every id of the
// first form.
func accountID(sub string) string {
	if id := "google-" + sub; checkID("player_id", id, games.MaxPlayerIDBytes) == nil {
		return id
	}
	sum := sha256.Sum256([]byte(sub))
	return "google#" + hex.EncodeToString(sum[:20])
}

// cleanName makes a display name of a Google profile name
// (displayname.Fit), "Player" when nothing of it is left.
func cleanName(s string) string {
	if out := displayname.Fit(s); out != "" {
		return out
	}
	return "Player"
}
