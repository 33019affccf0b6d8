package agree

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// tailSeeds is how many seeds TestSeparationTails draws its replies from: 0
// leaves it out (it takes minutes).
var tailSeeds = flag.Int("tails", 0, "draw TestSeparationTails's replies from this many seeds (64 for docs/measuring.md's figures)")

// The targets the default bounds are set from, as TensorRT-LLM sets its
// accuracy thresholds from α, β and a smallest effect to catch: a route that
// rounds its logits as bf16 does fails at most tailAlpha of the runs that
// compare tailRun replies with the reference; a route whose logits are off by
// the smallest perturbation to catch fails at least 1 − tailBeta of the
// runs that compare tailFewest.
const (
	tailAlpha  = 0.01
	tailRun    = 15 // --max-replies' default: the most replies a run compares
	tailBeta   = 0.2
	tailFewest = 3 // --lead: the fewest replies a run far from its limits compares
	// tailReplies is the replies drawn from each seed for the bf16 route,
	// whose tail sets the bounds; the other routes draw an eighth of it.
	tailReplies = 512
)

// sample is one reply's figures, enough to judge it under any bounds: it
// agrees when gap <= TieMargin and kl <= MaxKL.
type sample struct {
	kl  float64 // the mean KL
	gap float64 // its first divergence's Gap; 0 without one, +Inf where this run's token is not among the reference's top K
}

func (s sample) ok(b Bounds) bool { return s.gap <= b.TieMargin && s.kl <= b.MaxKL }

// draw compares n synthetic replies of route r drawn from seed with their
// references, checking that sample.ok under Default is Compare's verdict.
func draw(t *testing.T, r route, seed uint64, n int) []sample {
	rng := rand.New(rand.NewPCG(seed, 0x7a11))
	out := make([]sample, n)
	for i := range out {
		ref, run := synthetic(rng, r)
		got := Compare(&ref, &run, Default)
		s := sample{kl: *got.KL}
		if d := got.Diverged; d != nil {
			s.gap = math.Inf(1)
			if d.Gap != nil {
				s.gap = *d.Gap
			}
		}
		if s.ok(Default) != got.OK {
			t.Errorf("%s, seed %d, reply %d: %+v ok under the defaults %v, Compare says %v", r.name, seed, i, s, s.ok(Default), got.OK)
		}
		out[i] = s
	}
	return out
}

// drawSeeds is draw over seeds 1 to seeds, on every CPU: the samples of each
// seed in turn.
func drawSeeds(t *testing.T, r route, seeds, n int) [][]sample {
	out := make([][]sample, seeds)
	var wg sync.WaitGroup
	work := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range work {
				out[i] = draw(t, r, uint64(i+1), n)
			}
		})
	}
	for i := range seeds {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

// quantileAbove is the least of xs that at most a fraction p of xs exceed.
func quantileAbove(xs []float64, p float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)-1-int(math.Floor(p*float64(len(s))))]
}

// rates are how often replies, and runs of tailFewest and tailRun replies
// taken in turn from each seed, fail under b.
type rates struct {
	replies, failed     int
	fewRuns, fewFailed  int
	runs, runsFailed    int
	seedLeast, seedMost float64 // the per-reply rate of the seeds that failed least and most
}

func rateOf(seeds [][]sample, b Bounds) rates {
	var r rates
	r.seedLeast = 1
	for _, ss := range seeds {
		failed := 0
		for i, s := range ss {
			if !s.ok(b) {
				failed++
			}
			if (i+1)%tailFewest == 0 {
				r.fewRuns++
				if slices.ContainsFunc(ss[i+1-tailFewest:i+1], func(s sample) bool { return !s.ok(b) }) {
					r.fewFailed++
				}
			}
			if (i+1)%tailRun == 0 {
				r.runs++
				if slices.ContainsFunc(ss[i+1-tailRun:i+1], func(s sample) bool { return !s.ok(b) }) {
					r.runsFailed++
				}
			}
		}
		r.replies += len(ss)
		r.failed += failed
		f := float64(failed) / float64(len(ss))
		r.seedLeast, r.seedMost = min(r.seedLeast, f), max(r.seedMost, f)
	}
	return r
}

// binomUpper is the one-sided 95% (Clopper-Pearson) upper bound on a rate
// that gave k events in n.
func binomUpper(k, n int) float64 {
	if k >= n {
		return 1
	}
	lo, hi := float64(k)/float64(n), 1.0
	for range 60 {
		p := (lo + hi) / 2
		if binomCDF(k, n, p) > 0.05 {
			lo = p
		} else {
			hi = p
		}
	}
	return hi
}

// binomLower is the one-sided 95% lower bound on a rate that gave k in n.
func binomLower(k, n int) float64 { return 1 - binomUpper(n-k, n) }

// binomCDF is P(X <= k) for X ~ Binomial(n, p).
func binomCDF(k, n int, p float64) float64 {
	lgN, _ := math.Lgamma(float64(n + 1))
	sum := 0.0
	for i := 0; i <= k; i++ {
		lgI, _ := math.Lgamma(float64(i + 1))
		lgR, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lgN - lgI - lgR + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return sum
}

func TestTailHelpers(t *testing.T) {
	// 0 in n: the bound solves (1-p)^n = 0.05, about 3/n.
	if got, want := binomUpper(0, 1000), 1-math.Pow(0.05, 1.0/1000); math.Abs(got-want) > 1e-9 {
		t.Errorf("binomUpper(0, 1000) = %g, want %g", got, want)
	}
	// n in n: the lower bound solves p^n = 0.05.
	if got, want := binomLower(20, 20), math.Pow(0.05, 1.0/20); math.Abs(got-want) > 1e-9 {
		t.Errorf("binomLower(20, 20) = %g, want %g", got, want)
	}
	if got := binomCDF(3, 10, 0.3); math.Abs(got-0.6496107184) > 1e-9 {
		t.Errorf("binomCDF(3, 10, 0.3) = %.10f, want 0.6496107184", got)
	}
	for _, c := range []struct{ x, want float64 }{{0.3004, 0.31}, {0.0075, 0.0075}, {0.00741, 0.0075}, {0.31, 0.31}, {12.01, 13}} {
		if got := ceil2(c.x); got != c.want {
			t.Errorf("ceil2(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	if got := quantileAbove([]float64{5, 1, 4, 2, 3}, 0.2); got != 4 {
		t.Errorf("quantileAbove(1..5, 0.2) = %g, want 4 (one of five above it)", got)
	}
	if got := quantileAbove([]float64{5, 1, 4, 2, 3}, 0.19); got != 5 {
		t.Errorf("quantileAbove(1..5, 0.19) = %g, want 5 (none above it)", got)
	}
}

// ceil2 is x rounded up to two significant digits.
func ceil2(x float64) float64 {
	if x <= 0 || math.IsInf(x, 0) {
		return x
	}
	inv := math.Pow(10, 1-math.Floor(math.Log10(x)))
	return math.Ceil(x*inv-1e-9) / inv
}

// TestSeparationTails sets the bounds from the targets and measures their
// tail rates over many seeds, with the synthetic model of TestSeparation:
//
//	go test -run TestSeparationTails -v ./internal/agree -args -tails 64
//
// A bf16 route's replies fail their run's agreement only in the tail: q is
// the per-reply rate that fails tailAlpha of the runs of tailRun replies,
// (1 − q)^tailRun = 1 − tailAlpha; the replies that diverge to a token the
// reference does not list (r0 of them) fail under any bounds, and each bound
// is put at bf16's (1 − (q − r0)/2) quantile over every seed's replies. The defaults must be at least those (or
// the runs of bf16 routes fail more often than tailAlpha), and a route
// perturbed by the smallest perturbation to catch must still fail at least
// 1 − tailBeta of the runs of tailFewest replies.
func TestSeparationTails(t *testing.T) {
	seeds := *tailSeeds
	if seeds <= 0 {
		t.Skip("measures for minutes: go test -run TestSeparationTails -v ./internal/agree -args -tails 64")
	}
	q := 1 - math.Pow(1-tailAlpha, 1.0/tailRun)
	bf16 := drawSeeds(t, routes[2], seeds, tailReplies)
	var kls, gaps []float64
	outside := 0
	for _, ss := range bf16 {
		for _, s := range ss {
			kls, gaps = append(kls, s.kl), append(gaps, s.gap)
			if math.IsInf(s.gap, 1) {
				outside++
			}
		}
	}
	// Replies that diverge to a token the reference does not list fail
	// under any margin: their rate comes off q first, and the rest is
	// split between the two bounds.
	r0 := float64(outside) / float64(len(gaps))
	t.Logf("targets: a bf16 route fails at most %.0f%% of runs of %d replies (each reply %.2g); a perturbed route fails at least %.0f%% of runs of %d",
		100*tailAlpha, tailRun, q, 100*(1-tailBeta), tailFewest)
	t.Logf("bf16's replies, %d seeds of %d: %d (%.2g) diverge to a token not among the reference's top %d, which fails them under any margin (%.2g of runs of %d)",
		seeds, tailReplies, outside, r0, sepK, 1-math.Pow(1-r0, tailRun), tailRun)
	if r0 >= q {
		t.Fatalf("bf16's replies diverge outside the reference's top %d more often (%.2g) than the targets allow all failures (%.2g): compare on more alternatives", sepK, r0, q)
	}
	each := (q - r0) / 2
	derived := Bounds{TieMargin: ceil2(quantileAbove(gaps, r0+each)), MaxKL: ceil2(quantileAbove(kls, each))}
	t.Logf("the bounds at bf16's (1 - %.2g) quantiles, two digits up: tie margin %g nats, mean KL %g (the largest finite gap %.3g, the largest KL %.3g)",
		each, derived.TieMargin, derived.MaxKL, slices.Max(slices.DeleteFunc(slices.Clone(gaps), func(g float64) bool { return math.IsInf(g, 1) })), slices.Max(kls))
	overGap, overKL := 0, 0
	for i := range gaps {
		if !math.IsInf(gaps[i], 1) && gaps[i] > Default.TieMargin {
			overGap++
		}
		if kls[i] > Default.MaxKL {
			overKL++
		}
	}
	t.Logf("bf16's replies past the defaults: %d of %d with a gap above %g nats (and %d outside the top %d), %d with a mean KL above %g",
		overGap, len(gaps), Default.TieMargin, outside, sepK, overKL, Default.MaxKL)
	if derived.TieMargin > DefaultTieMargin || derived.MaxKL > DefaultMaxKL {
		t.Errorf("the targets want bounds of %+v, wider than the defaults %+v", derived, Default)
	}

	t.Logf("%-32s %8s %22s %17s %22s %22s", "route, under the defaults", "replies", "replies fail (95%)", "seeds least-most%",
		fmt.Sprintf("runs of %d fail", tailFewest), fmt.Sprintf("runs of %d fail", tailRun))
	caught := ""
	for _, r := range tailRoutes {
		samples := bf16
		if r.name != routes[2].name {
			samples = drawSeeds(t, r, seeds, tailReplies/8)
		}
		rt := rateOf(samples, Default)
		gapMost, klMost := 0.0, 0.0
		for _, ss := range samples {
			for _, s := range ss {
				if !math.IsInf(s.gap, 1) {
					gapMost = max(gapMost, s.gap)
				}
				klMost = max(klMost, s.kl)
			}
		}
		// Each rate with its one-sided 95% bound: the upper for a route
		// that should pass, the lower for one that should fail.
		bound := func(k, n int) string {
			if r.want == "none" {
				return fmt.Sprintf("%.3g%% (≥ %.3g%%)", 100*float64(k)/float64(n), 100*binomLower(k, n))
			}
			return fmt.Sprintf("%.3g%% (≤ %.2g%%)", 100*float64(k)/float64(n), 100*binomUpper(k, n))
		}
		t.Logf("%-32s %8d %22s %8.2f-%-8.2f %22s %22s", r.name, rt.replies,
			bound(rt.failed, rt.replies), 100*rt.seedLeast, 100*rt.seedMost,
			bound(rt.fewFailed, rt.fewRuns), bound(rt.runsFailed, rt.runs))
		t.Logf("%-32s   its largest gap %.3g nats (%d outside the top %d), its largest mean KL %.3g", "", gapMost, countInf(samples), sepK, klMost)
		switch r.want {
		case "all":
			if p := 1 - math.Pow(1-float64(rt.failed)/float64(rt.replies), tailRun); p > tailAlpha {
				t.Errorf("%s: fails %.2g of the runs of %d replies, more than %g", r.name, p, tailRun, tailAlpha)
			}
		case "none":
			low := binomLower(rt.fewFailed, rt.fewRuns)
			if low >= 1-tailBeta && caught == "" {
				caught = r.name
			}
			if r.name == tailCatch && low < 1-tailBeta {
				t.Errorf("%s: fails %d of %d runs of %d (95%% bound %.3g), want at least %g", r.name, rt.fewFailed, rt.fewRuns, tailFewest, low, 1-tailBeta)
			}
		}
	}
	t.Logf("the smallest perturbation caught (at least %.0f%% of runs of %d, 95%% bound): %s", 100*(1-tailBeta), tailFewest, caught)
}

// tailCatch is the smallest perturbation the targets catch.
const tailCatch = "perturbed (logits + 0.2 nats)"

// countInf is how many samples diverge outside the reference's top K.
func countInf(seeds [][]sample) int {
	n := 0
	for _, ss := range seeds {
		for _, s := range ss {
			if math.IsInf(s.gap, 1) {
				n++
			}
		}
	}
	return n
}

// tailRoutes are the routes of TestSeparationTails: "all" to pass (the
// targets' false FAIL), "none" to catch, smallest first.
var tailRoutes = []route{
	{"f16 rounding (1e-3 relative)", routes[1].change, "all"},
	{"bf16 rounding (4e-3 relative)", routes[2].change, "all"},
	{"perturbed (logits + 0.1 nats)", func(z float64, rng *rand.Rand) float64 { return z + 0.1*rng.NormFloat64() }, "none"},
	{"perturbed (logits + 0.2 nats)", func(z float64, rng *rand.Rand) float64 { return z + 0.2*rng.NormFloat64() }, "none"},
	{"perturbed (logits + 0.3 nats)", func(z float64, rng *rand.Rand) float64 { return z + 0.3*rng.NormFloat64() }, "none"},
	{"perturbed (logits + 0.5 nats)", routes[3].change, "none"},
}
