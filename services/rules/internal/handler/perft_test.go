package handler

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	rulesv1 "github.com/palacehq/palace/pkg/gen/palace/rules/v1"
)

// heavyXiangqi is a legal Xiangqi position (full material, pieces spread
// out) whose perft 4 is about 44 million leaves: up to a second of a core,
// from one public request.
const heavyXiangqi = "1PbakabPp/p1c6/P4r3/4P1N2/r6C1/4N1n2/3C5/2R1n1p2/1c6R/1pPAKABBp w - - 0 1"

// TestPerftStopsWhenItsCallEnds: a client that gives Perft 50 ms must not
// leave the server counting after it has gone: the handler counted to the
// end whatever its context, and answered OK.
func TestPerftStopsWhenItsCallEnds(t *testing.T) {
	h := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, divide := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		t0 := time.Now()
		resp, err := h.Perft(ctx, &rulesv1.PerftRequest{
			Kind:     commonv1.GameKind_GAME_KIND_XIANGQI,
			Position: &commonv1.Position{Fen: heavyXiangqi},
			Depth:    4,
			Divide:   divide,
		})
		took := time.Since(t0)
		cancel()
		if took > 5*time.Second || status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("divide=%v: Perft with a 50ms deadline ran %v and answered %v (nodes %d); want DeadlineExceeded soon after the deadline",
				divide, took.Round(time.Millisecond), status.Code(err), resp.GetNodes())
		}
	}
}

// TestPerftCountsAreBounded: counts take at most their places at once; a
// call finding them taken waits within its deadline, and one finding the
// waiting places taken too is refused at once, not left to add a count.
func TestPerftCountsAreBounded(t *testing.T) {
	h := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	req := &rulesv1.PerftRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Position: &commonv1.Position{Fen: heavyXiangqi}, Depth: 1}
	for range cap(h.counting) {
		h.counting <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := h.Perft(ctx, req)
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("every place taken: %v, want DeadlineExceeded as the call's deadline passes", err)
	}
	for range cap(h.waiting) {
		h.waiting <- struct{}{}
	}
	if _, err := h.Perft(context.Background(), req); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("every place and every waiting place taken: %v, want ResourceExhausted", err)
	}
	<-h.waiting
	answered := make(chan error, 1)
	go func() {
		_, err := h.Perft(context.Background(), req)
		answered <- err
	}()
	<-h.counting // a count ends: the waiting call takes its place
	if err := <-answered; err != nil {
		t.Fatalf("a waiting call once a place was free: %v", err)
	}
	if len(h.counting) != cap(h.counting)-1 {
		t.Fatalf("%d places taken after the call, want %d: its place was not given back", len(h.counting), cap(h.counting)-1)
	}
}
