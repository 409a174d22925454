package sweep

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// blockPipelines holds every pipeline (the release of the leases) until
// release is closed, having closed blocked.
type blockPipelines struct{ blocked, release chan struct{} }

func (b blockPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (b blockPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (b blockPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		close(b.blocked)
		<-b.release
		return next(ctx, cmds)
	}
}

// refusePipelines fails every pipeline (the release of the leases) at
// once, where a Redis out of reach would after its dial's retries.
type refusePipelines struct{}

func (refusePipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (refusePipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (refusePipelines) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(context.Context, []redis.Cmder) error { return errors.New("redis: connection refused") }
}

// TestAnAnswerWhileTheShardsAreHandedOverLeavesTheServiceServing: the
// game service answers a call while the replica, which a failed probe had
// told it was lost, releases its leases. The replica then holds shards
// again, and the clock service must report SERVING: reporting NOT_SERVING
// last kept it out of its balancer until the next outage ended.
func TestAnAnswerWhileTheShardsAreHandedOverLeavesTheServiceServing(t *testing.T) {
	s := newTestService(t)
	hold := blockPipelines{blocked: make(chan struct{}), release: make(chan struct{})}
	s.rdb.AddHook(hold)
	var mu sync.Mutex
	var reports []bool
	s.cfg.OnReach = func(ok bool) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, ok)
	}
	s.reach.mu.Lock()
	s.reach.failingSince, s.reach.handedOver, s.reach.drop = time.Now().Add(-time.Minute), true, true
	s.reach.mu.Unlock()
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.handingOver(ctx, ctx, time.Now())
	}()
	<-hold.blocked
	s.reached()
	close(hold.release)
	<-done
	s.calls.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(reports) == 0 || !reports[len(reports)-1] {
		t.Fatalf("reported %v, the replica reaching the game service; want SERVING (true) last", reports)
	}
}

// TestReachReportsKeepTheOrderOfWhatTheyTell: the hand-over's report and
// an answer's are made at once; the report that read the replica's reach
// last comes last, whatever each report's own pace, or the clock service
// would show NOT_SERVING while the replica sweeps.
func TestReachReportsKeepTheOrderOfWhatTheyTell(t *testing.T) {
	s := newTestService(t)
	s.rdb.AddHook(refusePipelines{})
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var reports []bool
	s.cfg.OnReach = func(ok bool) {
		mu.Lock()
		first := len(reports) == 0 && entered != nil
		if first {
			close(entered)
			entered = nil
		}
		mu.Unlock()
		if first {
			<-release // the first report is slow to be made
		}
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, ok)
	}
	wait := entered
	s.reach.mu.Lock()
	s.reach.failingSince, s.reach.handedOver, s.reach.drop = time.Now().Add(-time.Minute), true, true
	s.reach.mu.Unlock()
	ctx := context.Background()
	handedOver, answered := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(handedOver)
		s.handingOver(ctx, ctx, time.Now())
	}()
	<-wait
	go func() {
		defer close(answered)
		s.reached()
	}()
	time.Sleep(50 * time.Millisecond) // the answer's report, under way
	close(release)
	<-handedOver
	<-answered
	s.calls.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(reports) == 0 || !reports[len(reports)-1] {
		t.Fatalf("reported %v, the replica reaching the game service; want SERVING (true) last", reports)
	}
}
