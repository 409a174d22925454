package main

import "math"

// quantileIndex is the index of the q-quantile (0 < q <= 1) among n
// sorted values by the nearest-rank method: the ceil(q*n)-th smallest,
// so that the median of 1..100 is 50, its p99 99 and its p100 100.
func quantileIndex(q float64, n int) int {
	return min(n-1, max(0, int(math.Ceil(q*float64(n)))-1))
}

// quantile is the q-quantile of sorted values; the zero value when there
// are none.
func quantile[T any](sorted []T, q float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	return sorted[quantileIndex(q, len(sorted))]
}
