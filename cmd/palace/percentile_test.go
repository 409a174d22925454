package main

import (
	"testing"
	"time"
)

// TestPercentilesNearestRank: every load tool's percentiles are the
// nearest rank, the ceil(q*n)-th smallest value, not the one after it.
func TestPercentilesNearestRank(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	var hundred []int
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, i)
	}
	tests := []struct {
		name          string
		vals          []int
		p50, p99, max float64
	}{
		{name: "1..100", vals: hundred, p50: 50, p99: 99, max: 100},
		{name: "two values", vals: []int{100, 1}, p50: 1, p99: 100, max: 100},
		{name: "one value", vals: []int{7}, p50: 7, p99: 7, max: 7},
		{name: "none", vals: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// games and ai
			if p50, p99 := percentiles(ms(tt.vals...)); p50 != tt.p50 || p99 != tt.p99 {
				t.Errorf("percentiles: p50 %v p99 %v, want %v %v", p50, p99, tt.p50, tt.p99)
			}
			// clocks
			var fs []float64
			for _, v := range tt.vals {
				fs = append(fs, float64(v))
			}
			if p50, p99, mx := quantilesMs(fs); p50 != tt.p50 || p99 != tt.p99 || mx != tt.max {
				t.Errorf("quantilesMs: p50 %v p99 %v max %v, want %v %v %v", p50, p99, mx, tt.p50, tt.p99, tt.max)
			}
		})
	}
}

// TestQuantileIndex: the shared helper the three load tools use
// (matchmaking calls it directly).
func TestQuantileIndex(t *testing.T) {
	tests := []struct {
		q    float64
		n    int
		want int
	}{
		{0.50, 100, 49}, {0.90, 100, 89}, {0.99, 100, 98}, {1, 100, 99},
		{0.50, 2, 0}, {0.99, 2, 1}, {0.50, 1, 0}, {1, 1, 0}, {0.99, 1000, 989}, {0.5, 3, 1},
	}
	for _, tt := range tests {
		if got := quantileIndex(tt.q, tt.n); got != tt.want {
			t.Errorf("quantileIndex(%v, %d) = %d, want %d", tt.q, tt.n, got, tt.want)
		}
	}
	if got := quantile([]time.Duration(nil), 0.5); got != 0 {
		t.Errorf("quantile of nothing = %v, want 0", got)
	}
	if got := quantile([]int{1, 2, 3, 4}, 0.5); got != 2 {
		t.Errorf("median of 1..4 = %d, want 2", got)
	}
}
