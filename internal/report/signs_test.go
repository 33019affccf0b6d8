package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
)

// A run of the sequential rule: its sign counts in result.json, the
// headline's sentence on them, and the prompts' seed among the facts.
func TestMarkdownSigns(t *testing.T) {
	r := sample()
	seed := uint64(42)
	r.Limits.Lead, r.Run.OrderSeed, r.Run.Replies, r.Extra.Max = 3, &seed, 1, 15
	r.Replies = append(r.Replies, r.Replies[0])
	r.Replies[2].N = 3
	r.Judged(judge.Judge(r.Input()))
	md := Markdown(r, MarkdownLimit)
	for _, want := range []string{
		"over 3 replies. Both sign counts decided (rate: 3 meet the floor, 0 miss it; first token: 3 meet the limit, 0 miss it; --lead 3).",
		"| asked | 3 replies (at least 1, at most 15) + 1 warm-up, max 128 tokens, thinking off, prompts built-in in the order of seed 42 |",
		"signs: 3 meet the floor, 0 miss it: decided, a lead of 3 for meeting it, --lead 3 \\(likelihood ratio 3^3 = 27 against 1/alpha = 20\\)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"order_seed":42`, `"lead":3`, `"signs":{"rate":{"meet":3,"miss":0,"lead":3,"likelihood_ratio":27,"decided":true}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("result.json lacks %s: %s", want, b)
		}
	}

	// Two replies under the limit: the first token did not decide.
	r.Limits.FirstTokenMS = 260
	r.Judged(judge.Judge(r.Input()))
	md = Markdown(r, MarkdownLimit)
	want := "Close to the first-token limit: the sign counts did not decide in 3 replies (at most 15), and the median decides (rate: 3 meet the floor, 0 miss it; first token: 2 meet the limit, 1 miss it; --lead 3)."
	if !strings.Contains(md, want) {
		t.Errorf("Markdown() lacks %q:\n%s", want, md)
	}
	r.Limits.Floor = 95
	r.Judged(judge.Judge(r.Input()))
	if md := Markdown(r, MarkdownLimit); !strings.Contains(md, "Close to the floor and the first-token limit: ") {
		t.Errorf("Markdown() of both undecided:\n%s", md)
	}

	// Fewer replies than the lead, all meeting both limits: undecided,
	// not close to them. As many as the lead, split: close.
	if got := SignsText(&judge.Signs{Rate: stats.NewCount(2, 0, 3), FirstToken: stats.NewCount(2, 0, 3)}, 2, 2); got != "Undecided: 2 replies, fewer than --lead 3, cannot decide a sign count, and the median decides (rate: 2 meet the floor, 0 miss it; first token: 2 meet the limit, 0 miss it; --lead 3)." {
		t.Errorf("SignsText(2 replies, lead 3) = %q", got)
	}
	if got := SignsText(&judge.Signs{Rate: stats.NewCount(2, 1, 3), FirstToken: stats.NewCount(3, 0, 3)}, 3, 3); !strings.HasPrefix(got, "Close to the floor: ") {
		t.Errorf("SignsText(3 replies split, lead 3) = %q", got)
	}

	// Decided, and close all the same: the median's interval holds the
	// floor (4 meet it, 1 misses it).
	if got := SignsText(&judge.Signs{Rate: stats.NewCount(4, 1, 3), FirstToken: stats.NewCount(5, 0, 3)}, 5, 15); got != "Both sign counts decided, close to the floor all the same: the median's interval holds it (rate: 4 meet the floor, 1 miss it; first token: 5 meet the limit, 0 miss it; --lead 3)." {
		t.Errorf("SignsText(decided, close to the floor) = %q", got)
	}
	if got := SignsText(&judge.Signs{Rate: stats.NewCount(4, 1, 3), FirstToken: stats.NewCount(1, 4, 3)}, 5, 15); !strings.HasPrefix(got, "Both sign counts decided, close to the floor and the first-token limit all the same: ") {
		t.Errorf("SignsText(decided, close to both) = %q", got)
	}

	// A reply without a figure stopped the run: neither "close" nor the
	// median decides, the failure does.
	if got := SignsText(&judge.Signs{Rate: stats.NewCount(1, 0, 3), FirstToken: stats.NewCount(2, 0, 3)}, 2, 15); got != "The gate stopped after 2 replies: a reply has no rate or no first token, which fails the run whatever the sign counts (rate: 1 meet the floor, 0 miss it; first token: 2 meet the limit, 0 miss it; --lead 3)." {
		t.Errorf("SignsText(a reply without a rate) = %q", got)
	}
	if got := SignsText(&judge.Signs{Rate: stats.NewCount(2, 0, 3), FirstToken: stats.NewCount(1, 0, 3)}, 2, 15); !strings.HasPrefix(got, "The gate stopped after 2 replies: a reply has no rate") {
		t.Errorf("SignsText(a reply without a first token) = %q", got)
	}

	// With a baseline, its two counts: in result.json, and in the
	// headline, decided or close to its bounds.
	r.Limits.FirstTokenMS, r.Limits.Floor = 600, 60
	r.Baseline = &judge.Baseline{File: "base", Rate: 80, FirstTokenMS: 10000}
	r.Judged(judge.Judge(r.Input()))
	md = Markdown(r, MarkdownLimit)
	want = "The four sign counts decided (rate: 3 meet the floor, 0 miss it; first token: 3 meet the limit, 0 miss it; against the baseline, rate: 3 meet its bound, 0 miss it; first token: 3 meet its bound, 0 miss it; --lead 3)."
	if !strings.Contains(md, want) {
		t.Errorf("Markdown() with a baseline lacks %q:\n%s", want, md)
	}
	if b, _ := json.Marshal(r); !strings.Contains(string(b), `"baseline":{"rate":{"meet":3,"miss":0,"lead":3,"likelihood_ratio":27,"decided":true},"first_token":{"meet":3,"miss":0,`) {
		t.Errorf("result.json lacks the baseline's signs: %s", b)
	}
	// A baseline of too few replies is not judged: no counts against it.
	r.Baseline = &judge.Baseline{File: "base", Rate: 80, FirstTokenMS: 10000, Replies: 2, RateLo: 79, FirstTokenHiMS: 10001, Coverage: 0.5}
	r.Judged(judge.Judge(r.Input()))
	if r.Signs == nil || r.Signs.Baseline != nil || !strings.Contains(Markdown(r, MarkdownLimit), "Both sign counts decided") {
		t.Errorf("signs with a baseline of 2 replies = %+v, want none against it", r.Signs)
	}
	base := judge.Signs{Rate: stats.NewCount(5, 0, 3), FirstToken: stats.NewCount(5, 0, 3)}
	for _, b := range []judge.BaselineSigns{
		{Rate: stats.NewCount(3, 2, 3), FirstToken: stats.NewCount(5, 0, 3)},
		{Rate: stats.NewCount(5, 0, 3), FirstToken: stats.NewCount(3, 2, 3)},
	} {
		s := base
		s.Baseline = &b
		if got := SignsText(&s, 5, 5); !strings.HasPrefix(got, "Close to the baseline's bounds: the sign counts did not decide in 5 replies (at most 5)") {
			t.Errorf("SignsText(the baseline's counts %+v) = %q", b, got)
		}
	}

	// A run made before the rule: no signs, no seed.
	old := sample()
	if old.Signs != nil || strings.Contains(Markdown(old, MarkdownLimit), "sign counts decided") {
		t.Errorf("a run without a lead has signs: %+v", old.Signs)
	}
}
