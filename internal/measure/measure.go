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

// Token sources, in the order Tokens prefers them.
const (
	SourceUsage  = "usage"  // usage.completion_tokens, asked for with stream_options.include_usage
	SourceServer = "server" // the server's timings.predicted_n
	SourceChunks = "chunks" // content-bearing chunks counted by the client (approximate)
)

// Reply is one streamed chat reply. Times are milliseconds after T0, taken
// from the monotonic clock just before the request was written.
type Reply struct {
	N      int    `json:"n"`                // 1-based; warm-ups are numbered on their own
	Warmup bool   `json:"warmup,omitempty"` // recorded, never judged
	Prompt string `json:"prompt"`
	Expect string `json:"expect,omitempty"` // RE2 the content must match, if set

	T0      time.Time `json:"t0"`                 // wall clock, for people; figures use the ms fields
	FirstMS *float64  `json:"first_ms,omitempty"` // first chunk with content or reasoning
	LastMS  *float64  `json:"last_ms,omitempty"`  // last chunk with content or reasoning
	EndMS   float64   `json:"end_ms"`             // the stream ended or failed

	Chunks           int    `json:"chunks"` // content- or reasoning-bearing chunks
	Content          string `json:"content"`
	Reasoning        string `json:"reasoning,omitempty"`
	Truncated        bool   `json:"truncated,omitempty"` // content or reasoning cut at the probe's bound
	FinishReason     string `json:"finish_reason,omitempty"`
	CompletionTokens *int   `json:"completion_tokens,omitempty"` // from usage

	Server *ServerTimings `json:"server,omitempty"`

	Error string `json:"error,omitempty"` // transport, HTTP, stream or server error
}

// ServerTimings are the serve's own figures for a reply, when it sends them
// (llama.cpp's timings object).
type ServerTimings struct {
	PredictedN         int     `json:"predicted_n,omitempty"`
	PredictedPerSecond float64 `json:"predicted_per_second,omitempty"`
	PromptMS           float64 `json:"prompt_ms,omitempty"`
}

// Tokens is the number of generated tokens and where that number came from.
func (r *Reply) Tokens() (n int, source string) {
	// Conditions as if statements rather than switch cases throughout this
	// package: mutation testing reaches each of them.
	if r.CompletionTokens != nil {
		return *r.CompletionTokens, SourceUsage
	}
	if r.Server != nil && r.Server.PredictedN > 0 {
		return r.Server.PredictedN, SourceServer
	}
	return r.Chunks, SourceChunks
}

// FirstTokenMS is the time from T0 to the first content or reasoning chunk.
func (r *Reply) FirstTokenMS() (float64, bool) {
	if r.FirstMS == nil {
		return 0, false
	}
	return *r.FirstMS, true
}

// DecodeRate is (tokens - 1) / (last - first) in tokens per second: the first
// token and the prefill before it are left out, so the figure does not depend
// on how long the answer is. A reply that failed part-way has no rate: its
// stream did not run its course. When there is no rate, why says so.
func (r *Reply) DecodeRate() (rate float64, why string) {
	if r.Error != "" {
		return 0, "the reply failed"
	}
	if r.FirstMS == nil || r.LastMS == nil {
		return 0, "no content arrived"
	}
	if n, _ := r.Tokens(); n < 2 {
		return 0, plural(n, "token") + ", too few for a rate"
	}
	span := *r.LastMS - *r.FirstMS
	if span <= 0 {
		return 0, "all tokens arrived in one chunk"
	}
	n, _ := r.Tokens()
	return float64(n-1) / (span / 1000), ""
}

// ServerRate is the serve's own decode rate for the reply, when it sent one.
func (r *Reply) ServerRate() (rate float64, why string) {
	if r.Server == nil || r.Server.PredictedPerSecond <= 0 {
		return 0, "the serve sent no timings.predicted_per_second"
	}
	return r.Server.PredictedPerSecond, ""
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
