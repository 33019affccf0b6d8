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

// serve draws reply i's rate (from 1, the serve's requests, warm-ups
// included) as a fraction of the floor; each run gets a fresh one.
type serve struct {
	name string
	make func(rng *rand.Rand) func(i int) float64
}

// decaying is a device that throttles: 1.10 of the floor at its first
// request, 0.95 once settled, with a time constant of tau requests, each
// reply ± noise (uniform, as fakellm's --rate-noise).
func decaying(from, to, tau, noise float64) serve {
	return serve{
		name: fmt.Sprintf("decaying %.2f → %.2f of the floor, τ = %.0f, ± %.0f%%", from, to, tau, noise*100),
		make: func(rng *rand.Rand) func(int) float64 {
			return func(i int) float64 {
				return (to + (from-to)*math.Exp(-float64(i-1)/tau)) * (1 + noise*(2*rng.Float64()-1))
			}
		},
	}
}

// steady meets the floor with chance p, each reply on its own.
func steady(p float64) serve {
	return serve{
		name: fmt.Sprintf("steady, p = %.2f", p),
		make: func(rng *rand.Rand) func(int) float64 {
			return func(int) float64 { return 1 + 0.2*(rng.Float64()-(1-p)) }
		},
	}
}

// level is a steady serve at x of the floor, each reply ± noise
// (uniform).
func level(x, noise float64) serve {
	return serve{
		name: fmt.Sprintf("steady at %.2f of the floor, ± %.0f%%", x, noise*100),
		make: func(rng *rand.Rand) func(int) float64 {
			return func(int) float64 { return x * (1 + noise*(2*rng.Float64()-1)) }
		},
	}
}

// correlated meets the floor with chance p, successive replies correlated
// at rho (Gaussian, AR(1)).
func correlated(p, rho float64) serve {
	return serve{
		name: fmt.Sprintf("steady, p = %.2f, successive replies correlated at %.1f", p, rho),
		make: func(rng *rand.Rand) func(int) float64 {
			z := rng.NormFloat64()
			q := math.Sqrt2 * math.Erfinv(1-2*p) // P(Z ≥ q) = p
			return func(i int) float64 {
				if i > 1 {
					z = rho*z + math.Sqrt(1-rho*rho)*rng.NormFloat64()
				}
				return 1 + 0.05*(z-q)
			}
		},
	}
}

// flags are the run's: --replies, --warmup, --lead (0: 3); --max-replies
// 15.
type flags struct{ replies, warmup, lead int }

func (f flags) String() string {
	if f.lead > 0 {
		return fmt.Sprintf("--lead %d", f.lead)
	}
	switch {
	case f.warmup > 0 && f.replies > 1:
		return fmt.Sprintf("--warmup %d --replies %d", f.warmup, f.replies)
	case f.warmup > 0:
		return fmt.Sprintf("--warmup %d", f.warmup)
	case f.replies > 1:
		return fmt.Sprintf("--replies %d", f.replies)
	}
	return "defaults"
}

// outcome is a rule's over runs: passes, fails naming a drift, replies.
type outcome struct{ pass, drift, replies float64 }

// simulated keeps simulate's figures: the table and the tests share them.
var simulated = map[string][3]outcome{}

// simulate runs the gate's rule, before the trend test (the signs alone,
// the median of all), now (Rule.Stop and the rate row) and with the look
// ahead (lookAhead, the rate row), runs times on fresh draws of sv,
// seeded.
func simulate(sv serve, f flags, runs int) (before, now, ahead outcome) {
	key := fmt.Sprintf("%s %v %d", sv.name, f, runs)
	if o, ok := simulated[key]; ok {
		return o[0], o[1], o[2]
	}
	defer func() { simulated[key] = [3]outcome{before, now, ahead} }()
	lead := stats.DefaultLead
	if f.lead > 0 {
		lead = f.lead
	}
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, Lead: lead}
	rule := Rule{Lead: lead, Min: f.replies, Max: 15}
	rng := rand.New(rand.NewPCG(46, 2))
	for range runs {
		// The same draws for both rules: a run's replies up to the cap.
		rate := sv.make(rng)
		all := make([]measure.Reply, rule.Max)
		for i := range all {
			all[i] = reply(i+1, 60*rate(f.warmup+i+1), 300, 128, "Paris.")
		}
		n := 1
		for ; n < rule.Max; n++ {
			rates, _, _ := Figures(all[:n], l)
			c := stats.CountOf(rates, func(v float64) bool { return v >= l.Floor }, rule.Lead)
			if rule.Stops(c.Meet, c.Miss) {
				break
			}
		}
		rates, _, _ := Figures(all[:n], l)
		if stats.Median(rates) >= l.Floor {
			before.pass++
		}
		before.replies += float64(n)
		for _, o := range []struct {
			stop func([]measure.Reply, Limits) bool
			o    *outcome
		}{{func(rs []measure.Reply, l Limits) bool { s, _ := rule.Stop(rs, l); return s }, &now}, {rule.lookAhead, &ahead}} {
			if o.o == &ahead && testable(f.replies) {
				continue
			}
			n = 1
			for ; n < rule.Max; n++ {
				if o.stop(all[:n], l) {
					break
				}
			}
			a := judgeRate(all[:n], l)
			if a.OK {
				o.o.pass++
			}
			if strings.Contains(a.Detail, "did not settle") {
				o.o.drift++
			}
			o.o.replies += float64(n)
		}
	}
	r := float64(runs)
	before = outcome{before.pass / r, 0, before.replies / r}
	now = outcome{now.pass / r, now.drift / r, now.replies / r}
	ahead = outcome{ahead.pass / r, ahead.drift / r, ahead.replies / r}
	if testable(f.replies) {
		// The look ahead is the rule from the first stop on.
		ahead = now
	}
	return before, now, ahead
}

// lookAhead is a rule weighed for the defaults and not taken (the table's
// "look ahead" columns): while too few replies were asked for the trend
// test to find a trend (3 cannot: their least p-value is 1/6), a lead for
// meeting the floor does not stop the gate while the rates' Theil-Sen line
// is below the floor by Max; it asks on until the test can decide, then
// stops as Rule.Stop does.
func (r Rule) lookAhead(replies []measure.Reply, l Limits) bool {
	stop, _ := r.Stop(replies, l)
	n := len(replies)
	if !stop || n >= r.Max || testable(n) {
		return stop
	}
	rates, _, _ := Figures(replies, l)
	s, _ := SignsOf(replies, l, r.Lead)
	t, ok := stats.TrendOf(rates)
	return !(ok && t.At(r.Max) < l.Floor && s.Rate.Meet > s.Rate.Miss)
}

// testable says whether n figures can show a fall at stats.TrendAlpha:
// whether n falling ones do.
func testable(n int) bool {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(n - i)
	}
	t, ok := stats.TrendOf(xs)
	return ok && t.Falls()
}

// The look ahead asks a 4th reply of 3 that meet the floor while their
// line is below it by the cap, and stops there when 4 show no fall; 3 at
// a line clear of the floor stop, and so do 3 at the cap.
func TestLookAhead(t *testing.T) {
	if testable(3) || !testable(4) {
		t.Fatalf("testable(3), testable(4) = %v, %v; want false, true", testable(3), testable(4))
	}
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, Lead: 3}
	r := Rule{Lead: 3, Min: 1, Max: 15}
	tests := []struct {
		name  string
		rule  Rule
		rates []int
		stop  bool
	}{
		{"falling past the floor by 15", r, []int{70, 68, 66}, false}, // 72 - 2i: 42 at 15
		{"clear of the floor", r, []int{70, 70, 70}, true},
		{"at the cap", Rule{Lead: 3, Min: 1, Max: 3}, []int{70, 68, 66}, true},
		{"4, no fall found", r, []int{70, 68, 66, 67}, true},
		{"4 falling: the drift asks on", r, []int{70, 68, 66, 64}, false},
	}
	for _, tt := range tests {
		if got := tt.rule.lookAhead(exactRates(tt.rates...), l); got != tt.stop {
			t.Errorf("%s: lookAhead(%v) = %v, want %v", tt.name, tt.rates, got, tt.stop)
		}
	}
}

// driftRuns is the runs a row of the drift table is simulated over.
const driftRuns = 1000

// The serve 46.2 names: 1.10 → 0.95 of the floor, τ = 5 replies.
var throttling = decaying(1.10, 0.95, 5, 0.08)

// driftTable is docs/measuring.md's table of the rule under drift and
// correlation: each row's serve and flags, before the trend test and now.
func driftTable() string {
	var b strings.Builder
	b.WriteString("| serve | flags | before: pass | before: replies | now: pass | now: fails on the drift | now: replies | look ahead: pass | look ahead: replies |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	rows := []struct {
		sv serve
		f  flags
	}{
		{throttling, flags{1, 0, 0}},
		{throttling, flags{5, 0, 0}},
		{throttling, flags{10, 0, 0}},
		{throttling, flags{15, 0, 0}},
		{throttling, flags{1, 10, 0}},
		{throttling, flags{5, 10, 0}},
		{throttling, flags{1, 15, 0}},
		{decaying(1.30, 1.10, 5, 0.08), flags{1, 0, 0}},
		{decaying(1.30, 1.10, 5, 0.08), flags{15, 0, 0}},
		{decaying(1.50, 1.45, 5, 0.08), flags{1, 0, 0}},
		{steady(0.75), flags{1, 0, 0}},
		{steady(0.75), flags{15, 0, 0}},
		{steady(0.25), flags{1, 0, 0}},
		{correlated(0.25, 0.5), flags{1, 0, 0}},
		{correlated(0.25, 0.5), flags{1, 0, 4}},
		{correlated(0.25, 0.5), flags{1, 0, 5}},
		{correlated(0.75, 0.5), flags{1, 0, 0}},
		{correlated(0.75, 0.5), flags{15, 0, 0}},
		{level(1.3, 0.08), flags{1, 0, 0}},
		{level(1.3, 0.20), flags{1, 0, 0}},
		{level(1.5, 0.08), flags{1, 0, 0}},
		{level(1.5, 0.20), flags{1, 0, 0}},
		{level(2, 0.08), flags{1, 0, 0}},
		{level(2, 0.20), flags{1, 0, 0}},
	}
	for _, r := range rows {
		before, now, ahead := simulate(r.sv, r.f, driftRuns)
		fmt.Fprintf(&b, "| %s | %s | %.1f%% | %.1f | %.1f%% | %.1f%% | %.1f | %.1f%% | %.1f |\n",
			r.sv.name, r.f, before.pass*100, before.replies, now.pass*100, now.drift*100, now.replies, ahead.pass*100, ahead.replies)
	}
	return b.String()
}

// The decaying serve fails once the run asks past its fall: with
// --replies 15 it passes at most 1 run in 10, where it passed 4 in 10
// before; after a warm-up of three time constants, at most 1 in 20.
// With the defaults the trend test cannot help a run that stops at 3
// replies, before the fall shows (the table says how often it passes).
func TestDriftFails(t *testing.T) {
	before, _, now := simulate(throttling, flags{15, 0, 0}, driftRuns)
	if now.pass > 0.10 || before.pass < 0.40 {
		t.Errorf("%s with --replies 15 passes %.1f%% of runs, before %.1f%%; want at most 10%%, against 40%% or more", throttling.name, now.pass*100, before.pass*100)
	}
	if _, _, now := simulate(throttling, flags{1, 15, 0}, driftRuns); now.pass > 0.05 {
		t.Errorf("%s with --warmup 15 passes %.1f%% of runs, want at most 5%%", throttling.name, now.pass*100)
	}
	// A serve that settles above the floor passes: the drift is judged
	// where it settled.
	if _, _, now := simulate(decaying(1.30, 1.10, 5, 0.08), flags{15, 0, 0}, driftRuns); now.pass < 0.95 {
		t.Errorf("settling above the floor with --replies 15 passes %.1f%%, want 95%% or more", now.pass*100)
	}
}

// The table in docs/measuring.md between these markers.
const (
	driftStart = "<!-- drift-table: made by go test ./internal/judge -run TestDriftTable -update -->\n"
	driftEnd   = "<!-- /drift-table -->\n"
)

// pinned checks that the text of path between start and end is want,
// and with -update writes it there.
func pinned(t *testing.T, path, start, end, want, cmd string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q and %q", path, start, end)
	}
	got := doc[i+len(start) : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i+len(start)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's table is not the code's; %s -update rewrites it:\n%s\nwant:\n%s", path, cmd, got, want)
}

func TestDriftTable(t *testing.T) {
	pinned(t, "../../docs/measuring.md", driftStart, driftEnd, driftTable(), "go test ./internal/judge -run TestDriftTable")
}

// The rate's row names a drift that matters and judges where the serve
// settled: by the settled replies' median when their count decided, a
// fail when it did not.
func TestDriftInRows(t *testing.T) {
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, Lead: 3}
	tests := []struct {
		name  string
		rates []int
		ok    bool
		want  string
	}{
		{"settled below", []int{90, 85, 80, 75, 70, 65, 55, 56, 54, 55, 56, 54, 55, 56, 54}, false,
			"; drift: the rate falls 4.3%/reply over 15 replies (Kendall's tau -0.69, p < 0.001, alpha 0.1), its Theil-Sen line at reply 15 46.8 tok/s, below the floor; judged where it settled, replies 6-15: 1 meet the floor, 9 miss it, median 55.0 tok/s, decided at --lead 3"},
		{"settled above", []int{90, 85, 80, 75, 70, 66, 61, 62, 61, 62, 61, 62, 61, 62, 61}, true,
			"; judged where it settled, replies 6-15: 10 meet the floor, 0 miss it, median 61.5 tok/s, decided at --lead 3"},
		{"not settled", []int{90, 85, 80, 75, 70, 65, 59, 61, 59, 61, 59, 61, 59, 61, 59}, false,
			"; it did not settle in the replies asked (replies 6-15: 5 meet the floor, 5 miss it, median 60.0 tok/s, short of --lead 3): ask past the drift (--warmup, --replies; docs/measuring.md)"},
		// The line at the last reply exactly at the floor is no drift
		// (70 - 2i, at reply 5 62; 72 - 2·6 = 60 at 6).
		{"clear", []int{70, 68, 66, 64, 62}, true, ""},
	}
	for _, tt := range tests {
		a := judgeRate(exactRates(tt.rates...), l)
		if a.OK != tt.ok || tt.want == "" && strings.Contains(a.Detail, "drift") || !strings.HasPrefix(a.Detail, "median ") || !strings.HasSuffix(a.Detail, tt.want) {
			t.Errorf("%s: judgeRate() = %v, %q; want %v, ending %q", tt.name, a.OK, a.Detail, tt.ok, tt.want)
		}
	}
	// Falling to 60 at the 6th: exactly at the floor, no drift; to 58 at
	// the 7th, a drift, judged where it settled.
	if a := judgeRate(exactRates(72, 70, 68, 66, 64, 62), l); strings.Contains(a.Detail, "drift") {
		t.Errorf("judgeRate(a line at the floor at the last reply) = %q, want no drift", a.Detail)
	}
	if a := judgeRate(exactRates(72, 70, 68, 66, 64, 62, 60), Limits{Floor: 60.5, FirstTokenMS: 600, RateSource: RateClient, Lead: 3}); !strings.Contains(a.Detail, "at reply 7 60.0 tok/s, below the floor") {
		t.Errorf("judgeRate(a line below the floor at the last reply) = %q, want a drift", a.Detail)
	}
	// The first token rises toward its limit, and settles above it.
	ft := firsts(exactRates(90, 90, 90, 90, 90, 90, 90, 90, 90), 300, 400, 500, 600, 700, 650, 700, 690, 710)
	want := "; drift: the first token rises 7.7%/reply over 9 replies (Kendall's tau 0.81, p < 0.001, alpha 0.1), its Theil-Sen line at reply 9 800 ms, above the limit; judged where it settled, replies 5-9: 0 meet the limit, 5 miss it, median 700 ms, decided at --lead 3"
	if a := judgeFirstToken(ft, l); a.OK || !strings.HasPrefix(a.Detail, "median ") || !strings.HasSuffix(a.Detail, want) {
		t.Errorf("judgeFirstToken(rising) = %v, %q; want FAIL ending %q", a.OK, a.Detail, want)
	}
	// A run made before the rule (no lead) is judged as it was.
	old := l
	old.Lead = 0
	if a := judgeRate(exactRates(tests[2].rates...), old); strings.Contains(a.Detail, "drift") || !a.OK {
		t.Errorf("judgeRate(no lead) = %v, %q; want the median's verdict, no drift", a.OK, a.Detail)
	}
}

// The gate asks on while a lead for meeting a limit drifts toward it by
// --max-replies: the line exactly at the limit there does not.
func TestRuleStopDrift(t *testing.T) {
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, Lead: 3}
	falling := exactRates(70, 68, 66, 64, 62) // 72 - 2i: 60 at 6, 58 at 7
	tests := []struct {
		name    string
		rule    Rule
		replies []measure.Reply
		stop    bool
		why     string
	}{
		{"at the floor by the cap", Rule{Lead: 3, Min: 1, Max: 6}, falling, true, ""},
		{"below the floor by the cap", Rule{Lead: 3, Min: 1, Max: 7}, falling, false,
			"the rate falls 3.0%/reply over 5 replies (Kendall's tau -1.00, p = 0.008, alpha 0.1), its Theil-Sen line at reply 7 58.0 tok/s, below the floor: asking on to see where it settles"},
		// Three figures show no trend: the gate stops at the lead.
		{"three", Rule{Lead: 3, Min: 1, Max: 15}, falling[:3], true, ""},
		// A lead for missing stops whatever the drift.
		{"missing", Rule{Lead: 3, Min: 1, Max: 15}, exactRates(59, 58, 57, 56, 55), true, ""},
		// At a lead of 0 an even split decides, and is no lead for meeting.
		{"even", Rule{Lead: 0, Min: 1, Max: 15}, exactRates(70, 65, 61, 59, 58, 57), true, ""},
		{"the first token", Rule{Lead: 3, Min: 1, Max: 8}, firsts(exactRates(90, 90, 90, 90, 90), 300, 350, 400, 450, 500), false,
			"the first token rises 12.5%/reply over 5 replies (Kendall's tau 1.00, p = 0.008, alpha 0.1), its Theil-Sen line at reply 8 650 ms, above the limit: asking on"},
		{"the first token at the limit by the cap", Rule{Lead: 3, Min: 1, Max: 7}, firsts(exactRates(90, 90, 90, 90, 90), 300, 350, 400, 450, 500), true, ""},
		{"the first token even", Rule{Lead: 0, Min: 1, Max: 15}, firsts(exactRates(90, 90, 90, 90, 90, 90), 500, 550, 590, 610, 650, 700), true, ""},
		{"the first token missing", Rule{Lead: 3, Min: 1, Max: 15}, firsts(exactRates(90, 90, 90, 90, 90), 700, 750, 800, 850, 900), true, ""},
	}
	for _, tt := range tests {
		stop, why := tt.rule.Stop(tt.replies, l)
		if stop != tt.stop || !strings.HasPrefix(why, tt.why) || (why == "") != (tt.why == "") {
			t.Errorf("%s: %+v.Stop() = %v, %q; want %v, %q", tt.name, tt.rule, stop, why, tt.stop, tt.why)
		}
	}
	both := firsts(exactRates(70, 68, 66, 64, 62), 300, 350, 400, 450, 500)
	if got := Drifts(both, l, 8); !strings.HasPrefix(got, "the rate falls 3.0%/reply") || !strings.Contains(got, "below the floor; the first token rises 12.5%/reply") {
		t.Errorf("Drifts(both, at 8) = %q", got)
	}
	if got := Drifts(both, l, 6); got != "" {
		t.Errorf("Drifts(both, at 6) = %q, want none", got)
	}
}

// The size is against the median; a median of 0 gives no size.
func TestDriftText(t *testing.T) {
	d := drift{what: "first token", limit: "the limit", unit: "ms", trend: stats.Trend{N: 3, Tau: 1, PUp: 0.0005, Slope: 5}, at: 4, line: 20}
	if got, want := d.Text([]float64{0, 0, 0}), "the first token rises 0.0%/reply over 3 replies (Kendall's tau 1.00, p < 0.001, alpha 0.1), its Theil-Sen line at reply 4 20 ms, above the limit"; got != want {
		t.Errorf("Text() = %q, want %q", got, want)
	}
	d.trend.PUp = 0.001
	if got := d.Text([]float64{10, 20, 30}); !strings.Contains(got, "rises 25.0%/reply") || !strings.Contains(got, "p = 0.001,") {
		t.Errorf("Text() = %q", got)
	}
}
