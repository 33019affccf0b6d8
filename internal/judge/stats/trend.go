package stats

import (
	"math"
	"sync"
)

// The sign counts take the replies to be alike in all but their prompt: a
// device that slows as it heats breaks that, and a run that stops at the
// lead judges its first replies only. The trend test checks it: Mann and
// Kendall's S, the pairs of figures that rise in reply order less those
// that fall, against its exact distribution under no trend (every order of
// the figures as likely: S is n(n-1)/2 less twice the inversions of a
// random permutation, counted by Mahonian numbers). It is rank-based and
// distribution-free, as the signs are. A tie counts neither way, which
// leaves S nearer 0 and the test on the safe side. The size is Theil and
// Sen's slope, the median of the pairwise slopes, robust as the median is.
//
// Positive correlation between successive replies makes runs of like
// figures that look like a trend: the test then says "trend" more often
// than TrendAlpha, which costs replies (the gate asks on), not verdicts.

// TrendAlpha is the one-sided level at which a trend toward missing a
// limit counts: the gate asks on while one is found. It is twice Alpha: a
// trend wrongly found costs replies, and one missed passes a serve that is
// slowing down.
const TrendAlpha = 0.1

// TrendMax is the most figures the trend is tested on: its pairs grow as
// the square of the figures (a run holds at most 65536 replies).
const TrendMax = 1000

// exactMax is the most figures whose S is held against its exact
// distribution; above, the normal approximation with a continuity
// correction, within 0.0017 of it from 30 figures on (0.0013 at 40).
const exactMax = 40

// Trend is the trend of figures in the order they were measured.
type Trend struct {
	N int `json:"n"`
	// S is the pairs that rise less the pairs that fall; Tau is S over
	// all the pairs, n(n-1)/2, from -1 (every pair falls) to 1.
	S   int     `json:"s"`
	Tau float64 `json:"tau"`
	// PDown is the chance of an S this low or lower with no trend: the
	// one-sided p-value of a fall; PUp of a rise.
	PDown float64 `json:"p_down"`
	PUp   float64 `json:"p_up"`
	// Slope is Theil and Sen's: the median of (x_j - x_i)/(j - i) over the
	// pairs, a figure a reply; Line is the median of x_i - Slope·i, so
	// that Line + Slope·i is the fitted figure at the i-th (from 1).
	Slope float64 `json:"slope"`
	Line  float64 `json:"line"`
}

// At is the fitted figure at the i-th (from 1).
func (t Trend) At(i int) float64 {
	return t.Line + t.Slope*float64(i)
}

// Falls says whether the figures fall, at TrendAlpha; Rises whether they
// rise.
func (t Trend) Falls() bool { return t.PDown < TrendAlpha }

// Rises says whether the figures rise, at TrendAlpha.
func (t Trend) Rises() bool { return t.PUp < TrendAlpha }

// TrendOf is the trend of xs in their order. ok is false with fewer than 2
// figures or more than TrendMax.
func TrendOf(xs []float64) (t Trend, ok bool) {
	n := len(xs)
	if n < 2 || n > TrendMax {
		return Trend{}, false
	}
	s := kendallS(xs)
	pairs := n * (n - 1) / 2
	slopes := make([]float64, 0, pairs)
	for i := range xs {
		for j := i + 1; j < n; j++ {
			slopes = append(slopes, (xs[j]-xs[i])/float64(j-i))
		}
	}
	slope := Median(slopes)
	rest := make([]float64, n)
	for i, v := range xs {
		rest[i] = v - slope*float64(i+1)
	}
	return Trend{N: n, S: s, Tau: float64(s) / float64(pairs), PDown: pBelow(n, s), PUp: pBelow(n, -s), Slope: slope, Line: Median(rest)}, true
}

// kendallS is the pairs of xs that rise less those that fall.
func kendallS(xs []float64) int {
	s := 0
	for i := range xs {
		s += rising(xs, i)
	}
	return s
}

// rising is the figures after xs[i] above it less those below it.
func rising(xs []float64, i int) int {
	s := 0
	for _, v := range xs[i+1:] {
		if v > xs[i] {
			s++
		} else if v < xs[i] {
			s--
		}
	}
	return s
}

// pBelow is P(S ≤ s) for n figures with no trend. S is symmetric, so
// P(S ≥ s) is pBelow(n, -s).
func pBelow(n, s int) float64 {
	pairs := n * (n - 1) / 2
	if n > exactMax {
		sd := math.Sqrt(float64(n*(n-1)*(2*n+5)) / 18)
		return 0.5 * math.Erfc(-(float64(s)+1)/sd/math.Sqrt2)
	}
	// S = pairs - 2·inversions: S ≤ s when the inversions are at least
	// (pairs - s)/2, and the table holds the chance of at most i.
	inv := (pairs - s + 1) / 2
	if inv <= 0 {
		return 1
	}
	if inv > pairs {
		return 0
	}
	return 1 - kendallTable()[n][inv-1]
}

// kendallTable holds, for each n up to exactMax, the chance that a random
// permutation of n has at most i inversions, for each i; made once, on
// first use.
var kendallTable = sync.OnceValue(func() [][]float64 {
	t := make([][]float64, exactMax+1)
	for n := 1; n <= exactMax; n++ {
		dist := inversions(n)
		cdf := make([]float64, len(dist))
		sum := 0.0
		for i, q := range dist {
			sum += q
			cdf[i] = sum
		}
		t[n] = cdf
	}
	return t
})

// inversions is the distribution of the inversions of a random
// permutation of n: the m-th element placed adds 0 to m-1 of them, each as
// likely.
func inversions(n int) []float64 {
	dist := []float64{1}
	for m := 2; m <= n; m++ {
		next := make([]float64, len(dist)+m-1)
		for k, q := range dist {
			for j := range m {
				next[k+j] += q / float64(m)
			}
		}
		dist = next
	}
	return dist
}

// Settled is where figures that trend settle: the start of the longest
// run of the last figures whose own trend toward worse (a fall when down,
// a rise otherwise) is not found at TrendAlpha. It is 0 when the whole
// shows none; never more than len(xs)-3, as no 3 figures show a trend at
// TrendAlpha (their least p-value is 1/6).
func Settled(xs []float64, down bool) int {
	n := len(xs)
	if n > TrendMax {
		return 0
	}
	// S of xs[i:] is S of xs[i+1:] and the pairs xs[i] starts.
	s := make([]int, n+1)
	for i := n - 1; i >= 0; i-- {
		s[i] = s[i+1] + rising(xs, i)
	}
	for i := range n {
		t := Trend{PDown: pBelow(n-i, s[i]), PUp: pBelow(n-i, -s[i])}
		if down && !t.Falls() || !down && !t.Rises() {
			return i
		}
	}
	return n
}
