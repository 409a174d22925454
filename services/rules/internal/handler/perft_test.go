package handler

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
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
// call finding them taken waits within its deadline, and one finding four
// times as many calls waiting is refused at once, not left to add a count.
func TestPerftCountsAreBounded(t *testing.T) {
	h := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	req := &rulesv1.PerftRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Position: &commonv1.Position{Fen: heavyXiangqi}, Depth: 1}
	// Every place taken by a count under way.
	for range cap(h.counting) {
		h.admitted <- struct{}{}
		h.counting <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := h.Perft(ctx, req)
	cancel()
	if status.Code(err) != codes.DeadlineExceeded || len(h.admitted) != cap(h.counting) {
		t.Fatalf("every place taken: %v, %d calls admitted after; want DeadlineExceeded as the call's deadline passes, and its admission given back", err, len(h.admitted))
	}
	// And as many calls waiting as may.
	for len(h.admitted) < cap(h.admitted) {
		h.admitted <- struct{}{}
	}
	if _, err := h.Perft(context.Background(), req); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("every place and every waiting place taken: %v, want ResourceExhausted", err)
	}
	<-h.admitted // a waiting call leaves
	answered := make(chan error, 1)
	go func() {
		_, err := h.Perft(context.Background(), req)
		answered <- err
	}()
	// A count ends: the waiting call takes its place.
	<-h.admitted
	<-h.counting
	if err := <-answered; err != nil {
		t.Fatalf("a waiting call once a place was free: %v", err)
	}
	if len(h.counting) != cap(h.counting)-1 || len(h.admitted) != cap(h.admitted)-2 {
		t.Fatalf("%d places taken and %d calls admitted after the call, want %d and %d: its place was not given back", len(h.counting), len(h.admitted), cap(h.counting)-1, cap(h.admitted)-2)
	}
}

// TestPerftRefusesNoCallWithinItsBound: no more callers than may count and
// wait, each calling again as soon as answered, are never refused. A call
// handed a place as a count ended still held its waiting place a moment,
// and a caller coming then was refused with fewer calls waiting than the
// bound.
func TestPerftRefusesNoCallWithinItsBound(t *testing.T) {
	h := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	req := &rulesv1.PerftRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Position: &commonv1.Position{Fen: heavyXiangqi}, Depth: 1}
	var wg sync.WaitGroup
	var refused, calls atomic.Int64
	until := time.Now().Add(150 * time.Millisecond)
	for range cap(h.admitted) {
		wg.Go(func() {
			for time.Now().Before(until) {
				_, err := h.Perft(context.Background(), req)
				calls.Add(1)
				if status.Code(err) == codes.ResourceExhausted {
					refused.Add(1)
					return
				} else if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if refused.Load() > 0 {
		t.Fatalf("%d callers (%d places): %d of %d calls refused ResourceExhausted", cap(h.admitted), cap(h.counting), refused.Load(), calls.Load())
	}
	if len(h.counting) != 0 || len(h.admitted) != 0 {
		t.Fatalf("after the calls: %d places taken, %d calls admitted", len(h.counting), len(h.admitted))
	}
}
