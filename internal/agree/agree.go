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
	// TieMargin, in nats: a divergence is at a near-tie when the
	// reference's two most likely tokens there are within it, and this
	// run's token is among the reference's top K.
	TieMargin float64 `json:"tie_margin"`
	// MaxKL, in nats: the mean distance between the two routes'
	// distributions at the shared positions, at most.
	MaxKL float64 `json:"max_kl"`
}

// Reply is how one reply of the run agrees with the reference's reply to the
// same prompt.
type Reply struct {
	N      int    `json:"n"`      // the run's reply
	RefN   int    `json:"ref_n"`  // the reference's reply to the same prompt; 0: it has none
	Unit   string `json:"unit"`   // "tokens", or "bytes" when either side sent no logprobs (text only)
	Agree  int    `json:"agree"`  // units equal before the first divergence
	Of     int    `json:"of"`     // units of the longer of the two replies
	Shared int    `json:"shared"` // positions with logprobs on both sides, compared
	// KL is the mean distance over the shared positions, MaxKL the largest;
	// Top1 the fraction of them where the two routes' most likely tokens
	// are the same. Only with logprobs on both sides.
	KL    *float64 `json:"kl,omitempty"`
	MaxKL *float64 `json:"max_kl,omitempty"`
	Top1  *float64 `json:"top1,omitempty"`
	// Diverged is the first divergence, nil when the replies agree to the
	// end of the shorter.
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
	Gap      *float64 `json:"gap,omitempty"` // the reference's top-two gap there, nats
	Tie      bool     `json:"tie"`           // at a near-tie (Bounds.TieMargin)
}
