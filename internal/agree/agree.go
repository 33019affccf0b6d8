// Package agree measures how far one run's greedy replies agree with a
// reference route's replies to the same prompts: the tokens that agree before
// the first divergence, whether that divergence is at a near-tie, and the
// distance between the two routes' next-token distributions at the positions
// they share, from their top-K logprobs.
//
// It is pure: replies in, figures out.
package agree

import "github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"

// Bounds are what the agreement assertion allows (the --agreement-* flags).
type Bounds struct {
	// TieMargin, in nats: a divergence is at a near-tie when this run's
	// token is among the reference's top K there, at most TieMargin below
	// the reference's most likely token.
	TieMargin float64 `json:"tie_margin"`
	// MaxKL, in nats: the mean distance between the two routes'
	// distributions at the shared positions, at most.
	MaxKL float64 `json:"max_kl"`
}

// Reply is how one reply of the run agrees with the reference's reply to the
// same prompt.
type Reply struct {
	N    int    `json:"n"`     // the run's reply
	RefN int    `json:"ref_n"` // the reference's reply to the same prompt; 0: it has none
	Unit string `json:"unit"`  // "tokens", or "bytes" when either side's tokens cannot be compared (text only)
	// TextOnly says why the unit is "bytes": which side, and what of its
	// logprobs (none, or tokens that are not its streamed text).
	TextOnly string `json:"text_only,omitempty"`
	Agree    int    `json:"agree"`  // units equal before the first divergence
	Of       int    `json:"of"`     // units of the longer of the two replies
	Shared   int    `json:"shared"` // positions with logprobs on both sides, compared
	// K is the top-K the lists were compared on: the smaller of the two
	// sides' (MaxK at most). KNote says so when the sides differ.
	K     int    `json:"k,omitempty"`
	KNote string `json:"k_note,omitempty"`
	// KL is the mean distance over the shared positions, MaxKL the largest;
	// Top1 the fraction of them where the two routes' most likely tokens
	// are the same. Only with logprobs on both sides.
	KL    *float64 `json:"kl,omitempty"`
	MaxKL *float64 `json:"max_kl,omitempty"`
	Top1  *float64 `json:"top1,omitempty"`
	// Diverged is the first divergence, nil when the replies agree to the
	// end of both; when one ends before the other, it is where it ended
	// (Divergence.Ended).
	Diverged *Divergence `json:"diverged,omitempty"`
	OK       bool        `json:"ok"`
	Why      string      `json:"why,omitempty"` // why not, when not OK
}

// Divergence is the first position where the two replies differ.
type Divergence struct {
	Position int         `json:"position"` // 0-based, in Unit
	Ref      measure.Alt `json:"ref"`      // the reference's token there, with its logprob
	Run      measure.Alt `json:"run"`      // this run's token, with its logprob on this run
	// RunInRef is this run's token's logprob on the reference, when it is
	// among the reference's top K there.
	RunInRef *float64 `json:"run_in_ref,omitempty"`
	// Gap is how far this run's token is below the reference's most
	// likely token there, on the reference's logprobs (nats): with
	// RunInRef only.
	Gap *float64 `json:"gap,omitempty"`
	Tie bool     `json:"tie"` // at a near-tie (Bounds.TieMargin)
	// Ended is the side whose reply ended here while the other's went on
	// (EndedRun, EndedReference); that side's token is empty.
	Ended string `json:"ended,omitempty"`
}

// The defaults of Bounds, chosen from the separation of synthetic pairs:
// go test -run TestSeparation -v ./internal/agree prints the table, and
// docs/measuring.md ("Agreement with a reference route") quotes it.
const (
	// DefaultTieMargin is 0.3 nats. Rounding the logits as f16 does (1e-3
	// relative) flips greedy choices only where the reference's top two
	// are within 0.044 nats (64 replies of 128 tokens; 0.062 in 512), and
	// rounding as bf16 does (4e-3) within 0.28 (0.39 in 512): 0.3 lets
	// both through. A route whose logits are off by 0.5 nats flips choices
	// up to 1.5 nats apart, and its distance fails it where its flips do
	// not.
	DefaultTieMargin = 0.3
	// DefaultMaxKL is 0.005 nats, a reply's mean KL at most. f16 rounding
	// gives at most 0.00012 a reply (0.00029 in 512 replies), bf16
	// rounding 0.0034 (0.0049 in 512), logits off by 0.5 nats at least
	// 0.0094 (0.0057 in 512) and 0.047 on average: 0.005 is 17 times f16's
	// worst and below every perturbed reply.
	DefaultMaxKL = 0.005
)

// Default is Bounds with the defaults.
var Default = Bounds{TieMargin: DefaultTieMargin, MaxKL: DefaultMaxKL}

// OrDefault is *b, or Default when b is nil (bounds that were never set: a
// result.json from before the agreement assertion). Bounds that were set
// stay as they are, zero included: 0 is exact.
func (b *Bounds) OrDefault() Bounds {
	if b == nil {
		return Default
	}
	return *b
}
