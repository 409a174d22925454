package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/engine"
	aiv1 "github.com/palacehq/palace/pkg/gen/palace/ai/v1"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
)

// A failed call is retried after a pause from aiBackoffMin, growing by
// half with each further failure up to aiBackoffMax; only the first
// aiErrorsShown errors are printed, then how many more there were.
const (
	aiBackoffMin  = 50 * time.Millisecond
	aiBackoffMax  = 500 * time.Millisecond
	aiErrorsShown = 10
)

type aiReport struct {
	Level    int     `json:"level"`
	Jobs     int64   `json:"jobs"`
	JobsPerS float64 `json:"jobs_per_s"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
	Nodes    uint64  `json:"nodes"`
	NPS      float64 `json:"nodes_per_s"`
	Errors   int64   `json:"errors"`
	// Retries counts calls sent again, to the next replica, because theirs
	// answered Unavailable (gone, restarting, its connection renewed) or,
	// with several, held a call past --call-timeout: ridden through, as an
	// app would, not errors.
	Retries int64 `json:"retries"`
	// Shed counts calls the service refused for load (ResourceExhausted:
	// --ai-max-waiting calls were waiting already), which its API asks to
	// retry later: the service protecting itself, as it should when the
	// tool sends more than its engines and queue hold, so not errors. The
	// client backs off as after an error.
	Shed int64 `json:"shed"`
}

// runLoadtestAI asks the AI service for best moves on varied positions
// from several clients at once and reports jobs per second.
func runLoadtestAI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("palace loadtest ai", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:8080", "AI service host:port; several, comma-separated, spread the clients over replicas, and a call whose replica is unavailable goes to the next")
	level := fs.Int("level", 5, "AI level 1..10")
	clients := fs.Int("clients", 4, "concurrent requests")
	duration := fs.Duration("duration", 20*time.Second, "how long to run")
	variantName := fs.String("variant", "xiangqi", "janggi or xiangqi")
	callTimeout := fs.Duration("call-timeout", 30*time.Second, "longest a BestMove call may take before it is sent again to the next replica, with several, or else counts as an error; calls under way when the run ends are waited for that long")
	getTransport := transportFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	tr, err := getTransport()
	if err != nil {
		fmt.Fprintf(stderr, "palace loadtest ai: %v\n", err)
		return exitUsage
	}
	v, err := rules.ParseVariant(*variantName)
	if err != nil || *level < 1 || *level > 10 || *clients < 1 || *clients > 1000 || *duration <= 0 || *duration > time.Hour || *callTimeout <= 0 {
		fmt.Fprintln(stderr, "palace loadtest ai: want --variant janggi|xiangqi, --level 1..10, --clients 1..1000, --duration up to 1h, a positive --call-timeout")
		return exitUsage
	}
	replicas, ccs, err := replicaClients(tr, *addr, 1, aiv1.NewAIServiceClient,
		grpc.WithConnectParams(quickReconnect), grpc.WithUnaryInterceptor(withTimeout(*callTimeout)))
	if err != nil {
		fmt.Fprintln(stderr, "palace loadtest ai:", err)
		return exitUsage
	}
	defer closeAll(ccs)
	openings := engine.RandomOpenings(v, 64, 6, 1)
	// Every answer is checked: a move legal in the position sent, found
	// by a search that counted its nodes.
	legal := make([][]rules.Move, len(openings))
	for i, op := range openings {
		p, err := rules.ParseFEN(v, op.StartFEN)
		if err != nil {
			fmt.Fprintln(stderr, "palace loadtest ai: opening:", err)
			return exitFail
		}
		for _, m := range op.Moves {
			p.Make(m)
		}
		legal[i] = p.LegalMoves(nil)
	}
	rctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	var jobs, errs, retries, shed atomic.Int64
	// lastAnswer and lastShed are when the last call was answered, and shed
	// (unix nanos).
	var lastAnswer, lastShed atomic.Int64
	var nodes atomic.Uint64
	var mu sync.Mutex
	var lat []time.Duration
	var errText []string
	fail := func(format string, a ...any) {
		errs.Add(1)
		mu.Lock()
		if len(errText) < aiErrorsShown {
			errText = append(errText, fmt.Sprintf(format, a...))
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	start := time.Now()
	// The progress lines end before the report: joined, so that none is
	// written after it, nor at once with it.
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				el := time.Since(start).Seconds()
				fmt.Fprintf(stderr, "progress: %.0fs jobs=%d (%.1f/s) errors=%d retries=%d shed=%d\n", el, jobs.Load(), float64(jobs.Load())/el, errs.Load(), retries.Load(), shed.Load())
			}
		}
	}()
	for i := range *clients {
		// A call answered Unavailable is sent again, as an app would,
		// while the run lasts: BestMove changes nothing, so the same
		// request (its seed too) may be answered twice, and is counted
		// once.
		r := &route[aiv1.AIServiceClient]{replicas: replicas, replica: i % len(replicas), retry: true,
			moved: func() { retries.Add(1) }, renewed: func() { retries.Add(1) }}
		wg.Go(func() {
			// backoff grows while calls keep failing: a dead or overloaded
			// service must not be hammered, nor stderr flooded.
			backoff := time.Duration(0)
			for n := i; rctx.Err() == nil; n += *clients {
				op := openings[n%len(openings)]
				req := &aiv1.BestMoveRequest{
					Kind: rulespb.Kind(v), Start: &commonv1.Position{Fen: op.StartFEN}, Moves: rulespb.Moves(op.Moves),
					Level: uint32(*level), Seed: uint64(n),
				}
				t := time.Now()
				// Sent again only while the run lasts, but each call on the
				// process's context: a call under way when the run ends is
				// waited for (--call-timeout), so that a service that
				// stopped answering shows as errors, not as a quiet run.
				resp, err := onReplicas(rctx, r, func(c aiv1.AIServiceClient) (*aiv1.BestMoveResponse, error) {
					return c.BestMove(ctx, req)
				})
				if err == nil {
					err = checkBestMove(resp, legal[n%len(openings)])
				}
				if err != nil {
					if ctx.Err() != nil {
						return // interrupted: the tool's own cancellation
					}
					if status.Code(err) == codes.ResourceExhausted {
						shed.Add(1)
						lastShed.Store(time.Now().UnixNano())
					} else {
						fail("%v", err)
					}
					backoff = min(max(aiBackoffMin, backoff*3/2), aiBackoffMax)
					sleepUntil(rctx, time.Now().Add(backoff))
					continue
				}
				backoff = 0
				mu.Lock()
				lat = append(lat, time.Since(t))
				mu.Unlock()
				jobs.Add(1)
				lastAnswer.Store(time.Now().UnixNano())
				nodes.Add(resp.GetNodes())
			}
		})
	}
	wg.Wait()
	cancel()
	<-progressDone
	el := time.Since(start).Seconds()
	rep := aiReport{Level: *level, Jobs: jobs.Load(), JobsPerS: float64(jobs.Load()) / el, Nodes: nodes.Load(), NPS: float64(nodes.Load()) / el, Errors: errs.Load(), Retries: retries.Load(), Shed: shed.Load()}
	rep.P50ms, rep.P99ms = percentiles(lat)
	if quiet := shedOnly(start, lastAnswer.Load(), lastShed.Load()); quiet > 0 {
		fail("the service shed every call for the last %v of the run, answering none: shedding is for load it cannot take, not for stopping", quiet.Round(time.Millisecond))
		rep.Errors = errs.Load()
	}
	for _, e := range errText {
		fmt.Fprintln(stderr, "error:", e)
	}
	if more := rep.Errors - int64(len(errText)); more > 0 {
		fmt.Fprintf(stderr, "error: %d more not shown\n", more)
	}
	if rep.Jobs == 0 {
		fmt.Fprintln(stderr, "error: no BestMove call was answered")
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintln(stdout, string(b))
	if rep.faulty() || ctx.Err() != nil {
		// As the other load tools: the report stands, the status tells.
		return exitFail
	}
	return exitOK
}

// shedOnly is how long the end of a run that began at start went with
// calls shed and none answered (unix nanos of the last of each; 0: none),
// when that is longer than half the run: a service that takes more than
// it can bears still answers at its pace, one that stopped answering
// sheds everything. 0 otherwise. Slow answers (level 10) are no excuse:
// one that takes half a run is an answer a client gave up on.
func shedOnly(start time.Time, lastAnswer, lastShed int64) time.Duration {
	if lastShed == 0 || lastShed < lastAnswer {
		return 0
	}
	from := max(lastAnswer, start.UnixNano())
	quiet := time.Duration(lastShed - from)
	if quiet <= time.Duration(lastShed-start.UnixNano())/2 {
		return 0
	}
	return quiet
}

// faulty tells whether the report shows a fault: a failed or wrong
// answer, or a run that had none answered, so shows nothing.
func (r aiReport) faulty() bool { return r.Errors > 0 || r.Jobs == 0 }

// checkBestMove finds what is wrong with an answer for a position whose
// legal moves are legal: no move, one not among them, or no nodes counted.
func checkBestMove(r *aiv1.BestMoveResponse, legal []rules.Move) error {
	text := r.GetMove().GetCoordinate()
	m, err := rules.ParseMove(text)
	switch {
	case err != nil:
		return fmt.Errorf("BestMove answered %q, not a move, for a position with %d legal moves", text, len(legal))
	case !slices.Contains(legal, m):
		return fmt.Errorf("BestMove answered %s, which is not legal in the position sent", m)
	case r.GetNodes() == 0:
		return fmt.Errorf("BestMove answered %s having searched no node", m)
	}
	return nil
}
