package fakellm

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

var testPrompts = []string{
	"What is the capital of France?",
	"Write a haiku about a lighthouse.",
	"Explain what a CPU cache line is.",
	"List three uses of a hash map.",
	"Summarise the history of Rome in one sentence.",
}

// The reference kernel's answer is the serve's answer as it always was,
// the same each time, with logprobs a model could give.
func TestGenerateReference(t *testing.T) {
	for _, p := range testPrompts {
		got := Generate(p, 64, Kernel{})
		if diff := cmp.Diff(got, Generate(p, 64, Kernel{})); diff != "" {
			t.Errorf("Generate(%q) twice differs:\n%s", p, diff)
		}
		h := fnv.New32a()
		io.WriteString(h, p)
		seed := int(h.Sum32() % uint32(len(vocabulary)))
		for i, tok := range got {
			want := vocabulary[(seed+i*7)%len(vocabulary)]
			if i > 0 {
				want = " " + want
			}
			if tok.Text != want {
				t.Fatalf("Generate(%q) token %d = %q, want %q", p, i+1, tok.Text, want)
			}
			checkToken(t, fmt.Sprintf("%q token %d", p, i+1), tok)
		}
	}
}

func checkToken(t *testing.T, name string, tok measure.Token) {
	t.Helper()
	if len(tok.Top) != Alternatives || tok.Top[0].Text != tok.Text || *tok.Top[0].ID != *tok.ID || tok.Top[0].Logprob != tok.Logprob {
		t.Fatalf("%s: %d alternatives, first %+v; want %d, the token first", name, len(tok.Top), tok.Top[0], Alternatives)
	}
	seen := map[string]bool{}
	mass := 0.0
	for j, a := range tok.Top {
		if !(a.Logprob < 0) || math.IsInf(a.Logprob, 0) || j > 0 && a.Logprob > tok.Top[j-1].Logprob || seen[a.Text] {
			t.Fatalf("%s: alternative %d %+v: want finite, below 0, in order, each text once", name, j+1, a)
		}
		seen[a.Text] = true
		mass += math.Exp(a.Logprob)
	}
	if !(mass < 1) {
		t.Fatalf("%s: the alternatives hold %v of the mass, want below 1", name, mass)
	}
}

// firstDivergence is the first position where two answers part, or -1.
func firstDivergence(a, b []measure.Token) int {
	for i := range min(len(a), len(b)) {
		if *a[i].ID != *b[i].ID {
			return i
		}
	}
	return -1
}

// Rounding noise flips only near-ties: where a noisy answer first parts
// from the reference, the reference's top two are within twice the noise
// and the noisy token is the reference's second.
func TestGenerateNoise(t *testing.T) {
	const noise = 0.05
	flips := 0
	for _, p := range testPrompts {
		ref := Generate(p, 128, Kernel{})
		got := Generate(p, 128, Kernel{Noise: noise})
		if diff := cmp.Diff(got, Generate(p, 128, Kernel{Noise: noise})); diff != "" {
			t.Errorf("Generate(%q, noise) twice differs:\n%s", p, diff)
		}
		for i, tok := range got {
			checkToken(t, fmt.Sprintf("%q noisy token %d", p, i+1), tok)
		}
		if tiny := Generate(p, 128, Kernel{Noise: 1e-9}); firstDivergence(ref, tiny) >= 0 {
			t.Errorf("Generate(%q) with noise 1e-9 parts from the reference at %d", p, firstDivergence(ref, tiny))
		}
		d := firstDivergence(ref, got)
		if d < 0 {
			continue
		}
		flips++
		r := ref[d]
		if gap := r.Top[0].Logprob - r.Top[1].Logprob; gap > 2*noise || got[d].Text != r.Top[1].Text {
			t.Errorf("Generate(%q, noise %v) parts at token %d with %q: the reference's top two %q, %q are %.3f nats apart; want a near-tie flipped", p, noise, d+1, got[d].Text, r.Top[0].Text, r.Top[1].Text, gap)
		}
		for i := range d {
			if math.Abs(got[i].Logprob-ref[i].Logprob) > 2*noise {
				t.Errorf("Generate(%q, noise) token %d logprob %v, the reference's %v: more than the noise apart", p, i+1, got[i].Logprob, ref[i].Logprob)
			}
		}
	}
	if flips == 0 {
		t.Errorf("no prompt's noisy answer parts from the reference in 128 tokens; want near-ties to flip")
	}
}

// A broken kernel parts at its token, with a token the reference ranks
// far down, and the reference's choice still in its top five far below.
func TestGenerateSkew(t *testing.T) {
	for _, p := range testPrompts {
		ref := Generate(p, 32, Kernel{})
		got := Generate(p, 32, Kernel{Skew: 5})
		if d := firstDivergence(ref, got); d != 4 {
			t.Fatalf("Generate(%q, skew 5) parts at %d, want 4 (token 5)", p, d)
		}
		r, g := ref[4], got[4]
		for _, a := range r.Top[:5] {
			if a.Text == g.Text {
				t.Errorf("Generate(%q, skew 5): token 5 %q is in the reference's top 5", p, g.Text)
			}
		}
		if g.Top[3].Text != r.Text || g.Top[0].Logprob-g.Top[3].Logprob < 4 {
			t.Errorf("Generate(%q, skew 5): token 5's alternatives %+v; want the reference's %q fourth, 4 nats or more below", p, g.Top[:4], r.Text)
		}
		for i, tok := range got {
			checkToken(t, fmt.Sprintf("%q skewed token %d", p, i+1), tok)
		}
	}
}

// TestGenerateDecode: a wrong decoding keeps every id and logprob of the
// reference and changes the texts from the token named on.
func TestGenerateDecode(t *testing.T) {
	ref := Generate("Explain caches", 8, Kernel{})
	bad := Generate("Explain caches", 8, Kernel{Decode: 3})
	for i := range ref {
		r, b := ref[i], bad[i]
		if *r.ID != *b.ID || r.Logprob != b.Logprob || len(r.Top) != len(b.Top) {
			t.Fatalf("token %d: id %d, logprob %v; want the reference's %d, %v", i+1, *b.ID, b.Logprob, *r.ID, r.Logprob)
		}
		if wrong := i+1 >= 3; (b.Text != r.Text) != wrong || (b.Top[1].Text != r.Top[1].Text) != wrong {
			t.Errorf("token %d: text %q (alternative %q), the reference's %q (%q); want them apart from token 3 on", i+1, b.Text, b.Top[1].Text, r.Text, r.Top[1].Text)
		}
	}
}
