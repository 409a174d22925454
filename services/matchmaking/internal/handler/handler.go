// Package handler implements palace.matchmaking.v1.MatchmakingService.
package handler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
)

// MaxNicknameRunes bounds a nickname.
const MaxNicknameRunes = 24

// Handler serves the matchmaking service.
type Handler struct {
	matchmakingv1.UnimplementedMatchmakingServiceServer
	log      *slog.Logger
	ring     *auth.Keyring
	guestTTL time.Duration
	now      func() time.Time
}

var _ matchmakingv1.MatchmakingServiceServer = (*Handler)(nil)

// New returns a handler signing with ring.
func New(log *slog.Logger, ring *auth.Keyring, guestTTL time.Duration, now func() time.Time) *Handler {
	return &Handler{log: log, ring: ring, guestTTL: guestTTL, now: now}
}

// ValidNickname reports what is wrong with a nickname, or nil.
func ValidNickname(s string) error {
	s = strings.TrimSpace(s)
	switch n := utf8.RuneCountInString(s); {
	case !utf8.ValidString(s):
		return apierr.New(apierr.Invalid, "nickname: not valid UTF-8")
	case n == 0:
		return apierr.New(apierr.Invalid, "nickname: required")
	case n > MaxNicknameRunes:
		return apierr.New(apierr.Invalid, "nickname: %d characters, at most %d allowed", n, MaxNicknameRunes)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return apierr.New(apierr.Invalid, "nickname: contains an unprintable character %U", r)
		}
	}
	return nil
}

// CreateGuest issues a guest credential.
func (h *Handler) CreateGuest(ctx context.Context, req *matchmakingv1.CreateGuestRequest) (*matchmakingv1.CreateGuestResponse, error) {
	if err := ValidNickname(req.GetNickname()); err != nil {
		return nil, apierr.ToStatus(ctx, h.log, err)
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, apierr.ToStatus(ctx, h.log, err)
	}
	now := h.now()
	c := auth.Claims{
		Kind:      auth.KindGuest,
		Subject:   "guest-" + hex.EncodeToString(id[:]),
		Name:      strings.TrimSpace(req.GetNickname()),
		IssuedAt:  now.Unix(),
		ExpiresAt: now.Add(h.guestTTL).Unix(),
	}
	tok, err := h.ring.Sign(c)
	if err != nil {
		return nil, apierr.ToStatus(ctx, h.log, err)
	}
	return &matchmakingv1.CreateGuestResponse{PlayerId: c.Subject, Token: tok, ExpiresAt: timestamppb.New(c.Expires())}, nil
}
