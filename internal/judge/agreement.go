package judge

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/agree"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
)

// tokenQuote bounds a token quoted in the agreement's detail.
const tokenQuote = 40

// Agreements is how each of the run's replies agrees with the reference's
// reply to the same prompt (agree.CompareAll), within in.Limits.Agreement:
// what result.json keeps as "agreement". Nil without a reference.
func Agreements(in Input) []agree.Reply {
	if in.Reference == nil {
		return nil
	}
	return agree.CompareAll(in.Replies, in.Reference.Replies, in.Limits.Agreement.OrDefault())
}

// judgeAgreement judges the agreement with in.Reference: every reply whose
// prompt the reference holds must agree (agree.Compare), and at least one
// must have been compared.
func judgeAgreement(in Input) Assertion {
	a := Assertion{Name: Agreement}
	if in.Reference.Missing != "" {
		a.Detail = fmt.Sprintf("no usable reference at %s: %s; --reference-missing skip leaves the assertion out until there is one", in.Reference.File, in.Reference.Missing)
		return a
	}
	b := in.Limits.Agreement.OrDefault()
	rs := Agreements(in)
	var each, missing, bad, notes []string
	var textOnly []byReason
	var quoted string
	compared, shared, top1 := 0, 0, 0.0
	kl, worst := 0.0, 0.0
	for i := range rs {
		r := &rs[i]
		if r.RefN == 0 {
			each = append(each, "-")
			missing = append(missing, strconv.Itoa(r.N))
			continue
		}
		compared++
		each = append(each, eachOf(r))
		if r.Unit == agree.UnitBytes {
			textOnly = addReason(textOnly, r.TextOnly, r.N)
		}
		if r.KNote != "" && !slices.Contains(notes, r.KNote) {
			notes = append(notes, r.KNote)
		}
		if r.Shared > 0 {
			shared += r.Shared
			kl += *r.KL * float64(r.Shared)
			top1 += *r.Top1 * float64(r.Shared)
			worst = max(worst, *r.MaxKL)
		}
		if r.OK {
			continue
		}
		if quoted == "" && r.Diverged != nil && !r.Diverged.Tie {
			quoted = disagreement(r)
			bad = append(bad, quoted)
			continue
		}
		bad = append(bad, fmt.Sprintf("reply %d: %s", r.N, r.Why))
	}
	figures := "each: " + strings.Join(each, ", ")
	if shared > 0 {
		positions := "positions"
		if shared == 1 {
			positions = "position"
		}
		figures += fmt.Sprintf("; mean KL %.4f nats over %d shared %s (largest %.4f), top-1 %.1f%%",
			kl/float64(shared), shared, positions, worst, top1/float64(shared)*100)
	}
	figures += fmt.Sprintf("; tie margin %g nats, mean KL at most %g", b.TieMargin, b.MaxKL)
	if len(missing) > 0 {
		figures += fmt.Sprintf("; not in the reference, not judged: reply %s", strings.Join(missing, ", "))
	}
	if len(textOnly) > 0 {
		var whys []string
		for _, t := range textOnly {
			whys = append(whys, fmt.Sprintf("reply %s: %s", strings.Join(t.replies, ", "), t.why))
		}
		figures += fmt.Sprintf("; text only: weaker evidence (%s: compared in bytes)", strings.Join(whys, "; "))
	}
	figures += strings.Join(append([]string{""}, notes...), "; ")
	ref := in.Reference.File
	if compared == 0 {
		a.Detail = fmt.Sprintf("no reply's prompt is in the reference %s: nothing to compare (%s)", ref, figures)
		return a
	}
	if len(bad) > 0 {
		a.Detail = fmt.Sprintf("%d of %d compared replies disagree with the reference %s: %s (%s)",
			len(bad), compared, ref, strings.Join(bad, "; "), figures)
		return a
	}
	a.OK = true
	a.Detail = fmt.Sprintf("%d of %d compared replies agree with the reference %s (%s)", compared, compared, ref, figures)
	return a
}

// byReason is the replies compared by text for one reason.
type byReason struct {
	why     string
	replies []string
}

// addReason adds reply n to the replies compared by text for why, in the
// order the reasons first came.
func addReason(rs []byReason, why string, n int) []byReason {
	for i := range rs {
		if rs[i].why == why {
			rs[i].replies = append(rs[i].replies, strconv.Itoa(n))
			return rs
		}
	}
	return append(rs, byReason{why: why, replies: []string{strconv.Itoa(n)}})
}

// eachOf is one reply's figure in the detail's "each:" list.
func eachOf(r *agree.Reply) string {
	s := fmt.Sprintf("%d/%d", r.Agree, r.Of)
	if r.Unit == agree.UnitBytes {
		s += " bytes"
	}
	if r.Diverged != nil && r.Diverged.Tie {
		s += fmt.Sprintf(" at a tie (gap %.2f nats)", *r.Diverged.Gap)
	}
	if r.Diverged != nil && r.Diverged.Cut {
		who := "the reference"
		if r.Diverged.Ended == agree.EndedRun {
			who = "this run"
		}
		s += " (" + who + " cut at its max tokens)"
	}
	return s
}

// disagreement quotes a reply's first real disagreement: both tokens (the
// serve's text, quoted) and their logprobs.
func disagreement(r *agree.Reply) string {
	d := r.Diverged
	unit := "token"
	if r.Unit == agree.UnitBytes {
		unit = "byte"
	}
	side := func(who string, t string, lp float64, ended bool) string {
		if ended {
			return who + " ended"
		}
		if r.Unit == agree.UnitBytes {
			return who + " " + quote.Cut(t, tokenQuote)
		}
		return fmt.Sprintf("%s %s (%.1f)", who, quote.Cut(t, tokenQuote), lp)
	}
	return fmt.Sprintf("reply %d, %s %d: %s, %s", r.N, unit, d.Position+1,
		side("the reference", d.Ref.Text, d.Ref.Logprob, d.Ended == agree.EndedReference),
		side("this run", d.Run.Text, d.Run.Logprob, d.Ended == agree.EndedRun))
}
