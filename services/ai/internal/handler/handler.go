// Package handler implements palace.ai.v1.AIService on pkg/engine.
package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	aiv1 "github.com/palacehq/palace/pkg/gen/palace/ai/v1"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/engine"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
)

// Request bounds: a search may not hold a core for long.
const (
	MaxMoves     = 2000
	MaxFENBytes  = 256
	MaxDepth     = 64
	MaxMoveTime  = 60 * time.Second
	MaxNodes     = 100_000_000
	maxLevelWait = 30 * time.Second
)

// Handler serves the AI service with a fixed pool of engines, one search
// per engine at a time.
type Handler struct {
	aiv1.UnimplementedAIServiceServer
	log     *slog.Logger
	engines chan *engine.Engine
	// waiting holds a place per call that waits for an engine: callers
	// beyond it are refused at once rather than queued without end.
	waiting chan struct{}
}

var _ aiv1.AIServiceServer = (*Handler)(nil)

// New returns a handler with n engines of hashMB each, with at most
// maxWaiting calls waiting for one.
func New(log *slog.Logger, n, hashMB, maxWaiting int) *Handler {
	h := &Handler{log: log, engines: make(chan *engine.Engine, n), waiting: make(chan struct{}, maxWaiting)}
	for range n {
		h.engines <- engine.New(engine.Options{HashMB: hashMB})
	}
	return h
}

type searchInput struct {
	start *rules.Position
	moves []rules.Move
	lim   engine.Limits
}

func parseInput(kind commonv1.GameKind, start *commonv1.Position, moves []*commonv1.Move, level uint32, limits *aiv1.SearchLimits, seed uint64) (searchInput, error) {
	var in searchInput
	v, err := rulespb.Variant(kind)
	if err != nil {
		return in, apierr.Wrap(apierr.Invalid, err)
	}
	fen := start.GetFen()
	if fen == "" {
		fen = rules.StartFEN(v)
	}
	if len(fen) > MaxFENBytes {
		return in, apierr.New(apierr.Invalid, "start: FEN longer than %d bytes", MaxFENBytes)
	}
	if in.start, err = rules.ParseFEN(v, fen); err != nil {
		return in, apierr.New(apierr.Invalid, "start: %v", err)
	}
	if len(moves) > MaxMoves {
		return in, apierr.New(apierr.Invalid, "moves: %d moves, at most %d allowed", len(moves), MaxMoves)
	}
	g, err := rules.NewGame(v, fen)
	if err != nil {
		return in, apierr.New(apierr.Invalid, "start: %v", err)
	}
	for i, pm := range moves {
		m, err := rules.ParseMove(pm.GetCoordinate())
		if err != nil {
			return in, apierr.New(apierr.Invalid, "moves[%d]: %v", i, err)
		}
		if _, err := g.Play(m); err != nil {
			return in, apierr.New(apierr.Invalid, "moves[%d]: %v", i, err)
		}
		in.moves = append(in.moves, m)
	}
	if g.Outcome().Ended {
		return in, apierr.New(apierr.Precondition, "the game has ended (%v): there is no move to find", g.Outcome().Method)
	}
	switch {
	case level > 10:
		return in, apierr.New(apierr.Invalid, "level: %d is out of range 1..10", level)
	case level > 0:
		in.lim = engine.Level(int(level)).Limits(seed)
	default:
		if limits.GetDepth() == 0 && limits.GetNodes() == 0 && limits.GetMovetimeMs() == 0 {
			return in, apierr.New(apierr.Invalid, "limits: give at least one of depth, nodes, movetime_ms (or, to BestMove, a level)")
		}
		if limits.GetDepth() > MaxDepth || limits.GetNodes() > MaxNodes || time.Duration(limits.GetMovetimeMs())*time.Millisecond > MaxMoveTime {
			return in, apierr.New(apierr.Invalid, "limits: at most depth %d, %d nodes, %v", MaxDepth, MaxNodes, MaxMoveTime)
		}
		in.lim = engine.Limits{Depth: int(limits.GetDepth()), Nodes: limits.GetNodes(), MoveTime: time.Duration(limits.GetMovetimeMs()) * time.Millisecond, Seed: seed, Analysis: true}
	}
	if in.lim.MoveTime == 0 || in.lim.MoveTime > MaxMoveTime {
		// Every search ends: depth and node limits alone could run long.
		in.lim.MoveTime = MaxMoveTime
	}
	return in, nil
}

func (h *Handler) acquire(ctx context.Context) (*engine.Engine, error) {
	select {
	case e := <-h.engines:
		return e, nil
	default:
	}
	select {
	case h.waiting <- struct{}{}:
		defer func() { <-h.waiting }()
	default:
		return nil, apierr.New(apierr.ResourceExhausted, "all %d engines are searching and %d calls wait for one already; retry later", cap(h.engines), cap(h.waiting))
	}
	select {
	case e := <-h.engines:
		return e, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func result(r engine.Result) *aiv1.BestMoveResponse {
	return &aiv1.BestMoveResponse{
		Move: &commonv1.Move{Coordinate: r.Move.String()}, ScoreCp: int32(r.Score), MateIn: int32(r.Mate),
		Pv: rulespb.Moves(r.PV), Nodes: r.Nodes, Depth: uint32(r.Depth),
	}
}

func (h *Handler) search(ctx context.Context, in searchInput, onInfo func(engine.Info)) (engine.Result, error) {
	e, err := h.acquire(ctx)
	if err != nil {
		return engine.Result{}, err
	}
	defer func() { h.engines <- e }()
	// A search must not depend on the ones this engine ran before, or
	// equal seeds would not give equal answers.
	e.Clear()
	r, err := e.Search(ctx, in.start, in.moves, in.lim, onInfo)
	if cerr := ctx.Err(); cerr != nil && err == nil {
		// The search stops with a move when ctx ends: a client that left
		// (Canceled) or whose deadline came first is told so, not answered
		// with a search cut short as if it ran to its limits, nor logged
		// as an outage for a send that found nobody.
		return r, fmt.Errorf("search: %w", cerr)
	}
	if errors.Is(err, engine.ErrNoLegalMove) {
		return r, apierr.New(apierr.Precondition, "the side to move has no legal move")
	}
	if err != nil {
		return r, fmt.Errorf("search: %w", err)
	}
	return r, nil
}

// BestMove searches and returns the move to play.
func (h *Handler) BestMove(ctx context.Context, req *aiv1.BestMoveRequest) (*aiv1.BestMoveResponse, error) {
	in, err := parseInput(req.GetKind(), req.GetStart(), req.GetMoves(), req.GetLevel(), req.GetLimits(), req.GetSeed())
	if err != nil {
		return nil, apierr.ToStatus(ctx, h.log, err)
	}
	r, err := h.search(ctx, in, nil)
	if err != nil {
		return nil, apierr.ToStatus(ctx, h.log, err)
	}
	return result(r), nil
}

// Analyze streams one message per completed depth, then the best move.
func (h *Handler) Analyze(req *aiv1.AnalyzeRequest, ss aiv1.AIService_AnalyzeServer) error {
	ctx := ss.Context()
	in, err := parseInput(req.GetKind(), req.GetStart(), req.GetMoves(), 0, req.GetLimits(), 0)
	if err != nil {
		return apierr.ToStatus(ctx, h.log, err)
	}
	var sendErr error
	r, err := h.search(ctx, in, func(i engine.Info) {
		if sendErr != nil {
			return
		}
		sendErr = ss.Send(&aiv1.AnalyzeResponse{Info: &aiv1.SearchInfo{
			Depth: uint32(i.Depth), Seldepth: uint32(i.SelDepth), ScoreCp: int32(i.Score), MateIn: int32(i.Mate),
			Nodes: i.Nodes, Nps: i.NPS, Pv: rulespb.Moves(i.PV), TimeMs: uint32(i.Time.Milliseconds()),
		}})
	})
	if err != nil {
		return apierr.ToStatus(ctx, h.log, err)
	}
	if sendErr != nil {
		return sendErr
	}
	return ss.Send(&aiv1.AnalyzeResponse{Best: result(r)})
}
