package engine

import (
	"context"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// BenchmarkSearch reports the search speed (nodes/s, main and quiescence
// nodes) from each start position and a middlegame, at a fixed node count.
func BenchmarkSearch(b *testing.B) {
	for _, bc := range []struct {
		name    string
		variant rules.Variant
		fen     string
	}{
		{"janggi/start", rules.Janggi, rules.StartFEN(rules.Janggi)},
		{"janggi/middlegame", rules.Janggi, "1n1kaabn1/cr2N4/5C1c1/p1pNp3p/9/9/P1PbP1P1P/3r1p3/4A4/R1BA1KB1R b - - 0 1"},
		{"xiangqi/start", rules.Xiangqi, rules.StartFEN(rules.Xiangqi)},
		{"xiangqi/middlegame", rules.Xiangqi, "1rbaka2R/5r3/6n2/2p1p1p2/4P1bP1/PpC3Bc1/1nPR2P2/2N2AN2/1c2K1p2/2BAC4 w - - 0 1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := mustFEN(b, bc.variant, bc.fen)
			e := New(Options{HashMB: 16})
			var nodes uint64
			var el time.Duration
			for b.Loop() {
				e.Clear()
				res, err := e.Search(context.Background(), p, nil, Limits{Nodes: 300_000}, nil)
				if err != nil {
					b.Fatal(err)
				}
				nodes += res.Nodes
				el += res.Time
			}
			b.ReportMetric(float64(nodes)/el.Seconds(), "nodes/s")
		})
	}
}

// BenchmarkShortJob is what an AI request at level 1 costs the engine:
// a clear of the default 32 MiB table (a request must not depend on the
// ones before it) and a short search, against the search alone.
func BenchmarkShortJob(b *testing.B) {
	p := mustFEN(b, rules.Xiangqi, rules.StartFEN(rules.Xiangqi))
	lim := Level(1).Limits(1)
	for _, clearFirst := range []bool{false, true} {
		name := "search"
		if clearFirst {
			name = "clear+search"
		}
		b.Run(name, func(b *testing.B) {
			e := New(Options{HashMB: 32})
			for b.Loop() {
				if clearFirst {
					e.Clear()
				}
				if _, err := e.Search(context.Background(), p, nil, lim, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
