// Package measure holds one streamed reply as the probe recorded it and the
// figures derived from it: first token, token count and decode rate.
//
// It is pure: no I/O and no clock. The probe fills a Reply; the judge and the
// reports read the figures through the methods here, so every consumer
// computes them the same way.
package measure

import (
	"strconv"
	"time"
)

// Token sources, in the order Count prefers them.
const (
	SourceUsage  = "usage"  // usage.completion_tokens, asked for with stream_options.include_usage
	SourceServer = "server" // the server's timings.predicted_n
	SourceChunks = "chunks" // content-bearing chunks counted by the client (approximate)
)

// Reply is one streamed chat reply. Times are milliseconds after T0, taken
// from the monotonic clock just before the request was written.
type Reply struct {
	N         int    `json:"n"`                // 1-based; warm-ups are numbered on their own
	Warmup    bool   `json:"warmup,omitempty"` // recorded, never judged
	Prompt    string `json:"prompt"`
	Expect    string `json:"expect,omitempty"`     // RE2 the content must match, if set
	MaxTokens int    `json:"max_tokens,omitempty"` // asked for; no count above it is believed

	T0      time.Time `json:"t0"`                 // wall clock, for people; figures use the ms fields
	FirstMS *float64  `json:"first_ms,omitempty"` // first chunk with content or reasoning
	LastMS  *float64  `json:"last_ms,omitempty"`  // last chunk with content or reasoning
	EndMS   float64   `json:"end_ms"`             // the stream ended or failed
	// Arrivals are the content-bearing chunks grouped by how they came off
	// the network: chunks that were already waiting when the probe read are
	// one arrival with the first one's time.
	Arrivals []Arrival `json:"arrivals,omitempty"`

	Chunks           int    `json:"chunks"` // content- or reasoning-bearing chunks
	Content          string `json:"content"`
	Reasoning        string `json:"reasoning,omitempty"`
	Truncated        bool   `json:"truncated,omitempty"` // content or reasoning cut at the probe's bound
	FinishReason     string `json:"finish_reason,omitempty"`
	CompletionTokens *int   `json:"completion_tokens,omitempty"` // from usage
	// PromptTokens and CachedTokens are usage.prompt_tokens and
	// usage.prompt_tokens_details.cached_tokens, when sent.
	PromptTokens *int `json:"prompt_tokens,omitempty"`
	CachedTokens *int `json:"cached_tokens,omitempty"`

	Server *ServerTimings `json:"server,omitempty"`

	// Seed is the seed the request asked for, so a greedy reply can be
	// asked again and compared; TopLogprobs is the top_logprobs asked for
	// (0: no logprobs were asked for).
	Seed        *int64 `json:"seed,omitempty"`
	TopLogprobs int    `json:"top_logprobs,omitempty"`
	// Logprobs is what became of asking for them (LogprobsSent, ...; ""
	// when not asked), and Generated the tokens with their logprobs, in
	// order, when the serve sent them.
	Logprobs  string  `json:"logprobs,omitempty"`
	Generated []Token `json:"generated,omitempty"`
	// LogprobsDetail says why: the serve's refusal of the fields, quoted,
	// or what was wrong with the logprobs it sent, or what was dropped.
	LogprobsDetail string `json:"logprobs_detail,omitempty"`

	// Retried is the error of a first attempt that failed before any byte
	// of its answer came; the reply is the second attempt's, on a new
	// connection.
	Retried string `json:"retried,omitempty"`
	Error   string `json:"error,omitempty"` // transport, HTTP, stream or server error
}

// Arrival is one or more content-bearing chunks that came off the network
// together.
type Arrival struct {
	MS     float64 `json:"ms"`     // after T0
	Chunks int     `json:"chunks"` // content-bearing chunks in it
}

// ServerTimings are the serve's own figures for a reply, when it sends them
// (llama.cpp's timings object; Lemonade's stats; FastFlowLM's usage).
type ServerTimings struct {
	PredictedN         int     `json:"predicted_n,omitempty"`
	PredictedMS        float64 `json:"predicted_ms,omitempty"`
	PredictedPerSecond float64 `json:"predicted_per_second,omitempty"`
	PromptN            *int    `json:"prompt_n,omitempty"` // prompt tokens evaluated
	PromptMS           float64 `json:"prompt_ms,omitempty"`
	CacheN             *int    `json:"cache_n,omitempty"` // prompt tokens taken from the cache
	// DecodeSteps and DecodeMS are a serve's timed decode steps, each
	// giving one token after the first, and their time: FastFlowLM's
	// usage.completion_tokens and decoding_duration.
	DecodeSteps int     `json:"decode_steps,omitempty"`
	DecodeMS    float64 `json:"decode_ms,omitempty"`
}

// FirstTokenMS is the time from T0 to the first content or reasoning chunk.
func (r *Reply) FirstTokenMS() (float64, bool) {
	if r.FirstMS == nil {
		return 0, false
	}
	return *r.FirstMS, true
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
