package judge

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// firsts sets the replies' first tokens to ms, each in turn, keeping their
// decode spans.
func firsts(rs []measure.Reply, ms ...float64) []measure.Reply {
	for i := range rs {
		span := *rs[i].LastMS - *rs[i].FirstMS
		rs[i].FirstMS = ptr(ms[i])
		rs[i].LastMS = ptr(ms[i] + span)
	}
	return rs
}

func TestSignsOf(t *testing.T) {
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient}
	// A rate at the floor meets it, and a first token at the limit meets
	// it, as the medians are judged.
	rs := firsts(exactRates(60, 59, 90, 100), 600, 601, 300, 300)
	s, complete := SignsOf(rs, l, 3)
	want := Signs{Rate: stats.NewCount(3, 1, 3), FirstToken: stats.NewCount(3, 1, 3)}
	if diff := cmp.Diff(want, s); diff != "" || !complete {
		t.Errorf("SignsOf(rates 60, 59, 90, 100; first tokens 600, 601, 300, 300) complete %v (-want +got):\n%s", complete, diff)
	}
	s, complete = SignsOf(append(rated(90, 90), measure.Reply{N: 3, Error: "boom"}), l, 3)
	if want := (Signs{Rate: stats.NewCount(2, 0, 3), FirstToken: stats.NewCount(2, 0, 3)}); complete || s != want {
		t.Errorf("SignsOf(a failed reply) = %+v, %v; want %+v, incomplete", s, complete, want)
	}
	server := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateServer}
	if s, _ := SignsOf(rated(58, 59), server, 3); s.Rate.Meet != 2 {
		t.Errorf("SignsOf(server rates 60.9, 61.95) = %+v, want both meeting the floor", s.Rate)
	}
}

func TestRuleStop(t *testing.T) {
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient}
	rule := Rule{Lead: 3, Min: 1, Max: 15}
	slowFirst := firsts(rated(90, 90, 90, 90), 700, 300, 700, 300)
	tests := []struct {
		name    string
		rule    Rule
		replies []measure.Reply
		stop    bool
		why     string
	}{
		{"none asked", rule, nil, false, "--replies 1"},
		{"three far above", rule, rated(98, 84, 82), true, ""},
		{"three far below", rule, rated(1.9, 2.1, 1.9), true, ""},
		{"two far above", rule, rated(98, 84), false, "the rate's signs, 2 meet the floor and 0 miss it, lead by less than 3"},
		{"split around the floor", rule, rated(90, 50, 90, 50, 90), false, "the rate's signs, 3 meet the floor and 2 miss it"},
		{"a lead of 3 after 5", rule, rated(90, 50, 90, 90, 90), true, ""},
		{"a lead of 3 for missing after 7", rule, rated(50, 90, 50, 90, 50, 50, 50), true, ""},
		{"the first token split", rule, slowFirst, false, "the first token's signs, 2 meet the limit and 2 miss it, lead by less than 3"},
		{"the cap", Rule{Lead: 3, Min: 1, Max: 4}, slowFirst, true, ""},
		{"below the cap", Rule{Lead: 3, Min: 1, Max: 5}, slowFirst, false, "first token"},
		{"decided but short of --replies", Rule{Lead: 3, Min: 5, Max: 15}, rated(90, 90, 90, 90), false, "--replies 5"},
		{"decided at --replies", Rule{Lead: 3, Min: 4, Max: 15}, rated(90, 90, 90, 90), true, ""},
		{"a failed reply settles it", rule, append(rated(90), measure.Reply{N: 2, Error: "boom"}), true, ""},
		{"a failed reply before --replies does not", Rule{Lead: 3, Min: 3, Max: 15}, append(rated(90), measure.Reply{N: 2, Error: "boom"}), false, "--replies 3"},
		{"a lead of 4", Rule{Lead: 4, Min: 1, Max: 15}, rated(90, 90, 90), false, "lead by less than 4"},
	}
	for _, tt := range tests {
		stop, why := tt.rule.Stop(tt.replies, l)
		if stop != tt.stop || !strings.Contains(why, tt.why) || (why == "") != (tt.why == "") {
			t.Errorf("%s: %+v.Stop() = %v, %q; want %v, %q", tt.name, tt.rule, stop, why, tt.stop, tt.why)
		}
	}
}

func TestStops(t *testing.T) {
	rule := Rule{Lead: 3, Min: 2, Max: 9}
	legacy := Legacy{Min: 5, Max: 15}
	tests := []struct {
		s          Stopper
		meet, miss int
		want       bool
	}{
		{rule, 0, 0, false},
		{rule, 1, 0, false}, // short of Min, and of the lead
		{rule, 2, 0, false},
		{rule, 3, 0, true},
		{rule, 0, 3, true},
		{rule, 4, 2, false},
		{rule, 5, 4, true}, // the cap
		{Rule{Lead: 1, Min: 2, Max: 9}, 1, 0, false},
		{Rule{Lead: 1, Min: 2, Max: 9}, 2, 0, true}, // decided at Min
		{Rule{Lead: 1, Min: 2, Max: 9}, 2, 1, true},
		{legacy, 4, 0, false}, // short of Min
		{legacy, 5, 0, true},
		{legacy, 0, 5, true},
		{legacy, 4, 1, false}, // [min, max] holds the floor
		{legacy, 5, 1, false},
		{legacy, 8, 1, true}, // nine: k = 2, one miss is fewer
		{legacy, 7, 2, false},
		{legacy, 1, 8, true},
		{legacy, 8, 7, true}, // the cap
	}
	for _, tt := range tests {
		if got := tt.s.Stops(tt.meet, tt.miss); got != tt.want {
			t.Errorf("%+v.Stops(%d, %d) = %v, want %v", tt.s, tt.meet, tt.miss, got, tt.want)
		}
	}
}

// bruteForce is Operating by enumerating every sequence of max signs.
func bruteForce(s Stopper, max int, p float64) (pass, tie, replies float64) {
	for seq := 0; seq < 1<<max; seq++ {
		meet, miss, q := 0, 0, 1.0
		for i := 0; ; i++ {
			if i == max || s.Stops(meet, miss) {
				break
			}
			if seq>>i&1 == 1 {
				meet, q = meet+1, q*p
			} else {
				miss, q = miss+1, q*(1-p)
			}
		}
		// The signs past the stop are any: count each stopped prefix once.
		q /= math.Pow(2, float64(max-meet-miss))
		replies += q * float64(meet+miss)
		if meet > miss {
			pass += q
		}
		if meet == miss {
			tie += q
		}
	}
	return pass, tie, replies
}

// stopAtTies is a rule that stops whenever the count is even, so ties
// end runs at several lengths.
type stopAtTies struct{}

func (stopAtTies) Stops(meet, miss int) bool { return meet+miss > 0 && meet == miss }

// The dynamic programming is exact: it agrees with enumerating every
// sequence of signs, for both rules, at every p.
func TestOperatingExact(t *testing.T) {
	rules := []struct {
		s   Stopper
		max int
	}{
		{Rule{Lead: 3, Min: 1, Max: 11}, 11},
		{Rule{Lead: 2, Min: 3, Max: 10}, 10},
		{Rule{Lead: 4, Min: 1, Max: 12}, 12},
		{Legacy{Min: 5, Max: 12}, 12},
		{Legacy{Min: 3, Max: 9}, 9},
		{stopAtTies{}, 8},
	}
	for _, r := range rules {
		for _, p := range []float64{0.05, 0.25, 0.4, 0.5, 0.7, 0.95} {
			pass, tie, n := Operating(r.s, r.max, p)
			bp, bt, bn := bruteForce(r.s, r.max, p)
			if math.Abs(pass-bp) > 1e-12 || math.Abs(tie-bt) > 1e-12 || math.Abs(n-bn) > 1e-12 {
				t.Errorf("Operating(%+v, %d, %g) = %v, %v, %v; enumerated %v, %v, %v", r.s, r.max, p, pass, tie, n, bp, bt, bn)
			}
			if n < 1 || n > float64(r.max) || pass+tie > 1+1e-12 {
				t.Errorf("Operating(%+v, %d, %g) = %v, %v, %v: out of range", r.s, r.max, p, pass, tie, n)
			}
		}
	}
}

// Hand-computed cases: a cap of one reply passes with chance p; a lead of
// 3 with no cap in reach stops at 3 with chance p³ + (1-p)³.
func TestOperatingByHand(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	if pass, tie, n := Operating(Rule{Lead: 3, Min: 1, Max: 1}, 1, 0.3); !near(pass, 0.3) || tie != 0 || n != 1 {
		t.Errorf("Operating(one reply, p 0.3) = %v, %v, %v; want 0.3, 0, 1", pass, tie, n)
	}
	// Max 2, lead 3: always two replies; pass on two meets, tie on one.
	if pass, tie, n := Operating(Rule{Lead: 3, Min: 1, Max: 2}, 2, 0.5); !near(pass, 0.25) || !near(tie, 0.5) || !near(n, 2) {
		t.Errorf("Operating(two replies, p 0.5) = %v, %v, %v; want 0.25, 0.5, 2", pass, tie, n)
	}
	// Max 3, lead 3: three replies; pass on 2 or 3 meets.
	p := 0.2
	if pass, _, n := Operating(Rule{Lead: 3, Min: 1, Max: 3}, 3, p); !near(pass, 3*p*p*(1-p)+p*p*p) || !near(n, 3) {
		t.Errorf("Operating(three replies, p 0.2) = %v, %v", pass, n)
	}
	// Max 5, lead 3: stop at 3 with chance p³ + (1-p)³, else at 5.
	stop3 := p*p*p + (1-p)*(1-p)*(1-p)
	if _, _, n := Operating(Rule{Lead: 3, Min: 1, Max: 5}, 5, p); !near(n, 3*stop3+5*(1-stop3)) {
		t.Errorf("Operating(lead 3, cap 5, p 0.2) replies = %v, want %v", n, 3*stop3+5*(1-stop3))
	}
}

// The rate's and first token's details end with their sign counts: decided
// with the lead and the likelihood ratio against 1/alpha, or "close to" the
// limit with the median deciding; a run made before the rule (no lead) has
// none.
func TestSignsInDetails(t *testing.T) {
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, Lead: 3}
	tests := []struct {
		name     string
		replies  []measure.Reply
		rate, ft string
	}{
		{"both decided", rated(90, 90, 90),
			"; signs: 3 meet the floor, 0 miss it: decided, a lead of 3 for meeting it, --lead 3 (likelihood ratio 3^3 = 27 against 1/alpha = 20)",
			"; signs: 3 meet the limit, 0 miss it: decided, a lead of 3 for meeting it, --lead 3 (likelihood ratio 3^3 = 27 against 1/alpha = 20)"},
		{"missing by four", firsts(rated(50, 50, 50, 50), 700, 700, 700, 700),
			"; signs: 0 meet the floor, 4 miss it: decided, a lead of 4 for missing it, --lead 3 (likelihood ratio 3^4 = 81 against 1/alpha = 20)",
			"; signs: 0 meet the limit, 4 miss it: decided, a lead of 4 for missing it, --lead 3 (likelihood ratio 3^4 = 81 against 1/alpha = 20)"},
		{"close", firsts(rated(90, 50, 90, 50, 90), 700, 300, 700, 300, 300),
			"; close to the floor: 3 meet it, 2 miss it, a lead of 1, short of --lead 3 (likelihood ratio 3^1 = 3 against 1/alpha = 20): the median decides",
			"; close to the limit: 3 meet it, 2 miss it, a lead of 1, short of --lead 3 (likelihood ratio 3^1 = 3 against 1/alpha = 20): the median decides"},
		{"close, missing", firsts(rated(50, 90, 50), 700, 300, 700),
			"; close to the floor: 1 meet it, 2 miss it, a lead of 1, short of --lead 3",
			"; close to the limit: 1 meet it, 2 miss it, a lead of 1, short of --lead 3"},
	}
	for _, tt := range tests {
		if got := judgeRate(tt.replies, l).Detail; !strings.HasSuffix(got, tt.rate) && !strings.Contains(got, tt.rate+" (") {
			t.Errorf("%s: judgeRate() = %q, want it to end %q", tt.name, got, tt.rate)
		}
		if got := judgeFirstToken(tt.replies, l).Detail; !strings.HasSuffix(got, tt.ft) && !strings.Contains(got, tt.ft+" (") {
			t.Errorf("%s: judgeFirstToken() = %q, want it to end %q", tt.name, got, tt.ft)
		}
	}
	// Each detail keeps its median first, and a figure at the floor (or
	// the limit) meets it.
	at := firsts(exactRates(60, 60, 60), 600, 600, 600)
	if got := judgeRate(at, l).Detail; !strings.HasPrefix(got, "median 60.0 tok/s (floor 60.0") || !strings.Contains(got, "; signs: 3 meet the floor, 0 miss it: decided") {
		t.Errorf("judgeRate(three at the floor) = %q", got)
	}
	if got := judgeFirstToken(at, l).Detail; !strings.HasPrefix(got, "median 600 ms (limit 600") || !strings.Contains(got, "; signs: 3 meet the limit, 0 miss it: decided") {
		t.Errorf("judgeFirstToken(three at the limit) = %q", got)
	}
	// The floor's reason comes after the signs.
	why := l
	why.FloorWhy, why.FloorDerived = "a derived floor", true
	if got := judgeRate(rated(90, 90, 90), why).Detail; !strings.HasSuffix(got, "against 1/alpha = 20); the floor: a derived floor") {
		t.Errorf("judgeRate(a derived floor) = %q", got)
	}
	old := l
	old.Lead = 0
	for _, a := range []Assertion{judgeRate(rated(90, 90, 90), old), judgeFirstToken(rated(90, 90, 90), old)} {
		if strings.Contains(a.Detail, "signs") || strings.Contains(a.Detail, "close to") {
			t.Errorf("%s with no lead = %q, want no signs", a.Name, a.Detail)
		}
	}
}
