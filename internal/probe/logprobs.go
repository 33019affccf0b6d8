package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// Seed is the seed every request asks for, recorded in each reply: with
// temperature 0 it makes a reply one that can be asked for again and
// compared.
const Seed int64 = 17

// MaxTopLogprobs is the most alternatives a request may ask for (OpenAI's
// bound on top_logprobs; vLLM's and Ollama's too).
const MaxTopLogprobs = 20

// Bounds on the logprobs kept of one reply; the serve is untrusted.
const (
	// extraTokens is how many tokens past max_tokens are kept: a serve may
	// count an end-of-turn token it does not stream as content.
	extraTokens = 8
	// maxTokenText is the longest token text believed, in bytes.
	maxTokenText = 256
	// defaultTokenBound is the bound when no max_tokens was asked.
	defaultTokenBound = 4096
)

// ExtraTokens is how many tokens past max_tokens a reply keeps at most.
const ExtraTokens = extraTokens

// logprobs is one choice's logprobs as the serves stream them:
// {"content": [{"id", "token", "bytes", "logprob", "top_logprobs": [...]}]}
// (llama.cpp's server gives ids; vLLM and Ollama do not).
type logprobs struct {
	Content []logprob `json:"content"`
}

type logprob struct {
	ID          *json.Number `json:"id"`
	Token       *string      `json:"token"`
	Logprob     *json.Number `json:"logprob"`
	TopLogprobs []struct {
		ID      *json.Number `json:"id"`
		Token   *string      `json:"token"`
		Logprob *json.Number `json:"logprob"`
	} `json:"top_logprobs"`
}

// capture gathers the logprobs of one reply. While the stream runs it only
// keeps each choice's logprobs field as it came (the chunk's parse has
// copied it); they are read after the stream ended, so reading them delays
// no token's arrival time.
type capture struct {
	k       int // top_logprobs asked for; 0: none asked
	bound   int // tokens kept at most
	raw     []json.RawMessage
	tokens  []measure.Token
	garbage string // why the logprobs sent cannot be believed
	over    int    // tokens past the bound, dropped
}

func newCapture(k, maxTokens int) *capture {
	bound := defaultTokenBound
	if maxTokens > 0 {
		bound = maxTokens + extraTokens
	}
	return &capture{k: k, bound: bound}
}

// keep keeps one choice's logprobs field for later; no more fields than
// tokens are kept, a field holding one token or more.
func (c *capture) keep(raw json.RawMessage) {
	if c == nil || len(raw) == 0 || bytes.Equal(raw, null) {
		return
	}
	if len(c.raw) >= c.bound {
		c.over++ // at least one token more
		return
	}
	c.raw = append(c.raw, raw)
}

// take reads one choice's logprobs field. Whatever is wrong with it is
// recorded, never returned: the reply's other figures stand.
func (c *capture) take(raw json.RawMessage) {
	if c.garbage != "" {
		return
	}
	var lp logprobs
	if err := json.Unmarshal(raw, &lp); err != nil {
		c.garbage = fmt.Sprintf("a logprobs field is not the OpenAI shape ({\"content\": [...]}): %v", err)
		return
	}
	for i := range lp.Content {
		if len(c.tokens) >= c.bound {
			c.over += len(lp.Content) - i
			return
		}
		t, why := token(&lp.Content[i], c.k)
		if why != "" {
			c.garbage = fmt.Sprintf("token %d: %s", len(c.tokens)+1, why)
			return
		}
		c.tokens = append(c.tokens, t)
	}
}

var null = []byte("null")

// token checks one entry and turns it into a measure.Token, keeping at most
// k alternatives, most likely first.
func token(e *logprob, k int) (measure.Token, string) {
	text, id, lp, why := entry(e.Token, e.ID, e.Logprob)
	if why != "" {
		return measure.Token{}, why
	}
	t := measure.Token{Text: text, ID: id, Logprob: lp}
	if len(e.TopLogprobs) > 0 && k > 0 {
		t.Top = make([]measure.Alt, 0, min(len(e.TopLogprobs), k))
	}
	for i := range e.TopLogprobs {
		a := &e.TopLogprobs[i]
		text, id, lp, why := entry(a.Token, a.ID, a.Logprob)
		if why != "" {
			return measure.Token{}, fmt.Sprintf("alternative %d: %s", i+1, why)
		}
		t.Top = append(t.Top, measure.Alt{Text: text, ID: id, Logprob: lp})
	}
	// Most likely first, ties in the serve's order; no more than asked.
	slices.SortStableFunc(t.Top, func(a, b measure.Alt) int {
		switch {
		case a.Logprob > b.Logprob:
			return -1
		case a.Logprob < b.Logprob:
			return 1
		}
		return 0
	})
	if len(t.Top) > k {
		t.Top = t.Top[:k]
	}
	return t, ""
}

// entry checks the fields one token or alternative has in common.
func entry(text *string, id, logprob *json.Number) (string, *int, float64, string) {
	if text == nil {
		return "", nil, 0, "no token text"
	}
	if len(*text) > maxTokenText {
		return "", nil, 0, fmt.Sprintf("a token text of %d bytes, more than %d", len(*text), maxTokenText)
	}
	if logprob == nil {
		return "", nil, 0, "no logprob"
	}
	lp, err := logprob.Float64()
	if err != nil || math.IsNaN(lp) || math.IsInf(lp, 0) {
		return "", nil, 0, fmt.Sprintf("logprob %.40q is not a finite number", string(*logprob))
	}
	if lp > 0 {
		return "", nil, 0, fmt.Sprintf("logprob %v is above 0 (a probability above 1)", lp)
	}
	var p *int
	if id != nil {
		v, err := id.Int64()
		if err != nil || v < 0 || v > math.MaxInt32 {
			return "", nil, 0, fmt.Sprintf("token id %.40q is not a token id", string(*id))
		}
		n := int(v)
		p = &n
	}
	return *text, p, lp, ""
}

// finish reads the fields kept and records what became of the logprobs
// in r.
func (c *capture) finish(r *measure.Reply) {
	if c == nil {
		return
	}
	for _, raw := range c.raw {
		c.take(raw)
	}
	c.raw = nil
	switch {
	case c.garbage != "":
		r.Logprobs, r.LogprobsDetail = measure.LogprobsGarbage, c.garbage
	case len(c.tokens) == 0 && r.Error != "":
		// No answer to judge them by: nothing to say.
	case len(c.tokens) == 0:
		r.Logprobs = measure.LogprobsNone
	default:
		r.Logprobs, r.Generated = measure.LogprobsSent, c.tokens
		if c.over > 0 {
			r.LogprobsDetail = fmt.Sprintf("the serve sent logprobs for at least %d tokens past max_tokens + %d; kept the first %d", c.over, extraTokens, c.bound)
		}
	}
}

// rejects tells whether an answer refused a request for its logprobs
// fields: any HTTP 400 to a request that carried them, or another 4xx
// whose message names them.
func rejects(status int, msg string) bool {
	if status == http.StatusBadRequest {
		return true
	}
	return status >= 400 && status < 500 && strings.Contains(strings.ToLower(msg), "logprob")
}

// nullNonFinite turns the bare NaN, Infinity and -Infinity a Python serve
// may write into null, outside strings, so a chunk that carries them still
// parses; a logprob so written is then refused (no logprob) while the
// chunk's content counts. changed is false when there was none.
func nullNonFinite(data []byte) (out []byte, changed bool) {
	out = make([]byte, 0, len(data))
	in := false
	for i := 0; i < len(data); i++ {
		b := data[i]
		if in {
			out = append(out, b)
			if b == '\\' && i+1 < len(data) {
				i++
				out = append(out, data[i])
			} else if b == '"' {
				in = false
			}
			continue
		}
		if b == '"' {
			in = true
		}
		word := nonFinite(data[i:])
		if word == 0 {
			out = append(out, b)
			continue
		}
		out = append(out, null...)
		i += word - 1
		changed = true
	}
	return out, changed
}

// nonFinite is the length of the non-finite word data starts with, or 0.
func nonFinite(data []byte) int {
	for _, w := range []string{"-Infinity", "Infinity", "NaN"} {
		if bytes.HasPrefix(data, []byte(w)) {
			return len(w)
		}
	}
	return 0
}
