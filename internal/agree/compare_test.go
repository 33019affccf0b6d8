package agree

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

func ptr[T any](v T) *T { return &v }

// a is an alternative with the probability p.
func a(text string, p float64) measure.Alt {
	return measure.Alt{Text: text, Logprob: math.Log(p)}
}

// aID is a with a token id.
func aID(text string, id int, p float64) measure.Alt {
	x := a(text, p)
	x.ID = &id
	return x
}

// tok is a generated token: the first of top (its most likely) unless text
// names another.
func tok(text string, top ...measure.Alt) measure.Token {
	t := measure.Token{Text: text, Logprob: math.Log(0.5), Top: top}
	for _, x := range top {
		if x.Text == text {
			t.Logprob, t.ID = x.Logprob, x.ID
			break
		}
	}
	return t
}

// rep is a reply with logprobs sent, its content the tokens' texts.
func rep(n int, toks ...measure.Token) measure.Reply {
	var b strings.Builder
	k := 0
	for _, t := range toks {
		b.WriteString(t.Text)
		k = max(k, len(t.Top))
	}
	return measure.Reply{N: n, Prompt: "p", Content: b.String(), Logprobs: measure.LogprobsSent, TopLogprobs: k, Generated: toks}
}

// sure is a position the model is sure of: t at 0.9, two others after.
func sure(t string) measure.Token {
	return tok(t, a(t, 0.9), a("x", 0.05), a("y", 0.02))
}

var bounds = Bounds{TieMargin: 0.1, MaxKL: 0.01}

// noneAsked is why a reference recorded without logprobs is compared by text.
const noneAsked = "the reference's reply: no logprobs asked"

func TestCompare(t *testing.T) {
	tieRef := tok(" A", a(" A", 0.50), a(" B", 0.48), a(" C", 0.01))
	tieKL := klByHand(map[string]float64{" A": 0.50, " B": 0.48, " C": 0.01}, map[string]float64{" B": 0.50, " A": 0.48, " C": 0.01})
	parisKL := klByHand(map[string]float64{" Paris": 0.9, "x": 0.05, "y": 0.02}, map[string]float64{" //": 0.02, " Paris": 0.01})
	notInKL := klByHand(map[string]float64{" A": 0.40, " B": 0.39}, map[string]float64{" Z": 0.40, " A": 0.39})
	wideKL := klByHand(map[string]float64{" A": 0.50, " B": 0.40}, map[string]float64{" B": 0.50, " A": 0.40})
	tieRun := tok(" B", a(" B", 0.50), a(" A", 0.48), a(" C", 0.01))
	fifthKL := klByHand(map[string]float64{" A": 0.45, " B": 0.44, " C": 0.05, " D": 0.03, " E": 0.45 * math.Exp(-5.25)},
		map[string]float64{" E": 0.45, " A": 0.44, " B": 0.05, " C": 0.03, " D": 0.45 * math.Exp(-5.25)})
	thirdKL := klByHand(map[string]float64{"a": math.Exp(-1), "b": math.Exp(-1.125), "c": math.Exp(-1.25)},
		map[string]float64{"c": math.Exp(-1), "a": math.Exp(-1.125), "b": math.Exp(-1.25)})
	tests := []struct {
		name     string
		ref, run measure.Reply
		bounds   Bounds // zero: bounds
		want     Reply
	}{
		{
			name: "identical",
			ref:  rep(1, sure("a"), sure("b"), sure("c")),
			run:  rep(2, sure("a"), sure("b"), sure("c")),
			want: Reply{N: 2, RefN: 1, Unit: UnitTokens, Agree: 3, Of: 3, Shared: 3, K: 3,
				KL: ptr(0.0), MaxKL: ptr(0.0), Top1: ptr(1.0), OK: true},
		},
		{
			name: "a divergence at a near-tie: this run's token the reference's second, within the margin of its top",
			ref:  rep(1, sure("a"), tieRef, sure("c")),
			run:  rep(1, sure("a"), tieRun, sure("d")),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Agree: 1, Of: 3, Shared: 2, K: 3,
				KL: ptr(tieKL / 2), MaxKL: ptr(tieKL), Top1: ptr(0.5),
				Diverged: &Divergence{Position: 1, Ref: alt(&tieRef), Run: alt(&tieRun),
					RunInRef: ptr(math.Log(0.48)), Gap: ptr(math.Log(0.50) - math.Log(0.48)), Tie: true},
				OK: true},
		},
		{
			name: "a real disagreement: this run's token not among the reference's top K, its gap unknown",
			ref:  rep(1, sure(" Paris"), sure(".")),
			run:  rep(3, tok(" //", a(" //", 0.02), a(" Paris", 0.01)), sure(".")),
			want: Reply{N: 3, RefN: 1, Unit: UnitTokens, Agree: 0, Of: 2, Shared: 1, K: 3,
				KL: ptr(parisKL), MaxKL: ptr(parisKL), Top1: ptr(0.0),
				Diverged: &Divergence{Position: 0, Ref: alt(ptr(sure(" Paris"))), Run: measure.Alt{Text: " //", Logprob: math.Log(0.02)}},
				Why:      "a real disagreement at token 1"},
		},
		{
			name: "a close top two, but this run's token is not among the reference's top K",
			ref:  rep(1, tok(" A", a(" A", 0.40), a(" B", 0.39))),
			run:  rep(1, tok(" Z", a(" Z", 0.40), a(" A", 0.39))),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Of: 1, Shared: 1, K: 2,
				KL: ptr(notInKL), MaxKL: ptr(notInKL), Top1: ptr(0.0),
				Diverged: &Divergence{Ref: a(" A", 0.40), Run: a(" Z", 0.40)},
				Why:      "a real disagreement at token 1"},
		},
		{
			name: "the reference's top two within the margin, but this run's token its fifth, 5.25 nats down: a real disagreement",
			ref:  rep(1, tok(" A", a(" A", 0.45), a(" B", 0.44), a(" C", 0.05), a(" D", 0.03), a(" E", 0.45*math.Exp(-5.25)))),
			run:  rep(1, tok(" E", a(" E", 0.45), a(" A", 0.44), a(" B", 0.05), a(" C", 0.03), a(" D", 0.45*math.Exp(-5.25)))),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Of: 1, Shared: 1, K: 5,
				KL: ptr(fifthKL), MaxKL: ptr(fifthKL), Top1: ptr(0.0),
				Diverged: &Divergence{Ref: a(" A", 0.45), Run: a(" E", 0.45), RunInRef: ptr(math.Log(0.45) - 5.25), Gap: ptr(5.25)},
				Why:      "a real disagreement at token 1"},
		},
		{
			name:   "this run's token the reference's third, exactly the margin below its top: a near-tie",
			bounds: Bounds{TieMargin: 0.25, MaxKL: 1},
			ref:    rep(1, tok("a", measure.Alt{Text: "a", Logprob: -1}, measure.Alt{Text: "b", Logprob: -1.125}, measure.Alt{Text: "c", Logprob: -1.25})),
			run:    rep(1, tok("c", measure.Alt{Text: "c", Logprob: -1}, measure.Alt{Text: "a", Logprob: -1.125}, measure.Alt{Text: "b", Logprob: -1.25})),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Of: 1, Shared: 1, K: 3,
				KL: ptr(thirdKL), MaxKL: ptr(thirdKL), Top1: ptr(0.0),
				Diverged: &Divergence{Ref: measure.Alt{Text: "a", Logprob: -1}, Run: measure.Alt{Text: "c", Logprob: -1},
					RunInRef: ptr(-1.25), Gap: ptr(0.25), Tie: true},
				OK: true},
		},
		{
			name:   "this run's token the reference's third, just past the margin below its top: a real disagreement",
			bounds: Bounds{TieMargin: 0.25 - 1e-9, MaxKL: 1},
			ref:    rep(1, tok("a", measure.Alt{Text: "a", Logprob: -1}, measure.Alt{Text: "b", Logprob: -1.125}, measure.Alt{Text: "c", Logprob: -1.25})),
			run:    rep(1, tok("c", measure.Alt{Text: "c", Logprob: -1}, measure.Alt{Text: "a", Logprob: -1.125}, measure.Alt{Text: "b", Logprob: -1.25})),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Of: 1, Shared: 1, K: 3,
				KL: ptr(thirdKL), MaxKL: ptr(thirdKL), Top1: ptr(0.0),
				Diverged: &Divergence{Ref: measure.Alt{Text: "a", Logprob: -1}, Run: measure.Alt{Text: "c", Logprob: -1},
					RunInRef: ptr(-1.25), Gap: ptr(0.25)},
				Why: "a real disagreement at token 1"},
		},
		{
			name: "a tie wider than the margin is a real disagreement",
			ref:  rep(1, tok(" A", a(" A", 0.50), a(" B", 0.40))),
			run:  rep(1, tok(" B", a(" B", 0.50), a(" A", 0.40))),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Of: 1, Shared: 1, K: 2,
				KL: ptr(wideKL), MaxKL: ptr(wideKL), Top1: ptr(0.0),
				Diverged: &Divergence{Ref: a(" A", 0.50), Run: a(" B", 0.50), RunInRef: ptr(math.Log(0.40)),
					Gap: ptr(math.Log(0.50) - math.Log(0.40))},
				Why: "a real disagreement at token 1"},
		},
		{
			name: "this run ends where the reference goes on: a real disagreement",
			ref:  rep(1, sure("a"), sure("b")),
			run:  rep(1, sure("a")),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Agree: 1, Of: 2, Shared: 1, K: 3,
				KL: ptr(0.0), MaxKL: ptr(0.0), Top1: ptr(1.0),
				Diverged: &Divergence{Position: 1, Ref: alt(ptr(sure("b"))), Ended: EndedRun},
				Why:      "a real disagreement at token 2"},
		},
		{
			name: "the reference ends where this run goes on",
			ref:  rep(1),
			run:  rep(1, sure("a")),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Of: 1,
				Diverged: &Divergence{Run: alt(ptr(sure("a"))), Ended: EndedReference},
				Why:      "a real disagreement at token 1"},
		},
		{
			name: "no logprobs on the reference: text only, in bytes",
			ref:  measure.Reply{N: 1, Content: "The capital is Paris.", Logprobs: measure.LogprobsNone},
			run:  rep(1, sure("The capital"), sure(" is"), sure(" Paris.")),
			want: Reply{N: 1, RefN: 1, Unit: UnitBytes, TextOnly: "the reference's reply: no logprobs sent", Agree: 21, Of: 21, OK: true},
		},
		{
			name: "logprobs said sent, but no token for the content: text only",
			ref:  rep(1, sure("Paris")),
			run:  measure.Reply{N: 1, Content: "Paris", Logprobs: measure.LogprobsSent},
			want: Reply{N: 1, RefN: 1, Unit: UnitBytes, TextOnly: "this run's reply: its tokens, joined (0 bytes), do not end in its content (5 bytes)", Agree: 5, Of: 5, OK: true},
		},
		{
			name: "both empty, logprobs sent: tokens, agreeing",
			ref:  rep(1),
			run:  rep(2),
			want: Reply{N: 2, RefN: 1, Unit: UnitTokens, OK: true},
		},
		{
			name: "text only, differing inside a character: quoted from its first byte",
			ref:  measure.Reply{N: 1, Content: "café", Logprobs: measure.LogprobsRefused},
			run:  measure.Reply{N: 1, Content: "cafè au lait, with a long tail that is cut", Logprobs: measure.LogprobsRefused},
			want: Reply{N: 1, RefN: 1, Unit: UnitBytes, TextOnly: "the reference's reply: logprobs refused", Agree: 4, Of: 43,
				Diverged: &Divergence{Position: 4, Ref: measure.Alt{Text: "é"}, Run: measure.Alt{Text: "è au lait, with a long "}},
				Why:      "the texts differ at byte 5"},
		},
		{
			name: "text only, this run shorter",
			ref:  measure.Reply{N: 1, Content: "Paris"},
			run:  measure.Reply{N: 1, Content: "Par"},
			want: Reply{N: 1, RefN: 1, Unit: UnitBytes, TextOnly: noneAsked, Agree: 3, Of: 5,
				Diverged: &Divergence{Position: 3, Ref: measure.Alt{Text: "is"}, Ended: EndedRun},
				Why:      "the texts differ at byte 4"},
		},
		{
			name: "text only, the reference shorter",
			ref:  measure.Reply{N: 1, Content: "Par"},
			run:  measure.Reply{N: 1, Content: "Paris"},
			want: Reply{N: 1, RefN: 1, Unit: UnitBytes, TextOnly: noneAsked, Agree: 3, Of: 5,
				Diverged: &Divergence{Position: 3, Run: measure.Alt{Text: "is"}, Ended: EndedReference},
				Why:      "the texts differ at byte 4"},
		},
		{
			name: "text only, the first character apart inside it; a long tail cut at a character's start",
			ref:  measure.Reply{N: 1, Content: "é"},
			run:  measure.Reply{N: 1, Content: "èxéééééééééééééé"},
			want: Reply{N: 1, RefN: 1, Unit: UnitBytes, TextOnly: noneAsked, Agree: 1, Of: 31,
				Diverged: &Divergence{Position: 1, Ref: measure.Alt{Text: "é"}, Run: measure.Alt{Text: "èxéééééééééé"}},
				Why:      "the texts differ at byte 2"},
		},
		{
			name: "text only, not UTF-8: cut where it is, a character being 4 bytes at most",
			ref:  measure.Reply{N: 1, Content: strings.Repeat("\x80", 20) + "a" + strings.Repeat("\x80", 10)},
			run:  measure.Reply{N: 1, Content: "a"},
			want: Reply{N: 1, RefN: 1, Unit: UnitBytes, TextOnly: noneAsked, Agree: 0, Of: 31,
				Diverged: &Divergence{Ref: measure.Alt{Text: strings.Repeat("\x80", 20) + "a\x80\x80\x80"}, Run: measure.Alt{Text: "a"}},
				Why:      "the texts differ at byte 1"},
		},
		{
			name: "text only, exactly as long as a quote",
			ref:  measure.Reply{N: 1, Content: "a" + strings.Repeat("b", 24)},
			run:  measure.Reply{N: 1, Content: "a"},
			want: Reply{N: 1, RefN: 1, Unit: UnitBytes, TextOnly: noneAsked, Agree: 1, Of: 25,
				Diverged: &Divergence{Position: 1, Ref: measure.Alt{Text: strings.Repeat("b", 24)}, Ended: EndedRun},
				Why:      "the texts differ at byte 2"},
		},
		{
			name: "this run's reply is an error",
			ref:  rep(1, sure("a")),
			run:  measure.Reply{N: 1, Error: "HTTP 500", Logprobs: measure.LogprobsSent},
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Why: "this run's reply is an error"},
		},
		{
			name: "the reference's reply is an error",
			ref:  measure.Reply{N: 1, Error: "HTTP 500"},
			run:  rep(1, sure("a")),
			want: Reply{N: 1, RefN: 1, Unit: UnitBytes, TextOnly: "the reference's reply: no logprobs asked", Why: "the reference's reply is an error"},
		},
		{
			name: "the same tokens but the distributions apart: the mean KL above the bound",
			ref:  rep(1, tok("a", a("a", 0.5), a("b", 0.3), a("c", 0.1))),
			run:  rep(1, tok("a", a("a", 0.4), a("c", 0.35), a("b", 0.1))),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Agree: 1, Of: 1, Shared: 1, K: 3,
				KL:    ptr(klByHand(map[string]float64{"a": 0.5, "b": 0.3, "c": 0.1}, map[string]float64{"a": 0.4, "c": 0.35, "b": 0.1})),
				MaxKL: ptr(klByHand(map[string]float64{"a": 0.5, "b": 0.3, "c": 0.1}, map[string]float64{"a": 0.4, "c": 0.35, "b": 0.1})),
				Top1:  ptr(1.0), Why: "the mean KL, 0.2938 nats, is above 0.01"},
		},
		{
			name:   "a KL of exactly the bound is within it",
			ref:    rep(1, sure("a")),
			run:    rep(1, sure("a")),
			bounds: Bounds{TieMargin: 0.1, MaxKL: 0},
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Agree: 1, Of: 1, Shared: 1, K: 3,
				KL: ptr(0.0), MaxKL: ptr(0.0), Top1: ptr(1.0), OK: true},
		},
		{
			name: "a reference that did not take its most likely token: this run's, its top-1, is among its top K",
			ref:  rep(1, tok(" A", a(" B", 0.50), a(" A", 0.47))),
			run:  rep(1, tok(" B", a(" B", 0.50), a(" A", 0.47))),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Of: 1, Shared: 1, K: 2, KL: ptr(0.0), MaxKL: ptr(0.0), Top1: ptr(1.0),
				Diverged: &Divergence{Ref: a(" A", 0.47), Run: a(" B", 0.50), RunInRef: ptr(math.Log(0.50)),
					Gap: ptr(0.0), Tie: true},
				OK: true},
		},
		{
			name:   "a gap of exactly the margin is within it",
			bounds: Bounds{TieMargin: 0.25, MaxKL: 0.1},
			ref:    rep(1, tok("a", measure.Alt{Text: "a", Logprob: -0.5}, measure.Alt{Text: "b", Logprob: -0.75})),
			run:    rep(1, tok("b", measure.Alt{Text: "b", Logprob: -0.5}, measure.Alt{Text: "a", Logprob: -0.75})),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Of: 1, Shared: 1, K: 2,
				KL: ptr(0.25 * (math.Exp(-0.5) - math.Exp(-0.75)) / (math.Exp(-0.5) + math.Exp(-0.75))), MaxKL: ptr(0.25 * (math.Exp(-0.5) - math.Exp(-0.75)) / (math.Exp(-0.5) + math.Exp(-0.75))), Top1: ptr(0.0),
				Diverged: &Divergence{Ref: measure.Alt{Text: "a", Logprob: -0.5}, Run: measure.Alt{Text: "b", Logprob: -0.5},
					RunInRef: ptr(-0.75), Gap: ptr(0.25), Tie: true},
				OK: true},
		},
		{
			name: "a position without alternatives is left out of the shared ones, not the end of them",
			ref:  rep(1, tok("a"), sure("b")),
			run:  rep(1, tok("a"), sure("b")),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Agree: 2, Of: 2, Shared: 1, K: 3,
				KL: ptr(0.0), MaxKL: ptr(0.0), Top1: ptr(1.0), OK: true},
		},
		{
			name: "no alternatives listed: no shared position, judged on the tokens",
			ref:  rep(1, tok("a"), tok("b")),
			run:  rep(1, tok("a"), tok("b")),
			want: Reply{N: 1, RefN: 1, Unit: UnitTokens, Agree: 2, Of: 2, OK: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.bounds
			if b == (Bounds{}) {
				b = bounds
			}
			got := Compare(&tt.ref, &tt.run, b)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("Compare() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// klByHand is KL(p || q) over the union of two top-3 lists, the floors and
// renormalising written out the long way.
func klByHand(p, q map[string]float64) float64 {
	fl := func(m map[string]float64) float64 {
		sum, least := 0.0, 1.0
		for _, v := range m {
			sum += v
			least = min(least, v)
		}
		return max(min(least, 1-sum), MinProb)
	}
	union := map[string]bool{}
	for k := range p {
		union[k] = true
	}
	for k := range q {
		union[k] = true
	}
	pp, qq := map[string]float64{}, map[string]float64{}
	var ps, qs float64
	for k := range union {
		pp[k], qq[k] = fl(p), fl(q)
		if v, ok := p[k]; ok {
			pp[k] = v
		}
		if v, ok := q[k]; ok {
			qq[k] = v
		}
		ps += pp[k]
		qs += qq[k]
	}
	d := 0.0
	for k := range union {
		d += pp[k] / ps * math.Log((pp[k]/ps)/(qq[k]/qs))
	}
	return d
}

func TestTopK(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	lp := func(text string, l float64) measure.Alt { return measure.Alt{Text: text, Logprob: l} }
	tests := []struct {
		name string
		list []measure.Alt
		k    int
		want []measure.Alt
	}{
		{"in order already", []measure.Alt{lp("a", -0.1), lp("b", -2), lp("c", -3)}, 5,
			[]measure.Alt{lp("a", -0.1), lp("b", -2), lp("c", -3)}},
		{"out of order, cut to k", []measure.Alt{lp("c", -3), lp("a", -0.1), lp("d", -4), lp("b", -2)}, 2,
			[]measure.Alt{lp("a", -0.1), lp("b", -2)}},
		{"a repeat keeps its most likely entry", []measure.Alt{lp("b", -2), lp("a", -1), lp("a", -3), lp("b", -0.5), lp("c", -4)}, 5,
			[]measure.Alt{lp("b", -0.5), lp("a", -1), lp("c", -4)}},
		{"a repeat as likely as the first keeps its place", []measure.Alt{lp("a", -1), lp("b", -1), lp("a", -1)}, 5,
			[]measure.Alt{lp("a", -1), lp("b", -1)}},
		{"a repeat below the cut does not push another out", []measure.Alt{lp("a", -0.1), lp("b", -1), lp("a", -2)}, 2,
			[]measure.Alt{lp("a", -0.1), lp("b", -1)}},
		{"NaN and positive logprobs are left out; -Inf is the floor; a rounding above 0 is 0",
			[]measure.Alt{lp("n", nan), lp("p", 0.5), lp("i", inf), lp("z", math.Inf(-1)), lp("r", 1e-6), lp("s", roundingSlack), lp("t", 2*roundingSlack)}, 5,
			[]measure.Alt{lp("r", 0), lp("s", 0), lp("z", math.Log(MinProb))}},
		{"equal logprobs keep their order", []measure.Alt{lp("a", -1), lp("b", -1), lp("c", -1)}, 2,
			[]measure.Alt{lp("a", -1), lp("b", -1)}},
		{"one id, two texts, is two tokens; one text, two ids too", []measure.Alt{aID("a", 7, 0.5), aID("A", 7, 0.6), aID("a", 8, 0.1), aID("A", 7, 0.05)}, 5,
			[]measure.Alt{aID("A", 7, 0.6), aID("a", 7, 0.5), aID("a", 8, 0.1)}},
		{"empty", nil, 5, []measure.Alt{}},
		{"k 0", []measure.Alt{lp("a", -1)}, 0, []measure.Alt{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := topK(make([]measure.Alt, 3), tt.list, tt.k)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-12), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("topK(%v, %d) mismatch (-want +got):\n%s", tt.list, tt.k, diff)
			}
		})
	}
}

// TestCompareHostile: what the serve sends out of order, repeated or not a
// logprob at all gives the figures of the clean lists.
func TestCompareHostile(t *testing.T) {
	clean := rep(1, tok("a", a("a", 0.6), a("b", 0.3), a("c", 0.05)), tok("b", a("b", 0.7), a("c", 0.2)))
	run := rep(2, tok("a", a("a", 0.5), a("c", 0.3), a("b", 0.1)), tok("c", a("c", 0.5), a("b", 0.45)))
	hostile := rep(1,
		tok("a", a("c", 0.05), measure.Alt{Text: "d", Logprob: math.NaN()}, a("b", 0.3), a("a", 0.6), a("b", 0.01), measure.Alt{Text: "e", Logprob: 3}),
		tok("b", a("c", 0.2), a("b", 0.7), a("c", 0.1), measure.Alt{Text: "f", Logprob: math.Inf(1)}))
	hostile.TopLogprobs = 3
	want := Compare(&clean, &run, bounds)
	got := Compare(&hostile, &run, bounds)
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("Compare(hostile) mismatch (-clean +hostile):\n%s", diff)
	}
	if _, err := json.Marshal(got); err != nil {
		t.Errorf("json.Marshal(Compare(hostile)) = %v: every figure must be a number JSON can hold", err)
	}
	// A token's own logprob that is not one is reported from its list, or
	// as the floor.
	bad := rep(3, measure.Token{Text: "c", Logprob: math.NaN(), Top: []measure.Alt{a("c", 0.25), a("a", 0.2)}}, measure.Token{Text: "z", Logprob: 2})
	r := Compare(&clean, &bad, bounds)
	if r.Diverged == nil || r.Diverged.Run.Logprob != math.Log(0.25) {
		t.Errorf("Compare(NaN token logprob).Diverged = %+v, want the run's token at log(0.25) from its list", r.Diverged)
	}
	bad.Generated[0].Top = nil
	r = Compare(&clean, &bad, bounds)
	if r.Diverged == nil || r.Diverged.Run.Logprob != math.Log(MinProb) {
		t.Errorf("Compare(NaN token logprob, no list).Diverged = %+v, want the run's token at log(MinProb)", r.Diverged)
	}
}

// TestCompareK: sides that listed different numbers of alternatives are
// compared on the smaller, and the reply says so.
func TestCompareK(t *testing.T) {
	five := rep(1, tok("a", a("a", 0.5), a("b", 0.2), a("c", 0.1), a("d", 0.05), a("e", 0.04)))
	five.TopLogprobs = 5
	three := rep(1, tok("a", a("a", 0.5), a("b", 0.2), a("c", 0.1)))
	three.TopLogprobs = 3
	got := Compare(&five, &three, bounds)
	if got.K != 3 || got.KNote != "the reference listed 5 alternatives, this run 3: both compared on their top 3" {
		t.Errorf("Compare(5 against 3) K = %d, KNote %q; want 3 and a note", got.K, got.KNote)
	}
	// On the top 3 of both, the lists are the same: no distance.
	if got.KL == nil || *got.KL != 0 {
		t.Errorf("Compare(5 against 3) KL = %v, want 0: both cut to their top 3", got.KL)
	}
	if got := Compare(&three, &five, bounds); got.KNote != "the reference listed 3 alternatives, this run 5: both compared on their top 3" {
		t.Errorf("Compare(3 against 5) KNote = %q", got.KNote)
	}
	// Asked for none: the longest list sent; at most MaxK.
	long := rep(1, tok("a", a("a", 0.5)))
	for i := range MaxK + 5 {
		long.Generated[0].Top = append(long.Generated[0].Top, a(strings.Repeat("x", i+1), 0.001))
	}
	long.TopLogprobs = 0
	if got := Compare(&long, &long, bounds); got.K != MaxK {
		t.Errorf("Compare(%d alternatives, none asked) K = %d, want %d", MaxK+6, got.K, MaxK)
	}
}

// TestCompareIDs: tokens are the same when their texts are, and their ids
// too when both sides give one.
func TestCompareIDs(t *testing.T) {
	withID := func(text string, id int) measure.Token {
		return measure.Token{Text: text, ID: &id, Logprob: -0.1, Top: []measure.Alt{aID(text, id, 0.9)}}
	}
	noID := func(text string) measure.Token { return tok(text, a(text, 0.9)) }
	tests := []struct {
		name     string
		ref, run measure.Token
		agree    int
	}{
		{"one id, two texts (the right id, the wrong word)", withID("\ufffd", 5), withID("\xe9", 5), 0},
		{"one id, one text", withID("a", 5), withID("a", 5), 1},
		{"one text, two ids", withID("a", 5), withID("a", 6), 0},
		{"an id on one side only: by text", withID("a", 5), noID("a"), 1},
		{"an id on one side only, texts apart", withID("a", 5), noID("b"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, run := rep(1, tt.ref), rep(1, tt.run)
			if got := Compare(&ref, &run, bounds); got.Agree != tt.agree {
				t.Errorf("Compare(%+v, %+v).Agree = %d, want %d", tt.ref, tt.run, got.Agree, tt.agree)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	ref := []measure.Reply{
		{N: 1, Prompt: "warm", Warmup: true},
		{N: 1, Prompt: "a", Error: "HTTP 500"},
		{N: 2, Prompt: "a"},
		{N: 3, Prompt: "b"},
		{N: 4, Prompt: "a"},
		{N: 5, Prompt: "c", Error: "first"},
		{N: 6, Prompt: "c", Error: "second"},
	}
	run := []measure.Reply{{N: 1, Prompt: "b"}, {N: 2, Prompt: "a"}, {N: 3, Prompt: "warm"}, {N: 4, Prompt: "c"}, {N: 5, Prompt: "B"}}
	var got []int
	for _, p := range Match(run, ref) {
		n := 0
		if p != nil {
			n = p.N
		}
		got = append(got, n)
	}
	// b: 3; a: the first that is not an error, 2; warm: a warm-up, none; c:
	// both errors, the first; B: none (the text, exactly).
	if diff := cmp.Diff([]int{3, 2, 0, 5, 0}, got); diff != "" {
		t.Errorf("Match() reference replies mismatch (-want +got):\n%s", diff)
	}
	all := CompareAll(run, ref, bounds)
	if all[2].RefN != 0 || all[2].OK || all[2].Why != "not in the reference" || all[2].N != 3 {
		t.Errorf("CompareAll() for a prompt not in the reference = %+v", all[2])
	}
	if all[0].RefN != 3 || all[0].N != 1 || !all[0].OK {
		t.Errorf("CompareAll() for prompt b = %+v, want reference reply 3, agreeing (both empty)", all[0])
	}
	if all[3].RefN != 5 || all[3].N != 4 || all[3].Why != "the reference's reply is an error" {
		t.Errorf("CompareAll() for prompt c, after one not in the reference = %+v, want reference reply 5, an error", all[3])
	}
}

func TestOrDefault(t *testing.T) {
	var unset *Bounds
	if got := unset.OrDefault(); got != Default {
		t.Errorf("(*Bounds)(nil).OrDefault() = %v, want %v", got, Default)
	}
	// Bounds that were set stay, 0 included: 0 is exact, not "unset".
	for _, b := range []Bounds{{}, {TieMargin: 0, MaxKL: 1}, {TieMargin: 0.2, MaxKL: 0}} {
		if got := b.OrDefault(); got != b {
			t.Errorf("%v.OrDefault() = %v, want it unchanged", b, got)
		}
	}
}

// A serve that lists its end token after the text ("<|im_end|>", not in its
// content: measure.Reply.TokensNotText allows it) ended where the other side
// ended: the tag is no token of the reply's text, and no disagreement.
func TestCompareTrailingEndToken(t *testing.T) {
	end := sure("<|im_end|>")
	plain := rep(1, sure("Paris"), sure("."))
	withEnd := rep(1, sure("Paris"), sure("."), end)
	withEnd.Content = "Paris."
	tests := []struct {
		name      string
		ref, run  measure.Reply
		ok        bool
		agree, of int
	}{
		{"the run lists it", plain, withEnd, true, 2, 2},
		{"the reference lists it", withEnd, plain, true, 2, 2},
		{"both list it", withEnd, withEnd, true, 2, 2},
		// In the content, the tag is text: a token the other side lacks.
		{"the run streamed it as text", plain, rep(1, sure("Paris"), sure("."), end), false, 2, 3},
		// A word after the text on one side is a disagreement still.
		{"a word after the text", plain, func() measure.Reply { r := rep(1, sure("Paris"), sure("."), sure(" Yes")); return r }(), false, 2, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compare(&tt.ref, &tt.run, bounds)
			if got.Unit != UnitTokens || got.OK != tt.ok || got.Agree != tt.agree || got.Of != tt.of {
				t.Errorf("Compare: unit %s ok %v agree %d/%d (%s); want tokens, ok %v, %d/%d", got.Unit, got.OK, got.Agree, got.Of, got.Why, tt.ok, tt.agree, tt.of)
			}
		})
	}
}

// A run that takes the reference's fifth token, 5.25 nats below its top where
// the reference's top two are 0.02 apart, after 256 tokens the same: the one
// position's KL (about 1) is diluted to under DefaultMaxKL by the reply's
// mean, so only the tie rule can fail it, and does under the defaults.
func TestCompareFarTokenAfterLongAgreement(t *testing.T) {
	var refToks, runToks []measure.Token
	for range 256 {
		refToks, runToks = append(refToks, sure("a")), append(runToks, sure("a"))
	}
	refToks = append(refToks, tok(" A", a(" A", 0.45), a(" B", 0.44), a(" C", 0.05), a(" D", 0.03), a(" E", 0.45*math.Exp(-5.25))))
	runToks = append(runToks, tok(" E", a(" E", 0.45), a(" A", 0.44), a(" B", 0.05), a(" C", 0.03), a(" D", 0.45*math.Exp(-5.25))))
	ref, run := rep(1, refToks...), rep(1, runToks...)
	got := Compare(&ref, &run, Default)
	if got.OK || got.Diverged == nil || got.Diverged.Tie || *got.KL > DefaultMaxKL {
		t.Errorf("Compare under the defaults: OK %v, diverged %+v, mean KL %.4f; want a real disagreement at token 257 with the mean KL within %g", got.OK, got.Diverged, *got.KL, DefaultMaxKL)
	}
	if got.Why != "a real disagreement at token 257" {
		t.Errorf("why %q, want the real disagreement at token 257", got.Why)
	}
}
