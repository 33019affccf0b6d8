package agree

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// Units of Reply.Unit.
const (
	UnitTokens = "tokens"
	UnitBytes  = "bytes" // text only: either side sent no logprobs
)

// Which side of a divergence ended there (Divergence.Ended).
const (
	EndedRun       = "run"
	EndedReference = "reference"
)

// MaxK is the most alternatives a position is compared on: OpenAI's bound on
// top_logprobs. A longer list is cut to its MaxK most likely entries, so one
// position costs at most MaxK² comparisons however long the serve's list.
const MaxK = 20

// MinProb is the least probability any token is given, 1e-9 (a logprob of
// -20.7): a token one side's list does not hold, or holds at -Inf, still has
// some mass, so the KL stays finite; a token the reference gives real mass and
// this run none then costs about 20 nats times that mass.
const MinProb = 1e-9

// roundingSlack is how far above 0 a logprob may be and still be read as 0: a
// log-softmax computed in float32 can round log(1) up by this much.
const roundingSlack = 1e-4

// quoteBytes is how much of each side's text a text-only divergence keeps.
const quoteBytes = 24

var minLogprob = math.Log(MinProb)

// Compare says how far run agrees with ref, two replies to the same prompt,
// within the bounds b.
//
// With logprobs on both sides (Reply.Logprobs measure.LogprobsSent), each
// side's tokens being the text it streamed (measure.Reply.TokensNotText), the
// unit is the token. Two tokens are equal when their texts are, and their ids
// too where both sides give one. Agree is the tokens equal before the first
// divergence, Of the tokens of the longer reply. The divergence is at a
// near-tie when this run's token there is among the reference's top K and
// within b.TieMargin nats of the reference's most likely token, on the
// reference's logprobs: the reference could have taken it had its logits
// been rounded otherwise. How close the reference's own top two are says
// nothing of the token this run took. A reply that ends where the other goes
// on diverges there, never at a tie (its end token is not in the lists),
// and that is a real disagreement unless it was cut at its max_tokens
// (Divergence.Cut): a reference recorded with another --max-tokens agrees
// on the tokens both sides have.
//
// The shared positions are those up to and including the first divergence,
// where both sides saw the same text, and where both sides listed
// alternatives. At each, the two top-K lists (K the smaller of the two sides'
// lists, at most MaxK) are read as distributions over the union of their
// tokens: a token one side does not list gets that side's floor, the smaller
// of its K-th probability and the mass its list leaves over, and never less
// than MinProb; both are renormalised on the union, and KL(ref || run) is
// taken. Reply.KL is its mean over the shared positions, MaxKL its largest,
// Top1 the fraction of them where both sides' most likely token is the same.
//
// The reply agrees (OK) when it has no real disagreement (no divergence, or
// one at a near-tie), this run listed alternatives (sound ones, after topK)
// at every shared position where the reference did, and its mean KL is at
// most b.MaxKL: a run that withholds its lists does not escape the distance.
//
// Without logprobs on either side, or with tokens that are not a side's
// streamed text, the unit is the byte: Agree is the common prefix of the two
// contents, and the reply agrees only when they are equal; this is weaker
// evidence, Unit says so and TextOnly says why.
//
// Either reply being an error fails it. Input is the serve's: NaN, positive
// and infinite logprobs, lists out of order or with repeats are handled (see
// topK). The time is linear in the tokens.
func Compare(ref, run *measure.Reply, b Bounds) Reply {
	r := Reply{N: run.N, RefN: ref.N, Unit: UnitTokens}
	if r.TextOnly = textOnly(ref, run); r.TextOnly != "" {
		r.Unit = UnitBytes
	}
	if run.Error != "" {
		r.Why = "this run's reply is an error"
		return r
	}
	if ref.Error != "" {
		r.Why = "the reference's reply is an error"
		return r
	}
	if r.Unit == UnitBytes {
		compareText(&r, ref.Content, run.Content)
		return r
	}
	compareTokens(&r, ref, run, b)
	return r
}

// textOnly says why the two replies are compared by their text, or "" when
// their tokens can be: each side sent logprobs, and its tokens are the text
// it streamed (measure.Reply.TokensNotText). A serve that listed tokens it
// did not stream, or left some out, is compared by its text: its tokens say
// nothing of it.
func textOnly(ref, run *measure.Reply) string {
	if why := tokensWhy(ref); why != "" {
		return "the reference's reply: " + why
	}
	if why := tokensWhy(run); why != "" {
		return "this run's reply: " + why
	}
	return ""
}

// noLogprobs is why a reply's Logprobs leaves no tokens to compare.
var noLogprobs = map[string]string{
	"":                      "no logprobs asked",
	measure.LogprobsNone:    "no logprobs sent",
	measure.LogprobsRefused: "logprobs refused",
	measure.LogprobsGarbage: "logprobs not believed",
}

// tokensWhy is why r's tokens cannot be compared, or "".
func tokensWhy(r *measure.Reply) string {
	if r.Logprobs != measure.LogprobsSent {
		if why, ok := noLogprobs[r.Logprobs]; ok {
			return why
		}
		return "no logprobs"
	}
	return r.TokensNotText()
}

// compareText is Compare without logprobs: the common prefix in bytes.
func compareText(r *Reply, ref, run string) {
	n := min(len(ref), len(run))
	i := 0
	for i < n && ref[i] == run[i] {
		i++
	}
	r.Agree = i
	r.Of = max(len(ref), len(run))
	if i == r.Of {
		r.OK = true
		return
	}
	// Back to the start of the character the two differ in, so both
	// quotes are whole characters: the byte there on the side that has
	// one (before it, the two are the same).
	longer := ref
	if i == len(ref) {
		longer = run
	}
	i = runeStart(longer, i)
	r.Diverged = &Divergence{Position: r.Agree,
		Ref: measure.Alt{Text: cut(ref[i:])}, Run: measure.Alt{Text: cut(run[i:])}}
	r.Diverged.Ended = ended(len(ref), len(run), r.Agree)
	r.Why = fmt.Sprintf("the texts differ at byte %d", r.Agree+1)
}

// cut is s cut to quoteBytes bytes, at a character's start.
func cut(s string) string {
	if len(s) <= quoteBytes {
		return s
	}
	return s[:runeStart(s, quoteBytes)]
}

// runeStart is i, or the start of the character byte i of s is in: at most
// utf8.UTFMax-1 bytes back, so text that is not UTF-8 is cut where it is.
func runeStart(s string, i int) int {
	for j := i; j > i-utf8.UTFMax && j >= 0; j-- {
		if utf8.RuneStart(s[j]) {
			return j
		}
	}
	return i
}

// ended says which side ended at position i, if one did.
func ended(refLen, runLen, i int) string {
	if i == runLen {
		return EndedRun
	}
	if i == refLen {
		return EndedReference
	}
	return ""
}

// same reports whether two tokens are the same: their texts equal, and their
// ids too when both give one. An id alone is not enough: a serve with the
// right ids and the wrong words (a wrong vocabulary or byte decoding) does
// not agree.
func same(a, b measure.Alt) bool {
	if a.Text != b.Text {
		return false
	}
	return a.ID == nil || b.ID == nil || *a.ID == *b.ID
}

// alt is a token as an alternative.
func alt(t *measure.Token) measure.Alt {
	return measure.Alt{Text: t.Text, ID: t.ID, Logprob: t.Logprob}
}

// logprob is lp made sound: NaN or above roundingSlack is not a logprob (ok
// false); up to roundingSlack above 0 is 0; below log(MinProb), -Inf
// included, is log(MinProb).
func logprob(lp float64) (float64, bool) {
	if math.IsNaN(lp) || lp > roundingSlack {
		return 0, false
	}
	return min(max(lp, minLogprob), 0), true
}

// kOf is the top-K one side's lists are compared on: the top_logprobs it asked
// for, or the longest list it sent when it asked for none, at most MaxK.
func kOf(r *measure.Reply) int {
	k := r.TopLogprobs
	if k <= 0 {
		for i := range r.Generated {
			k = max(k, len(r.Generated[i].Top))
		}
	}
	return min(k, MaxK)
}

// topK appends to dst the k most likely entries of list, most likely first,
// each token once (its most likely entry), entries that are not logprobs left
// out, and returns it. It takes O(len(list)·k).
func topK(dst []measure.Alt, list []measure.Alt, k int) []measure.Alt {
	dst = dst[:0]
	for _, a := range list {
		lp, ok := logprob(a.Logprob)
		if !ok {
			continue
		}
		a.Logprob = lp
		if dup := find(dst, a); dup >= 0 {
			if a.Logprob <= dst[dup].Logprob {
				continue
			}
			dst = append(dst[:dup], dst[dup+1:]...)
		}
		// Insert in order, most likely first; a tie keeps the earlier.
		i := len(dst)
		for i > 0 && dst[i-1].Logprob < a.Logprob {
			i--
		}
		if i >= k {
			continue
		}
		if len(dst) < k {
			dst = append(dst, measure.Alt{})
		}
		copy(dst[i+1:], dst[i:len(dst)-1])
		dst[i] = a
	}
	return dst
}

// floor is the probability a side gives a token its list does not hold: the
// smaller of its last (K-th) probability and the mass the list leaves over,
// at least MinProb.
func floor(list []measure.Alt) float64 {
	sum := 0.0
	for _, a := range list {
		sum += math.Exp(a.Logprob)
	}
	f := min(math.Exp(list[len(list)-1].Logprob), 1-sum)
	return max(f, MinProb)
}

// probOf is the probability list gives a: its entry's, or fl when it has
// none; at least MinProb.
func probOf(list []measure.Alt, a measure.Alt, fl float64) float64 {
	if j := find(list, a); j >= 0 {
		return max(math.Exp(list[j].Logprob), MinProb)
	}
	return fl
}

// kl is KL(ref || run) in nats over the union of the two lists, each
// non-empty, as Compare defines it.
func kl(ref, run []measure.Alt) float64 {
	refFloor, runFloor := floor(ref), floor(run)
	// The union: ref's tokens, then run's that ref does not hold. p and q
	// are each side's probabilities over it, before renormalising.
	var pSum, qSum, pqSum float64
	add := func(p, q float64) {
		pSum += p
		qSum += q
		pqSum += p * math.Log(p/q)
	}
	for _, a := range ref {
		add(max(math.Exp(a.Logprob), MinProb), probOf(run, a, runFloor))
	}
	for _, a := range run {
		if find(ref, a) < 0 {
			add(refFloor, max(math.Exp(a.Logprob), MinProb))
		}
	}
	// Σ (p/P) log((p/P)/(q/Q)) = (Σ p log(p/q))/P + log(Q/P).
	d := pqSum/pSum + math.Log(qSum/pSum)
	return max(d, 0) // rounding can leave -1e-17
}

// find is the index of a's first entry in list, or -1.
func find(list []measure.Alt, a measure.Alt) int {
	for j := range list {
		if same(list[j], a) {
			return j
		}
	}
	return -1
}

// compareTokens is Compare with logprobs on both sides.
func compareTokens(r *Reply, ref, run *measure.Reply, b Bounds) {
	rk, uk := kOf(ref), kOf(run)
	r.K = min(rk, uk)
	if rk != uk && r.K > 0 {
		r.KNote = fmt.Sprintf("the reference listed %d alternatives, this run %d: both compared on their top %d", rk, uk, r.K)
	}
	rg, ug := ref.TextTokens(), run.TextTokens()
	n := min(len(rg), len(ug))
	r.Of = max(len(rg), len(ug))
	i := 0
	for i < n && same(alt(&rg[i]), alt(&ug[i])) {
		i++
	}
	r.Agree = i
	// The shared positions: up to and including the divergence, where
	// both sides have a token.
	last := min(i, n-1)
	var sum, top1 float64
	var worst float64
	var rl, ul []measure.Alt
	withheld := 0 // the first token where the reference listed alternatives and this run none, 1-based
	for p := 0; p <= last; p++ {
		rl = topK(rl, rg[p].Top, r.K)
		ul = topK(ul, ug[p].Top, r.K)
		if len(rl) > 0 && len(ul) == 0 && withheld == 0 {
			withheld = p + 1
		}
		if len(rl) == 0 || len(ul) == 0 {
			continue
		}
		d := kl(rl, ul)
		sum += d
		worst = max(worst, d)
		if same(rl[0], ul[0]) {
			top1++
		}
		r.Shared++
	}
	if r.Shared > 0 {
		mean, t := sum/float64(r.Shared), top1/float64(r.Shared)
		r.KL, r.MaxKL, r.Top1 = &mean, &worst, &t
	}
	if i < r.Of {
		r.Diverged = divergence(ref, run, rg, ug, i, r.K, b)
	}
	// if, not switch: each condition is then a statement of its own, which
	// mutation testing can reach.
	if r.Diverged != nil && !r.Diverged.Tie && !r.Diverged.Cut {
		r.Why = fmt.Sprintf("a real disagreement at token %d", i+1)
	} else if withheld > 0 {
		r.Why = fmt.Sprintf("this run listed no alternatives at token %d, where the reference did: its distance from the reference is not measured", withheld)
	} else if r.KL != nil && *r.KL > b.MaxKL {
		r.Why = fmt.Sprintf("the mean KL, %.4f nats, is above %g", *r.KL, b.MaxKL)
	} else {
		r.OK = true
	}
}

// divergence is the first divergence, at position i of the two replies'
// tokens.
func divergence(ref, run *measure.Reply, rg, ug []measure.Token, i, k int, b Bounds) *Divergence {
	d := &Divergence{Position: i, Ended: ended(len(rg), len(ug), i)}
	if i < len(rg) {
		d.Ref = soundAlt(&rg[i], k)
	}
	if i < len(ug) {
		d.Run = soundAlt(&ug[i], k)
	}
	if d.Ended != "" {
		ender := ref
		if d.Ended == EndedRun {
			ender = run
		}
		d.Cut = cutAtCap(ender)
		return d
	}
	top := topK(nil, rg[i].Top, k)
	if j := find(top, d.Run); j >= 0 {
		gap := top[0].Logprob - top[j].Logprob
		d.RunInRef, d.Gap = &top[j].Logprob, &gap
	}
	d.Tie = d.Gap != nil && *d.Gap <= b.TieMargin
	return d
}

// cutAtCap reports whether r stopped at the max_tokens it asked for: its
// finish_reason "length", and at least that many tokens sent (a "length"
// short of the cap, or with no cap recorded, is not believed).
func cutAtCap(r *measure.Reply) bool {
	return r.FinishReason == "length" && r.MaxTokens > 0 && len(r.Generated) >= r.MaxTokens
}

// soundAlt is t as an alternative with a logprob fit to report: its own when
// that is one, else its entry in its own list, else log(MinProb).
func soundAlt(t *measure.Token, k int) measure.Alt {
	a := alt(t)
	lp, ok := logprob(a.Logprob)
	if !ok {
		lp = minLogprob
		own := topK(nil, t.Top, k)
		if j := find(own, a); j >= 0 {
			lp = own[j].Logprob
		}
	}
	a.Logprob = lp
	return a
}

// Match pairs each of the run's replies with the reference's reply to the
// same prompt text (not the same number: the order of requests may differ),
// or nil when the reference has none. Where the reference answered a prompt
// more than once, the first of its replies that is not an error is taken, or
// its first. The reference's warm-ups are left out.
func Match(run, ref []measure.Reply) []*measure.Reply {
	byPrompt := make(map[string]*measure.Reply, len(ref))
	for i := range ref {
		r := &ref[i]
		if r.Warmup {
			continue
		}
		if have, ok := byPrompt[r.Prompt]; !ok || have.Error != "" && r.Error == "" {
			byPrompt[r.Prompt] = r
		}
	}
	out := make([]*measure.Reply, len(run))
	for i := range run {
		out[i] = byPrompt[run[i].Prompt]
	}
	return out
}

// CompareAll compares each of the run's replies with the reference's reply to
// the same prompt (Match); a reply whose prompt the reference lacks has RefN 0
// and is not judged (OK false, Why says so).
func CompareAll(run, ref []measure.Reply, b Bounds) []Reply {
	pairs := Match(run, ref)
	out := make([]Reply, len(run))
	for i, p := range pairs {
		if p == nil {
			out[i] = Reply{N: run[i].N, Why: "not in the reference"}
			continue
		}
		out[i] = Compare(p, &run[i], b)
	}
	return out
}
