package rules_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	rulesv1 "github.com/palacehq/palace/pkg/gen/palace/rules/v1"
	"github.com/palacehq/palace/pkg/rules"
	rulessvc "github.com/palacehq/palace/services/rules"
	"github.com/palacehq/palace/services/rules/internal/handler"
)

const (
	janggi  = commonv1.GameKind_GAME_KIND_JANGGI
	xiangqi = commonv1.GameKind_GAME_KIND_XIANGQI
)

func client(t *testing.T) rulesv1.RulesServiceClient {
	t.Helper()
	return rulesv1.NewRulesServiceClient(apptest.Start(t, "", rulessvc.Bind()))
}

func pos(fen string) *commonv1.Position { return &commonv1.Position{Fen: fen} }

func mv(m string) *commonv1.Move { return &commonv1.Move{Coordinate: m} }

func TestStartPosition(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		req     *rulesv1.StartPositionRequest
		wantFEN string
		wantErr codes.Code
		wantMsg string // in the refusal: the field a client must mend
	}{
		{name: "xiangqi", req: &rulesv1.StartPositionRequest{Kind: xiangqi}, wantFEN: rules.StartFEN(rules.Xiangqi)},
		{name: "janggi default formations", req: &rulesv1.StartPositionRequest{Kind: janggi}, wantFEN: rules.StartFEN(rules.Janggi)},
		{name: "janggi han mirrored", req: &rulesv1.StartPositionRequest{Kind: janggi, FirstFormation: commonv1.Formation_FORMATION_SANG_MA_SANG_MA, SecondFormation: commonv1.Formation_FORMATION_SANG_MA_SANG_MA},
			wantFEN: "rnba1anbr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RBNA1ABNR w - - 0 1"},
		// Each side's own formation, Han's mirrored: docs/rules.md's table.
		{name: "janggi formations differ", req: &rulesv1.StartPositionRequest{Kind: janggi, FirstFormation: commonv1.Formation_FORMATION_SANG_MA_MA_SANG, SecondFormation: commonv1.Formation_FORMATION_MA_SANG_MA_SANG},
			wantFEN: "rbna1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RBNA1ANBR w - - 0 1"},
		{name: "no kind", req: &rulesv1.StartPositionRequest{}, wantErr: codes.InvalidArgument},
		{name: "xiangqi has no formations", req: &rulesv1.StartPositionRequest{Kind: xiangqi, FirstFormation: commonv1.Formation_FORMATION_SANG_MA_SANG_MA}, wantErr: codes.InvalidArgument},
		{name: "bad first formation", req: &rulesv1.StartPositionRequest{Kind: janggi, FirstFormation: 9}, wantErr: codes.InvalidArgument, wantMsg: "first_formation: 9 is not a formation"},
		{name: "bad second formation", req: &rulesv1.StartPositionRequest{Kind: janggi, SecondFormation: 9}, wantErr: codes.InvalidArgument, wantMsg: "second_formation: 9 is not a formation"},
		// Both named, on one line: a message shown or logged as one once
		// broke across two.
		{name: "both formations bad", req: &rulesv1.StartPositionRequest{Kind: janggi, FirstFormation: -1, SecondFormation: 77}, wantErr: codes.InvalidArgument,
			wantMsg: "first_formation: -1 is not a formation; second_formation: 77 is not a formation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := c.StartPosition(ctx, tt.req)
			if status.Code(err) != tt.wantErr || !strings.Contains(status.Convert(err).Message(), tt.wantMsg) {
				t.Fatalf("err %v, want %v saying %q", err, tt.wantErr, tt.wantMsg)
			}
			if err == nil && resp.GetPosition().GetFen() != tt.wantFEN {
				t.Fatalf("fen %q, want %q", resp.GetPosition().GetFen(), tt.wantFEN)
			}
		})
	}
}

func TestLegalMovesAndApply(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	lm, err := c.LegalMoves(ctx, &rulesv1.LegalMovesRequest{Kind: janggi, Position: pos(rules.StartFEN(rules.Janggi))})
	if err != nil || len(lm.GetMoves()) != 32 {
		t.Fatalf("janggi start: %d moves, %v", len(lm.GetMoves()), err)
	}
	for i := 1; i < len(lm.GetMoves()); i++ {
		if lm.GetMoves()[i-1].GetCoordinate() >= lm.GetMoves()[i].GetCoordinate() {
			t.Fatal("legal moves are not sorted")
		}
	}
	am, err := c.ApplyMove(ctx, &rulesv1.ApplyMoveRequest{Kind: xiangqi, Position: pos(rules.StartFEN(rules.Xiangqi)), Move: mv("h3e3")})
	if err != nil {
		t.Fatal(err)
	}
	if am.GetNotation() != "C2.5" || am.GetCheck() || am.GetCaptured() != "" {
		t.Fatalf("h3e3: %v", am)
	}
	cap, err := c.ApplyMove(ctx, &rulesv1.ApplyMoveRequest{Kind: xiangqi, Position: pos(am.GetPosition().GetFen()), Move: mv("b8b1")})
	if err != nil || cap.GetCaptured() != "N" {
		t.Fatalf("b8b1 captures the horse over the cannon: %v %v", cap, err)
	}
	pass, err := c.ApplyMove(ctx, &rulesv1.ApplyMoveRequest{Kind: janggi, Position: pos(rules.StartFEN(rules.Janggi)), Move: mv("e2e2")})
	if err != nil || !pass.GetPass() {
		t.Fatalf("janggi pass: %v %v", pass, err)
	}
}

func TestBadInputNamesTheProblem(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	start := pos(rules.StartFEN(rules.Xiangqi))
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{name: "blocked chariot", call: func() error {
			_, err := c.ApplyMove(ctx, &rulesv1.ApplyMoveRequest{Kind: xiangqi, Position: start, Move: mv("a1a9")})
			return err
		}, want: "a1a9"},
		{name: "malformed move", call: func() error {
			_, err := c.ApplyMove(ctx, &rulesv1.ApplyMoveRequest{Kind: xiangqi, Position: start, Move: mv("zz")})
			return err
		}, want: "move"},
		{name: "bad fen", call: func() error {
			_, err := c.LegalMoves(ctx, &rulesv1.LegalMovesRequest{Kind: xiangqi, Position: pos("rnbakabnr/9 w")})
			return err
		}, want: "position"},
		{name: "oversized fen", call: func() error {
			_, err := c.LegalMoves(ctx, &rulesv1.LegalMovesRequest{Kind: xiangqi, Position: pos(strings.Repeat("9/", 200))})
			return err
		}, want: "longer"},
		{name: "perft depth unset", call: func() error {
			_, err := c.Perft(ctx, &rulesv1.PerftRequest{Kind: xiangqi, Position: start})
			return err
		}, want: "depth: 0 is out of range 1..4"},
		{name: "perft too deep", call: func() error {
			_, err := c.Perft(ctx, &rulesv1.PerftRequest{Kind: xiangqi, Position: start, Depth: 9})
			return err
		}, want: "depth"},
		{name: "illegal move in a game names its index", call: func() error {
			_, err := c.Adjudicate(ctx, &rulesv1.AdjudicateRequest{Kind: xiangqi, Moves: []*commonv1.Move{mv("h3e3"), mv("h3e3")}})
			return err
		}, want: "moves[1]"},
		{name: "too many moves", call: func() error {
			ms := make([]*commonv1.Move, 2001)
			for i := range ms {
				ms[i] = mv("h3e3")
			}
			_, err := c.Adjudicate(ctx, &rulesv1.AdjudicateRequest{Kind: xiangqi, Moves: ms})
			return err
		}, want: "2000"},
		{name: "no kind, or a misspelt one dropped by JSON", call: func() error {
			_, err := c.StartPosition(ctx, &rulesv1.StartPositionRequest{})
			return err
		}, want: "a name that is not a game kind; want GAME_KIND_JANGGI or GAME_KIND_XIANGQI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tt.want) {
				t.Fatalf("got %v, want InvalidArgument mentioning %q", err, tt.want)
			}
		})
	}
}

func TestPerftAndAdjudicate(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	p, err := c.Perft(ctx, &rulesv1.PerftRequest{Kind: janggi, Position: pos(rules.StartFEN(rules.Janggi)), Depth: 3, Divide: true})
	if err != nil || p.GetNodes() != 33316 || len(p.GetDivide()) != 32 {
		t.Fatalf("janggi perft 3: %d nodes, %d root moves, %v", p.GetNodes(), len(p.GetDivide()), err)
	}
	var sum uint64
	for _, d := range p.GetDivide() {
		sum += d.GetNodes()
	}
	if sum != 33316 {
		t.Fatalf("divide sums to %d", sum)
	}
	p, err = c.Perft(ctx, &rulesv1.PerftRequest{Kind: xiangqi, Position: pos(rules.StartFEN(rules.Xiangqi)), Depth: 3})
	if err != nil || p.GetNodes() != 79666 || len(p.GetDivide()) != 0 {
		t.Fatalf("xiangqi perft 3: %d nodes, %d root moves, %v", p.GetNodes(), len(p.GetDivide()), err)
	}
	a, err := c.Adjudicate(ctx, &rulesv1.AdjudicateRequest{Kind: janggi, Moves: []*commonv1.Move{mv("e2e2"), mv("e9e9")}})
	if err != nil {
		t.Fatal(err)
	}
	if a.GetStatus() != commonv1.GameStatus_GAME_STATUS_ENDED || a.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TWO_PASSES ||
		a.GetResult().GetWinner() != commonv1.Winner_WINNER_SECOND || a.GetPoints().GetSecond() != 73.5 {
		t.Fatalf("two passes: %v", a)
	}
	a, err = c.Adjudicate(ctx, &rulesv1.AdjudicateRequest{Kind: xiangqi, Moves: []*commonv1.Move{mv("h3e3")}})
	if err != nil || a.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING || a.GetResult() != nil {
		t.Fatalf("ongoing: %v %v", a, err)
	}
}

func TestCheckIsReported(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	am, err := c.ApplyMove(ctx, &rulesv1.ApplyMoveRequest{Kind: xiangqi, Position: pos("4k4/9/9/9/9/9/9/9/9/R2K5 w - - 0 1"), Move: mv("a1a10")})
	if err != nil || !am.GetCheck() || am.GetNotation() != "R9+9" {
		t.Fatalf("a1a10 gives check along rank 10: %v %v", am, err)
	}
	lm, err := c.LegalMoves(ctx, &rulesv1.LegalMovesRequest{Kind: xiangqi, Position: am.GetPosition()})
	if err != nil || !lm.GetCheck() {
		t.Fatalf("legal moves after a1a10: %v %v, want check", lm, err)
	}
	lm, err = c.LegalMoves(ctx, &rulesv1.LegalMovesRequest{Kind: xiangqi, Position: pos(rules.StartFEN(rules.Xiangqi))})
	if err != nil || lm.GetCheck() {
		t.Fatalf("legal moves at the start: %v %v, want no check", lm, err)
	}
}

func TestAdjudicateReportsTheGame(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	janggiStartPoints := &commonv1.Points{First: 72, Second: 73.5}
	tests := []struct {
		name       string
		req        *rulesv1.AdjudicateRequest
		wantFEN    string
		wantPoints *commonv1.Points // nil for Xiangqi, which has none
		wantResult *commonv1.Result // nil while the game goes on
	}{
		{
			name:    "xiangqi from its own start by default",
			req:     &rulesv1.AdjudicateRequest{Kind: xiangqi, Moves: []*commonv1.Move{mv("h3e3")}},
			wantFEN: "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR b - - 1 1",
		},
		{
			name:       "xiangqi checkmate has no points",
			req:        &rulesv1.AdjudicateRequest{Kind: xiangqi, Start: pos("4k4/R8/9/9/9/9/9/9/1R7/3K5 w - - 0 1"), Moves: []*commonv1.Move{mv("b2b10")}},
			wantFEN:    "1R2k4/R8/9/9/9/9/9/9/9/3K5 b - - 1 1",
			wantResult: &commonv1.Result{Winner: commonv1.Winner_WINNER_FIRST, Method: commonv1.EndMethod_END_METHOD_CHECKMATE},
		},
		{
			name:       "janggi ongoing has points",
			req:        &rulesv1.AdjudicateRequest{Kind: janggi, Moves: []*commonv1.Move{mv("b1c3")}},
			wantFEN:    "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1CN4C1/4K4/R1BA1ABNR b - - 1 1",
			wantPoints: janggiStartPoints,
		},
		{
			name:       "janggi result carries the points",
			req:        &rulesv1.AdjudicateRequest{Kind: janggi, Moves: []*commonv1.Move{mv("e2e2"), mv("e9e9")}},
			wantFEN:    "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 2 2",
			wantPoints: janggiStartPoints,
			wantResult: &commonv1.Result{Winner: commonv1.Winner_WINNER_SECOND, Method: commonv1.EndMethod_END_METHOD_TWO_PASSES, Points: janggiStartPoints},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := c.Adjudicate(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			wantStatus := commonv1.GameStatus_GAME_STATUS_ONGOING
			if tt.wantResult != nil {
				wantStatus = commonv1.GameStatus_GAME_STATUS_ENDED
			}
			if a.GetStatus() != wantStatus || a.GetPosition().GetFen() != tt.wantFEN {
				t.Errorf("status %v, position %q; want %v, %q", a.GetStatus(), a.GetPosition().GetFen(), wantStatus, tt.wantFEN)
			}
			if !proto.Equal(a.GetPoints(), tt.wantPoints) {
				t.Errorf("points %v, want %v", a.GetPoints(), tt.wantPoints)
			}
			if !proto.Equal(a.GetResult(), tt.wantResult) {
				t.Errorf("result %v, want %v", a.GetResult(), tt.wantResult)
			}
		})
	}
}

// The request limits are inclusive: MaxFENBytes and MaxMoves themselves
// are allowed.
func TestLimitsAreInclusive(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	start := rules.StartFEN(rules.Xiangqi)
	padded := start + strings.Repeat(" ", handler.MaxFENBytes-len(start))
	if _, err := c.LegalMoves(ctx, &rulesv1.LegalMovesRequest{Kind: xiangqi, Position: pos(padded)}); err != nil {
		t.Errorf("a FEN of %d bytes: %v", len(padded), err)
	}
	if _, err := c.LegalMoves(ctx, &rulesv1.LegalMovesRequest{Kind: xiangqi, Position: pos(padded + " ")}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a FEN of %d bytes: %v, want InvalidArgument", len(padded)+1, err)
	}
	// Moves that fail on the second ply show that the whole list was read.
	ms := make([]*commonv1.Move, handler.MaxMoves)
	for i := range ms {
		ms[i] = mv("h3e3")
	}
	_, err := c.Adjudicate(ctx, &rulesv1.AdjudicateRequest{Kind: xiangqi, Moves: ms})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "moves[1]") {
		t.Errorf("%d moves: %v, want the illegal moves[1] named", len(ms), err)
	}
}
