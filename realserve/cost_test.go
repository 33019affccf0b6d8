package realserve

import (
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
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
		t.Logf("%-14d %14.0f %14.1f %12.1fms", k, judge.Median(got[i].bytes), judge.Median(got[i].rate), judge.Median(got[i].first))
	}
	b0, b5 := judge.Median(got[0].bytes), judge.Median(got[1].bytes)
	t.Logf("asking top_logprobs %d: %.0f bytes a token more (%.1fx the stream); rate %+.1f%%, first token %+.1f%% (medians)",
		topK, (b5-b0)/maxTokens, b5/b0, 100*(judge.Median(got[1].rate)/judge.Median(got[0].rate)-1),
		100*(judge.Median(got[1].first)/judge.Median(got[0].first)-1))
	if b5 <= b0 {
		t.Errorf("a reply's stream with logprobs (%.0f bytes) is not larger than without (%.0f)", b5, b0)
	}
}
