// Package handler implements palace.rules.v1.RulesService on pkg/rules.
package handler

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"

	"github.com/palacehq/palace/pkg/apierr"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	rulesv1 "github.com/palacehq/palace/pkg/gen/palace/rules/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
)

// Limits keep one request from holding a core for long.
const (
	MaxFENBytes   = 256
	MaxMoves      = 2000
	MaxPerftDepth = 4
)

// Handler serves the rules service.
type Handler struct {
	rulesv1.UnimplementedRulesServiceServer
	log *slog.Logger
	// counting holds a place per Perft count under way, admitted one per
	// call counting or waiting for a place (see countPlace).
	counting, admitted chan struct{}
}

var _ rulesv1.RulesServiceServer = (*Handler)(nil)

// New returns a handler logging to log, running Perft counts on at most
// half the process's cores at once (one on a single core).
func New(log *slog.Logger) *Handler {
	n := max(1, runtime.GOMAXPROCS(0)/2)
	return &Handler{log: log, counting: make(chan struct{}, n), admitted: make(chan struct{}, 5*n)}
}

// countPlace waits for a place for a Perft count and returns the function
// that gives it back. A count takes up to a second of a core, from a
// public call: however many come at once, they take no more than their
// places (in palace serve, the game service shares the cores), and a call
// that finds four times as many calls waiting already is refused. A call
// is admitted for as long as it waits or counts, so that one handed a
// place as another ends is never counted twice.
func (h *Handler) countPlace(ctx context.Context) (func(), error) {
	select {
	case h.admitted <- struct{}{}:
	default:
		return nil, apierr.New(apierr.ResourceExhausted, "perft counts are under way on all %d places and %d more calls wait for one; retry later", cap(h.counting), cap(h.admitted)-cap(h.counting))
	}
	select {
	case h.counting <- struct{}{}:
		return func() {
			<-h.admitted
			<-h.counting
		}, nil
	case <-ctx.Done():
		<-h.admitted
		return nil, ctx.Err()
	}
}

func (h *Handler) fail(ctx context.Context, err error) error { return apierr.ToStatus(ctx, h.log, err) }

func variant(k commonv1.GameKind) (rules.Variant, error) {
	v, err := rulespb.Variant(k)
	if err != nil {
		return 0, apierr.Wrap(apierr.Invalid, err)
	}
	return v, nil
}

func position(v rules.Variant, field string, p *commonv1.Position) (*rules.Position, error) {
	if p == nil || p.GetFen() == "" {
		return nil, apierr.New(apierr.Invalid, "%s: a FEN is required", field)
	}
	if len(p.GetFen()) > MaxFENBytes {
		return nil, apierr.New(apierr.Invalid, "%s: FEN is longer than %d bytes", field, MaxFENBytes)
	}
	pos, err := rules.ParseFEN(v, p.GetFen())
	if err != nil {
		return nil, apierr.New(apierr.Invalid, "%s: %v", field, err)
	}
	return pos, nil
}

func (h *Handler) StartPosition(ctx context.Context, req *rulesv1.StartPositionRequest) (*rulesv1.StartPositionResponse, error) {
	v, err := variant(req.GetKind())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if v == rules.Xiangqi {
		if req.GetFirstFormation() != commonv1.Formation_FORMATION_UNSPECIFIED || req.GetSecondFormation() != commonv1.Formation_FORMATION_UNSPECIFIED {
			return nil, h.fail(ctx, apierr.New(apierr.Invalid, "formations: Xiangqi has no formations"))
		}
		return &rulesv1.StartPositionResponse{Position: &commonv1.Position{Fen: rules.StartFEN(v)}}, nil
	}
	cho, err1 := rulespb.Formation(req.GetFirstFormation())
	if err1 != nil {
		err1 = fmt.Errorf("first_formation: %w", err1)
	}
	han, err2 := rulespb.Formation(req.GetSecondFormation())
	if err2 != nil {
		err2 = fmt.Errorf("second_formation: %w", err2)
	}
	if err := apierr.Problems(err1, err2); err != nil {
		return nil, h.fail(ctx, err)
	}
	return &rulesv1.StartPositionResponse{Position: &commonv1.Position{Fen: rules.JanggiStartFEN(cho, han)}}, nil
}

func (h *Handler) LegalMoves(ctx context.Context, req *rulesv1.LegalMovesRequest) (*rulesv1.LegalMovesResponse, error) {
	v, err := variant(req.GetKind())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	pos, err := position(v, "position", req.GetPosition())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return &rulesv1.LegalMovesResponse{Moves: rulespb.Moves(SortedMoves(pos)), Check: pos.InCheck()}, nil
}

// SortedMoves returns the legal moves in byte order of their notation.
func SortedMoves(pos *rules.Position) []rules.Move {
	ms := pos.LegalMoves(nil)
	slices.SortFunc(ms, func(a, b rules.Move) int {
		switch as, bs := a.String(), b.String(); {
		case as < bs:
			return -1
		case as > bs:
			return 1
		}
		return 0
	})
	return ms
}

func parseMove(field string, m *commonv1.Move) (rules.Move, error) {
	if m == nil || m.GetCoordinate() == "" {
		return rules.NoMove, apierr.New(apierr.Invalid, "%s: a move is required", field)
	}
	mv, err := rules.ParseMove(m.GetCoordinate())
	if err != nil {
		return rules.NoMove, apierr.New(apierr.Invalid, "%s: %v", field, err)
	}
	return mv, nil
}

func (h *Handler) ApplyMove(ctx context.Context, req *rulesv1.ApplyMoveRequest) (*rulesv1.ApplyMoveResponse, error) {
	v, err := variant(req.GetKind())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	pos, err := position(v, "position", req.GetPosition())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	m, err := parseMove("move", req.GetMove())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if err := pos.CheckMove(m); err != nil {
		return nil, h.fail(ctx, apierr.Wrap(apierr.Invalid, err))
	}
	notation, err := rules.Notation(pos, m)
	if err != nil {
		return nil, h.fail(ctx, fmt.Errorf("notation of legal move %s: %w", m, err))
	}
	u := pos.Make(m)
	return &rulesv1.ApplyMoveResponse{
		Position: &commonv1.Position{Fen: pos.FEN()},
		Check:    pos.InCheck(),
		Notation: notation,
		Captured: rulespb.CapturedLetter(u.Captured),
		Pass:     m.IsPass(),
	}, nil
}

func (h *Handler) Perft(ctx context.Context, req *rulesv1.PerftRequest) (*rulesv1.PerftResponse, error) {
	v, err := variant(req.GetKind())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	pos, err := position(v, "position", req.GetPosition())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	d := req.GetDepth()
	if d < 1 || d > MaxPerftDepth {
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "depth: %d is out of range 1..%d", d, MaxPerftDepth))
	}
	done, err := h.countPlace(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	defer done()
	resp := &rulesv1.PerftResponse{}
	// Divided, not Perft per child: a pass at the root changes what the
	// tree below it counts (a second pass in a row is a leaf); and given
	// up once the call ends, as its client has gone or stopped waiting: a
	// count of depth 4 may take a second of a core.
	counts := map[rules.Move]uint64{}
	if err := rules.DivideEach(ctx, pos, int(d), func(m rules.Move, n uint64) {
		counts[m] = n
		resp.Nodes += n
	}); err != nil {
		return nil, h.fail(ctx, err)
	}
	if !req.GetDivide() {
		return resp, nil
	}
	for _, m := range SortedMoves(pos) {
		resp.Divide = append(resp.Divide, &rulesv1.PerftDivide{Move: &commonv1.Move{Coordinate: m.String()}, Nodes: counts[m]})
	}
	return resp, nil
}

func (h *Handler) Adjudicate(ctx context.Context, req *rulesv1.AdjudicateRequest) (*rulesv1.AdjudicateResponse, error) {
	v, err := variant(req.GetKind())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	start := req.GetStart()
	if start.GetFen() == "" {
		start = &commonv1.Position{Fen: rules.StartFEN(v)}
	}
	if len(req.GetMoves()) > MaxMoves {
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "moves: %d moves, at most %d allowed", len(req.GetMoves()), MaxMoves))
	}
	if _, err := position(v, "start", start); err != nil {
		return nil, h.fail(ctx, err)
	}
	g, err := rules.NewGame(v, start.GetFen())
	if err != nil {
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "start: %v", err))
	}
	for i, pm := range req.GetMoves() {
		m, err := parseMove(fmt.Sprintf("moves[%d]", i), pm)
		if err != nil {
			return nil, h.fail(ctx, err)
		}
		if _, err := g.Play(m); err != nil {
			return nil, h.fail(ctx, apierr.New(apierr.Invalid, "moves[%d]: %v", i, err))
		}
	}
	o := g.Outcome()
	resp := &rulesv1.AdjudicateResponse{
		Status:   commonv1.GameStatus_GAME_STATUS_ONGOING,
		Position: &commonv1.Position{Fen: g.Position().FEN()},
	}
	if v == rules.Janggi {
		resp.Points = &commonv1.Points{First: o.Points[0], Second: o.Points[1]}
	}
	if o.Ended {
		resp.Status = commonv1.GameStatus_GAME_STATUS_ENDED
		resp.Result = &commonv1.Result{Winner: rulespb.Winner(o.Winner), Method: rulespb.Method(o.Method), Points: resp.Points}
	}
	return resp, nil
}
