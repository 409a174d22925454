// Package handler implements palace.clock.v1.ClockService.
package handler

import (
	"context"
	"log/slog"

	"github.com/palacehq/palace/pkg/apierr"
	clockv1 "github.com/palacehq/palace/pkg/gen/palace/clock/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// Handler serves the clock service.
type Handler struct {
	clockv1.UnimplementedClockServiceServer
	log   *slog.Logger
	games gamev1.GameServiceClient
}

var _ clockv1.ClockServiceServer = (*Handler)(nil)

// New returns a handler that reads games through games.
func New(log *slog.Logger, games gamev1.GameServiceClient) *Handler {
	return &Handler{log: log, games: games}
}

// GetClocks reads the game's clocks from the game service, which owns
// them; the clock service never keeps a second copy that could disagree.
func (h *Handler) GetClocks(ctx context.Context, req *clockv1.GetClocksRequest) (*clockv1.GetClocksResponse, error) {
	if req.GetGameId() == "" {
		return nil, apierr.ToStatus(ctx, h.log, apierr.New(apierr.Invalid, "game_id: required"))
	}
	g, err := h.games.GetGame(ctx, &gamev1.GetGameRequest{GameId: req.GetGameId()})
	if err != nil {
		return nil, err
	}
	return &clockv1.GetClocksResponse{Clocks: g.GetGame().GetClocks(), TimeControl: g.GetGame().GetTimeControl()}, nil
}

// GetStats reports this replica's sweepers.
func (h *Handler) GetStats(context.Context, *clockv1.GetStatsRequest) (*clockv1.GetStatsResponse, error) {
	return &clockv1.GetStatsResponse{}, nil
}
