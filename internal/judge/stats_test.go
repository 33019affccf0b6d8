package judge

import (
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

func rated(rates ...float64) []measure.Reply {
	var rs []measure.Reply
	for i, r := range rates {
		rs = append(rs, reply(i+1, r, 300, 128, "Paris is the capital of France."))
	}
	return rs
}

// exactRates are replies whose decode rates are exactly rates: rate+1
// tokens over one second.
func exactRates(rates ...int) []measure.Reply {
	var rs []measure.Reply
	for i, r := range rates {
		rs = append(rs, exact(i+1, r+1, 1000))
	}
	return rs
}

func TestBaseline(t *testing.T) {
	l := Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient, MaxRegression: ptr(0.10)}
	base := &Baseline{File: "last-release/result.json", Rate: 100, FirstTokenMS: 300}
	evidence := route.Evidence{Fast: &route.Match{Line: 1, Text: "on the private route dx"}}
	firsts := func(rs []measure.Reply, ms float64) []measure.Reply {
		for i := range rs {
			span := *rs[i].LastMS - *rs[i].FirstMS
			rs[i].FirstMS = ptr(ms)
			rs[i].LastMS = ptr(ms + span)
		}
		return rs
	}
	tests := []struct {
		name    string
		replies []measure.Reply
		wantOK  bool
		want    string
	}{
		{"a 12% drop fails", rated(88, 88, 88), false, "the rate fell by more than allowed: rate 88.0 tok/s against 100.0 (-12.0%), first token 300 ms against 300 (+0.0%); allowed 10%"},
		{"an 8% drop passes", rated(92, 92, 92), true, "rate 92.0 tok/s against 100.0 (-8.0%)"},
		{"a rise passes", rated(120, 120, 120), true, "(+20.0%)"},
		{"a 10% drop is allowed", exactRates(90, 90, 90), true, "(-10.0%)"},
		{"a first token 10% later is allowed", firsts(exactRates(100, 100, 100), 330), true, "first token 330 ms against 300 (+10.0%)"},
		{"a first token 12% later fails", firsts(rated(100, 100, 100), 336), false, "the first token rose by more than allowed: rate 100.0 tok/s against 100.0 (+0.0%), first token 336 ms against 300 (+12.0%)"},
		{"both", firsts(rated(50, 50, 50), 400), false, "the rate fell and the first token rose by more than allowed"},
		{"nothing to compare", []measure.Reply{{N: 1, Error: "x"}}, false, "no rate or first token to compare with the baseline last-release/result.json"},
		{"a serve's rate without a first token", []measure.Reply{{N: 1, Content: "ok", Server: &measure.ServerTimings{PredictedPerSecond: 100}}}, false, "no rate or first token to compare"},
	}
	for _, tt := range tests {
		l := l
		if strings.HasPrefix(tt.name, "a serve's rate") {
			l.RateSource = RateServer
		}
		v := Judge(Input{Route: evidence, Replies: tt.replies, Limits: l, Baseline: base})
		if len(v.Assertions) != 5 {
			t.Fatalf("%s: %d assertions, want 5", tt.name, len(v.Assertions))
		}
		a := v.Assertions[4]
		if a.Name != Regression || a.OK != tt.wantOK || !strings.Contains(a.Detail, tt.want) {
			t.Errorf("%s: baseline = %+v, want ok %v and %q", tt.name, a, tt.wantOK, tt.want)
		}
		if !a.OK && v.Pass {
			t.Errorf("%s: a failed baseline passed the run", tt.name)
		}
	}
	v := Judge(Input{NoReplies: "never ready", Baseline: base, Limits: l})
	if len(v.Assertions) != 5 || v.Assertions[4].Name != Regression || v.Assertions[4].OK {
		t.Errorf("Judge(no replies, baseline) = %+v, want five failed assertions", v.Assertions)
	}
	if v := Judge(Input{Route: evidence, Replies: rated(90, 90, 90), Limits: l}); len(v.Assertions) != 4 {
		t.Errorf("Judge() without a baseline has %d assertions, want 4", len(v.Assertions))
	}
}
