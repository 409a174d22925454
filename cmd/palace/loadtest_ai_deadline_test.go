package main

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	aiv1 "github.com/palacehq/palace/pkg/gen/palace/ai/v1"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
)

// legalMovesAI answers every BestMove with a legal move of the position sent.
type legalMovesAI struct {
	aiv1.UnimplementedAIServiceServer
}

func (legalMovesAI) BestMove(_ context.Context, req *aiv1.BestMoveRequest) (*aiv1.BestMoveResponse, error) {
	mv, err := firstLegalMove(req)
	if err != nil {
		return nil, err
	}
	return &aiv1.BestMoveResponse{Move: &commonv1.Move{Coordinate: mv}, Nodes: 10}, nil
}

// deadlineExceededAI fails every call at once with DEADLINE_EXCEEDED, as a
// server whose own internal deadline (e.g. a Redis call) ran out answers:
// no call is held anywhere near --call-timeout.
type deadlineExceededAI struct {
	aiv1.UnimplementedAIServiceServer
}

func (deadlineExceededAI) BestMove(context.Context, *aiv1.BestMoveRequest) (*aiv1.BestMoveResponse, error) {
	return nil, status.Error(codes.DeadlineExceeded, "deadline exceeded")
}

func serveAI(t *testing.T, s aiv1.AIServiceServer) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	aiv1.RegisterAIServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestLoadtestAICountsADeadlineExceededAReplicaAnswers: a replica that answers
// DEADLINE_EXCEEDED at once was not "held past --call-timeout" (30s here);
// its failed answers must count as errors, not be ridden through as
// retries with exit 0.
func TestLoadtestAICountsADeadlineExceededAReplicaAnswers(t *testing.T) {
	bad := serveAI(t, deadlineExceededAI{})
	good := serveAI(t, legalMovesAI{})
	out, errOut, code := palace("loadtest", "ai", "--addr", bad+","+good, "--variant", "xiangqi", "--level", "1",
		"--clients", "2", "--duration", "500ms", "--call-timeout", "30s")
	var rep aiReport
	lastJSON(t, out, &rep)
	t.Logf("report %+v", rep)
	if code != exitFail || rep.Errors == 0 {
		t.Fatalf("a replica answering DEADLINE_EXCEEDED at once is hidden: exit %d, report %+v (retries %d); want exit %d and errors\n%s", code, rep, rep.Retries, exitFail, errOut)
	}
}

// busyAI refuses every other BestMove (odd seeds) for load, as a service
// whose --ai-max-waiting calls are waiting already answers, and answers
// the others with a legal move.
type busyAI struct {
	legalMovesAI
}

func (b busyAI) BestMove(ctx context.Context, req *aiv1.BestMoveRequest) (*aiv1.BestMoveResponse, error) {
	if req.GetSeed()%2 == 1 {
		return nil, status.Error(codes.ResourceExhausted, "64 calls are waiting for an engine already: retry later")
	}
	return b.legalMovesAI.BestMove(ctx, req)
}

// TestLoadtestAICountsCallsRefusedForLoadAsShed: a call the service
// refuses for load, as its API says it will when more calls wait than it
// queues, is counted as shed, not as an error: a run sending more than the
// service holds passes and says how much was shed.
func TestLoadtestAICountsCallsRefusedForLoadAsShed(t *testing.T) {
	addr := serveAI(t, busyAI{})
	out, errOut, code := palace("loadtest", "ai", "--addr", addr, "--variant", "xiangqi", "--level", "1",
		"--clients", "2", "--duration", "500ms")
	var rep aiReport
	lastJSON(t, out, &rep)
	t.Logf("report %+v", rep)
	if code != exitOK || rep.Errors != 0 || rep.Shed == 0 || rep.Jobs == 0 {
		t.Fatalf("exit %d, report %+v; want exit %d, jobs, calls shed and no error\n%s", code, rep, exitOK, errOut)
	}
}

// leakingAI answers its first BestMove, then refuses every later one for
// load, as a service whose engine slots leaked (never handed back) would:
// it answers nothing more, whatever the load.
type leakingAI struct {
	legalMovesAI
	calls *atomic.Int64
}

func (l leakingAI) BestMove(ctx context.Context, req *aiv1.BestMoveRequest) (*aiv1.BestMoveResponse, error) {
	if l.calls.Add(1) > 1 {
		return nil, status.Error(codes.ResourceExhausted, "all 4 engines are searching and 64 calls wait for one already; retry later")
	}
	return l.legalMovesAI.BestMove(ctx, req)
}

// TestLoadtestAIFailsAServiceThatShedsEverything: one client, one call at
// a time; the service answers one call and sheds every later one. Counted
// as shed, not errors, the run passed as long as one call was answered: a
// service that stopped answering looked like one under load.
func TestLoadtestAIFailsAServiceThatShedsEverything(t *testing.T) {
	addr := serveAI(t, leakingAI{calls: new(atomic.Int64)})
	out, errOut, code := palace("loadtest", "ai", "--addr", addr, "--variant", "xiangqi", "--level", "1",
		"--clients", "1", "--duration", "1s")
	var rep aiReport
	lastJSON(t, out, &rep)
	if code == exitOK {
		t.Fatalf("a service answering 1 call and shedding the %d after it, with one client: exit %d, report %+v; want a failed run\n%s", rep.Shed, code, rep, errOut)
	}
}

// unavailableAI answers every BestMove Unavailable, as a replica
// that is restarting does, and counts the calls it was sent.
type unavailableAI struct {
	aiv1.UnimplementedAIServiceServer
	calls *atomic.Int64
}

func (s unavailableAI) BestMove(context.Context, *aiv1.BestMoveRequest) (*aiv1.BestMoveResponse, error) {
	s.calls.Add(1)
	return nil, status.Error(codes.Unavailable, "restarting")
}

// TestLoadtestAIRetriesCountOnlyCallsSentAgain: "retries" are the calls
// sent again. Against a lone replica that answers every call Unavailable,
// every call the server got is a first send (one per loop round, each
// ending as one of "errors") or a retry. A retry was counted before its
// pause, which the run's end cuts short without sending it: one retry too
// many per client (the games and clocks tools' failovers alike).
func TestLoadtestAIRetriesCountOnlyCallsSentAgain(t *testing.T) {
	var calls atomic.Int64
	addr := serveAI(t, unavailableAI{calls: &calls})
	out, errOut, _ := palace("loadtest", "ai", "--addr", addr, "--variant", "xiangqi", "--level", "1", "--clients", "2", "--duration", "1s")
	var rep aiReport
	lastJSON(t, out, &rep)
	sent := calls.Load()
	t.Logf("report %+v, calls received %d", rep, sent)
	if rep.Jobs != 0 || rep.Shed != 0 || rep.Errors == 0 {
		t.Fatalf("report %+v: want only errors\n%s", rep, errOut)
	}
	if want := sent - rep.Errors; rep.Retries != want {
		t.Errorf("retries = %d, but the server got %d calls for %d failed rounds: %d sent again", rep.Retries, sent, rep.Errors, want)
	}
}

// stopsAnsweringAI answers its first two calls, slowly (a level-10
// search on a busy service), with a legal move, and sheds every later call
// (ResourceExhausted) at once: a service that stopped answering.
type stopsAnsweringAI struct {
	aiv1.UnimplementedAIServiceServer
	calls *atomic.Int64
}

func (s stopsAnsweringAI) BestMove(ctx context.Context, req *aiv1.BestMoveRequest) (*aiv1.BestMoveResponse, error) {
	if s.calls.Add(1) > 2 {
		return nil, status.Error(codes.ResourceExhausted, "all engines busy; retry later")
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(1500 * time.Millisecond):
	}
	return legalMovesAI{}.BestMove(ctx, req)
}

// TestLoadtestAIFailsAServiceThatShedsTheLastHalf: a service that sheds
// every call for the last half of the run, answering none, is one of the
// errors (README). One that answered two slow calls (1.5 s each) and shed
// every call for the rest of a 5 s run passed: the quiet spell had also
// to exceed five times the answers' median.
func TestLoadtestAIFailsAServiceThatShedsTheLastHalf(t *testing.T) {
	var calls atomic.Int64
	addr := serveAI(t, stopsAnsweringAI{calls: &calls})
	out, errOut, code := palace("loadtest", "ai", "--addr", addr, "--variant", "xiangqi", "--level", "10", "--clients", "2", "--duration", "5s")
	var rep aiReport
	lastJSON(t, out, &rep)
	t.Logf("report %+v", rep)
	if rep.Jobs != 2 || rep.Shed == 0 {
		t.Fatalf("report %+v: want 2 jobs, then only shed calls\n%s", rep, errOut)
	}
	if code != exitFail || rep.Errors == 0 {
		t.Errorf("exit %d, errors %d: a service that shed every call for the last 70%% of the run passed\n%s", code, rep.Errors, errOut)
	}
}
