package sweep

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/deadline"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// slowGames answers every deadline at once but game "slow"'s, which it
// never answers, and a probe after probeDelay: a game service that is
// up, with one game stuck (its Redis master failing over, say).
type slowGames struct{ probeDelay time.Duration }

func (g slowGames) ExpireDeadline(ctx context.Context, req *gamev1.ExpireDeadlineRequest, _ ...grpc.CallOption) (*gamev1.ExpireDeadlineResponse, error) {
	var d time.Duration
	switch req.GetGameId() {
	case "slow":
		d = time.Hour
	case probeGameID:
		d = g.probeDelay
	}
	select {
	case <-time.After(d):
		return &gamev1.ExpireDeadlineResponse{}, nil
	case <-ctx.Done():
		return nil, status.Error(codes.DeadlineExceeded, "timed out")
	}
}

// TestACallThatTimesOutAfterAnAnswerHandsNothingOver: one game's call
// times out after another call, begun later, was answered: the game
// service is up. Its calls have failed only since that answer, so no hand-
// over is due, and a slow probe cannot hand the shards over.
func TestACallThatTimesOutAfterAnAnswerHandsNothingOver(t *testing.T) {
	s := newTestService(t)
	s.games = slowGames{probeDelay: 2 * time.Second}
	s.cfg.CallTimeout, s.cfg.HandOverAfter = time.Second, 600*time.Millisecond
	ctx := context.Background()
	timedOut := make(chan outcome, 1)
	go func() { timedOut <- s.expire(ctx, 0, deadline.Entry{GameID: "slow", At: time.Now()}) }()
	time.Sleep(800 * time.Millisecond)
	if o := s.expire(ctx, 0, deadline.Entry{GameID: "fast", At: time.Now()}); o.err != nil {
		t.Fatalf("the answered call: %v", o.err)
	}
	if o := <-timedOut; o.err == nil {
		t.Fatal("the stuck game's call did not fail")
	}
	s.handingOver(ctx, ctx, time.Now())
	s.calls.Wait()
	s.reach.mu.Lock()
	defer s.reach.mu.Unlock()
	if s.reach.handedOver || s.reach.drop {
		t.Fatalf("handed over, failing since %v ago, though a call was answered %v ago",
			time.Since(s.failingSinceLocked()).Round(time.Millisecond), time.Since(s.reach.answered).Round(time.Millisecond))
	}
}
