package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	aiv1 "github.com/palacehq/palace/pkg/gen/palace/ai/v1"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rules"
)

// TestLoadtestAIBacksOffOnErrors: against a dead address the AI load
// test pauses after each failed call instead of retrying at once, and
// prints only the first errors, then how many more there were; it still
// exits 1.
func TestLoadtestAIBacksOffOnErrors(t *testing.T) {
	out, errOut, code := palace("loadtest", "ai", "--addr", "127.0.0.1:1", "--level", "1", "--clients", "2", "--duration", "1s")
	var rep aiReport
	lastJSON(t, out, &rep)
	if code != exitFail || rep.Errors == 0 {
		t.Fatalf("exit %d with report %+v, want %d and errors", code, rep, exitFail)
	}
	// 2 clients for 1s, pausing at least 50ms after each failure.
	if rep.Errors > 2*(1000/50)+2 {
		t.Errorf("%d failed calls in 1s from 2 clients: no back-off", rep.Errors)
	}
	// The first errors, then one line counting the others, and one saying
	// that nothing was answered.
	if lines := strings.Count(errOut, "\n"); lines > aiErrorsShown+2 {
		t.Errorf("%d lines on stderr, want at most %d:\n%.2000s", lines, aiErrorsShown+2, errOut)
	}
	if !strings.Contains(errOut, "no BestMove call was answered") {
		t.Errorf("a run without a single answer does not say so:\n%s", errOut)
	}
	if rep.Errors > aiErrorsShown && !strings.Contains(errOut, "more not shown") {
		t.Errorf("%d errors but no count of those not shown:\n%s", rep.Errors, errOut)
	}
}

// TestLoadtestAIChecksTheAnswers: an answer without a move, with a move
// not legal in the position sent, or from a search of no node is an
// error; a legal move found by a search is not.
func TestLoadtestAIChecksTheAnswers(t *testing.T) {
	p, err := rules.ParseFEN(rules.Xiangqi, rules.StartFEN(rules.Xiangqi))
	if err != nil {
		t.Fatal(err)
	}
	legal := p.LegalMoves(nil)
	answer := func(mv string, nodes uint64) *aiv1.BestMoveResponse {
		return &aiv1.BestMoveResponse{Move: &commonv1.Move{Coordinate: mv}, Nodes: nodes}
	}
	for _, bad := range []*aiv1.BestMoveResponse{answer("", 10), answer("a1a1", 10), answer("h3h9", 10), answer("h3e3", 0)} {
		if err := checkBestMove(bad, legal); err == nil {
			t.Errorf("%v taken for a good answer", bad)
		}
	}
	if err := checkBestMove(answer("h3e3", 10), legal); err != nil {
		t.Errorf("a legal move refused: %v", err)
	}
}

// halfWrongAI answers every other BestMove (odd seeds) with a move no
// position allows, from a search that counted its nodes, and the others
// with a legal move of the position sent.
type halfWrongAI struct {
	aiv1.UnimplementedAIServiceServer
}

func (halfWrongAI) BestMove(_ context.Context, req *aiv1.BestMoveRequest) (*aiv1.BestMoveResponse, error) {
	mv := "a1a1"
	if req.GetSeed()%2 == 0 {
		var err error
		if mv, err = firstLegalMove(req); err != nil {
			return nil, err
		}
	}
	return &aiv1.BestMoveResponse{Move: &commonv1.Move{Coordinate: mv}, Nodes: 10}, nil
}

// TestLoadtestAIFailsOnWrongAnswers: a service that answers every call,
// half of them wrongly, fails the run: its wrong answers are errors, not
// jobs, though the right ones are.
func TestLoadtestAIFailsOnWrongAnswers(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	aiv1.RegisterAIServiceServer(srv, halfWrongAI{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	out, errOut, code := palace("loadtest", "ai", "--addr", lis.Addr().String(), "--variant", "xiangqi", "--level", "1", "--clients", "2", "--duration", "300ms")
	var rep aiReport
	lastJSON(t, out, &rep)
	if code != exitFail || rep.Errors == 0 || rep.Jobs == 0 || !strings.Contains(errOut, "not legal") {
		t.Fatalf("exit %d with report %+v; want %d, errors and jobs\n%s", code, rep, exitFail, errOut)
	}
}

// TestAIReportFaulty: the exit status reports failed answers, and a run
// that had no answer at all.
func TestAIReportFaulty(t *testing.T) {
	tests := []struct {
		name string
		r    aiReport
		want bool
	}{
		{name: "answered", r: aiReport{Jobs: 10}, want: false},
		{name: "an error", r: aiReport{Jobs: 10, Errors: 1}, want: true},
		{name: "no answer", r: aiReport{}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.faulty(); got != tt.want {
				t.Fatalf("faulty() = %v for %+v, want %v", got, tt.r, tt.want)
			}
		})
	}
}

// TestLoadtestAIRidesOutUnavailableReplicas: the tool's connection to one
// of two replicas of the AI service is cut for a second, then the other
// replica is stopped. Each call answered Unavailable is sent again, to the
// next replica, as an app would: no error, each call sent again counted as
// a retry, and each answer, checked, counted as one job however often its
// request was sent.
func TestLoadtestAIRidesOutUnavailableReplicas(t *testing.T) {
	shared := []string{"--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0"}
	toA := redistest.NewProxy(t, startServe(t, shared...))
	b, stopB := startServeStoppable(t, shared...)
	out, errOut, code := palaceUnderFaults(time.Second, func() {
		toA.Cut()
		time.Sleep(time.Second)
		toA.Restore()
		time.Sleep(500 * time.Millisecond)
		stopB()
	}, "loadtest", "ai", "--addr", toA.Addr()+","+b, "--level", "1", "--clients", "4", "--duration", "4s")
	var rep aiReport
	lastJSON(t, out, &rep)
	t.Logf("report %+v", rep)
	if code != exitOK || rep.Errors != 0 || rep.Retries == 0 || rep.Jobs == 0 {
		t.Fatalf("exit %d, report %+v; want exit 0, jobs, no error and retries\n%s", code, rep, errOut)
	}
}

// firstLegalMove is the first legal move of the Xiangqi position req asks
// about.
func firstLegalMove(req *aiv1.BestMoveRequest) (string, error) {
	p, err := rules.ParseFEN(rules.Xiangqi, req.GetStart().GetFen())
	if err != nil {
		return "", err
	}
	for _, m := range req.GetMoves() {
		pm, err := rules.ParseMove(m.GetCoordinate())
		if err != nil {
			return "", err
		}
		p.Make(pm)
	}
	return p.LegalMoves(nil)[0].String(), nil
}
