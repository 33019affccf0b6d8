package measure

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// arrivals of one chunk each at the given times.
func each(ms ...float64) []Arrival {
	var as []Arrival
	for _, m := range ms {
		as = append(as, Arrival{MS: m, Chunks: 1})
	}
	return as
}

func TestEstimate(t *testing.T) {
	tests := []struct {
		name string
		r    Reply
		want Estimate
	}{
		{"128 tokens over 1270 ms, no arrivals recorded", Reply{FirstMS: ptr(250.0), LastMS: ptr(1520.0), CompletionTokens: ptr(128)},
			Estimate{Rate: 100, Method: MethodSpan}},
		{"the first token is left out", Reply{FirstMS: ptr(0.0), LastMS: ptr(1000.0), CompletionTokens: ptr(2), Arrivals: each(0, 1000)},
			Estimate{Rate: 1, Method: MethodSpan, Arrivals: 2}},
		{"a clean stream: the span, not the regression", Reply{FirstMS: ptr(100.0), LastMS: ptr(400.0), CompletionTokens: ptr(4), Arrivals: each(100, 110, 120, 400)},
			Estimate{Rate: 10, Method: MethodSpan, Arrivals: 4}},
		{"one token", Reply{FirstMS: ptr(250.0), LastMS: ptr(250.0), CompletionTokens: ptr(1)}, Estimate{Why: "1 token, too few for a rate"}},
		{"no tokens", Reply{FirstMS: ptr(250.0), LastMS: ptr(250.0), CompletionTokens: ptr(0)}, Estimate{Why: "0 tokens, too few for a rate"}},
		{"no content", Reply{CompletionTokens: ptr(10)}, Estimate{Why: "no content arrived"}},
		{"first without last", Reply{FirstMS: ptr(1.0), CompletionTokens: ptr(10)}, Estimate{Why: "no content arrived"}},
		{"last without first", Reply{LastMS: ptr(1.0), CompletionTokens: ptr(10)}, Estimate{Why: "no content arrived"}},
		{"a failed reply", Reply{FirstMS: ptr(250.0), LastMS: ptr(1520.0), CompletionTokens: ptr(128), Error: "stream ended"}, Estimate{Why: "the reply failed"}},
		{"one chunk, no arrivals recorded", Reply{FirstMS: ptr(250.0), LastMS: ptr(250.0), CompletionTokens: ptr(10)}, Estimate{Why: Burst}},
		{"one arrival of ten chunks", Reply{FirstMS: ptr(250.0), LastMS: ptr(250.1), CompletionTokens: ptr(10), Chunks: 10, Arrivals: []Arrival{{250, 10}}},
			Estimate{Arrivals: 1, Why: Burst}},
		{"arrivals at one time", Reply{FirstMS: ptr(250.0), LastMS: ptr(250.0), CompletionTokens: ptr(10), Arrivals: []Arrival{{250, 5}, {250, 5}}},
			Estimate{Arrivals: 2, Why: Burst}},
		{"clean arrivals at one time", Reply{FirstMS: ptr(250.0), LastMS: ptr(250.0), CompletionTokens: ptr(2), Arrivals: each(250, 250)},
			Estimate{Arrivals: 2, Why: Burst}},
		{"at the plausible bound", Reply{FirstMS: ptr(0.0), LastMS: ptr(1.0), CompletionTokens: ptr(21), Arrivals: []Arrival{{0, 1}, {0.5, 10}, {1, 10}}},
			Estimate{Rate: 20000, Method: MethodRegression, Arrivals: 3}},
		{"past it", Reply{FirstMS: ptr(100.0), LastMS: ptr(101.0), CompletionTokens: ptr(22), Arrivals: []Arrival{{100, 1}, {100.5, 11}, {101, 10}}},
			Estimate{Arrivals: 3, Why: "22 tokens came in 1.00 ms, faster than any serve decodes (20000 tok/s): " + Burst}},
		{"clean but too fast", Reply{FirstMS: ptr(0.0), LastMS: ptr(0.09), CompletionTokens: ptr(3), Arrivals: each(0, 0.05, 0.09)},
			Estimate{Arrivals: 3, Why: "3 tokens came in 0.09 ms, faster than any serve decodes (20000 tok/s): " + Burst}},
		{"three arrivals: the last, off the schedule, is left out", Reply{FirstMS: ptr(0.0), LastMS: ptr(60.0), CompletionTokens: ptr(8), Arrivals: []Arrival{{0, 1}, {50, 5}, {60, 2}}},
			Estimate{Rate: 100, Method: MethodRegression, Arrivals: 3}},
		{"four arrivals: three fitted", Reply{FirstMS: ptr(0.0), LastMS: ptr(300.0), CompletionTokens: ptr(9), Arrivals: []Arrival{{0, 1}, {100, 2}, {150, 5}, {300, 1}}},
			// times 0, 100, 150 (mean 250/3), tokens 1, 3, 8: 500 / (35000/3) a ms
			Estimate{Rate: 300.0 / 7, Method: MethodRegression, Arrivals: 4}},
		{"regression with tokens counted per chunk: 2 a chunk", Reply{FirstMS: ptr(10.0), LastMS: ptr(300.0), CompletionTokens: ptr(12), Chunks: 6, Arrivals: []Arrival{{10, 1}, {110, 2}, {210, 2}, {300, 1}}},
			Estimate{Rate: 40, Method: MethodRegression, Arrivals: 4}},
		{"tokens counted per chunk: 2 a chunk, flushed in pairs", Reply{FirstMS: ptr(0.0), LastMS: ptr(300.0), CompletionTokens: ptr(8), Chunks: 4, Content: "two words a chunk", Arrivals: []Arrival{{0, 1}, {100, 1}, {200, 1}, {300, 1}}},
			Estimate{Rate: 7.0 / 0.3, Method: MethodSpan, Arrivals: 4}},
	}
	for _, tt := range tests {
		tt.r.Content = words // text enough for every count here
		got := tt.r.Estimate()
		if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
			t.Errorf("%s: Estimate() (-want +got):\n%s", tt.name, diff)
		}
		if rate, why := tt.r.DecodeRate(); rate != got.Rate || why != got.Why {
			t.Errorf("%s: DecodeRate() = %v, %q, want Estimate's %v, %q", tt.name, rate, why, got.Rate, got.Why)
		}
	}
}

// generated is when each of n tokens was generated: the first at firstMS,
// then one every 1000/rate ms.
func generated(n int, rate, firstMS float64) []float64 {
	g := make([]float64, n)
	for i := range g {
		g[i] = firstMS + float64(i)*1000/rate
	}
	return g
}

// flushed is a stream through a proxy that sends what it holds every
// periodMS, at phaseMS past a multiple of it; atEnd sends the rest as soon
// as the last token came, else at the next tick.
func flushed(g []float64, periodMS, phaseMS float64, atEnd bool) []Arrival {
	var as []Arrival
	for i, t := range g {
		tick := math.Ceil((t-phaseMS)/periodMS)*periodMS + phaseMS
		if atEnd && i == len(g)-1 {
			tick = t
		}
		if n := len(as); n > 0 && as[n-1].MS == tick {
			as[n-1].Chunks++
			continue
		}
		if n := len(as); n > 0 && as[n-1].MS > tick { // the end flush came before the tick
			as[n-1].Chunks++
			continue
		}
		as = append(as, Arrival{MS: tick, Chunks: 1})
	}
	return as
}

// grouped sends every size tokens together, when the last of them came.
func grouped(g []float64, size int) []Arrival {
	var as []Arrival
	for i := 0; i < len(g); i += size {
		j := min(i+size, len(g))
		as = append(as, Arrival{MS: g[j-1], Chunks: j - i})
	}
	return as
}

func synthetic(n int, as []Arrival) Reply {
	first, last := as[0].MS, as[len(as)-1].MS
	return Reply{CompletionTokens: ptr(n), Chunks: n, MaxTokens: n, Content: strings.Repeat("x", n), FirstMS: &first, LastMS: &last, Arrivals: as}
}

// TestEstimateSynthetic checks the estimate against arrival patterns whose
// true rate is known: 97 tok/s, first token at 300 ms.
func TestEstimateOfACountNotBelieved(t *testing.T) {
	lie := "usage.completion_tokens 1000 is above max_tokens 32: not believed; counted 10 from the chunks with content instead"
	tests := []struct {
		name string
		r    Reply
		want Estimate
	}{
		{"a clean stream", Reply{MaxTokens: 32, CompletionTokens: ptr(1000), Chunks: 10, Content: words, FirstMS: ptr(0.0), LastMS: ptr(1800.0), Arrivals: each(0, 200, 400, 600, 800, 1000, 1200, 1400, 1600, 1800)},
			Estimate{Arrivals: 10, Why: lie + "; on that count the rate would be 5.0 tok/s"}},
		{"and a burst", Reply{MaxTokens: 32, CompletionTokens: ptr(1000), Chunks: 10, Content: words, FirstMS: ptr(0.0), LastMS: ptr(0.0), Arrivals: []Arrival{{0, 10}}},
			Estimate{Arrivals: 1, Why: lie + "; " + Burst}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.r.Estimate()); diff != "" {
			t.Errorf("%s: Estimate() (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestEstimateSynthetic(t *testing.T) {
	const rate = 97.0 // a token every 10.3 ms: flushes do not fall on token boundaries
	tests := []struct {
		name       string
		n          int
		arrivals   func(g []float64) []Arrival
		wantMethod string
		tolerance  float64 // of the true rate
	}{
		{"clean, 16 tokens", 16, func(g []float64) []Arrival { return each(g...) }, MethodSpan, 1e-9},
		{"clean, 256 tokens", 256, func(g []float64) []Arrival { return each(g...) }, MethodSpan, 1e-9},
		{"in pairs (Nagle waiting on an ACK)", 64, func(g []float64) []Arrival { return grouped(g, 2) }, MethodRegression, 1e-9},
		{"in fives", 256, func(g []float64) []Arrival { return grouped(g, 5) }, MethodRegression, 0.001},
		{"the first alone, the rest when done", 128, func(g []float64) []Arrival { return []Arrival{{g[0], 1}, {g[len(g)-1], len(g) - 1}} }, MethodRegression, 1e-9},
		{"a proxy flushing every 50 ms, the rest at the end, 256 tokens", 256, func(g []float64) []Arrival { return flushed(g, 50, 7, true) }, MethodRegression, 0.01},
		{"a proxy flushing every 50 ms, the rest at the next tick, 256 tokens", 256, func(g []float64) []Arrival { return flushed(g, 50, 7, false) }, MethodRegression, 0.01},
		{"a proxy flushing every 50 ms, 64 tokens", 64, func(g []float64) []Arrival { return flushed(g, 50, 21, true) }, MethodRegression, 0.03},
		// 16 tokens in flushes of 5 over 150 ms: a token's worth of quantisation
		// at either end of 12 is the limit of what the arrivals say.
		{"a proxy flushing every 50 ms, 16 tokens", 16, func(g []float64) []Arrival { return flushed(g, 50, 33, true) }, MethodRegression, 0.08},
		{"a proxy flushing every 20 ms, 256 tokens", 256, func(g []float64) []Arrival { return flushed(g, 20, 3, false) }, MethodRegression, 0.005},
	}
	for _, tt := range tests {
		g := generated(tt.n, rate, 300)
		r := synthetic(tt.n, tt.arrivals(g))
		e := r.Estimate()
		if e.Why != "" || e.Method != tt.wantMethod || math.Abs(e.Rate-rate)/rate > tt.tolerance {
			t.Errorf("%s: Estimate() = %+v, want %v tok/s within %.1f%% by %s", tt.name, e, rate, tt.tolerance*100, tt.wantMethod)
		}
		if e.Arrivals != len(r.Arrivals) {
			t.Errorf("%s: Estimate().Arrivals = %d, want %d", tt.name, e.Arrivals, len(r.Arrivals))
		}
	}
	// A stream buffered whole has no rate, whatever it holds.
	for _, n := range []int{2, 16, 256} {
		g := generated(n, 5, 300)
		r := synthetic(n, []Arrival{{g[n-1], n}})
		if e := r.Estimate(); e.Why != Burst {
			t.Errorf("one burst of %d tokens: Estimate() = %+v, want no rate: %s", n, e, Burst)
		}
	}
}

// words is text enough for any count in these tests.
var words = strings.Repeat("word ", 60)

func TestServerEstimate(t *testing.T) {
	tests := []struct {
		name string
		r    Reply
		want Estimate
	}{
		{"llama.cpp's 16 tokens: 15 steps in 150 ms", Reply{Content: words, Server: &ServerTimings{PredictedN: 16, PredictedMS: 150, PredictedPerSecond: 106.7}},
			Estimate{Rate: 100, Method: MethodServer}},
		{"2 tokens", Reply{Content: words, Server: &ServerTimings{PredictedN: 2, PredictedMS: 10}}, Estimate{Rate: 100, Method: MethodServer}},
		{"1 token: the rate as sent", Reply{Server: &ServerTimings{PredictedN: 1, PredictedMS: 10, PredictedPerSecond: 84.4}}, Estimate{Rate: 84.4, Method: MethodServerAsSent}},
		{"no predicted_ms: as sent", Reply{Server: &ServerTimings{PredictedN: 16, PredictedPerSecond: 84.4}}, Estimate{Rate: 84.4, Method: MethodServerAsSent}},
		{"a count not believed", Reply{Content: words, MaxTokens: 8, Server: &ServerTimings{PredictedN: 16, PredictedMS: 150}},
			Estimate{Why: "timings.predicted_n 16 is above max_tokens 8"}},
		{"no timings", Reply{}, Estimate{Why: "the serve sent no timings"}},
		{"a rate as sent with a count not believed", Reply{Content: words, MaxTokens: 8, Server: &ServerTimings{PredictedN: 16, PredictedPerSecond: 84.4}},
			Estimate{Why: "timings.predicted_n 16 is above max_tokens 8"}},
		{"timings without figures", Reply{Server: &ServerTimings{PredictedN: 3}}, Estimate{Why: "the serve sent no timings.predicted_n and predicted_ms"}},
		// FastFlowLM: 16 decode steps (the 16 tokens after the prefill's,
		// the end of turn's included) in 160 ms, its decoding_speed_tps 100.
		{"FastFlowLM's 16 steps in 160 ms", Reply{Content: words, Server: &ServerTimings{DecodeSteps: 16, DecodeMS: 160, PredictedPerSecond: 100}},
			Estimate{Rate: 100, Method: MethodServer}},
		{"FastFlowLM's one step", Reply{Content: words, Server: &ServerTimings{DecodeSteps: 1, DecodeMS: 20, PredictedPerSecond: 40}},
			Estimate{Rate: 50, Method: MethodServer}},
		{"FastFlowLM's steps without their time: as sent", Reply{Content: words, Server: &ServerTimings{DecodeSteps: 16, PredictedPerSecond: 84.4}},
			Estimate{Rate: 84.4, Method: MethodServerAsSent}},
		{"FastFlowLM's time without steps: as sent", Reply{Content: words, Server: &ServerTimings{DecodeMS: 160, PredictedPerSecond: 84.4}},
			Estimate{Rate: 84.4, Method: MethodServerAsSent}},
		{"FastFlowLM's count not believed", Reply{Content: words, MaxTokens: 8, Server: &ServerTimings{DecodeSteps: 9, DecodeMS: 90, PredictedPerSecond: 100}},
			Estimate{Why: "usage.completion_tokens 9 is above max_tokens 8"}},
		{"FastFlowLM's count at max_tokens", Reply{Content: words, MaxTokens: 8, Server: &ServerTimings{DecodeSteps: 8, DecodeMS: 80}},
			Estimate{Rate: 100, Method: MethodServer}},
		{"llama.cpp's figures before steps", Reply{Content: words, Server: &ServerTimings{PredictedN: 11, PredictedMS: 100, DecodeSteps: 10, DecodeMS: 50}},
			Estimate{Rate: 100, Method: MethodServer}},
	}
	for _, tt := range tests {
		got := tt.r.ServerEstimate()
		if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
			t.Errorf("%s: ServerEstimate() (-want +got):\n%s", tt.name, diff)
		}
		if rate, why := tt.r.ServerRate(); rate != got.Rate || why != got.Why {
			t.Errorf("%s: ServerRate() = %v, %q, want %v, %q", tt.name, rate, why, got.Rate, got.Why)
		}
	}
}

func TestDisagreement(t *testing.T) {
	r := Reply{Content: words, FirstMS: ptr(0.0), LastMS: ptr(150.0), CompletionTokens: ptr(16), Server: &ServerTimings{PredictedN: 16, PredictedMS: 125}}
	if d, ok := r.Disagreement(); !ok || math.Abs(d-(1-100.0/120)) > 1e-9 {
		t.Errorf("Disagreement() = %v, %v, want %v", d, ok, 1-100.0/120)
	}
	r.Server.PredictedMS = 187.5 // 80 tok/s
	if d, ok := r.Disagreement(); !ok || math.Abs(d-0.25) > 1e-9 {
		t.Errorf("Disagreement() = %v, %v, want 0.25", d, ok)
	}
	for _, r := range []Reply{{FirstMS: ptr(0.0), LastMS: ptr(150.0), CompletionTokens: ptr(16)}, {Server: &ServerTimings{PredictedN: 16, PredictedMS: 150}}} {
		if d, ok := r.Disagreement(); ok {
			t.Errorf("Disagreement() of %+v = %v, true, want none: one figure is missing", r, d)
		}
	}
}

func TestCache(t *testing.T) {
	tests := []struct {
		name   string
		r      Reply
		want   Cache
		wantOK bool
	}{
		{"llama.cpp: warm", Reply{Server: &ServerTimings{CacheN: ptr(29), PromptN: ptr(1)}}, Cache{Cached: 29, Prompt: 30, Hit: true}, true},
		{"llama.cpp: the template's opening only", Reply{Server: &ServerTimings{CacheN: ptr(4), PromptN: ptr(26)}}, Cache{Cached: 4, Prompt: 30}, true},
		{"exactly half", Reply{Server: &ServerTimings{CacheN: ptr(15), PromptN: ptr(15)}}, Cache{Cached: 15, Prompt: 30, Hit: true}, true},
		{"one short of half", Reply{Server: &ServerTimings{CacheN: ptr(14), PromptN: ptr(16)}}, Cache{Cached: 14, Prompt: 30}, true},
		{"an empty prompt", Reply{Server: &ServerTimings{CacheN: ptr(0), PromptN: ptr(0)}}, Cache{}, true},
		{"OpenAI's usage", Reply{PromptTokens: ptr(40), CachedTokens: ptr(32)}, Cache{Cached: 32, Prompt: 40, Hit: true}, true},
		{"llama.cpp's timings first", Reply{Server: &ServerTimings{CacheN: ptr(0), PromptN: ptr(40)}, PromptTokens: ptr(40), CachedTokens: ptr(40)}, Cache{Prompt: 40}, true},
		{"cache_n without prompt_n", Reply{Server: &ServerTimings{CacheN: ptr(3)}, PromptTokens: ptr(40), CachedTokens: ptr(1)}, Cache{Cached: 1, Prompt: 40}, true},
		{"prompt_n without cache_n", Reply{Server: &ServerTimings{PromptN: ptr(3)}}, Cache{}, false},
		{"prompt tokens without cached", Reply{PromptTokens: ptr(40)}, Cache{}, false},
		{"cached without prompt tokens", Reply{CachedTokens: ptr(40)}, Cache{}, false},
		{"nothing", Reply{}, Cache{}, false},
	}
	for _, tt := range tests {
		got, ok := tt.r.Cache()
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: Cache() = %+v, %v, want %+v, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

// A counter that lies within the text's bound: 10 chunks, each its own
// arrival 50 ms apart (20 tok/s), with usage.completion_tokens 32 (under the
// text's bytes + 4) read 68.9 tok/s. A serve that sends three tokens a chunk
// at that pace sends their text, and its count is believed.
func TestEstimateCounterWithinTextBound(t *testing.T) {
	ms := make([]float64, 10)
	for i := range ms {
		ms[i] = 300 + 50*float64(i)
	}
	liar := Reply{FirstMS: ptr(300.0), LastMS: ptr(750.0), MaxTokens: 64, CompletionTokens: ptr(32), Chunks: 10,
		Content: strings.Repeat(" ab", 10), Arrivals: each(ms...)}
	e := liar.Estimate()
	if e.Why == "" || !strings.HasSuffix(e.Why, "; on that count the rate would be 20.0 tok/s") || !strings.Contains(e.Why, "30 bytes of text are 1.0 a token over 28 tokens") {
		t.Errorf("a count of 32 over 10 chunks of 30 bytes: Estimate() = %+v, want no rate, the text's evidence and 20.0 tok/s on the chunks", e)
	}
	honest := liar
	honest.Content = strings.Repeat(" one two six", 10)
	if e := honest.Estimate(); e.Why != "" || math.Abs(e.Rate-31/0.45) > 1e-9 || e.Method != MethodSpan {
		t.Errorf("three tokens a chunk with their text: Estimate() = %+v, want %.1f tok/s", e, 31/0.45)
	}
}
