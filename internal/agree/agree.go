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
	// Cut says the side that ended had reached the max_tokens it asked
	// for (finish_reason "length", as many tokens as asked): it was cut,
	// not ended, and the reply is judged on the tokens both have.
	Cut bool `json:"cut,omitempty"`
}

// The defaults of Bounds, set from targets on synthetic pairs (the model of
// TestSeparation) as TensorRT-LLM sets its accuracy thresholds from α, β and
// a smallest effect to catch: a route that rounds its logits as bf16 does
// fails at most 1% of the runs that compare 15 replies (--max-replies), each
// bound at bf16's quantile that leaves it half of that; and a route whose
// logits are off by 0.2 nats still fails at least 80% of the runs that
// compare 3 (--lead). go test -run TestSeparationTails -v ./internal/agree
// -args -tails 64 sets them over 64 seeds, 32768 bf16 replies, and prints
// the rates docs/measuring.md ("Agreement with a reference route") quotes.
const (
	// DefaultTieMargin is 0.31 nats: bf16 rounding (4e-3 relative on the
	// logits) takes a token more than 0.31 below the reference's top in 9
	// of 32768 replies (and one outside its top 5), f16 rounding (1e-3)
	// none past 0.087 in 4096.
	DefaultTieMargin = 0.31
	// DefaultMaxKL is 0.0075 nats, a reply's mean KL at most: bf16
	// rounding gives more in 10 of 32768 replies (its largest 0.013), f16
	// at most 0.00039 in 4096.
	DefaultMaxKL = 0.0075
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
