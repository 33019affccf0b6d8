package agree

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// The synthetic model of TestSeparation: each position's logits over vocab
// tokens are drawn around logitMean with spread logitSpread (logits of a small
// model's last layer are of this size), and one token, the model's intended
// one, is raised by a lead drawn evenly from 0 to maxLead nats: most positions
// are sure, some are near-ties, as in a real reply. The greedy token is the
// largest.
const (
	vocab       = 200
	logitMean   = 12.0
	logitSpread = 2.0
	maxLead     = 12.0
	sepReplies  = 64
	sepTokens   = 128
	sepK        = 5
)

// A route of TestSeparation: how it changes the reference's logits.
type route struct {
	name   string
	change func(z float64, rng *rand.Rand) float64
	want   string // "all": every reply agrees under the defaults; "none": none does; "": not asserted
}

var routes = []route{
	{"the same route", func(z float64, _ *rand.Rand) float64 { return z }, "all"},
	{"f16 rounding (1e-3 relative)", func(z float64, rng *rand.Rand) float64 { return z * (1 + 1e-3*rng.NormFloat64()) }, "all"},
	{"bf16 rounding (4e-3 relative)", func(z float64, rng *rand.Rand) float64 { return z * (1 + 4e-3*rng.NormFloat64()) }, "all"}, // within the bounds but for 1 run of 100 (TestSeparationTails)
	{"perturbed (logits + 0.5 nats)", func(z float64, rng *rand.Rand) float64 { return z + 0.5*rng.NormFloat64() }, "none"},
	{"perturbed (logits + 2 nats)", func(z float64, rng *rand.Rand) float64 { return z + 2*rng.NormFloat64() }, "none"},
}

// top is the k most likely tokens of logits z, as logprobs, most likely
// first.
func top(z []float64, k int) []measure.Alt {
	m := slices.Max(z)
	sum := 0.0
	for _, v := range z {
		sum += math.Exp(v - m)
	}
	lse := m + math.Log(sum)
	var idx []int // the k largest so far, largest first
	for i, v := range z {
		j := len(idx)
		for j > 0 && z[idx[j-1]] < v {
			j--
		}
		if j >= k {
			continue
		}
		if len(idx) < k {
			idx = append(idx, 0)
		}
		copy(idx[j+1:], idx[j:len(idx)-1])
		idx[j] = i
	}
	out := make([]measure.Alt, k)
	for i, id := range idx {
		out[i] = measure.Alt{Text: "t" + strconv.Itoa(id), ID: &id, Logprob: z[id] - lse}
	}
	return out
}

// synthetic is one reply's pair: the reference's and a route's, greedy, with
// their top-K lists, drawn from rng.
func synthetic(rng *rand.Rand, r route) (ref, run measure.Reply) {
	ref = measure.Reply{N: 1, Logprobs: measure.LogprobsSent, TopLogprobs: sepK}
	run = ref
	z, w := make([]float64, vocab), make([]float64, vocab)
	for range sepTokens {
		for i := range z {
			z[i] = logitMean + logitSpread*rng.NormFloat64()
		}
		z[rng.IntN(vocab)] += maxLead * rng.Float64()
		for i := range z {
			w[i] = r.change(z[i], rng)
		}
		for _, side := range []struct {
			reply *measure.Reply
			z     []float64
		}{{&ref, z}, {&run, w}} {
			t := top(side.z, sepK)
			side.reply.Generated = append(side.reply.Generated,
				measure.Token{Text: t[0].Text, ID: t[0].ID, Logprob: t[0].Logprob, Top: t})
			side.reply.Content += t[0].Text
		}
	}
	return ref, run
}

// TestSeparation compares synthetic pairs (a reference against itself,
// against its logits rounded as f16 and bf16 round them, and against
// perturbed logits) under the default bounds and logs the separation table
// docs/measuring.md quotes: go test -run TestSeparation -v ./internal/agree
func TestSeparation(t *testing.T) {
	t.Logf("%-30s %8s %9s %19s %7s %15s %10s",
		"route", "agree", "mean KL", "reply KL least-most", "top-1", "gaps min-max", "verdict")
	for ri, r := range routes {
		rng := rand.New(rand.NewPCG(17, uint64(ri)))
		var ok, diverged, notInTop, shared int
		var kl, top1 float64
		klLeast, klMost := math.Inf(1), 0.0
		gapLeast, gapMost := math.Inf(1), 0.0
		for range sepReplies {
			ref, run := synthetic(rng, r)
			got := Compare(&ref, &run, Default)
			if got.OK {
				ok++
			}
			shared += got.Shared
			kl += *got.KL * float64(got.Shared)
			top1 += *got.Top1 * float64(got.Shared)
			klLeast, klMost = min(klLeast, *got.KL), max(klMost, *got.KL)
			if d := got.Diverged; d != nil {
				diverged++
				if d.Gap == nil {
					notInTop++
					continue
				}
				gapLeast, gapMost = min(gapLeast, *d.Gap), max(gapMost, *d.Gap)
			}
		}
		gaps := "-"
		if diverged > notInTop {
			gaps = fmt.Sprintf("%.3f-%.3f", gapLeast, gapMost)
		}
		if notInTop > 0 {
			gaps += fmt.Sprintf(" +%d", notInTop)
		}
		t.Logf("%-30s %8s %9.2g %9.2g-%-9.2g %6.1f%% %15s %10s", r.name,
			fmt.Sprintf("%d/%d", sepReplies-diverged, sepReplies), kl/float64(shared), klLeast, klMost,
			top1/float64(shared)*100, gaps, fmt.Sprintf("%d/%d ok", ok, sepReplies))
		if r.want == "all" && ok != sepReplies || r.want == "none" && ok != 0 {
			t.Errorf("%s: %d of %d replies agree under the defaults %+v, want %s", r.name, ok, sepReplies, Default, r.want)
		}
	}
	t.Logf("agree: replies the same to the end; KL in nats, over shared positions; gaps: how far below the reference's top this run's token is where the replies diverge, nats (+N: N more not among the reference's top %d)", sepK)
}

// BenchmarkCompare compares two replies of 4096 tokens with 20 alternatives
// each: the time is linear in the tokens.
func BenchmarkCompare(b *testing.B) {
	for _, n := range []int{1024, 4096} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			ref := measure.Reply{Logprobs: measure.LogprobsSent, TopLogprobs: MaxK}
			z := make([]float64, 200)
			for range n {
				for i := range z {
					z[i] = logitMean + logitSpread*rng.NormFloat64()
				}
				t := top(z, MaxK)
				ref.Generated = append(ref.Generated, measure.Token{Text: t[0].Text, ID: t[0].ID, Logprob: t[0].Logprob, Top: t})
				ref.Content += t[0].Text
			}
			run := ref
			b.ResetTimer()
			for b.Loop() {
				Compare(&ref, &run, Default)
			}
		})
	}
}
