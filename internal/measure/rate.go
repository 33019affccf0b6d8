package measure

import (
	"fmt"
	"math"
)

// How a decode rate was estimated.
const (
	// MethodSpan is (tokens - 1) / (last - first): every content chunk came
	// off the network on its own, so its arrival is when it was generated.
	MethodSpan = "span"
	// MethodRegression is the slope of the tokens received so far against
	// the arrival time, least squares over the arrivals but the last: some
	// chunks came together (a proxy flushing every few tens of ms, a serve's
	// Nagle), and the tokens of an arrival were generated between the one
	// before and it, so each arrival's running total still lies on the line.
	MethodRegression = "regression"
	// MethodServer is (predicted_n - 1) / predicted_ms, or decode steps /
	// their time: the serve's own count and decode time on the span's
	// definition.
	MethodServer = "server"
	// MethodServerAsSent is the serve's rate as it sent it, with nothing to
	// recompute it from.
	MethodServerAsSent = "server, as sent"
)

// MaxRate is the fastest a single stream is believed to decode, in tok/s: a
// token every 50 µs. Faster is a buffer being emptied, not generation.
const MaxRate = 20000

// Burst is why a stream that came off the network in one piece has no rate.
const Burst = "the stream arrived in one burst: a buffering proxy or compression? the serve must flush each token"

// Estimate is a decode rate and how it was had, or why there is none.
type Estimate struct {
	Rate     float64 `json:"rate,omitempty"` // tok/s
	Method   string  `json:"method,omitempty"`
	Arrivals int     `json:"arrivals,omitempty"` // the arrivals it was estimated over
	Why      string  `json:"why,omitempty"`      // why there is no rate
}

// Estimate is the reply's decode rate from the stream. A clean stream (each
// content chunk its own arrival) gives (tokens - 1) / (last - first): the
// first token and the prefill before it are left out, so the figure does not
// depend on how long the answer is. A stream whose chunks partly came
// together gives the regression over its arrivals; one that came in one
// arrival, or over a span too short for its tokens, gives no rate. A reply
// that failed part-way has no rate: its stream did not run its course, and
// neither has one whose token count was not believed (Count).
func (r *Reply) Estimate() Estimate {
	if r.Error != "" {
		return Estimate{Why: "the reply failed"}
	}
	if r.FirstMS == nil || r.LastMS == nil {
		return Estimate{Why: "no content arrived"}
	}
	c := r.Count()
	e := r.estimate(c.N)
	if c.Doubt != "" && e.Why == "" {
		// A serve whose count cannot be believed gets no rate, whatever
		// its stream says; what it would be on the count defended is said.
		return Estimate{Arrivals: e.Arrivals, Why: fmt.Sprintf("%s; on that count the rate would be %.1f tok/s", c.Doubt, e.Rate)}
	}
	if c.Doubt != "" {
		e.Why = c.Doubt + "; " + e.Why
	}
	return e
}

// estimate is the rate of n tokens over the reply's arrivals.
func (r *Reply) estimate(n int) Estimate {
	if n < 2 {
		return Estimate{Why: plural(n, "token") + ", too few for a rate"}
	}
	if len(r.Arrivals) == 1 {
		return Estimate{Arrivals: 1, Why: Burst}
	}
	e := Estimate{Method: MethodSpan, Arrivals: len(r.Arrivals)}
	// Replies recorded without arrivals are taken as clean.
	if clean(r.Arrivals) {
		span := *r.LastMS - *r.FirstMS
		if span <= 0 {
			return Estimate{Arrivals: e.Arrivals, Why: Burst}
		}
		e.Rate = float64(n-1) / (span / 1000)
	} else {
		e.Method = MethodRegression
		slope, ok := regression(r.Arrivals, n)
		if !ok {
			return Estimate{Arrivals: e.Arrivals, Why: Burst}
		}
		e.Rate = slope * 1000
	}
	if e.Rate > MaxRate {
		return Estimate{Arrivals: e.Arrivals, Why: fmt.Sprintf("%d tokens came in %.2f ms, faster than any serve decodes (%d tok/s): %s",
			n, *r.LastMS-*r.FirstMS, MaxRate, Burst)}
	}
	return e
}

// DecodeRate is Estimate's rate, or why there is none.
func (r *Reply) DecodeRate() (rate float64, why string) {
	e := r.Estimate()
	return e.Rate, e.Why
}

func clean(arrivals []Arrival) bool {
	for _, a := range arrivals {
		if a.Chunks != 1 {
			return false
		}
	}
	return true
}

// regression is the least-squares slope, in tokens a millisecond, of the
// tokens received by each arrival against its time, the n tokens spread
// evenly over the chunks. The last arrival is left out when there are three
// or more: the end of the stream is sent when it comes, not on the schedule
// of the flushes before it, and it holds whatever was left. ok is false when
// the arrivals fitted share one time.
func regression(arrivals []Arrival, n int) (slope float64, ok bool) {
	chunks := 0
	for _, a := range arrivals {
		chunks += a.Chunks
	}
	perChunk := float64(n) / float64(chunks)
	fit := arrivals
	if len(fit) >= 3 {
		fit = fit[:len(fit)-1]
	}
	// The slope is sum((t - mean t) * y) / sum((t - mean t)^2); y needs no
	// centring, as the first factor sums to nothing.
	var st float64
	for _, a := range fit {
		st += a.MS
	}
	mt := st / float64(len(fit))
	var num, den float64
	seen := 0
	for _, a := range fit {
		seen += a.Chunks
		d := a.MS - mt
		num += d * float64(seen) * perChunk
		den += d * d
	}
	if den <= 0 {
		return 0, false
	}
	return num / den, true
}

// ServerEstimate is the serve's own decode rate for the reply, on the
// stream's definition: (predicted_n - 1) / predicted_ms. llama.cpp's
// predicted_per_second is predicted_n over predicted_ms, which starts when the
// first token is sampled, so it counts n tokens over n - 1 steps; put on one
// definition, the two figures can be compared. FastFlowLM's decoding_speed_tps
// needs no such care: it is its decode steps over their time (the first
// token, from the prefill, is neither counted nor timed), which is the
// definition already. A serve that sends only a rate (Lemonade's
// tokens_per_second) is taken as sent.
func (r *Reply) ServerEstimate() Estimate {
	s := r.Server
	if s == nil {
		return Estimate{Why: "the serve sent no timings"}
	}
	// Lemonade's stats carry a count but no predicted_ms: the count is
	// checked all the same.
	if why := r.implausible(s.PredictedN); why != "" {
		return Estimate{Why: fmt.Sprintf("timings.predicted_n %d %s", s.PredictedN, why)}
	}
	if why := r.implausible(s.DecodeSteps); why != "" {
		return Estimate{Why: fmt.Sprintf("usage.completion_tokens %d %s", s.DecodeSteps, why)}
	}
	if s.PredictedN >= 2 && s.PredictedMS > 0 {
		return Estimate{Rate: float64(s.PredictedN-1) / (s.PredictedMS / 1000), Method: MethodServer}
	}
	if s.DecodeSteps >= 1 && s.DecodeMS > 0 {
		return Estimate{Rate: float64(s.DecodeSteps) / (s.DecodeMS / 1000), Method: MethodServer}
	}
	if s.PredictedPerSecond > 0 {
		return Estimate{Rate: s.PredictedPerSecond, Method: MethodServerAsSent}
	}
	return Estimate{Why: "the serve sent no timings.predicted_n and predicted_ms"}
}

// ServerRate is ServerEstimate's rate, or why there is none.
func (r *Reply) ServerRate() (rate float64, why string) {
	e := r.ServerEstimate()
	return e.Rate, e.Why
}

// Disagreement is how far the stream's rate and the serve's own differ, as a
// fraction of the serve's, when both are there.
func (r *Reply) Disagreement() (frac float64, ok bool) {
	c, s := r.Estimate(), r.ServerEstimate()
	if c.Why != "" || s.Why != "" {
		return 0, false
	}
	return math.Abs(c.Rate-s.Rate) / s.Rate, true
}

// Cache is what the serve said of its prompt cache for a reply.
type Cache struct {
	Cached int `json:"cached"` // prompt tokens taken from the cache
	Prompt int `json:"prompt"` // prompt tokens in all
	// Hit is half the prompt or more from the cache: more than a chat
	// template's shared opening, so the first token did not pay for the
	// prompt.
	Hit bool `json:"hit"`
}

// Cache is the serve's prompt cache figures for the reply: llama.cpp's
// timings.cache_n beside prompt_n (the tokens evaluated), or usage's
// prompt_tokens_details.cached_tokens of prompt_tokens. ok is false when the
// serve said nothing of it.
func (r *Reply) Cache() (c Cache, ok bool) {
	if s := r.Server; s != nil && s.CacheN != nil && s.PromptN != nil {
		c = Cache{Cached: *s.CacheN, Prompt: *s.CacheN + *s.PromptN}
	} else if r.CachedTokens != nil && r.PromptTokens != nil {
		c = Cache{Cached: *r.CachedTokens, Prompt: *r.PromptTokens}
	} else {
		return Cache{}, false
	}
	c.Hit = c.Prompt > 0 && 2*c.Cached >= c.Prompt
	return c, true
}
