package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

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
}

// runLoadtestAI asks the AI service for best moves on varied positions
// from several clients at once and reports jobs per second.
func runLoadtestAI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("palace loadtest ai", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:8080", "AI service host:port; several, comma-separated, spread the clients over replicas")
	level := fs.Int("level", 5, "AI level 1..10")
	clients := fs.Int("clients", 4, "concurrent requests")
	duration := fs.Duration("duration", 20*time.Second, "how long to run")
	variantName := fs.String("variant", "xiangqi", "janggi or xiangqi")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	v, err := rules.ParseVariant(*variantName)
	if err != nil || *level < 1 || *level > 10 || *clients < 1 || *clients > 1000 || *duration <= 0 || *duration > time.Hour {
		fmt.Fprintln(stderr, "palace loadtest ai: want --variant janggi|xiangqi, --level 1..10, --clients 1..1000, --duration up to 1h")
		return exitUsage
	}
	ccs, err := dialAll(*addr)
	if err != nil {
		fmt.Fprintln(stderr, "palace loadtest ai:", err)
		return exitUsage
	}
	var replicas []aiv1.AIServiceClient
	for _, cc := range ccs {
		defer cc.Close()
		replicas = append(replicas, aiv1.NewAIServiceClient(cc))
	}
	openings := engine.RandomOpenings(v, 64, 6, 1)
	rctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	var jobs, errs atomic.Int64
	var nodes atomic.Uint64
	var mu sync.Mutex
	var lat []time.Duration
	var errText []string
	var wg sync.WaitGroup
	start := time.Now()
	for i := range *clients {
		client := replicas[i%len(replicas)]
		wg.Go(func() {
			// backoff grows while calls keep failing: a dead or overloaded
			// service must not be hammered, nor stderr flooded.
			backoff := time.Duration(0)
			for n := i; rctx.Err() == nil; n += *clients {
				op := openings[n%len(openings)]
				t := time.Now()
				r, err := client.BestMove(rctx, &aiv1.BestMoveRequest{
					Kind: rulespb.Kind(v), Start: &commonv1.Position{Fen: op.StartFEN}, Moves: rulespb.Moves(op.Moves),
					Level: uint32(*level), Seed: uint64(n),
				})
				if err != nil {
					if runEnded(rctx, err) {
						return
					}
					errs.Add(1)
					mu.Lock()
					if len(errText) < aiErrorsShown {
						errText = append(errText, err.Error())
					}
					mu.Unlock()
					backoff = min(max(aiBackoffMin, backoff*3/2), aiBackoffMax)
					sleepUntil(rctx, time.Now().Add(backoff))
					continue
				}
				backoff = 0
				mu.Lock()
				lat = append(lat, time.Since(t))
				mu.Unlock()
				jobs.Add(1)
				nodes.Add(r.GetNodes())
			}
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	rep := aiReport{Level: *level, Jobs: jobs.Load(), JobsPerS: float64(jobs.Load()) / el, Nodes: nodes.Load(), NPS: float64(nodes.Load()) / el, Errors: errs.Load()}
	rep.P50ms, rep.P99ms = percentiles(lat)
	for _, e := range errText {
		fmt.Fprintln(stderr, "error:", e)
	}
	if more := rep.Errors - int64(len(errText)); more > 0 {
		fmt.Fprintf(stderr, "error: %d more not shown\n", more)
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintln(stdout, string(b))
	if rep.Errors > 0 {
		// As the other load tools: the report stands, the status tells.
		return exitFail
	}
	return exitOK
}
