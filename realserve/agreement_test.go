package realserve

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/agree"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
)

// topK is the top_logprobs these tests ask for: the gate's default.
const topK = 5

// variantModel is the name of a variant of the tiny model in Ollama.
func variantModel(v Variant) string {
	if v == F32 {
		return modelName
	}
	return modelName + "-" + v.String()
}

// variantServe starts an Ollama of its own in dir with every variant of
// the tiny model created in it, and a warm-up asked of each.
func variantServe(t *testing.T) *ollamaServe {
	t.Helper()
	if skip(t) {
		return nil
	}
	ollama, err := findOllama()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := startOllama(ollama, dir, "variants.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stop()
		if left := leftBehind(dir); len(left) > 0 {
			t.Errorf("the Ollama of the variants left processes behind: %s", strings.Join(left, "; "))
		}
	})
	for _, v := range []Variant{F32, F16, Perturbed} {
		gguf := filepath.Join(dir, v.String()+".gguf")
		if err := WriteTinyVariant(gguf, v); err != nil {
			t.Fatal(err)
		}
		if err := s.createModel(variantModel(v), gguf); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// round asks every built-in prompt of model, in order, with top_logprobs
// topK, after a warm-up: the replies numbered from 1, as the gate numbers
// them.
func round(t *testing.T, s *ollamaServe, model string, topK int) []openaiReply {
	t.Helper()
	ps := prompts.Builtin()
	if _, err := s.chatOpenAI(model, prompts.Warmup(ps).Prompt, 8, topK); err != nil {
		t.Fatal(err)
	}
	var out []openaiReply
	for n := 1; n <= len(ps); n++ {
		r, err := s.chatOpenAI(model, prompts.Asked(ps, n-1, 1).Prompt, maxTokens, topK)
		if err != nil {
			t.Fatalf("%s, reply %d: %v", model, n, err)
		}
		r.N = n
		if topK > 0 && r.Logprobs != measure.LogprobsSent {
			t.Fatalf("%s, reply %d: asked for logprobs, Ollama sent none", model, n)
		}
		out = append(out, r)
	}
	return out
}

// separation is how one variant's replies agree with the model's own.
type separation struct {
	variant string
	replies []agree.Reply
}

func (s separation) ok() bool {
	return !slices.ContainsFunc(s.replies, func(r agree.Reply) bool { return !r.OK })
}

// top1 and kl are the means over the replies' shared positions (weighted by
// them); maxKL the largest.
func (s separation) figures() (top1, kl, maxKL float64) {
	var shared int
	for _, r := range s.replies {
		if r.Top1 == nil || r.KL == nil {
			continue
		}
		top1 += *r.Top1 * float64(r.Shared)
		kl += *r.KL * float64(r.Shared)
		maxKL = max(maxKL, *r.MaxKL)
		shared += r.Shared
	}
	return top1 / float64(shared), kl / float64(shared), maxKL
}

// each is the per-reply agreement, as the assertion's detail gives it.
func (s separation) each() string {
	var parts []string
	for _, r := range s.replies {
		p := fmt.Sprintf("%d/%d", r.Agree, r.Of)
		if r.KL != nil {
			p += fmt.Sprintf(" KL %.2g", *r.KL)
		}
		if d := r.Diverged; d != nil {
			if d.Tie {
				p += fmt.Sprintf(" at a tie (gap %.2g nats)", *d.Gap)
			} else {
				p += fmt.Sprintf(" at token %d: the reference %s (%.2f), this run %s (%.2f)",
					d.Position, quote.Cut(d.Ref.Text, 40), d.Ref.Logprob, quote.Cut(d.Run.Text, 40), d.Run.Logprob)
				if d.Gap != nil {
					p += fmt.Sprintf(", %.2f nats below the reference's top there", *d.Gap)
				} else {
					p += ", not among the reference's top alternatives"
				}
			}
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// TestAgreementSeparation measures, through Ollama's OpenAI-compatible
// endpoint with logprobs, how far each variant of the tiny model agrees with
// the model itself (agree.Compare with the default bounds): the model asked
// again (identical), its F16 rounding (right but rounded: passes) and its
// perturbed layer (wrong: fails, at a real disagreement). The figures are
// logged as a table; docs/measuring.md quotes them.
func TestAgreementSeparation(t *testing.T) {
	s := variantServe(t)
	if s == nil {
		return
	}
	ref := round(t, s, variantModel(F32), topK)
	b := agree.Default
	var seps []separation
	for _, v := range []Variant{F32, F16, Perturbed} {
		run := round(t, s, variantModel(v), topK)
		sep := separation{variant: v.String()}
		if v == F32 {
			sep.variant = "f32 again (itself)"
		}
		for i := range run {
			sep.replies = append(sep.replies, agree.Compare(&ref[i].Reply, &run[i].Reply, b))
		}
		seps = append(seps, sep)
	}
	t.Logf("against the f32 model, %d replies of %d tokens, top_logprobs %d, bounds: tie margin %g nats, mean KL at most %g nats",
		len(ref), maxTokens, topK, b.TieMargin, b.MaxKL)
	t.Logf("%-20s %8s %10s %10s %8s  %s", "variant", "top-1", "mean KL", "max KL", "verdict", "each")
	for _, sep := range seps {
		top1, kl, maxKL := sep.figures()
		verdict := "ok"
		if !sep.ok() {
			verdict = "FAIL"
		}
		t.Logf("%-20s %7.1f%% %10.2g %10.2g %8s  %s", sep.variant, 100*top1, kl, maxKL, verdict, sep.each())
	}

	self, f16, perturbed := seps[0], seps[1], seps[2]
	for _, r := range self.replies {
		if !r.OK || r.Agree != r.Of || r.Diverged != nil || r.KL == nil || *r.KL != 0 {
			t.Errorf("itself, reply %d: %+v; want identical: every token, KL 0", r.N, r)
		}
	}
	if !f16.ok() {
		t.Errorf("f16: %s; want every reply ok (rounding is not a disagreement)", f16.each())
	}
	if perturbed.ok() {
		t.Errorf("perturbed: %s; want a reply that fails", perturbed.each())
	}
	real := false
	for _, r := range perturbed.replies {
		real = real || (r.Diverged != nil && !r.Diverged.Tie)
	}
	if !real {
		t.Errorf("perturbed: %s; want a real disagreement (not at a near-tie)", perturbed.each())
	}
}

// TestOllamaAgreement records a reference with the gate (record, --preset
// ollama) on the f32 model, then gates each variant against it
// (--reference): the model itself and its F16 rounding pass on agreement;
// the perturbed one fails on agreement alone, the detail quoting the first
// real disagreement with both tokens and their logprobs.
func TestOllamaAgreement(t *testing.T) {
	o := setUp(t)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	ref := o.command(t, "record", modelName, "reference", port, "--floor", "1")
	if ref.code != 0 || !ref.res.Pass() {
		t.Fatalf("record: exit %d, verdict %q, want 0 and pass: %+v", ref.code, ref.res.Verdict, ref.res.Assertions)
	}
	for _, r := range ref.res.Replies {
		if r.Logprobs != measure.LogprobsSent || len(r.Generated) != maxTokens {
			t.Fatalf("the reference's reply %d: logprobs %q, %d tokens with them; want %q, %d", r.N, r.Logprobs, len(r.Generated), measure.LogprobsSent, maxTokens)
		}
	}
	args := append([]string{"--floor", "1", "--reference", ref.out}, cpuIsExpected...)
	quoted := regexp.MustCompile(`reply \d+, token \d+: the reference ".*" \(-?\d+\.\d+\), this run ".*" \(-?\d+\.\d+\)`)
	for _, v := range []Variant{F32, F16, Perturbed} {
		t.Run(v.String(), func(t *testing.T) {
			g := o.command(t, "run", variantModel(v), v.String(), port, args...)
			a := g.assertion(t, judge.Agreement)
			t.Logf("%s: agreement ok %v: %s", v, a.OK, a.Detail)
			if v != Perturbed {
				if g.code != 0 || !a.OK {
					t.Errorf("exit %d, agreement ok %v (%s); want 0 and ok", g.code, a.OK, a.Detail)
				}
				return
			}
			if g.code != 1 || a.OK || !quoted.MatchString(a.Detail) {
				t.Errorf("exit %d, agreement ok %v (%s); want 1, FAIL quoting the first real disagreement", g.code, a.OK, a.Detail)
			}
			for _, other := range g.res.Assertions {
				if other.Name != judge.Agreement && !other.OK {
					t.Errorf("assertion %s failed (%s): only agreement should", other.Name, other.Detail)
				}
			}
		})
	}
}
