// Package stats is the statistics the judge rests on: medians, the
// order-statistic interval of a median, the sign counts of Wald's
// sequential test by which the gate decides when to stop asking, and the
// trend test (Mann-Kendall, Theil-Sen) that checks the replies stay alike.
package stats

import (
	"math"
	"slices"
)

// Median of xs; xs is not changed. The median of nothing is 0.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// P95 is the nearest-rank 95th percentile of xs; 0 of nothing.
func P95(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(0.95*float64(len(s)))) - 1
	return s[max(k, 0)]
}

// Interval is a distribution-free confidence interval for a median, from
// order statistics: [x(k), x(n-k+1)] holds the true median with probability
// 1 - 2·P(Bin(n, ½) ≤ k-1), whatever the distribution of the figures. k is
// the largest that keeps that coverage at 95% or more; with five figures or
// fewer no k does, and the interval is [min, max] with its lower coverage.
type Interval struct {
	N        int     `json:"n"`
	Median   float64 `json:"median"`
	Lo       float64 `json:"lo"`
	Hi       float64 `json:"hi"`
	Coverage float64 `json:"coverage"` // the probability the interval holds the median
}

// Level is the coverage MedianInterval aims for.
const Level = 0.95

// MedianInterval is the order-statistics interval of xs' median at Level.
// ok is false when xs is empty.
func MedianInterval(xs []float64) (iv Interval, ok bool) {
	return MedianIntervalAt(xs, Level)
}

// MedianIntervalAt is the order-statistics interval of xs' median at level.
// ok is false when xs is empty.
func MedianIntervalAt(xs []float64, level float64) (iv Interval, ok bool) {
	n := len(xs)
	if n == 0 {
		return Interval{}, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := IntervalK(n, level)
	return Interval{N: n, Median: Median(s), Lo: s[k-1], Hi: s[n-k], Coverage: coverage(n, k)}, true
}

// IntervalK is the largest k whose interval [x(k), x(n-k+1)] of n figures
// covers the median at level, or 1 when none does.
func IntervalK(n int, level float64) int {
	// The coverage falls as k grows, to -1 at k = n+1, so the loop returns
	// by k = n-1 at the latest. A loop bounded by n, not by the coverage,
	// stops too when the coverage is wrong (a mutant of it: .ci/mutants).
	for k := range n {
		if coverage(n, k+2) < level {
			return k + 1
		}
	}
	return 1 // n is 0
}

// coverage is 1 - 2·P(Bin(n, ½) ≤ k-1).
func coverage(n, k int) float64 {
	tail := 0.0
	for i := range k {
		tail += binom(n, i)
	}
	return 1 - 2*tail*math.Pow(0.5, float64(n))
}

func binom(n, k int) float64 {
	r := 1.0
	for i := range k {
		r = r * float64(n-k+1+i) / float64(i+1)
	}
	return r
}
