package judge

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// A serve that did not change fails the baseline at most alpha of the time
// on each row. The serve is the docs' simulated one (fakellm --rate-noise
// 0.2): 90 tok/s and a 300 ms first token, each reply's drawn uniformly
// within ±20% of them; the baseline's medians are the serve's own, and 10%
// is allowed. A reply then holds the baseline with p = 0.75, the zone's
// edge: the median of 3 replies falls below the bound with chance
// 3·0.25²·0.75 + 0.25³ = 15.6%, where the gate stops when the baseline is
// not counted.
func TestBaselineNoChangeAtMostAlpha(t *testing.T) {
	t.Parallel()
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, MaxRegression: ptr(0.10), Lead: stats.DefaultLead}
	b := Baseline{File: "base", Rate: 90, FirstTokenMS: 300}
	rule := Rule{Lead: stats.DefaultLead, Min: 1, Max: 15, Baseline: &b}
	rng := rand.New(rand.NewPCG(46, 1))
	const runs = 2000
	rate, first := 0, 0
	for range runs {
		var rs []measure.Reply
		for n := 1; ; n++ {
			if stop, _ := rule.Stop(rs, l); stop {
				break
			}
			u, v := rng.Float64(), rng.Float64()
			rs = append(rs, reply(n, 90*(1+0.2*(2*u-1)), 300*(1+0.2*(2*v-1)), 128, "Paris is the capital of France."))
		}
		a := judgeBaseline(rs, l, b)
		if strings.Contains(a.Detail, "the rate fell") {
			rate++
		}
		if strings.Contains(a.Detail, "the first token rose") {
			first++
		}
	}
	for _, row := range []struct {
		name  string
		fails int
	}{{"rate", rate}, {"first token", first}} {
		if got := float64(row.fails) / runs; got > stats.Alpha {
			t.Errorf("the baseline's %s row failed %.1f%% of %d runs of a serve that did not change (±20%% a reply, 10%% allowed), want at most alpha = %.0f%%", row.name, got*100, runs, stats.Alpha*100)
		}
	}
}

// A baseline of a default run's 3 replies is noisy on its own: its median
// rate is above the serve's true median half the time, by 7% at 10% spread.
// A serve that did not change still fails the row at most alpha of the time
// on each row when the baseline is built from its replies as --baseline
// builds it (BaselineOf); against the baseline's medians it failed 8.6% of
// runs on the rate and 11.7% on the first token.
func TestBaselineThreeRepliesAtMostAlpha(t *testing.T) {
	t.Parallel()
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, MaxRegression: ptr(DefaultMaxRegression), Lead: stats.DefaultLead}
	s := baselineServe{spread: 0.10}
	rng := rand.New(rand.NewPCG(46, 3))
	const runs = 2000
	rate, first := 0, 0
	for range runs {
		var rs, fs []float64
		for range 3 {
			rs, fs = append(rs, s.draw(rng, 90)), append(fs, s.draw(rng, 300))
		}
		b := BaselineOf("base", rs, fs)
		rule := Rule{Lead: stats.DefaultLead, Min: 1, Max: 15, Baseline: &b}
		var replies []measure.Reply
		for n := 1; ; n++ {
			if stop, _ := rule.Stop(replies, l); stop {
				break
			}
			replies = append(replies, reply(n, s.draw(rng, 90), s.draw(rng, 300), 128, "Paris is the capital of France."))
		}
		a := judgeBaseline(replies, l, b)
		if strings.Contains(a.Detail, "the rate fell") {
			rate++
		}
		if strings.Contains(a.Detail, "the first token rose") {
			first++
		}
	}
	for _, row := range []struct {
		name  string
		fails int
	}{{"rate", rate}, {"first token", first}} {
		if got := float64(row.fails) / runs; got > stats.Alpha {
			t.Errorf("the baseline's %s row failed %.1f%% of %d runs of a serve that did not change against a baseline of 3 replies (10%% a reply, 10%% allowed), want at most alpha = %.0f%%", row.name, got*100, runs, stats.Alpha*100)
		}
	}
}

// baselineServe is a serve and its baseline for the table of the baseline
// row's errors: each reply's rate and first token drawn around 90 tok/s and
// 300 ms, spread by a fraction of them (the standard deviation of a normal
// draw, or with uniform the half-width of fakellm --rate-noise's draw), and
// the baseline's medians the serve's own (replies 0) or those of as many
// replies of the serve drawn the same way.
type baselineServe struct {
	spread  float64
	uniform bool
	replies int
}

// draw is one figure of the serve around mu. The conversions keep each
// product rounded on its own, so no platform fuses it with the sum (Go's
// spec allows a fused multiply-add) and the table is the same on arm64.
func (s baselineServe) draw(rng *rand.Rand, mu float64) float64 {
	if s.uniform {
		return mu * (1 + float64(s.spread*(2*rng.Float64()-1)))
	}
	return mu * (1 + float64(s.spread*rng.NormFloat64()))
}

// simulate runs the gate's rule on the serve runs times, changed by change
// (the rate by 1 − change, the first token by 1 + change), against the
// baseline at the default limits (floor 60, first token 600 ms, --lead 3,
// --replies 1, --max-replies 15, --max-regression 10): before, on the
// replies the floor's and first token's counts stopped at, against the
// baseline's medians; now, the baseline's counts too, against the ends of
// its medians' intervals (BaselineOf): how often each of the baseline's
// rows fails, and the replies asked on average. Before and now judge the
// same draws: the rule that counts the baseline's signs stops no sooner, so
// the replies before are the first of those now.
func (s baselineServe) simulate(rng *rand.Rand, runs int, change float64) (before, now baselineFigures) {
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, MaxRegression: ptr(DefaultMaxRegression), Lead: stats.DefaultLead}
	for range runs {
		b := Baseline{Rate: 90, FirstTokenMS: 300}
		medians := b // before: the baseline's medians, whatever its replies
		if s.replies > 0 {
			var rs, fs []float64
			for range s.replies {
				rs, fs = append(rs, s.draw(rng, 90)), append(fs, s.draw(rng, 300))
			}
			b = BaselineOf("", rs, fs)
			medians = Baseline{Rate: b.Rate, FirstTokenMS: b.FirstTokenMS}
		}
		old := Rule{Lead: stats.DefaultLead, Min: 1, Max: 15}
		rule := old
		rule.Baseline = &b
		var rates, firstMS []float64
		stopped := 0 // the replies the rule before stopped at
		for len(rates) < rule.Max {
			if len(rates) >= rule.Min {
				if stopped == 0 {
					if _, _, _, ok := old.undecided(rates, firstMS, l); ok {
						stopped = len(rates)
					}
				}
				if _, _, _, ok := rule.undecided(rates, firstMS, l); ok {
					break
				}
			}
			rates, firstMS = append(rates, s.draw(rng, 90*(1-change))), append(firstMS, s.draw(rng, 300*(1+change)))
		}
		if stopped == 0 {
			stopped = len(rates)
		}
		before.add(baselineHeld(rates[:stopped], firstMS[:stopped], medians, l.Regression()))
		before.Replies += float64(stopped)
		now.add(baselineHeld(rates, firstMS, b, l.Regression()))
		now.Replies += float64(len(rates))
	}
	before.of(runs)
	now.of(runs)
	return before, now
}

// baselineFigures are how often the baseline's rows failed, and the
// replies asked on average.
type baselineFigures struct{ Rate, FirstToken, Replies float64 }

func (f *baselineFigures) add(rateOK, firstTokenOK bool) {
	if !rateOK {
		f.Rate++
	}
	if !firstTokenOK {
		f.FirstToken++
	}
}

func (f *baselineFigures) of(runs int) {
	f.Rate, f.FirstToken, f.Replies = f.Rate/float64(runs), f.FirstToken/float64(runs), f.Replies/float64(runs)
}

// The docs' table of the baseline row, between these markers.
const (
	baselineTableStart = "<!-- baseline-rule-table: made by go test ./internal/judge -run TestBaselineTable -update -->\n"
	baselineTableEnd   = "<!-- /baseline-rule-table -->\n"
)

// baselineRuns is the runs simulated for each figure of the table.
const baselineRuns = 4000

// baselineTable is the table of the baseline row's errors, before (the
// replies the floor's and first token's counts stopped at) and now (the
// baseline's counts too), from a seeded simulation of the rule and the
// row's verdict, baselineRuns runs a figure: a false FAIL is a failed row
// of a serve that did not change; a catch, a failed row of one whose rate
// fell by 15% and whose first token rose by 15%.
func baselineTable() string {
	var b strings.Builder
	b.WriteString("| spread a reply | baseline's medians | false FAIL, rate | false FAIL, first token | −15% caught, rate | +15% caught, first token | replies (no change) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	rng := rand.New(rand.NewPCG(46, 1))
	for _, s := range baselineServes {
		spread := fmt.Sprintf("%.0f%%", s.spread*100)
		if s.uniform {
			spread = fmt.Sprintf("±%.0f%%, uniform (fakellm --rate-noise %g)", s.spread*100, s.spread)
		}
		base := "the serve's own"
		if s.replies > 0 {
			base = fmt.Sprintf("%d replies", s.replies)
		}
		before, now := s.simulate(rng, baselineRuns, 0)
		caughtBefore, caughtNow := s.simulate(rng, baselineRuns, 0.15)
		pc := func(before, now float64) string { return fmt.Sprintf("%.1f%% → %.1f%%", before*100, now*100) }
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.1f → %.1f |\n", spread, base, pc(before.Rate, now.Rate), pc(before.FirstToken, now.FirstToken),
			pc(caughtBefore.Rate, caughtNow.Rate), pc(caughtBefore.FirstToken, caughtNow.FirstToken), before.Replies, now.Replies)
	}
	return b.String()
}

// baselineServes are the table's rows.
var baselineServes = []baselineServe{
	{spread: 0.02}, {spread: 0.05}, {spread: 0.10}, {spread: 0.20},
	{spread: 0.20, uniform: true},
	{spread: 0.10, replies: 3}, {spread: 0.10, replies: 5}, {spread: 0.10, replies: 15},
	{spread: 0.20, uniform: true, replies: 3}, {spread: 0.20, uniform: true, replies: 15},
}

// docs/measuring.md's table of the baseline row is the one the code
// computes; -update rewrites it.
func TestBaselineTable(t *testing.T) {
	t.Parallel()
	const path = "../../docs/measuring.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, baselineTableStart), strings.Index(doc, baselineTableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q and %q", path, baselineTableStart, baselineTableEnd)
	}
	got, want := doc[i+len(baselineTableStart):j], baselineTable()
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i+len(baselineTableStart)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's table of the baseline row is not the code's; go test ./internal/judge -run TestBaselineTable -update rewrites it:\n%s\nwant:\n%s", path, got, want)
}

// A figure exactly at the change allowed holds the baseline, one past it
// does not, whichever way; at 0 the baseline's own median holds it.
func TestHolds(t *testing.T) {
	b := Baseline{Rate: 100, FirstTokenMS: 300}
	for _, tt := range []struct {
		v, reg float64
		want   bool
	}{
		{90, 0.10, true}, {89.99, 0.10, false}, {110, 0.10, true}, {100, 0, true}, {99.99, 0, false},
	} {
		if got := b.HoldsRate(tt.v, tt.reg); got != tt.want {
			t.Errorf("HoldsRate(%v, %v) = %v, want %v", tt.v, tt.reg, got, tt.want)
		}
	}
	for _, tt := range []struct {
		v, reg float64
		want   bool
	}{
		{330, 0.10, true}, {330.01, 0.10, false}, {200, 0.10, true}, {300, 0, true}, {300.01, 0, false},
	} {
		if got := b.HoldsFirstToken(tt.v, tt.reg); got != tt.want {
			t.Errorf("HoldsFirstToken(%v, %v) = %v, want %v", tt.v, tt.reg, got, tt.want)
		}
	}
}

// With a baseline the rule asks on until its two counts decide too, at the
// change the limits allow.
func TestRuleStopBaseline(t *testing.T) {
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, MaxRegression: ptr(0.10)}
	b := &Baseline{Rate: 100, FirstTokenMS: 300}
	rule := Rule{Lead: 3, Min: 1, Max: 15, Baseline: b}
	wide := l
	wide.MaxRegression = ptr(0.20)
	tests := []struct {
		name    string
		rule    Rule
		l       Limits
		replies []measure.Reply
		stop    bool
		why     string
	}{
		{"all four decided", rule, l, firsts(rated(95, 95, 95), 300, 300, 300), true, ""},
		{"all missing the baseline decide too", rule, l, firsts(rated(80, 80, 80), 400, 400, 400), true, ""},
		{"the rate split about its bound", rule, l, firsts(rated(95, 85, 95), 300, 300, 300), false, "the rate's signs against the baseline, 2 meet its bound and 1 miss it, lead by less than 3"},
		{"the first token split about its bound", rule, l, firsts(rated(95, 95, 95), 300, 400, 300), false, "the first token's signs against the baseline, 2 meet its bound and 1 miss it, lead by less than 3"},
		{"a wider change allowed", rule, wide, firsts(rated(85, 95, 85), 350, 300, 350), true, ""},
		{"no baseline", Rule{Lead: 3, Min: 1, Max: 15}, l, firsts(rated(95, 85, 95), 300, 400, 300), true, ""},
		{"the floor first", rule, l, firsts(rated(95, 50, 95), 300, 400, 300), false, "the rate's signs, 2 meet the floor and 1 miss it"},
		{"the cap", Rule{Lead: 3, Min: 1, Max: 3, Baseline: b}, l, firsts(rated(95, 85, 95), 300, 300, 300), true, ""},
		// A baseline of too few replies is not judged: its counts do not
		// keep the gate asking.
		{"too few to judge", Rule{Lead: 3, Min: 1, Max: 15, Baseline: &Baseline{Rate: 100, FirstTokenMS: 300, Replies: 2, RateLo: 99, FirstTokenHiMS: 301, Coverage: 0.5}}, l, firsts(rated(95, 85, 95), 300, 400, 300), true, ""},
		{"enough to judge", Rule{Lead: 3, Min: 1, Max: 15, Baseline: &Baseline{Rate: 100, FirstTokenMS: 300, Replies: 3, RateLo: 100, FirstTokenHiMS: 300, Coverage: 0.75}}, l, firsts(rated(95, 85, 95), 300, 300, 300), false, "the rate's signs against the baseline, 2 meet its bound and 1 miss it"},
	}
	for _, tt := range tests {
		stop, why := tt.rule.Stop(tt.replies, tt.l)
		if stop != tt.stop || !strings.Contains(why, tt.why) || (why == "") != (tt.why == "") {
			t.Errorf("%s: Stop() = %v, %q; want %v, %q", tt.name, stop, why, tt.stop, tt.why)
		}
	}
	s, complete := BaselineSignsOf(firsts(rated(95, 85, 95, 90), 300, 330, 331, 200), l, *b, 3)
	if want := (BaselineSigns{Rate: stats.NewCount(3, 1, 3), FirstToken: stats.NewCount(3, 1, 3)}); s != want || !complete {
		t.Errorf("BaselineSignsOf() = %+v, %v; want %+v, complete", s, complete, want)
	}
	if _, complete := BaselineSignsOf(append(rated(95), measure.Reply{N: 2, Error: "boom"}), l, *b, 3); complete {
		t.Errorf("BaselineSignsOf(a failed reply) complete")
	}
}

// The baseline row ends with its two counts, each against its bound, and a
// run made before the rule (no lead) has none.
func TestBaselineDetailSigns(t *testing.T) {
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, MaxRegression: ptr(0.10), Lead: 3}
	b := Baseline{File: "base", Rate: 100, FirstTokenMS: 300}
	a := judgeBaseline(firsts(exactRates(88, 88, 88), 300, 300, 300), l, b)
	want := "the rate fell by more than allowed: rate 88.0 tok/s against 100.0 (-12.0%), first token 300 ms against 300 (+0.0%); allowed 10%" +
		"; rate: signs: 0 meet 90.0 tok/s (the baseline's less 10%), 3 miss it: decided, a lead of 3 for missing it, --lead 3 (likelihood ratio 3^3 = 27 against 1/alpha = 20)" +
		"; first token: signs: 3 meet 330 ms (the baseline's plus 10%), 0 miss it: decided, a lead of 3 for meeting it, --lead 3 (likelihood ratio 3^3 = 27 against 1/alpha = 20)"
	if a.OK || a.Detail != want {
		t.Errorf("judgeBaseline(12%% slower) = %+v, want failed with\n%q", a, want)
	}
	a = judgeBaseline(firsts(exactRates(95, 85, 95), 300, 300, 300), l, b)
	if !a.OK || !strings.Contains(a.Detail, "; rate: close to 90.0 tok/s (the baseline's less 10%): 2 meet it, 1 miss it") {
		t.Errorf("judgeBaseline(split about the bound) = %+v, want passed, close to the bound", a)
	}
	old := l
	old.Lead = 0
	if a := judgeBaseline(rated(95, 95, 95), old, b); strings.Contains(a.Detail, "signs") || strings.Contains(a.Detail, "close to") {
		t.Errorf("judgeBaseline(no lead) = %q, want no signs", a.Detail)
	}
}

// A baseline keeps how many replies its medians are of and the
// conservative ends of their intervals at BaselineLevel: the range of 3 or
// 4 (75%, 87.5%), the fewer replies and the lower coverage of its rates'
// and first tokens'.
func TestBaselineOf(t *testing.T) {
	for _, tt := range []struct {
		name           string
		rates, firstMS []float64
		want           Baseline
	}{
		{"3 replies", []float64{100, 90, 95}, []float64{320, 300, 310},
			Baseline{File: "f", Rate: 95, FirstTokenMS: 310, Replies: 3, RateLo: 90, FirstTokenHiMS: 320, Coverage: 0.75}},
		{"a rate more", []float64{100, 90, 95, 97}, []float64{320, 300, 310},
			Baseline{File: "f", Rate: 96, FirstTokenMS: 310, Replies: 3, RateLo: 90, FirstTokenHiMS: 320, Coverage: 0.75}},
		{"a first token more", []float64{100, 90, 95}, []float64{320, 300, 310, 305},
			Baseline{File: "f", Rate: 95, FirstTokenMS: 307.5, Replies: 3, RateLo: 90, FirstTokenHiMS: 320, Coverage: 0.75}},
		{"4 replies", []float64{100, 90, 95, 97}, []float64{320, 300, 310, 305},
			Baseline{File: "f", Rate: 96, FirstTokenMS: 307.5, Replies: 4, RateLo: 90, FirstTokenHiMS: 320, Coverage: 0.875}},
		{"1 reply", []float64{100}, []float64{300},
			Baseline{File: "f", Rate: 100, FirstTokenMS: 300, Replies: 1, RateLo: 100, FirstTokenHiMS: 300, Coverage: 0}},
		{"no first token", []float64{100, 90, 95}, nil, Baseline{File: "f", Rate: 95}},
		{"no rate", nil, []float64{320, 300, 310}, Baseline{File: "f", FirstTokenMS: 310}},
	} {
		if got := BaselineOf("f", tt.rates, tt.firstMS); got != tt.want {
			t.Errorf("%s: BaselineOf() = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if BaselineMinReplies != 3 || BaselineLevel != 0.75 {
		t.Errorf("BaselineMinReplies, BaselineLevel = %d, %v; want 3, 0.75", BaselineMinReplies, BaselineLevel)
	}
	// The fewest replies whose range reaches the level.
	if iv, _ := stats.MedianIntervalAt([]float64{1, 2, 3}[:BaselineMinReplies], BaselineLevel); iv.Coverage < BaselineLevel {
		t.Errorf("%d replies' interval covers %v, below BaselineLevel", BaselineMinReplies, iv.Coverage)
	}
	if iv, _ := stats.MedianIntervalAt([]float64{1, 2}[:BaselineMinReplies-1], BaselineLevel); iv.Coverage >= BaselineLevel {
		t.Errorf("%d replies' interval covers %v, at BaselineLevel or more", BaselineMinReplies-1, iv.Coverage)
	}
}

// The row holds the run against the interval's ends when they bound the
// medians at BaselineLevel and lie on their conservative side, against
// the medians otherwise (a result.json is untrusted); each condition at
// its edge, both sides. A change in one end shows in the other.
func TestBaselineEnds(t *testing.T) {
	ok := Baseline{Rate: 100, FirstTokenMS: 300, Replies: 3, RateLo: 90, FirstTokenHiMS: 320, Coverage: 0.75}
	for _, tt := range []struct {
		name     string
		edit     func(*Baseline)
		rate, ft float64
		tooFew   bool
	}{
		{"bounded", func(*Baseline) {}, 90, 320, false},
		{"coverage just below the level", func(b *Baseline) { b.Coverage = 0.7499 }, 100, 300, true},
		{"coverage above it", func(b *Baseline) { b.Coverage = 0.9 }, 90, 320, false},
		{"no rate end", func(b *Baseline) { b.RateLo = 0 }, 100, 300, false},
		{"the least rate end", func(b *Baseline) { b.RateLo = math.SmallestNonzeroFloat64 }, math.SmallestNonzeroFloat64, 320, false},
		{"a negative rate end", func(b *Baseline) { b.RateLo = -1 }, 100, 300, false},
		{"the rate end at the median", func(b *Baseline) { b.RateLo = 100 }, 100, 320, false},
		{"the rate end above the median", func(b *Baseline) { b.RateLo = 100.01 }, 100, 300, false},
		{"a NaN rate end", func(b *Baseline) { b.RateLo = math.NaN() }, 100, 300, false},
		{"the first token end at the median", func(b *Baseline) { b.FirstTokenHiMS = 300 }, 90, 300, false},
		{"the first token end below the median", func(b *Baseline) { b.FirstTokenHiMS = 299.99 }, 100, 300, false},
		{"the largest first token end", func(b *Baseline) { b.FirstTokenHiMS = math.MaxFloat64 }, 90, math.MaxFloat64, false},
		{"an infinite first token end", func(b *Baseline) { b.FirstTokenHiMS = math.Inf(1) }, 100, 300, false},
		{"replies not known", func(b *Baseline) { b.Replies, b.Coverage = 0, 0 }, 100, 300, false},
		{"1 reply", func(b *Baseline) { b.Replies, b.Coverage = 1, 0 }, 100, 300, true},
	} {
		b := ok
		tt.edit(&b)
		if r, f, few := b.RateEnd(), b.FirstTokenEnd(), b.TooFew(); r != tt.rate || f != tt.ft || few != tt.tooFew {
			t.Errorf("%s: RateEnd, FirstTokenEnd, tooFew = %v, %v, %v; want %v, %v, %v", tt.name, r, f, few, tt.rate, tt.ft, tt.tooFew)
		}
	}
	// Each reply is counted against the ends, less and plus the change.
	for _, tt := range []struct {
		v    float64
		want bool
	}{{81, true}, {80.99, false}} {
		if got := ok.HoldsRate(tt.v, 0.10); got != tt.want {
			t.Errorf("HoldsRate(%v) against a low end of 90 = %v, want %v", tt.v, got, tt.want)
		}
	}
	for _, tt := range []struct {
		v    float64
		want bool
	}{{352, true}, {352.01, false}} {
		if got := ok.HoldsFirstToken(tt.v, 0.10); got != tt.want {
			t.Errorf("HoldsFirstToken(%v) against a high end of 320 = %v, want %v", tt.v, got, tt.want)
		}
	}
	// The rule counts them so: 85 tok/s holds a low end of 90 less 10%, not
	// a median of 100 less it.
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, MaxRegression: ptr(0.10)}
	rule := Rule{Lead: 3, Min: 1, Max: 15, Baseline: &ok}
	if stop, why := rule.Stop(firsts(rated(95, 85, 95), 300, 340, 300), l); !stop {
		t.Errorf("Stop(85 tok/s and 340 ms against ends of 90 and 320) = false, %q; want decided", why)
	}
}

// The row against a bounded baseline names the ends it holds the run
// against; against one of too few replies it shows the change and judges
// nothing, saying why and what to record.
func TestBaselineDetailEnds(t *testing.T) {
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, MaxRegression: ptr(0.10), Lead: 3}
	b := BaselineOf("base", []float64{97, 100, 103}, []float64{270, 277, 290})
	a := judgeBaseline(firsts(exactRates(85, 84, 86), 280, 281, 279), l, b)
	want := "the rate fell by more than allowed: rate 85.0 tok/s against 100.0 (-15.0%), first token 280 ms against 277 (+1.1%); allowed 10% below 97.0 tok/s and above 290 ms, the baseline's median rate and first token at their conservative ends (its 3 replies bound each median at 75%)" +
		"; rate: signs: 0 meet 87.3 tok/s (its low end less 10%), 3 miss it: decided, a lead of 3 for missing it, --lead 3 (likelihood ratio 3^3 = 27 against 1/alpha = 20)" +
		"; first token: signs: 3 meet 319 ms (its high end plus 10%), 0 miss it: decided, a lead of 3 for meeting it, --lead 3 (likelihood ratio 3^3 = 27 against 1/alpha = 20)"
	if a.OK || a.Info || a.Detail != want {
		t.Errorf("judgeBaseline(15%% slower, a 3-reply baseline) = %+v, want failed with\n%q", a, want)
	}
	// 88 tok/s is 12% below the median, 9.3% below the low end: it holds.
	if a := judgeBaseline(firsts(exactRates(88, 88, 88), 280, 281, 279), l, b); !a.OK || a.Info {
		t.Errorf("judgeBaseline(12%% below the median, within 10%% of the low end) = %+v, want passed", a)
	}
	few := BaselineOf("base", []float64{97, 103}, []float64{270, 290})
	a = judgeBaseline(firsts(exactRates(50, 50, 50), 280, 281, 279), l, few)
	want = "rate 50.0 tok/s against 100.0 (-50.0%), first token 280 ms against 280 (+0.0%); not judged: the baseline's 2 replies cannot bound its median at 75%, and its noise alone would fail a serve that did not change more often than alpha; record the baseline with --replies 3 or more (docs/measuring.md)"
	if !a.OK || !a.Info || a.Detail != want {
		t.Errorf("judgeBaseline(a 2-reply baseline) = %+v, want an info row\n%q", a, want)
	}
	one := BaselineOf("base", []float64{100}, []float64{280})
	if a := judgeBaseline(firsts(exactRates(50, 50, 50), 280, 281, 279), l, one); !a.Info || !strings.Contains(a.Detail, "the baseline's 1 reply cannot") {
		t.Errorf("judgeBaseline(a 1-reply baseline) = %+v, want an info row of 1 reply", a)
	}
}

// A baseline's figures come from a file anyone with the artifact can edit:
// a median that is no rate (0 or less) or no first token (below 0) holds
// every reply (a rate of 0 less 10% is met by any, and a first token of
// -5 ms is "exceeded" by none: (v+5)/-5 is negative), so the row fails
// saying so rather than pass on it. At 0 ms the first token is a figure
// (the bound is then 0, which any later first token misses).
func TestBaselineNotFigures(t *testing.T) {
	l := Limits{Floor: 40, FirstTokenMS: 6000, RateSource: RateClient, MaxRegression: ptr(0.10), Lead: 3}
	slow := firsts(rated(50, 50, 50), 5000, 5000, 5000)
	for _, tt := range []struct {
		name string
		b    Baseline
		ok   bool
		want string
	}{
		{"a negative first token", BaselineOf("b", []float64{40, 40, 40}, []float64{-5, -5, -5}), false,
			"the baseline b is no rate and first token to compare with: its median rate 40.0 tok/s and first token -5 ms; pass the result.json of a run that measured them"},
		{"a first token just below 0", Baseline{File: "b", Rate: 40, FirstTokenMS: -0.001}, false, "is no rate and first token"},
		{"a rate of 0", Baseline{File: "b", Rate: 0, FirstTokenMS: 1e6}, false, "its median rate 0.0 tok/s"},
		{"the least rate", Baseline{File: "b", Rate: math.SmallestNonzeroFloat64, FirstTokenMS: 1e6}, true, "rate 50.0 tok/s against 0.0"},
		{"a first token of 0", Baseline{File: "b", Rate: 40, FirstTokenMS: 0}, false, "the first token rose by more than allowed"},
	} {
		a := judgeBaseline(slow, l, tt.b)
		if a.OK != tt.ok || !strings.Contains(a.Detail, tt.want) {
			t.Errorf("%s: judgeBaseline() = %+v, want ok %v with %q", tt.name, a, tt.ok, tt.want)
		}
	}
}

// A baseline whose own replies spread wider than the change allowed (a
// cold reply among warm ones: 100, 100 and 61 tok/s) holds the run against
// its slowest, and a drop to 80 tok/s, 20% below its median, passes the
// row (it passes down to 54.9, 45% below): the row says so, and what to
// record, rather than pass in silence.
// At exactly the change allowed it says nothing.
func TestBaselineWideNotice(t *testing.T) {
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, MaxRegression: ptr(0.10), Lead: 3}
	run := firsts(exactRates(80, 80, 80), 300, 300, 300)
	for _, tt := range []struct {
		name           string
		rates, firstMS []float64
		want           string
	}{
		{"a cold reply", []float64{100, 100, 61}, []float64{300, 300, 300},
			"; the baseline's own replies spread wider than the change allowed: the row passes a rate 45% below its median; record the baseline with more replies (docs/measuring.md)"},
		{"a slow first token", []float64{100, 100, 100}, []float64{300, 300, 450},
			"; the baseline's own replies spread wider than the change allowed: the row passes a first token 65% above its median; record the baseline with more replies (docs/measuring.md)"},
		{"both", []float64{100, 100, 61}, []float64{300, 300, 450},
			"the row passes a rate 45% below its median, a first token 65% above its median; record"},
		{"the rate's end at the change allowed", []float64{100, 100, 90}, []float64{300, 300, 300}, ""},
		{"the first token's end at the change allowed", []float64{100, 100, 100}, []float64{300, 300, 330}, ""},
		{"the rate's end past it", []float64{100, 100, 89.99}, []float64{300, 300, 300}, "the row passes a rate 19% below its median;"},
		{"the first token's end past it", []float64{100, 100, 100}, []float64{300, 300, 330.01}, "the row passes a first token 21% above its median;"},
	} {
		a := judgeBaseline(run, l, BaselineOf("b", tt.rates, tt.firstMS))
		if got := strings.Contains(a.Detail, "spread wider than the change allowed"); got != (tt.want != "") || !strings.Contains(a.Detail, tt.want) || !strings.Contains(a.Detail, "; rate: ") {
			t.Errorf("%s: judgeBaseline() = %q, want %q", tt.name, a.Detail, tt.want)
		}
	}
}
