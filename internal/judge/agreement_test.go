package judge

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/agree"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// alt is an alternative with the probability p.
func alt(text string, p float64) measure.Alt {
	return measure.Alt{Text: text, Logprob: math.Log(p)}
}

// sure is a token the model is sure of.
func sure(text string) measure.Token {
	return measure.Token{Text: text, Logprob: math.Log(0.9), Top: []measure.Alt{alt(text, 0.9), alt("x", 0.05)}}
}

// wrongTokens is r with a token it did not stream before its own: its
// tokens hold more than its content.
func wrongTokens(r measure.Reply) measure.Reply {
	r.Generated = append([]measure.Token{sure("Rome")}, r.Generated...)
	return r
}

// said is a reply to prompt with logprobs: its tokens.
func said(n int, prompt string, toks ...measure.Token) measure.Reply {
	r := reply(n, 80, 300, 128, "")
	r.Prompt, r.Logprobs, r.TopLogprobs, r.Generated = prompt, measure.LogprobsSent, 2, toks
	for _, t := range toks {
		r.Content += t.Text
	}
	return r
}

// wide is r asking for 3 alternatives.
func wide(r measure.Reply) measure.Reply {
	r.TopLogprobs = 3
	return r
}

func TestJudgeAgreement(t *testing.T) {
	ref := []measure.Reply{
		said(1, "France?", sure(" Paris"), sure(".")),
		said(2, "Italy?", sure(" Rome"), sure(".")),
		said(3, "Spain?", measure.Token{Text: " Madrid", Logprob: math.Log(0.5), Top: []measure.Alt{alt(" Madrid", 0.5), alt(" Barcelona", 0.49)}}, sure(".")),
	}
	tie := measure.Token{Text: " Barcelona", Logprob: math.Log(0.5), Top: []measure.Alt{alt(" Barcelona", 0.5), alt(" Madrid", 0.49)}}
	broken := measure.Token{Text: " //", Logprob: -3.9, Top: []measure.Alt{{Text: " //", Logprob: -3.9}}}
	textOnly := func(r measure.Reply) measure.Reply {
		r.Logprobs, r.Generated = measure.LogprobsNone, nil
		return r
	}
	tests := []struct {
		name    string
		replies []measure.Reply
		limits  agree.Bounds
		want    Assertion
	}{
		{
			name: "the same answers, one at a tie, one not in the reference",
			replies: []measure.Reply{
				said(1, "Spain?", tie, sure(".")),
				said(2, "Peru?", sure(" Lima")),
				said(3, "France?", sure(" Paris"), sure(".")),
			},
			want: Assertion{Name: Agreement, OK: true, Detail: `2 of 2 compared replies agree with the reference ref/result.json ` +
				`(each: 0/2 at a tie (gap 0.02 nats), -, 2/2; mean KL 0.0001 nats over 3 shared positions (largest 0.0002), top-1 66.7%; ` +
				`tie margin 0.1 nats, mean KL at most 0.01; not in the reference, not judged: reply 2)`},
		},
		{
			name: "a real disagreement quoted with both tokens and their logprobs",
			replies: []measure.Reply{
				said(1, "France?", sure(" Paris"), sure(".")),
				said(2, "Italy?", sure(" Rome"), sure(".")),
				said(3, "France?", sure(" Paris"), broken),
				said(4, "Italy?", broken),
			},
			want: Assertion{Name: Agreement, Detail: `2 of 4 compared replies disagree with the reference ref/result.json: ` +
				`reply 3, token 2: the reference "." (-0.1), this run " //" (-3.9); reply 4: a real disagreement at token 1 ` +
				`(each: 2/2, 2/2, 1/2, 0/2; mean KL 0.2012 nats over 7 shared positions (largest 0.7042), top-1 71.4%; tie margin 0.1 nats, mean KL at most 0.01)`},
		},
		{
			name: "apart in distribution, an error, and lists of another length, said once",
			replies: []measure.Reply{
				wide(said(1, "France?", measure.Token{Text: " Paris", Logprob: math.Log(0.6), Top: []measure.Alt{alt(" Paris", 0.6), alt("x", 0.3), alt("y", 0.05)}}, sure("."))),
				wide(said(2, "Italy?", sure(" Rome"), sure("."))),
				func() measure.Reply { r := said(3, "Spain?"); r.Error = "HTTP 500"; return r }(),
			},
			want: Assertion{Name: Agreement, Detail: `2 of 3 compared replies disagree with the reference ref/result.json: ` +
				`reply 1: the mean KL, 0.1179 nats, is above 0.01; reply 3: this run's reply is an error ` +
				`(each: 2/2, 2/2, 0/0; mean KL 0.0589 nats over 4 shared positions (largest 0.2358), top-1 100.0%; tie margin 0.1 nats, mean KL at most 0.01; ` +
				`the reference listed 2 alternatives, this run 3: both compared on their top 2)`},
		},
		{
			name:    "this run ended where the reference went on",
			replies: []measure.Reply{said(1, "France?", sure(" Paris"))},
			want: Assertion{Name: Agreement, Detail: `1 of 1 compared replies disagree with the reference ref/result.json: ` +
				`reply 1, token 2: the reference "." (-0.1), this run ended ` +
				`(each: 1/2; mean KL 0.0000 nats over 1 shared position (largest 0.0000), top-1 100.0%; tie margin 0.1 nats, mean KL at most 0.01)`},
		},
		{
			name:    "the reference ended where this run went on",
			replies: []measure.Reply{said(1, "France?", sure(" Paris"), sure("."), sure(" It"))},
			want: Assertion{Name: Agreement, Detail: `1 of 1 compared replies disagree with the reference ref/result.json: ` +
				`reply 1, token 3: the reference ended, this run " It" (-0.1) ` +
				`(each: 2/3; mean KL 0.0000 nats over 2 shared positions (largest 0.0000), top-1 100.0%; tie margin 0.1 nats, mean KL at most 0.01)`},
		},
		{
			name:    "text only: weaker evidence",
			replies: []measure.Reply{textOnly(said(1, "France?", sure(" Paris"), sure(".")))},
			limits:  agree.Bounds{TieMargin: 0.5, MaxKL: 0.2},
			want: Assertion{Name: Agreement, OK: true, Detail: `1 of 1 compared replies agree with the reference ref/result.json ` +
				`(each: 7/7 bytes; tie margin 0.5 nats, mean KL at most 0.2; text only: weaker evidence (reply 1: this run's reply: no logprobs sent: compared in bytes))`},
		},
		{
			name:    "text only, apart",
			replies: []measure.Reply{textOnly(said(1, "France?", sure(" Paris"), sure("!")))},
			want: Assertion{Name: Agreement, Detail: `1 of 1 compared replies disagree with the reference ref/result.json: reply 1, byte 7: the reference ".", this run "!" ` +
				`(each: 6/7 bytes; tie margin 0.1 nats, mean KL at most 0.01; text only: weaker evidence (reply 1: this run's reply: no logprobs sent: compared in bytes))`},
		},
		{
			name: "text only for two reasons: each named once, with its replies",
			replies: []measure.Reply{
				textOnly(said(1, "France?", sure(" Paris"), sure("."))),
				wrongTokens(said(2, "France?", sure(" Paris"), sure("."))),
				textOnly(said(3, "France?", sure(" Paris"), sure("."))),
			},
			want: Assertion{Name: Agreement, OK: true, Detail: `3 of 3 compared replies agree with the reference ref/result.json ` +
				`(each: 7/7 bytes, 7/7 bytes, 7/7 bytes; tie margin 0.1 nats, mean KL at most 0.01; text only: weaker evidence (` +
				`reply 1, 3: this run's reply: no logprobs sent; ` +
				`reply 2: this run's reply: its tokens hold 4 bytes before its content, and it streamed no reasoning: compared in bytes))`},
		},
		{
			name:    "nothing compared",
			replies: []measure.Reply{said(1, "Peru?", sure(" Lima"))},
			want: Assertion{Name: Agreement, Detail: `no reply's prompt is in the reference ref/result.json: nothing to compare ` +
				`(each: -; tie margin 0.1 nats, mean KL at most 0.01; not in the reference, not judged: reply 1)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.limits == (agree.Bounds{}) {
				tt.limits = agree.Bounds{TieMargin: 0.1, MaxKL: 0.01}
			}
			in := Input{Replies: tt.replies, Limits: Limits{Agreement: &tt.limits},
				Reference: &Reference{File: "ref/result.json", Replies: ref}}
			if diff := cmp.Diff(tt.want, judgeAgreement(in)); diff != "" {
				t.Errorf("judgeAgreement() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestJudgeAgreementInJudge: the assertion comes after the baseline's, with
// the default bounds when none are set; with no replies it says why, like the
// others.
func TestJudgeAgreementInJudge(t *testing.T) {
	ref := &Reference{File: "ref", Replies: []measure.Reply{said(1, "France?", sure(" Paris"))}}
	in := Input{
		Replies:   []measure.Reply{said(1, "France?", sure(" Paris"))},
		Limits:    limits,
		Baseline:  &Baseline{File: "base", Rate: 80, FirstTokenMS: 300},
		Reference: ref,
	}
	in.Limits.MaxRegression = ptr(0.1)
	v := Judge(in)
	var names []string
	for _, a := range v.Assertions {
		names = append(names, a.Name)
	}
	if diff := cmp.Diff([]string{Route, Rate, FirstToken, Content, Regression, Agreement}, names); diff != "" {
		t.Errorf("Judge() assertions mismatch (-want +got):\n%s", diff)
	}
	last := v.Assertions[len(v.Assertions)-1]
	bounds := fmt.Sprintf("tie margin %g nats, mean KL at most %g", agree.DefaultTieMargin, agree.DefaultMaxKL)
	if !last.OK || !strings.Contains(last.Detail, bounds) {
		t.Errorf("Judge() agreement = %+v, want OK with the default bounds (%s)", last, bounds)
	}
	if got := Agreements(in); len(got) != 1 || got[0].RefN != 1 || !got[0].OK {
		t.Errorf("Agreements() = %+v, want reply 1 agreeing with reference reply 1", got)
	}
	if got := Agreements(Input{Replies: in.Replies}); got != nil {
		t.Errorf("Agreements(no reference) = %+v, want nil", got)
	}

	in.Replies, in.NoReplies = nil, "the serve never became ready"
	v = Judge(in)
	names = nil
	for _, a := range v.Assertions {
		names = append(names, a.Name+": "+a.Detail)
	}
	want := []string{Route, Rate, FirstToken, Content, Regression, Agreement}
	for i := range want {
		want[i] += ": no replies: the serve never became ready"
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("Judge(no replies) assertions mismatch (-want +got):\n%s", diff)
	}
}

// TestJudgeAgreementMissing: a reference asked for and not found fails the
// assertion, saying why, whatever the replies.
func TestJudgeAgreementMissing(t *testing.T) {
	in := Input{Replies: []measure.Reply{said(1, "France?", sure(" Paris"))},
		Reference: &Reference{File: "github:ref-*", Missing: "no successful run of gate.yml on ref-*"}}
	want := Assertion{Name: Agreement, Detail: "no usable reference at github:ref-*: no successful run of gate.yml on ref-*; --reference-missing skip leaves the assertion out until there is one"}
	if diff := cmp.Diff(want, judgeAgreement(in)); diff != "" {
		t.Errorf("judgeAgreement(missing reference) mismatch (-want +got):\n%s", diff)
	}
	if v := Judge(in); v.Pass {
		t.Errorf("Judge(missing reference) passed: %+v", v)
	}
}

// TestEachOfCut: a reply judged on the tokens both sides have, one cut at
// its max tokens, says which side was cut.
func TestEachOfCut(t *testing.T) {
	for _, c := range []struct{ ended, want string }{
		{agree.EndedRun, "2/4 (this run cut at its max tokens)"},
		{agree.EndedReference, "2/4 (the reference cut at its max tokens)"},
	} {
		r := agree.Reply{Agree: 2, Of: 4, Unit: agree.UnitTokens, OK: true, Diverged: &agree.Divergence{Position: 2, Ended: c.ended, Cut: true}}
		if got := eachOf(&r); got != c.want {
			t.Errorf("eachOf(cut, ended %s) = %q, want %q", c.ended, got, c.want)
		}
		r.Diverged.Cut = false
		if got := eachOf(&r); got != "2/4" {
			t.Errorf("eachOf(ended %s, not cut) = %q, want \"2/4\"", c.ended, got)
		}
	}
}
