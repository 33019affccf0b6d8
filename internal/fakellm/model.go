package fakellm

import (
	"hash/fnv"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// Kernel is how a route's arithmetic departs from the reference's. The zero
// Kernel is the reference: the trusted route's greedy answer.
type Kernel struct {
	// Noise jitters each logit by up to this many nats, the same way for
	// the same prompt: rounding. Where the reference's top two are within
	// 2×Noise the greedy choice can flip: right but rounded.
	Noise float64
	// Skew breaks the kernel from token Skew on (1-based; 0 never): the
	// reference's choice falls to fourth, 4.5 nats below a token the
	// reference ranks last of its Alternatives.
	Skew int
	// Decode decodes wrongly from token Decode on (1-based; 0 never): a
	// wrong vocabulary or byte decoding on the device. Each token's ids and
	// logprobs, and its alternatives', are the reference's; their texts,
	// and so the streamed content, are other words (upper-cased).
	Decode int
}

// Alternatives is how many tokens the simulated model ranks at each
// position, most likely first; a request's top_logprobs takes the first K.
const Alternatives = 20

// words are the simulated model's vocabulary, each word once: a token is a
// word, with a space before it after the first.
var words = func() []string {
	var out []string
	for _, w := range vocabulary {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}()

// Generate is the simulated model's greedy answer to prompt under kernel k:
// count tokens, each with its logprob and its Alternatives most likely
// tokens, most likely first. It is the one source of the simulated serve's
// tokens: the same prompt and kernel give the same tokens and logprobs, and
// under the reference kernel the text is the serve's usual answer, so a
// reference recorded from it and a route with Noise or Skew compare token by
// token up to where the kernel made them part. After a token that differs
// from the reference's choice the context differs, and so does what follows.
func Generate(prompt string, count int, k Kernel) []measure.Token {
	h := fnv.New32a()
	io.WriteString(h, prompt)
	seed := int(h.Sum32() % uint32(len(vocabulary))) // where the answer has always begun
	state := mix(uint64(h.Sum32()), 17)
	out := make([]measure.Token, 0, count)
	diverged := false
	for i := range count {
		ref := wordIndex(vocabulary[(seed+i*7)%len(vocabulary)])
		if diverged {
			ref = int(state % uint64(len(words)))
		}
		cands, logits := rank(ref, state, i)
		if k.Noise > 0 {
			for j := range logits {
				logits[j] += k.Noise * (2*unit(state, uint64(i), uint64(j), 1) - 1)
			}
		}
		if k.Skew > 0 && i+1 >= k.Skew {
			// The broken kernel: a token the reference ranks last on top,
			// the reference's choice fourth and far below.
			order := []int{Alternatives - 1, 1, 2, 0}
			for j := 3; j < Alternatives-1; j++ {
				order = append(order, j)
			}
			skewed := make([]int, len(order))
			for j, o := range order {
				skewed[j] = cands[o]
			}
			cands = skewed
			for j := range logits {
				logits[j] = []float64{0, -1.5, -2.5, -4.5}[min(j, 3)] - float64(max(j-3, 0))*0.6
			}
		}
		tok := token(cands, logits, i)
		if tok.ID == nil || *tok.ID != tokenID(ref, i) {
			diverged = true
		}
		state = mix(state, uint64(*tok.ID))
		if k.Decode > 0 && i+1 >= k.Decode {
			tok.Text = strings.ToUpper(tok.Text)
			for j := range tok.Top {
				tok.Top[j].Text = strings.ToUpper(tok.Top[j].Text)
			}
		}
		out = append(out, tok)
	}
	return out
}

// rank gives, at position i in the context state, the reference's
// candidates (ref first, then Alternatives-1 other words) and their logits,
// most likely first. The gap between the first two is often wide and
// sometimes a near-tie, as in a real model.
func rank(ref int, state uint64, i int) ([]int, []float64) {
	cands := make([]int, 0, Alternatives)
	logits := make([]float64, 0, Alternatives)
	cands, logits = append(cands, ref), append(logits, 0)
	start := int(state>>7+uint64(i)*13) % len(words)
	u := unit(state, uint64(i), 0, 2)
	l := -(0.01 + 5*u*u) // gap to the second: below 0.1 nats about one time in eight
	for j := 0; len(cands) < Alternatives; j++ {
		w := (start + j) % len(words)
		if w == ref {
			continue
		}
		cands, logits = append(cands, w), append(logits, l)
		l -= 0.5 + 1.5*unit(state, uint64(i), uint64(j), 3)
	}
	return cands, logits
}

// token turns the candidates' logits into logprobs, the rest of the
// vocabulary holding one more share below the last, and takes the most
// likely.
func token(cands []int, logits []float64, i int) measure.Token {
	order := make([]int, len(cands))
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	rest := logits[order[len(order)-1]] - 1
	sum := math.Exp(rest)
	for _, l := range logits {
		sum += math.Exp(l)
	}
	lse := math.Log(sum)
	top := make([]measure.Alt, len(order))
	for j, o := range order {
		id := tokenID(cands[o], i)
		top[j] = measure.Alt{Text: tokenText(cands[o], i), ID: &id, Logprob: logits[o] - lse}
	}
	first := top[0]
	return measure.Token{Text: first.Text, ID: first.ID, Logprob: first.Logprob, Top: top}
}

func wordIndex(w string) int { return slices.Index(words, w) }

// tokenID is a word's token id: a word and the same word after a space are
// two tokens.
func tokenID(w, i int) int {
	if i > 0 {
		return 2*w + 1
	}
	return 2 * w
}

func tokenText(w, i int) string {
	if i > 0 {
		return " " + words[w]
	}
	return words[w]
}

// unit is a number in [0, 1) drawn from its arguments alone.
func unit(state, i, j, salt uint64) float64 {
	x := mix(mix(mix(state, i), j), salt)
	return float64(x>>11) / (1 << 53)
}

// mix is SplitMix64's finaliser over state and v.
func mix(state, v uint64) uint64 {
	z := state ^ (v + 0x9e3779b97f4a7c15)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// text is the tokens' text.
func text(tokens []measure.Token) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString(t.Text)
	}
	return b.String()
}
