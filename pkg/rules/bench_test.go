package rules

import (
	"testing"
	"time"
)

// BenchmarkPerft reports nodes/s for perft 4 from each start position, the
// project's speed target (the last ply is counted in bulk, as in Perft).
func BenchmarkPerft(b *testing.B) {
	for _, bc := range []struct {
		name    string
		variant Variant
		depth   int
	}{
		{"janggi", Janggi, 4},
		{"xiangqi", Xiangqi, 4},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := mustFEN(b, bc.variant, StartFEN(bc.variant))
			var nodes uint64
			start := time.Now()
			for b.Loop() {
				nodes += Perft(p, bc.depth)
			}
			b.ReportMetric(float64(nodes)/time.Since(start).Seconds(), "nodes/s")
		})
	}
}

func BenchmarkLegalMoves(b *testing.B) {
	for _, v := range []Variant{Janggi, Xiangqi} {
		b.Run(v.String(), func(b *testing.B) {
			p := mustFEN(b, v, StartFEN(v))
			buf := make([]Move, 0, 256)
			for b.Loop() {
				buf = p.LegalMoves(buf[:0])
			}
		})
	}
}
