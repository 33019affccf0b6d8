package realserve

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// costRounds is how many rounds of the built-in prompts TestLogprobsCost
// asks with and without logprobs, alternating.
const costRounds = 3

// TestLogprobsCost asks the f32 model the built-in prompts with top_logprobs
// 0 (logprobs not asked for) and topK, alternating rounds on one serve, and
// logs what asking costs: the bytes of a reply's stream and the median rate
// and first token of each. It checks what is sent, not the times: each token
// of a reply asked with logprobs carries topK alternatives, a reply asked
// without carries none, and the stream grows.
func TestLogprobsCost(t *testing.T) {
	s := variantServe(t)
	if s == nil {
		return
	}
	type figures struct{ bytes, rate, first []float64 }
	var got [2]figures
	ks := [2]int{0, topK}
	for range costRounds {
		for i, k := range ks {
			for _, r := range round(t, s, modelName, k) {
				got[i].bytes = append(got[i].bytes, float64(r.Bytes))
				got[i].rate = append(got[i].rate, r.Rate)
				got[i].first = append(got[i].first, r.FirstMS)
				if k == 0 && len(r.Generated) > 0 {
					t.Errorf("top_logprobs 0, reply %d: %d tokens with logprobs, want none", r.N, len(r.Generated))
				}
				if k == 0 {
					continue
				}
				if r.CompletionTokens == nil || len(r.Generated) != *r.CompletionTokens {
					t.Errorf("top_logprobs %d, reply %d: %d tokens with logprobs, usage says %v", k, r.N, len(r.Generated), r.CompletionTokens)
				}
				for j, tok := range r.Generated {
					if len(tok.Top) != k {
						t.Errorf("top_logprobs %d, reply %d, token %d: %d alternatives", k, r.N, j, len(tok.Top))
						break
					}
				}
			}
		}
	}
	t.Logf("f32 model, %d rounds of %d-token replies to the built-in prompts, each setting:", costRounds, maxTokens)
	t.Logf("%-14s %14s %14s %14s", "top_logprobs", "bytes/reply", "rate tok/s", "first token")
	for i, k := range ks {
		t.Logf("%-14d %14.0f %14.1f %12.1fms", k, stats.Median(got[i].bytes), stats.Median(got[i].rate), stats.Median(got[i].first))
	}
	b0, b5 := stats.Median(got[0].bytes), stats.Median(got[1].bytes)
	t.Logf("asking top_logprobs %d: %.0f bytes a token more (%.1fx the stream); rate %+.1f%%, first token %+.1f%% (medians)",
		topK, (b5-b0)/maxTokens, b5/b0, 100*(stats.Median(got[1].rate)/stats.Median(got[0].rate)-1),
		100*(stats.Median(got[1].first)/stats.Median(got[0].first)-1))
	if b5 <= b0 {
		t.Errorf("a reply's stream with logprobs (%.0f bytes) is not larger than without (%.0f)", b5, b0)
	}
}

// gateCostRuns is how many gate runs TestGateLogprobsCost makes with each
// --top-logprobs, alternating.
const gateCostRuns = 3

// TestGateLogprobsCost runs the gate (--preset ollama) against the f32 model
// with --top-logprobs 0 and topK, alternating, and logs the median over the
// runs of each run's median rate and first token, and the bytes of a reply
// file: the rate assertion must not be skewed by asking. It checks what was
// asked and kept, not the times: every reply of a run with topK holds its
// tokens with topK alternatives each, and no reply of a run with 0 any.
func TestGateLogprobsCost(t *testing.T) {
	o := setUp(t)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	type figures struct{ rate, first, bytes []float64 }
	var got [2]figures
	ks := [2]int{0, topK}
	for run := range gateCostRuns {
		for i, k := range ks {
			g := o.run(t, "cost-"+strconv.Itoa(k)+"-"+strconv.Itoa(run), port,
				append([]string{"--floor", "1", "--top-logprobs", strconv.Itoa(k)}, cpuIsExpected...)...)
			var rates, firsts []float64
			for _, r := range g.res.Replies {
				rate, ok := g.res.Rate(&r)
				if !ok {
					t.Fatalf("--top-logprobs %d: reply %d has no rate", k, r.N)
				}
				rates, firsts = append(rates, rate), append(firsts, deref(r.FirstMS))
				fi, err := os.Stat(filepath.Join(g.out, report.ReplyFile(&r)))
				if err != nil {
					t.Fatal(err)
				}
				got[i].bytes = append(got[i].bytes, float64(fi.Size()))
				switch {
				case k == 0 && (r.Logprobs != "" || len(r.Generated) > 0):
					t.Errorf("--top-logprobs 0, reply %d: logprobs %q, %d tokens with them; want none asked", r.N, r.Logprobs, len(r.Generated))
				case k > 0 && (r.Logprobs != measure.LogprobsSent || len(r.Generated) != maxTokens):
					t.Errorf("--top-logprobs %d, reply %d: logprobs %q, %d tokens with them; want %q, %d", k, r.N, r.Logprobs, len(r.Generated), measure.LogprobsSent, maxTokens)
				case k > 0 && len(r.Generated[0].Top) != k:
					t.Errorf("--top-logprobs %d, reply %d: %d alternatives at the first token", k, r.N, len(r.Generated[0].Top))
				}
			}
			got[i].rate = append(got[i].rate, stats.Median(rates))
			got[i].first = append(got[i].first, stats.Median(firsts))
		}
	}
	t.Logf("the gate (--preset ollama), f32 model, %d runs with each --top-logprobs, %d replies of %d tokens a run; medians over the runs of each run's median:",
		gateCostRuns, len(got[0].bytes)/gateCostRuns, maxTokens)
	t.Logf("%-15s %14s %14s %16s", "--top-logprobs", "rate tok/s", "first token", "reply_N.json")
	for i, k := range ks {
		t.Logf("%-15d %14.1f %12.1fms %14.0f B", k, stats.Median(got[i].rate), stats.Median(got[i].first), stats.Median(got[i].bytes))
	}
	t.Logf("--top-logprobs %d against 0: rate %+.1f%%, first token %+.1f%%, a reply file %.1fx",
		topK, 100*(stats.Median(got[1].rate)/stats.Median(got[0].rate)-1),
		100*(stats.Median(got[1].first)/stats.Median(got[0].first)-1), stats.Median(got[1].bytes)/stats.Median(got[0].bytes))
}
