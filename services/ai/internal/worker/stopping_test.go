package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/aijobs"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// allDown is a game service out of reach: every call Unavailable.
type allDown struct{ gamev1.GameServiceClient }

func (allDown) GetGame(context.Context, *gamev1.GetGameRequest, ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	return nil, status.Error(codes.Unavailable, "connection refused")
}

func (allDown) MakeMove(context.Context, *gamev1.MakeMoveRequest, ...grpc.CallOption) (*gamev1.MakeMoveResponse, error) {
	return nil, status.Error(codes.Unavailable, "connection refused")
}

// A worker stopped while it waited for its game service to come back
// kept the job it held: its hand back, made with the stopped context,
// failed, and the job waited for the claim timeout (or the worker's lease
// to lapse) before another worker took it, on the AI's clock.
func TestAWorkerStoppedDuringAnOutageHandsItsJobBack(t *testing.T) {
	ctx := context.Background()
	q := aijobs.New(redistest.Client(t), redistest.Prefix(t))
	q.ClaimAfter, q.Lease = time.Hour, 0 // nothing is taken over
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, aijobs.Job{GameID: "g", Version: 2, Kind: aijobs.KindMove, Side: "first", Level: 1, Token: "t", EnqueuedMs: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: allDown{}, Mover: NewBuiltin(1),
		OutageWait: 100 * time.Millisecond}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	time.Sleep(1500 * time.Millisecond) // the try, its outage wait, then waiting for the game service
	cancel()
	<-done

	d, err := q.Next(ctx, "w2", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if d == nil || d.Job.GameID != "g" {
		t.Fatalf("another worker got %+v, want the job of game g, handed back by the stopped worker", d)
	}
}
