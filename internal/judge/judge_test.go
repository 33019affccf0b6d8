package judge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/agree"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

func ptr[T any](v T) *T { return &v }

// reply is a streamed reply of tokens tokens whose first token came at
// firstMS and whose decode ran at rate tok/s.
func reply(n int, rate, firstMS float64, tokens int, content string) measure.Reply {
	last := firstMS
	if tokens > 1 && rate > 0 {
		last = firstMS + float64(tokens-1)/rate*1000
	}
	return measure.Reply{
		N: n, Prompt: "p", Content: content,
		FirstMS: ptr(firstMS), LastMS: ptr(last), EndMS: last + 1,
		Chunks: tokens, CompletionTokens: ptr(tokens),
		Server: &measure.ServerTimings{PredictedN: tokens, PredictedPerSecond: rate * 1.05, PromptMS: firstMS - 20},
	}
}

func replies(rates []float64, firstMS []float64) []measure.Reply {
	var rs []measure.Reply
	for i, r := range rates {
		rs = append(rs, reply(i+1, r, firstMS[i], 128, "The capital of France is Paris, a city on the Seine."))
	}
	return rs
}

const (
	fastLine = "npu: Qwen3-0.6B ready on the private route dx (4 of 4 roles)"
	slowLine = "npu: no 16-row decode kernel for role ffn; using the per-op forward"
)

func evidence(t *testing.T, log string) route.Evidence {
	t.Helper()
	m, err := route.NewMatcher(route.DefaultFast, route.DefaultSlow)
	if err != nil {
		t.Fatal(err)
	}
	if log != "" {
		for line := range strings.SplitSeq(log, "\n") {
			m.Line([]byte(line))
		}
	}
	return m.Evidence()
}

var limits = Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateClient}

// okay is a verdict's OK column in report order: route, rate, first-token, content.
type okay [4]bool

func TestJudge(t *testing.T) {
	fastRow := replies([]float64{98.4, 84.4, 82.1}, []float64{250, 277, 300})
	slowRow := replies([]float64{1.9, 2.1, 1.9}, []float64{1063, 1100, 1040})
	mixedLog := "loading\n" + fastLine + "\nretry after a kernel fault\n" + slowLine

	withReply := func(rs []measure.Reply, i int, f func(*measure.Reply)) []measure.Reply {
		out := append([]measure.Reply(nil), rs...)
		f(&out[i])
		return out
	}

	tests := []struct {
		name     string
		log      string
		replies  []measure.Reply
		limits   Limits
		want     okay
		contains []string // each assertion detail, in order, must contain the string ("" skips)
		exact    []string // each assertion detail, in order, must be the string ("" skips)
	}{
		{
			name: "the measured fast row", log: "start\n" + fastLine + "\n", replies: fastRow,
			want:  okay{true, true, true, true},
			exact: []string{`the serve log names the fast route: "` + fastLine + `" (line 2)`, "median 84.4 tok/s (floor 60.0; each: 98.4, 84.4, 82.1; the serve's own: 103.3, 88.6, 86.2)", "median 277 ms (limit 600; each: 250, 277, 300)", "3 replies, all with content"},
		},
		{
			name: "the silent fallback at 1.9 tok/s", log: slowLine, replies: slowRow,
			want:     okay{false, false, false, true},
			contains: []string{"names the slow route", "median 1.9 tok/s (floor 60.0; each: 1.9, 2.1, 1.9; the serve's own: 2.0, 2.2, 2.0)", "median 1063 ms (limit 600", "3 replies, all with content"},
		},
		{
			name: "a log naming neither route", log: "loading model\nlistening on 127.0.0.1:8080", replies: fastRow,
			want:     okay{false, true, true, true},
			contains: []string{"names neither route (fast: " + route.NoteRule + ", on the private route; slow: per-op forward): the evidence has to be there"},
		},
		{
			name: "an empty log", log: "", replies: fastRow,
			want:  okay{false, true, true, true},
			exact: []string{"the serve log names neither route (fast: " + route.NoteRule + ", on the private route; slow: per-op forward): the evidence has to be there; the log is empty"},
		},
		{
			name: "a log naming both routes: the slow route wins", log: mixedLog, replies: fastRow,
			want:     okay{false, true, true, true},
			contains: []string{`names both routes; the slow route wins the doubt: "` + slowLine + `" (line 4), after "` + fastLine + `" (line 2)`},
		},
		{
			name: "thinking left on: all tokens as reasoning", log: fastLine,
			replies: withReply(fastRow, 1, func(r *measure.Reply) { r.Content = ""; r.Reasoning = "Okay, the user asks" }),
			want:    okay{true, true, true, false},
			contains: []string{"", "", "",
				`1 of 3 replies fail: reply 2 has no content, only reasoning (19 characters): is thinking off?`},
		},
		{
			name: "an empty think block before real content passes", log: fastLine,
			replies: withReply(fastRow, 0, func(r *measure.Reply) { r.Content = "<think>\n\n</think>\n\nParis." }),
			want:    okay{true, true, true, true},
		},
		{
			name: "an empty think block and nothing else fails", log: fastLine,
			replies:  withReply(fastRow, 0, func(r *measure.Reply) { r.Content = "<think></think>  " }),
			want:     okay{true, true, true, false},
			contains: []string{"", "", "", "reply 1 has no content"},
		},
		{
			name: "one degenerate reply", log: fastLine,
			replies:  withReply(fastRow, 2, func(r *measure.Reply) { r.Content = "//////" }),
			want:     okay{true, true, true, false},
			contains: []string{"", "", "", `reply 3 is one character repeated: "//////"`},
		},
		{
			name: "one character repeated with spaces", log: fastLine,
			replies:  withReply(fastRow, 2, func(r *measure.Reply) { r.Content = "a a a a" }),
			want:     okay{true, true, true, false},
			contains: []string{"", "", "", `reply 3 is one character repeated`},
		},
		{
			name: "two of one character", log: fastLine,
			replies:  withReply(fastRow, 0, func(r *measure.Reply) { r.Content = "!!" }),
			want:     okay{true, true, true, false},
			contains: []string{"", "", "", `reply 1 is one character repeated: "!!"`},
		},
		{
			name: "one character alone is content (\"4\")", log: fastLine,
			replies: withReply(fastRow, 0, func(r *measure.Reply) { r.Content = "4" }),
			want:    okay{true, true, true, true},
		},
		{
			name: "two different characters are content", log: fastLine,
			replies: withReply(fastRow, 2, func(r *measure.Reply) { r.Content = "ab" }),
			want:    okay{true, true, true, true},
		},
		{
			name: "whitespace-only content", log: fastLine,
			replies:  withReply(fastRow, 0, func(r *measure.Reply) { r.Content = " \n\t " }),
			want:     okay{true, true, true, false},
			contains: []string{"", "", "", "reply 1 has no content"},
		},
		{
			name: "the median, not the mean: (70, 70, 1.9) passes 60", log: fastLine,
			replies:  replies([]float64{70, 70, 1.9}, []float64{300, 300, 300}),
			want:     okay{true, true, true, true},
			contains: []string{"", "median 70.0 tok/s"},
		},
		{
			name: "two slow replies of three", log: fastLine,
			replies:  replies([]float64{90, 1.9, 2.0}, []float64{300, 300, 300}),
			want:     okay{true, false, true, true},
			contains: []string{"", "median 2.0 tok/s"},
		},
		{
			name: "an even count takes the mean of the middle two", log: fastLine,
			replies:  replies([]float64{50, 72, 66, 100}, []float64{100, 500, 700, 900}),
			want:     okay{true, true, true, true},
			contains: []string{"", "median 69.0 tok/s", "median 600 ms"},
		},
		{
			name: "the floor's edge: 60.0 passes", log: fastLine,
			replies: []measure.Reply{exact(1, 61, 1000), exact(2, 61, 1000), exact(3, 61, 1000)},
			want:    okay{true, true, true, true}, contains: []string{"", "median 60.0 tok/s"},
		},
		{
			name: "the floor's edge: 59.9 fails", log: fastLine,
			replies: []measure.Reply{exact(1, 600, 10000), exact(2, 600, 10000), exact(3, 600, 10000)},
			want:    okay{true, false, true, true}, contains: []string{"", "median 59.9 tok/s"},
		},
		{
			name: "the first-token edge: 600 ms passes", log: fastLine,
			replies: replies([]float64{90, 90, 90}, []float64{500, 600, 700}),
			want:    okay{true, true, true, true}, contains: []string{"", "", "median 600 ms"},
		},
		{
			name: "the first-token edge: 600.5 ms fails", log: fastLine,
			replies: replies([]float64{90, 90, 90}, []float64{500, 600.5, 700}),
			want:    okay{true, true, false, true}, contains: []string{"", "", "median 600 ms (limit 600"},
		},
		{
			name: "missing timings fail by name, without a crash", log: fastLine,
			replies: withReply(fastRow, 1, func(r *measure.Reply) { r.FirstMS, r.LastMS = nil, nil }),
			want:    okay{true, false, false, true},
			contains: []string{"",
				"reply 2 has no rate (no content arrived) (floor 60.0; each: 98.4, -, 82.1; the serve's own: 103.3, 88.6, 86.2)",
				"reply 2 has no first token (limit 600; each: 250, -, 300)"},
		},
		{
			name: "an error reply", log: fastLine,
			replies: withReply(fastRow, 0, func(r *measure.Reply) {
				r.Error = "HTTP 500: model crashed"
				r.Content = ""
				r.FirstMS, r.LastMS = nil, nil
			}),
			want:     okay{true, false, false, false},
			contains: []string{"", "reply 1 has no rate", "reply 1 has no first token", `reply 1 is an error: "HTTP 500: model crashed"`},
		},
		{
			name: "an error after content still fails content", log: fastLine,
			replies:  withReply(fastRow, 2, func(r *measure.Reply) { r.Error = "stream ended without [DONE]" }),
			want:     okay{true, false, true, false},
			contains: []string{"", "reply 3 has no rate (the reply failed)", "median 277 ms", "reply 3 is an error"},
		},
		{
			name: "a reply of one token has no rate", log: fastLine,
			replies: withReply(fastRow, 1, func(r *measure.Reply) {
				r.CompletionTokens = ptr(1)
				r.LastMS = r.FirstMS
				r.Content = "Paris"
			}),
			want:     okay{true, false, true, true},
			contains: []string{"", "reply 2 has no rate (1 token, too few for a rate)"},
		},
		{
			name: "the reasoning field (newer vLLM) alone is still thinking", log: fastLine,
			replies:  withReply(fastRow, 0, func(r *measure.Reply) { r.Content = ""; r.Reasoning = "Let me think" }),
			want:     okay{true, true, true, false},
			contains: []string{"", "", "", "is thinking off?"},
		},
		{
			name: "no replies: every assertion fails and says why", log: fastLine,
			want:     okay{false, false, false, false},
			contains: []string{"no replies: the serve never became ready", "no replies: the serve never became ready", "no replies", "no replies"},
		},
		{
			name: "server rate source judges the serve's own figures", log: fastLine, replies: slowRow,
			limits: Limits{Floor: 60, FirstTokenMS: 2000, RateSource: RateServer},
			want:   okay{true, false, true, true}, contains: []string{"", "median 2.0 tok/s, the serve's own figures"},
		},
		{
			name: "server rate source without server figures fails by name", log: fastLine,
			replies: withReply(fastRow, 1, func(r *measure.Reply) { r.Server = nil }),
			limits:  Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateServer},
			want:    okay{true, false, true, true}, contains: []string{"", "reply 2 has no rate (the serve sent no timings)"},
		},
		{
			name: "tokens counted from chunks are flagged approximate", log: fastLine,
			replies: withReply(fastRow, 0, func(r *measure.Reply) { r.CompletionTokens = nil; r.Server = nil }),
			want:    okay{true, true, true, true},
			exact:   []string{"", "median 84.4 tok/s (floor 60.0; each: 98.4, 84.4, 82.1; the serve's own: -, 88.6, 86.2); tokens approximate for 1 of 3: counted chunks, the serve sent no usage"},
		},
		{
			name: "a failed reply is not called approximate: it has its own reason", log: fastLine,
			replies: withReply(fastRow, 1, func(r *measure.Reply) { r.CompletionTokens = nil; r.Server = nil; r.Error = "connection reset" }),
			want:    okay{true, false, true, false},
			exact:   []string{"", "reply 2 has no rate (the reply failed) (floor 60.0; each: 98.4, -, 82.1; the serve's own: 103.3, -, 86.2)"},
		},
		{
			name: "approximate counts only replies with a rate", log: fastLine,
			replies: withReply(withReply(fastRow, 0, func(r *measure.Reply) { r.CompletionTokens = nil; r.Server = nil }), 1, func(r *measure.Reply) { r.Error = "connection reset" }),
			want:    okay{true, false, true, false},
			exact:   []string{"", "reply 2 has no rate (the reply failed) (floor 60.0; each: 98.4, -, 82.1; the serve's own: -, 88.6, 86.2); tokens approximate for 1 of 2: counted chunks, the serve sent no usage"},
		},
		{
			name: "the serve's own figures on the stream's definition: (n-1)/predicted_ms", log: fastLine,
			replies: withReply(fastRow[:1], 0, func(r *measure.Reply) {
				r.Server = &measure.ServerTimings{PredictedN: 16, PredictedMS: 250, PredictedPerSecond: 64}
			}),
			limits: Limits{Floor: 60.5, FirstTokenMS: 600, RateSource: RateServer},
			want:   okay{true, false, true, true},
			exact:  []string{"", "median 60.0 tok/s, the serve's own figures (floor 60.5; each: 60.0; the stream's: 98.4); warning: the stream's rate and the serve's own differ by more than 5% in replies 1 (64%): the measurement path is not clean"},
		},
		{
			name: "the stream and the serve agree within 5%: no warning", log: fastLine,
			replies: withReply(fastRow[:1], 0, func(r *measure.Reply) {
				r.Server = &measure.ServerTimings{PredictedN: 128, PredictedMS: 127 / 98.4 * 1000 * 1.04}
			}),
			want:  okay{true, true, true, true},
			exact: []string{"", "median 98.4 tok/s (floor 60.0; each: 98.4; the serve's own: 94.6)"},
		},
		{
			name: "the stream and the serve differ by just over 5%", log: fastLine,
			replies: withReply(fastRow[:1], 0, func(r *measure.Reply) {
				r.Server = &measure.ServerTimings{PredictedN: 128, PredictedMS: 127 / 98.4 * 1000 / 1.06}
			}),
			want:  okay{true, true, true, true},
			exact: []string{"", "median 98.4 tok/s (floor 60.0; each: 98.4; the serve's own: 104.3); warning: the stream's rate and the serve's own differ by more than 5% in replies 1 (6%): the measurement path is not clean"},
		},
		{
			name: "exactly 5% apart: no warning", log: fastLine,
			replies: []measure.Reply{{N: 1, Content: strings.Repeat("word ", 30), FirstMS: ptr(300.0), LastMS: ptr(1300.0), CompletionTokens: ptr(106), Chunks: 106,
				Server: &measure.ServerTimings{PredictedN: 101, PredictedMS: 1000}}},
			want:  okay{true, true, true, true},
			exact: []string{"", "median 105.0 tok/s (floor 60.0; each: 105.0; the serve's own: 100.0)"},
		},
		{
			name: "no figures of the serve's: none beside the stream's", log: fastLine,
			replies: withReply(fastRow[:1], 0, func(r *measure.Reply) { r.Server = nil }),
			want:    okay{true, true, true, true},
			exact:   []string{"", "median 98.4 tok/s (floor 60.0; each: 98.4)"},
		},
		{
			name: "chunks that came together: the regression, said", log: fastLine,
			replies: withReply(fastRow[:2], 1, func(r *measure.Reply) {
				r.CompletionTokens, r.Chunks, r.Server = ptr(9), 9, nil
				r.Arrivals = []measure.Arrival{{MS: 300, Chunks: 1}, {MS: 340, Chunks: 4}, {MS: 380, Chunks: 4}}
				r.FirstMS, r.LastMS = ptr(300.0), ptr(380.0)
			}),
			want:  okay{true, true, true, true},
			exact: []string{"", "median 99.2 tok/s (floor 60.0; each: 98.4, 100.0; the serve's own: 103.3, -); chunks came together (reply 2): their rates are the regression over arrivals"},
		},
		{
			name: "several tokens a chunk, believed on their text, said", log: fastLine,
			replies: withReply(fastRow[:2], 1, func(r *measure.Reply) {
				r.Chunks, r.MaxTokens, r.Content = 40, 128, strings.Repeat("word ", 80)
			}),
			want:  okay{true, true, true, true},
			exact: []string{"", "median 91.4 tok/s (floor 60.0; each: 98.4, 84.4; the serve's own: 103.3, 88.6); counts of several tokens a chunk believed on their text (3 bytes a token or more): reply 2, 128 tokens in 40 chunks with 400 bytes of text, 3.2 a token over 124 tokens (128 but the 4 that may carry none)"},
		},
		{
			name: "several tokens a chunk with too little text: no rate, the text's evidence said", log: fastLine,
			replies: withReply(fastRow[:2], 1, func(r *measure.Reply) {
				r.Chunks, r.MaxTokens, r.Server, r.Content = 40, 128, nil, strings.Repeat("ab ", 50)
			}),
			want: okay{true, false, true, true},
			exact: []string{"", "reply 2 has no rate (usage.completion_tokens 128 is more than the 40 chunks it came in, and their 150 bytes of text are 1.2 a token over 124 tokens " +
				"(128 but the 4 that may carry none; a serve sending several tokens a chunk sends 3 bytes a token or more): not believed; counted 40 from the chunks with content instead; " +
				"on that count the rate would be 25.9 tok/s) (floor 60.0; each: 98.4, -; the serve's own: 103.3, -)"},
		},
		{
			name: "the serve's rate source is not a regression", log: fastLine,
			replies: withReply(fastRow[:1], 0, func(r *measure.Reply) {
				r.CompletionTokens, r.Chunks = ptr(9), 9
				r.Server = &measure.ServerTimings{PredictedN: 9, PredictedMS: 80}
				r.Arrivals = []measure.Arrival{{MS: 300, Chunks: 1}, {MS: 340, Chunks: 4}, {MS: 380, Chunks: 4}}
				r.FirstMS, r.LastMS = ptr(300.0), ptr(380.0)
			}),
			limits: Limits{Floor: 60, FirstTokenMS: 600, RateSource: RateServer},
			want:   okay{true, true, true, true},
			exact:  []string{"", "median 100.0 tok/s, the serve's own figures (floor 60.0; each: 100.0; the stream's: 100.0)"},
		},
		{
			name: "a burst fails the rate, saying what to do", log: fastLine,
			replies: withReply(fastRow, 2, func(r *measure.Reply) {
				r.Arrivals = []measure.Arrival{{MS: 300, Chunks: 128}}
				r.LastMS = ptr(300.2)
			}),
			want:     okay{true, false, true, true},
			contains: []string{"", "reply 3 has no rate (" + measure.Burst + ") (floor 60.0; each: 98.4, 84.4, -; the serve's own: 103.3, 88.6, 86.2)"},
		},
		{
			name: "a lying counter fails the rate", log: fastLine,
			replies: withReply(fastRow, 0, func(r *measure.Reply) { r.MaxTokens, r.CompletionTokens = 128, ptr(1000) }),
			want:    okay{true, false, true, true},
			exact: []string{"", "reply 1 has no rate (usage.completion_tokens 1000 is above max_tokens 128; timings.predicted_n 128 is more than the 52 bytes of text the stream carried can hold: not believed; " +
				"counted 128 from the chunks with content instead; on that count the rate would be 98.4 tok/s) (floor 60.0; each: -, 84.4, 82.1; the serve's own: -, 88.6, 86.2)"},
		},
		{
			name: "an expect pattern that matches", log: fastLine,
			replies: withReply(fastRow, 0, func(r *measure.Reply) { r.Expect = `(?i)paris` }),
			want:    okay{true, true, true, true},
		},
		{
			name: "an expect pattern that does not match", log: fastLine,
			replies:  withReply(fastRow, 0, func(r *measure.Reply) { r.Expect = `Berlin` }),
			want:     okay{true, true, true, false},
			contains: []string{"", "", "", `reply 1 does not match "Berlin"`},
		},
		{
			name: "a single reply", log: fastLine, replies: fastRow[:1],
			want: okay{true, true, true, true}, contains: []string{"", "", "", "1 reply, with content"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.limits
			if l == (Limits{}) {
				l = limits
			}
			in := Input{Route: evidence(t, tt.log), Replies: tt.replies, Limits: l}
			if len(tt.replies) == 0 {
				in.NoReplies = "the serve never became ready"
			}
			v := Judge(in)
			var got okay
			names := []string{Route, Rate, FirstToken, Content}
			if len(v.Assertions) != 4 {
				t.Fatalf("Judge() gave %d assertions, want 4: %+v", len(v.Assertions), v.Assertions)
			}
			for i, a := range v.Assertions {
				if a.Name != names[i] {
					t.Errorf("assertion %d is %q, want %q", i, a.Name, names[i])
				}
				got[i] = a.OK
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Judge() OK columns (-want +got):\n%s\ndetails: %+v", diff, v.Assertions)
			}
			wantPass := tt.want == okay{true, true, true, true}
			if v.Pass != wantPass {
				t.Errorf("Judge().Pass = %v, want %v", v.Pass, wantPass)
			}
			for i, s := range tt.exact {
				if s != "" && v.Assertions[i].Detail != s {
					t.Errorf("%s detail = %q, want %q", v.Assertions[i].Name, v.Assertions[i].Detail, s)
				}
			}
			for i, s := range tt.contains {
				if !strings.Contains(v.Assertions[i].Detail, s) {
					t.Errorf("%s detail = %q, want it to contain %q", v.Assertions[i].Name, v.Assertions[i].Detail, s)
				}
			}
		})
	}
}

// exact is a reply of tokens tokens whose decode took spanMS, so its rate is
// exactly (tokens-1)/(spanMS/1000).
func exact(n, tokens int, spanMS float64) measure.Reply {
	return measure.Reply{N: n, Content: "Paris is the capital.", FirstMS: ptr(300.0), LastMS: ptr(300 + spanMS), CompletionTokens: ptr(tokens), Chunks: tokens}
}

// TestLimitsZeroIsExact: bounds of 0 survive result.json's round trip as 0,
// and only bounds never written take the defaults.
func TestLimitsZeroIsExact(t *testing.T) {
	exact := Limits{Floor: 60, FirstTokenMS: 600, MaxRegression: ptr(0.0), Agreement: &agree.Bounds{}}
	data, err := json.Marshal(exact)
	if err != nil {
		t.Fatal(err)
	}
	var got Limits
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Regression() != 0 || got.Agreement.OrDefault() != (agree.Bounds{}) {
		t.Errorf("Limits from %s: regression %v, agreement %v; want 0 and exact bounds", data, got.Regression(), got.Agreement.OrDefault())
	}
	var old Limits
	if err := json.Unmarshal([]byte(`{"floor": 60, "first_token_ms": 600}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.Regression() != DefaultMaxRegression || old.Agreement.OrDefault() != agree.Default {
		t.Errorf("Limits of a run made before the bounds were kept: regression %v, agreement %v; want %v and %v",
			old.Regression(), old.Agreement.OrDefault(), DefaultMaxRegression, agree.Default)
	}
	// The baseline judged at 0: a fall of 1% fails.
	rs := []measure.Reply{reply(1, 99, 300, 128, ""), reply(2, 99, 300, 128, ""), reply(3, 99, 300, 128, "")}
	if a := judgeBaseline(rs, Limits{RateSource: RateClient, MaxRegression: ptr(0.0)}, Baseline{Rate: 100, FirstTokenMS: 300}); a.OK {
		t.Errorf("judgeBaseline(1%% slower, max regression 0) = %+v, want failed", a)
	}
}
