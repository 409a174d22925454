package handler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/textcut"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// callerID is the player id that the ratings RPCs read as the caller's.
const callerID = "me"

// ratingTarget validates a ratings request and resolves the player.
func (h *Handler) ratingTarget(ctx context.Context, kind commonv1.GameKind, player string) (auth.Claims, string, error) {
	c, err := h.account(ctx, "ratings")
	if err != nil {
		return c, "", err
	}
	if _, err := store.KindName(kind); err != nil {
		return c, "", apierr.Wrap(apierr.Invalid, err)
	}
	if player == "" || player == callerID {
		return c, c.Subject, nil
	}
	if err := checkID("player_id", player, 128); err != nil {
		return c, "", err
	}
	return c, player, nil
}

// GetRating returns a player's rating and rank.
func (h *Handler) GetRating(ctx context.Context, req *matchmakingv1.GetRatingRequest) (*matchmakingv1.GetRatingResponse, error) {
	c, player, err := h.ratingTarget(ctx, req.GetKind(), req.GetPlayerId())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	r, err := h.store.PlayerRating(ctx, req.GetKind(), player)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if r.Name == "" && player == c.Subject {
		r.Name = c.Name
	}
	return &matchmakingv1.GetRatingResponse{Rating: ratingPB(req.GetKind(), r)}, nil
}

// GetRatingHistory returns a player's latest rating changes.
func (h *Handler) GetRatingHistory(ctx context.Context, req *matchmakingv1.GetRatingHistoryRequest) (*matchmakingv1.GetRatingHistoryResponse, error) {
	_, player, err := h.ratingTarget(ctx, req.GetKind(), req.GetPlayerId())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	limit := int(req.GetLimit())
	switch {
	case limit == 0:
		limit = 20
	case limit > 100:
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "limit: %d is above 100", limit))
	}
	below, err := historyPageStart(req.GetPageToken(), player, req.GetKind())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	hist, err := h.store.History(ctx, req.GetKind(), player, below, limit)
	if errors.Is(err, store.ErrNoSuchPage) {
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "page_token: %q is not a page of this player's history of this kind", req.GetPageToken()))
	}
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	out := &matchmakingv1.GetRatingHistoryResponse{}
	if hist.Next > 0 {
		out.NextPageToken = historyPageToken(hist.Next, player, req.GetKind())
	}
	for _, c := range hist.Changes {
		out.Changes = append(out.Changes, &matchmakingv1.RatingChange{
			GameId: c.Game, Score: c.Score, RatingBefore: int32(c.Before), RatingAfter: int32(c.After),
			OpponentId: c.Opponent, OpponentName: c.OpponentName, OpponentRatingBefore: int32(c.OpponentBefore),
			Time: timestamppb.New(msTime(c.AtMs)),
		})
	}
	return out, nil
}

// historyTokenPrefix marks a rating history page token, so that a token
// of another list is refused rather than read as a number.
const historyTokenPrefix = "h"

// historyPageToken is the page token of player's history of kind starting
// below change number next. It names the history it belongs to (a short
// digest of player and kind: not a secret, as the history is not), so that
// a token of another player's or kind's history is refused, not read as a
// place in this one.
func historyPageToken(next int64, player string, kind commonv1.GameKind) string {
	return historyTokenPrefix + strconv.FormatInt(next, 10) + "." + historyOf(player, kind)
}

// historyOf names player's history of kind in its page tokens.
func historyOf(player string, kind commonv1.GameKind) string {
	sum := sha256.Sum256([]byte(player + "|" + kind.String()))
	return hex.EncodeToString(sum[:4])
}

// historyPageStart reads a history page token of player's history of kind:
// 0 for none (the latest). Only what historyPageToken writes is taken:
// a page starts below change number 2 or more.
func historyPageStart(token, player string, kind commonv1.GameKind) (int64, error) {
	if token == "" {
		return 0, nil
	}
	refused := apierr.New(apierr.Invalid, "page_token: %q is not a next_page_token of this player's rating history of this kind", textcut.Quote(token, 40, "..."))
	rest, ok := strings.CutPrefix(token, historyTokenPrefix)
	number, of, dotted := strings.Cut(rest, ".")
	n, err := strconv.ParseInt(number, 10, 64)
	// The previous release's tokens name no history ("h6"): an app that
	// paged across an upgrade still reads on.
	if !ok || err != nil || n < 2 || strconv.FormatInt(n, 10) != number || (dotted && of != historyOf(player, kind)) {
		return 0, refused
	}
	return n, nil
}

// GetLeaderboard returns the top of a kind's leaderboard or the players
// around one.
func (h *Handler) GetLeaderboard(ctx context.Context, req *matchmakingv1.GetLeaderboardRequest) (*matchmakingv1.GetLeaderboardResponse, error) {
	c, err := h.account(ctx, "leaderboards")
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if _, err := store.KindName(req.GetKind()); err != nil {
		return nil, h.fail(ctx, apierr.Wrap(apierr.Invalid, err))
	}
	limit := int64(req.GetLimit())
	var page store.Page
	if around := req.GetAroundPlayerId(); around != "" {
		if req.GetOffset() > 0 {
			return nil, h.fail(ctx, apierr.New(apierr.Invalid, "offset: pages are of the top list; around_player_id already says where the page is"))
		}
		if around == callerID {
			around = c.Subject
		} else if err := checkID("around_player_id", around, 128); err != nil {
			return nil, h.fail(ctx, err)
		}
		switch {
		case limit == 0:
			limit = 5
		case limit > 50:
			return nil, h.fail(ctx, apierr.New(apierr.Invalid, "limit: %d is above 50 around a player", limit))
		}
		page = store.Page{Around: around, Reach: limit}
	} else {
		switch {
		case limit == 0:
			limit = 10
		case limit > 100:
			return nil, h.fail(ctx, apierr.New(apierr.Invalid, "limit: %d is above 100", limit))
		}
		page.Start = int64(req.GetOffset())
		page.Stop = page.Start + limit - 1
	}
	rs, total, err := h.store.Leaderboard(ctx, req.GetKind(), page)
	if errors.Is(err, store.ErrNotFound) {
		return nil, h.fail(ctx, apierr.New(apierr.NotFound, "player %s has no rated game of this kind", page.Around))
	}
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	out := &matchmakingv1.GetLeaderboardResponse{Total: uint64(total)}
	for _, r := range rs {
		out.Entries = append(out.Entries, &matchmakingv1.LeaderboardEntry{Rank: uint64(r.Rank), Rating: ratingPB(req.GetKind(), r)})
	}
	return out, nil
}
