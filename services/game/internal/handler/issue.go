package handler

import (
	"context"
	"errors"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
	"github.com/palacehq/palace/services/game/internal/model"
	"github.com/palacehq/palace/services/game/internal/store"
)

// IssueSeatCredentials signs new credentials for a game's human seats, so
// that a player who lost a credential (a new device, an expired one, one
// signed with a key removed in an emergency) gets back into the game
// through the service that knows the player. It writes nothing: a
// credential is only a signature over the game, the seat and the player.
func (h *Handler) IssueSeatCredentials(ctx context.Context, req *gamev1.IssueSeatCredentialsRequest) (*gamev1.IssueSeatCredentialsResponse, error) {
	if err := h.internal(ctx, "IssueSeatCredentials"); err != nil {
		return nil, h.fail(ctx, err)
	}
	id, player := req.GetGameId(), req.GetPlayerId()
	var errs []error
	if err := checkID("game_id", id, MaxIDBytes); err != nil {
		errs = append(errs, err)
	}
	bySide := req.GetSide() != commonv1.Side_SIDE_UNSPECIFIED
	var side rules.Side
	switch {
	case bySide && player != "":
		errs = append(errs, apierr.New(apierr.Invalid, "player_id and side: set one of them, not both"))
	case bySide:
		s, err := rulespb.SideFrom(req.GetSide())
		if err != nil {
			errs = append(errs, apierr.Wrap(apierr.Invalid, err))
		}
		side = s
	case player == "":
		// JSON decoding drops a side's name it does not know, as it drops
		// unknown fields, so a misspelt side arrives unset: say so.
		errs = append(errs, apierr.New(apierr.Invalid, "player_id or side: one of them is required (a side's name other than SIDE_FIRST or SIDE_SECOND is dropped in JSON, and arrives unset)"))
	case len(player) > MaxPlayerIDBytes:
		errs = append(errs, apierr.New(apierr.Invalid, "player_id: longer than %d bytes", MaxPlayerIDBytes))
	}
	if err := apierr.Problems(errs...); err != nil {
		return nil, h.fail(ctx, err)
	}
	l, err := h.load(ctx, id, "")
	if errors.Is(err, store.ErrNotFound) {
		return nil, h.fail(ctx, apierr.New(apierr.NotFound, "game %s not found", id))
	}
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	st := l.State
	var sides []rules.Side
	if bySide {
		if st.Seats[side].AILevel > 0 {
			return nil, h.fail(ctx, apierr.New(apierr.Precondition, "the AI plays %s in game %s: its seat takes no credential", rules.SideName(st.Variant, side), id))
		}
		sides = []rules.Side{side}
	} else {
		ai := false
		for _, s := range []rules.Side{rules.First, rules.Second} {
			switch {
			case st.Seats[s].PlayerID != player:
			case st.Seats[s].AILevel > 0:
				ai = true
			default:
				sides = append(sides, s)
			}
		}
		switch {
		case len(sides) == 0 && ai:
			return nil, h.fail(ctx, apierr.New(apierr.Precondition, "player %q is the AI in game %s: its seat takes no credential", player, id))
		case len(sides) == 0:
			return nil, h.fail(ctx, apierr.New(apierr.NotFound, "player %q holds no seat in game %s", player, id))
		}
	}
	resp := &gamev1.IssueSeatCredentialsResponse{Game: model.View(h.judged(st, l.Now), nil, l.Now)}
	for _, s := range sides {
		resp.Credentials = append(resp.Credentials, h.seatCredential(ctx, st, s, l.Now))
	}
	return resp, nil
}

// seatCredential signs a credential for side's seat of game st, valid for
// --seat-ttl from now.
func (h *Handler) seatCredential(ctx context.Context, st *model.State, side rules.Side, now time.Time) *gamev1.SeatCredential {
	return h.signSeat(ctx, st.ID, st.Seats[side].PlayerID, side, now)
}

func (h *Handler) signSeat(ctx context.Context, game, player string, side rules.Side, now time.Time) *gamev1.SeatCredential {
	// The credential holds whole seconds: the time told is the one it
	// runs out at, not a fraction of a second after.
	exp := now.Add(h.cfg.SeatTTL).Truncate(time.Second)
	tok, err := h.ring.Sign(auth.Claims{
		Kind: auth.KindSeat, Subject: player, Game: game, Side: side.String(),
		IssuedAt: now.Unix(), ExpiresAt: exp.Unix(),
	})
	if err != nil {
		// Signing with a valid keyring cannot fail; an empty token would
		// only be refused later.
		h.log.ErrorContext(ctx, "sign seat credential", "err", err)
	}
	return &gamev1.SeatCredential{Side: rulespb.Side(side), Token: tok, ExpiresAt: timestamppb.New(exp)}
}

// freshen gives a creation's retry the credentials of its first answer
// while they have most of their life ahead, so that retries agree, and
// signs afresh, for the same seat, one that is no longer accepted (its
// key retired) or runs out within half of --seat-ttl: a caller that keeps
// what a retry returns as the players' credentials must not keep dead ones.
func (h *Handler) freshen(ctx context.Context, resp *gamev1.CreateGameResponse, now time.Time) {
	for i, c := range resp.GetCredentials() {
		if claims, err := h.verified.Verify(c.GetToken(), now); err == nil && claims.Expires().Sub(now) >= h.cfg.SeatTTL/2 {
			continue
		}
		side, err := rulespb.SideFrom(c.GetSide())
		if err != nil {
			continue
		}
		for _, s := range resp.GetGame().GetSeats() {
			if s.GetSide() == c.GetSide() {
				resp.Credentials[i] = h.signSeat(ctx, resp.GetGameId(), s.GetPlayerId(), side, now)
			}
		}
	}
}

// dropAICredentials removes from a remembered creation the credentials of
// AI seats, which the answers of earlier releases held: a retry must not
// hand out what a first answer now leaves out.
func dropAICredentials(resp *gamev1.CreateGameResponse) {
	ai := map[commonv1.Side]bool{}
	for _, s := range resp.GetGame().GetSeats() {
		if s.GetAiLevel() > 0 {
			ai[s.GetSide()] = true
		}
	}
	if len(ai) == 0 {
		return
	}
	resp.Credentials = slices.DeleteFunc(resp.Credentials, func(c *gamev1.SeatCredential) bool { return ai[c.GetSide()] })
}
