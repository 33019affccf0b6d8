package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// permutations calls f with every order of 0..n-1.
func permutations(n int, f func([]float64)) {
	p := make([]float64, n)
	for i := range p {
		p[i] = float64(i)
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			f(p)
			return
		}
		for i := k; i < n; i++ {
			p[k], p[i] = p[i], p[k]
			rec(k + 1)
			p[k], p[i] = p[i], p[k]
		}
	}
	rec(0)
}

// The exact distribution of S is the one every order of n distinct figures
// gives, each as likely.
func TestPBelowExact(t *testing.T) {
	for n := 1; n <= 7; n++ {
		count := map[int]int{}
		total := 0
		permutations(n, func(xs []float64) {
			count[kendallS(xs)]++
			total++
		})
		pairs := n * (n - 1) / 2
		for s := -pairs - 1; s <= pairs+1; s++ {
			below := 0
			for v, c := range count {
				if v <= s {
					below += c
				}
			}
			want := float64(below) / float64(total)
			if got := pBelow(n, s); math.Abs(got-want) > 1e-12 {
				t.Errorf("pBelow(%d, %d) = %v, want %v", n, s, got, want)
			}
		}
	}
	// n figures have 0 to n(n-1)/2 inversions.
	for n := 1; n <= 7; n++ {
		dist, sum := inversions(n), 0.0
		for _, q := range dist {
			sum += q
		}
		if len(dist) != n*(n-1)/2+1 || math.Abs(sum-1) > 1e-12 {
			t.Errorf("inversions(%d) = %v: want %d chances summing to 1", n, dist, n*(n-1)/2+1)
		}
	}
	// By hand: every pair falling, the least S, has a chance of 1/n!.
	for n, want := range map[int]float64{3: 1.0 / 6, 4: 1.0 / 24, 5: 1.0 / 120} {
		if got := pBelow(n, -n*(n-1)/2); math.Abs(got-want) > 1e-15 {
			t.Errorf("pBelow(%d, all falling) = %v, want %v", n, got, want)
		}
	}
}

// Up to exactMax figures the exact distribution, above it the normal
// approximation, which by then is within 0.0013 of it.
func TestPBelowNormal(t *testing.T) {
	dist := inversions(exactMax)
	exact := func(n, s int) float64 {
		p := 0.0
		for inv, q := range dist {
			if n*(n-1)/2-2*inv <= s {
				p += q
			}
		}
		return p
	}
	normal := func(n, s int) float64 {
		sd := math.Sqrt(float64(n*(n-1)*(2*n+5)) / 18)
		return 0.5 * math.Erfc(-(float64(s)+1)/sd/math.Sqrt2)
	}
	for _, s := range []int{-200, -100, -60, -2, 2, 60} {
		if got, want := pBelow(exactMax, s), exact(exactMax, s); math.Abs(got-want) > 1e-12 {
			t.Errorf("pBelow(%d, %d) = %v, want the exact %v", exactMax, s, got, want)
		}
		if d := math.Abs(exact(exactMax, s) - normal(exactMax, s)); d > 0.0013 || s == -100 && d < 1e-6 {
			t.Errorf("at %d figures, S %d: the normal approximation is %v from the exact", exactMax, s, d)
		}
		if got, want := pBelow(exactMax+1, s), normal(exactMax+1, s); got != want {
			t.Errorf("pBelow(%d, %d) = %v, want the normal %v", exactMax+1, s, got, want)
		}
	}
	// By hand: 41 figures, S = -100: sd = √(41·40·87/18) = 89.03, z =
	// -99/89.03 = -1.112.
	if got := pBelow(41, -100); math.Abs(got-0.13308) > 1e-4 {
		t.Errorf("pBelow(41, -100) = %v, want 0.1331", got)
	}
}

func TestTrendOf(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	tr, ok := TrendOf([]float64{10, 8, 6, 4})
	want := Trend{N: 4, S: -6, Tau: -1, PDown: 1.0 / 24, PUp: 1, Slope: -2, Line: 12}
	if !ok || tr.N != want.N || tr.S != want.S || !near(tr.Tau, want.Tau) || !near(tr.PDown, want.PDown) || !near(tr.PUp, want.PUp) || tr.Slope != want.Slope || tr.Line != want.Line {
		t.Errorf("TrendOf(10, 8, 6, 4) = %+v, %v; want %+v", tr, ok, want)
	}
	if got := tr.At(5); got != 2 {
		t.Errorf("At(5) = %v, want 2", got)
	}
	// Slopes 1, 3 and 2 between the pairs: their median; the line through
	// the median of x_i - 2i: 1-2, 2-4, 5-6.
	tr, _ = TrendOf([]float64{1, 2, 5})
	if tr.Slope != 2 || tr.Line != -1 || tr.S != 3 || !near(tr.Tau, 1) || !near(tr.PUp, 1.0/6) || !near(tr.PDown, 1) {
		t.Errorf("TrendOf(1, 2, 5) = %+v, want slope 2, line -1, S 3", tr)
	}
	// Ties count neither way.
	tr, _ = TrendOf([]float64{5, 5, 5, 4})
	if tr.S != -3 || !near(tr.Tau, -0.5) {
		t.Errorf("TrendOf(5, 5, 5, 4) = %+v, want S -3, tau -0.5", tr)
	}
	for _, n := range []int{0, 1, TrendMax + 1} {
		if _, ok := TrendOf(make([]float64, n)); ok {
			t.Errorf("TrendOf(%d figures) ok, want none", n)
		}
	}
	if tr, ok := TrendOf(make([]float64, 2)); !ok || tr.N != 2 || tr.S != 0 {
		t.Errorf("TrendOf(two figures) = %+v, %v", tr, ok)
	}
	if testing.Short() {
		return
	}
	if tr, ok := TrendOf(make([]float64, TrendMax)); !ok || tr.N != TrendMax {
		t.Errorf("TrendOf(%d figures) = %+v, %v", TrendMax, tr, ok)
	}
}

func TestFallsRises(t *testing.T) {
	for _, tt := range []struct {
		t            Trend
		falls, rises bool
	}{
		{Trend{PDown: TrendAlpha, PUp: TrendAlpha}, false, false},
		{Trend{PDown: math.Nextafter(TrendAlpha, 0), PUp: 1}, true, false},
		{Trend{PDown: 1, PUp: math.Nextafter(TrendAlpha, 0)}, false, true},
	} {
		if tt.t.Falls() != tt.falls || tt.t.Rises() != tt.rises {
			t.Errorf("%+v: Falls %v, Rises %v; want %v, %v", tt.t, tt.t.Falls(), tt.t.Rises(), tt.falls, tt.rises)
		}
	}
}

// settledByHand is Settled by testing each run of last figures on its own.
func settledByHand(xs []float64, down bool) int {
	for i := range xs {
		tr, ok := TrendOf(xs[i:])
		if !ok {
			return i
		}
		if down && !tr.Falls() || !down && !tr.Rises() {
			return i
		}
	}
	return len(xs)
}

func TestSettled(t *testing.T) {
	// Falling by 1 for six figures, then flat but for noise: settled
	// after the fall, and the whole counts as settled in the other
	// direction.
	xs := []float64{20, 19, 18, 17, 16, 15, 14.2, 14.8, 14.1, 14.9, 14.3}
	if got, want := Settled(xs, true), settledByHand(xs, true); got != want || got == 0 {
		t.Errorf("Settled(a fall, then flat) = %d, by hand %d", got, want)
	}
	if got := Settled(xs, false); got != 0 {
		t.Errorf("Settled(a fall, up) = %d, want 0", got)
	}
	// A rise, then flat, settles where the fall did.
	up := make([]float64, len(xs))
	for i, v := range xs {
		up[i] = -v
	}
	if got, want := Settled(up, false), Settled(xs, true); got != want || got != settledByHand(up, false) {
		t.Errorf("Settled(a rise, then flat) = %d, want %d as the fall's", got, want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := rng.IntN(14) + 1
		xs := make([]float64, n)
		slope := 0.6 * (rng.Float64() - 0.5)
		for i := range xs {
			xs[i] = float64(rng.IntN(5)) + slope*float64(i)*rng.Float64()
		}
		for _, down := range []bool{true, false} {
			if got, want := Settled(xs, down), settledByHand(xs, down); got != want {
				t.Errorf("Settled(%v, down %v) = %d, by hand %d", xs, down, got, want)
			}
		}
	}
	// No three figures trend at TrendAlpha: at most len-3, and nothing of
	// nothing.
	if got := Settled([]float64{5, 4, 3, 2, 1}, true); got != 2 {
		t.Errorf("Settled(5, 4, 3, 2, 1) = %d, want 2", got)
	}
	if got := Settled(nil, true); got != 0 {
		t.Errorf("Settled(nil) = %d", got)
	}
	// TrendMax falling figures settle at the last 3; one more is not
	// tested.
	falling := make([]float64, TrendMax+1)
	for i := range falling {
		falling[i] = -float64(i)
	}
	if got := Settled(falling[:TrendMax], true); got != TrendMax-3 {
		t.Errorf("Settled(%d falling figures) = %d, want %d", TrendMax, got, TrendMax-3)
	}
	if got := Settled(falling, true); got != 0 {
		t.Errorf("Settled(%d figures) = %d, want 0", TrendMax+1, got)
	}
}
