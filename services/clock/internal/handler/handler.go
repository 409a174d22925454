// Package handler implements palace.clock.v1.ClockService.
package handler

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	clockv1 "github.com/palacehq/palace/pkg/gen/palace/clock/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/clock/internal/sweep"
)

// MaxIDBytes matches the game service's limit on ids.
const MaxIDBytes = 64

// Games is the part of the game service the handler reads.
type Games interface {
	GetGame(ctx context.Context, in *gamev1.GetGameRequest, opts ...grpc.CallOption) (*gamev1.GetGameResponse, error)
}

// Stater reports the sweepers' statistics.
type Stater interface {
	Stats(ctx context.Context) (sweep.Stats, error)
}

// Handler serves the clock service.
type Handler struct {
	clockv1.UnimplementedClockServiceServer
	log      *slog.Logger
	games    Games
	stats    Stater
	services *auth.Verified
	// callTimeout bounds a read from the game service: one that stopped
	// answering without closing its connection must not hold the caller
	// until its own deadline, or for ever without one.
	callTimeout time.Duration
}

var (
	_ clockv1.ClockServiceServer = (*Handler)(nil)
	_ Games                      = gamev1.GameServiceClient(nil)
)

// New returns a handler that reads games through games, each read within
// callTimeout, and statistics from stats, for callers with a service
// credential signed by services.
func New(log *slog.Logger, games Games, stats Stater, services *auth.Keyring, callTimeout time.Duration) *Handler {
	return &Handler{log: log, games: games, stats: stats, services: auth.NewVerified(services, 64), callTimeout: callTimeout}
}

// GetClocks reads the game's clocks from the game service, which owns
// them; the clock service never keeps a second copy that could disagree.
// The caller's seat credential is passed on, so a private game's players
// read their clocks here as they read the game there.
func (h *Handler) GetClocks(ctx context.Context, req *clockv1.GetClocksRequest) (*clockv1.GetClocksResponse, error) {
	switch id := req.GetGameId(); {
	case id == "":
		return nil, apierr.ToStatus(ctx, h.log, apierr.New(apierr.Invalid, "game_id: required"))
	case len(id) > MaxIDBytes:
		return nil, apierr.ToStatus(ctx, h.log, apierr.New(apierr.Invalid, "game_id: longer than %d bytes", MaxIDBytes))
	}
	out := ctx
	// Every value, so that the game service refuses several as it would.
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
		out = metadata.AppendToOutgoingContext(out, "authorization", v)
	}
	out, cancel := context.WithTimeout(out, h.callTimeout)
	defer cancel()
	g, err := h.games.GetGame(out, &gamev1.GetGameRequest{GameId: req.GetGameId()})
	if err != nil {
		switch code := status.Code(err); {
		case code == codes.DeadlineExceeded && ctx.Err() != nil:
			// The client's own deadline, which the call inherited.
			return nil, status.Error(codes.DeadlineExceeded, "deadline exceeded")
		case code == codes.DeadlineExceeded:
			return nil, apierr.ToStatus(ctx, h.log, &apierr.Error{Code: apierr.Unavailable, Msg: fmt.Sprintf("the game service did not answer within %v; retry", h.callTimeout), Err: err})
		case code == codes.NotFound, code == codes.PermissionDenied, code == codes.Unauthenticated, code == codes.InvalidArgument, code == codes.Canceled:
			// The game service's answer about this caller's own request and
			// credential: passed through as it is.
			return nil, err
		}
		// Anything else is about the call between the services (the game
		// service unreachable, a deadline): mapped, so that no internal
		// address or transport text reaches the client.
		return nil, apierr.ToStatus(ctx, h.log, fmt.Errorf("get game %s: %w", req.GetGameId(), err))
	}
	return &clockv1.GetClocksResponse{Clocks: g.GetGame().GetClocks(), TimeControl: g.GetGame().GetTimeControl()}, nil
}

// GetStats reports every shard of the deadline index and this replica's
// sweepers. It is for operators: players reach the clock service too, and
// the replicas' names and the sweepers' errors are none of theirs.
func (h *Handler) GetStats(ctx context.Context, _ *clockv1.GetStatsRequest) (*clockv1.GetStatsResponse, error) {
	if err := auth.RequireService(ctx, h.services, "GetStats"); err != nil {
		return nil, apierr.ToStatus(ctx, h.log, err)
	}
	st, err := h.stats.Stats(ctx)
	if err != nil {
		h.log.WarnContext(ctx, "clock stats", "err", err)
		return nil, apierr.ToStatus(ctx, h.log, &apierr.Error{Code: apierr.Unavailable, Msg: "the deadline index cannot be read now", Err: err})
	}
	out := &clockv1.GetStatsResponse{ReplicaId: st.ReplicaID, Replicas: st.Replicas}
	for _, s := range st.Shards {
		out.Shards = append(out.Shards, &clockv1.ShardStats{Shard: uint32(s.Shard), Pending: uint64(max(0, s.Pending)), Owner: s.Owner})
	}
	for _, b := range st.Lateness {
		out.Lateness = append(out.Lateness, &clockv1.LatenessBucket{LeMs: b.LeMs, Count: b.Count})
	}
	for _, s := range st.Sweepers {
		sw := &clockv1.SweeperHealth{Shard: uint32(s.Shard), Expired: s.Expired, Errors: s.Errors, Stale: s.Stale, Owned: s.Owned}
		if !s.LastSweep.IsZero() {
			sw.LastSweep = timestamppb.New(s.LastSweep)
		}
		out.Sweepers = append(out.Sweepers, sw)
	}
	return out, nil
}
