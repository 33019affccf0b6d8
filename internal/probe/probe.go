// Package probe asks a serve one streamed chat question at a time and
// records, from the stream itself, when the first and last tokens came.
package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
)

// Bounds on what one reply may bring; the serve is untrusted.
const (
	DefaultMaxBody = 16 << 20 // bytes of stream per reply
	MaxText        = 1 << 20  // bytes of content, and of reasoning, kept per reply
	maxErrorBody   = 4 << 10
)

// Prober asks questions of one serve.
type Prober struct {
	URL       string // the chat endpoint, e.g. http://127.0.0.1:8080/v1/chat/completions
	Model     string // sent as "model" when not empty
	MaxTokens int
	Thinking  bool // false asks the serve not to think
	// ThinkingControl is how thinking is asked for: "chat-template-kwargs"
	// (chat_template_kwargs.enable_thinking, the default), "reasoning-effort"
	// (reasoning_effort "none" when off), "both" (those two) or "think" (a
	// top-level "think", FastFlowLM's).
	ThinkingControl string
	// StatsURL, when set, is read after each reply for the serve's own
	// figures of it (Lemonade's /api/v1/stats).
	StatsURL       string
	RequestTimeout time.Duration // for the whole reply, stream included
	MaxBody        int64         // 0: DefaultMaxBody
	// Client, when set, is used in place of the probe's own transport (a
	// connection a request, acknowledging at once); benchmarks compare.
	Client *http.Client
	// TopLogprobs, when above 0, asks for logprobs and that many
	// alternatives at each token (at most MaxTopLogprobs). A serve that
	// rejects the fields is asked again without them, and every later
	// request goes without.
	TopLogprobs int

	once    sync.Once
	own     *http.Client
	refusal atomic.Pointer[string] // the serve's answer to the fields, once it refused them
}

type request struct {
	Model              string          `json:"model,omitempty"`
	Messages           []message       `json:"messages"`
	MaxTokens          int             `json:"max_tokens"`
	Temperature        float64         `json:"temperature"`
	Stream             bool            `json:"stream"`
	StreamOptions      streamOptions   `json:"stream_options"`
	ChatTemplateKwargs map[string]bool `json:"chat_template_kwargs,omitempty"`
	ReasoningEffort    string          `json:"reasoning_effort,omitempty"`
	Think              *bool           `json:"think,omitempty"`
	Seed               int64           `json:"seed"`
	Logprobs           bool            `json:"logprobs,omitempty"`
	TopLogprobs        int             `json:"top_logprobs,omitempty"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Body is the JSON the prober sends for prompt now: with the logprobs
// fields unless the serve refused them.
func (p *Prober) Body(prompt string) []byte {
	return p.body(prompt, p.topLogprobs())
}

// topLogprobs is the top_logprobs the next request asks for: 0 once the
// serve refused them.
func (p *Prober) topLogprobs() int {
	if p.TopLogprobs <= 0 || p.refusal.Load() != nil {
		return 0
	}
	return min(p.TopLogprobs, MaxTopLogprobs)
}

// Refusal is the serve's answer to a request for logprobs, quoted, once it
// refused them; "" while it has not.
func (p *Prober) Refusal() string {
	if s := p.refusal.Load(); s != nil {
		return *s
	}
	return ""
}

func (p *Prober) body(prompt string, k int) []byte {
	req := request{
		Model:         p.Model,
		Messages:      []message{{Role: "user", Content: prompt}},
		MaxTokens:     p.MaxTokens,
		Temperature:   0,
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
		Seed:          Seed,
		Logprobs:      k > 0,
		TopLogprobs:   k,
	}
	kwargs := map[string]bool{"enable_thinking": p.Thinking}
	effort := ""
	if !p.Thinking {
		effort = "none"
	}
	switch p.ThinkingControl {
	case "think":
		think := p.Thinking
		req.Think = &think
	case "reasoning-effort":
		req.ReasoningEffort = effort
	case "both":
		req.ChatTemplateKwargs, req.ReasoningEffort = kwargs, effort
	default:
		req.ChatTemplateKwargs = kwargs
	}
	b, _ := json.Marshal(req)
	return b
}

// Ask sends one prompt and assembles the streamed reply. Whatever goes wrong
// is recorded in Reply.Error; Ask itself does not fail. A request that fails
// before any byte of its answer came is asked once more, on a new
// connection, and the reply says so.
//
// A serve that rejects the logprobs fields (an HTTP 400, or another 4xx
// naming them) is asked again without them, once; the reply is the second
// request's, its Logprobs "refused" with the serve's words, and every later
// request of the prober goes without them and says so too.
func (p *Prober) Ask(ctx context.Context, n int, warmup bool, pr prompts.Prompt) measure.Reply {
	ctx, cancel := context.WithTimeout(ctx, p.RequestTimeout)
	defer cancel()
	k := p.topLogprobs()
	r, status, unanswered := p.ask(ctx, n, warmup, pr, k)
	if unanswered && ctx.Err() == nil {
		first := r.Error
		r, status, _ = p.ask(ctx, n, warmup, pr, k)
		r.Retried = first
	}
	if k > 0 && rejects(status, r.Error) && ctx.Err() == nil {
		refusal := r.Error
		p.refusal.CompareAndSwap(nil, &refusal)
		r, _, unanswered = p.ask(ctx, n, warmup, pr, 0)
		if unanswered && ctx.Err() == nil {
			first := r.Error
			r, _, _ = p.ask(ctx, n, warmup, pr, 0)
			r.Retried = first
		}
	}
	if refusal := p.Refusal(); refusal != "" && p.TopLogprobs > 0 {
		r.Logprobs, r.LogprobsDetail = measure.LogprobsRefused, refusal
	}
	return r
}

// ask is one attempt, asking for k alternatives (0: no logprobs). status is
// the HTTP status, 0 when none came. unanswered is true when it failed
// before any byte of the answer came, so asking again cannot count anything
// twice.
func (p *Prober) ask(ctx context.Context, n int, warmup bool, pr prompts.Prompt, k int) (r measure.Reply, status int, unanswered bool) {
	r = measure.Reply{N: n, Warmup: warmup, Prompt: pr.Prompt, Expect: pr.Expect, MaxTokens: p.MaxTokens, TopLogprobs: k}
	seed := Seed
	r.Seed = &seed
	var lp *capture
	if k > 0 {
		lp = newCapture(k, p.MaxTokens)
		defer lp.finish(&r)
	}
	client := p.Client
	if client == nil {
		client = p.client()
	}
	stats := &connStats{}
	req, err := http.NewRequestWithContext(withStats(ctx, stats), http.MethodPost, p.URL, bytes.NewReader(p.body(pr.Prompt, k)))
	if err != nil {
		r.Error = err.Error()
		return r, status, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Accept-Encoding", "identity")

	r.T0 = time.Now()
	t0 := r.T0
	defer func() {
		if r.EndMS == 0 {
			r.EndMS = msSince(t0)
		}
	}()
	resp, err := client.Do(req)
	if err != nil {
		r.Error = p.describe(ctx, err, &r)
		return r, 0, stats.bytes.Load() == 0
	}
	defer resp.Body.Close()
	status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		r.Error = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, errorMessage(b))
		return r, status, false
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		r.Error = fmt.Sprintf("the serve answered %q, not a stream (text/event-stream); it must support stream: true", mt)
		return r, status, false
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		r.Error = fmt.Sprintf("the serve compressed the stream (Content-Encoding %q) though asked for identity: compression holds tokens back; turn it off", ce)
		return r, status, false
	}
	max := p.MaxBody
	if max <= 0 {
		max = DefaultMaxBody
	}
	var src io.Reader = resp.Body
	arrival := stats.arrivals.Load
	if stats.conn.Load() == nil {
		// Not the probe's own connection: each read is an arrival.
		cr := &countedReader{r: resp.Body}
		src, arrival = cr, cr.reads.Load
	}
	body := &limitedReader{r: src, left: max}
	err = read(body, t0, &r, arrival, lp)
	r.EndMS = msSince(t0)
	if err != nil {
		if body.left <= 0 {
			err = fmt.Errorf("the stream ran past %d bytes; stopped reading", max)
		}
		r.Error = p.describe(ctx, err, &r)
		return r, status, false
	}
	drain(resp.Body, stats)
	if p.StatsURL != "" {
		if st, err := p.stats(ctx, client); err == nil {
			r.Server = st
		}
	}
	return r, status, false
}

// drainWait is how long the probe waits, after [DONE], for the serve to end
// the response, so the connection closes with a FIN rather than a reset
// (which a Python serve logs as a ConnectionResetError traceback).
const drainWait = time.Second

// drain reads what follows [DONE] to the end of the response, for at most
// drainWait and maxErrorBody bytes.
func drain(body io.Reader, stats *connStats) {
	if c := stats.conn.Load(); c != nil {
		c.SetReadDeadline(time.Now().Add(drainWait))
	}
	io.Copy(io.Discard, io.LimitReader(body, maxErrorBody))
}

// client is the probe's own HTTP client, made once.
func (p *Prober) client() *http.Client {
	p.once.Do(func() { p.own = &http.Client{Transport: newTransport()} })
	return p.own
}

// stats reads the serve's own figures of its last request, Lemonade's shape:
// {"time_to_first_token": s, "tokens_per_second": tok/s, "output_tokens": n}.
func (p *Prober) stats(ctx context.Context, client *http.Client) (*measure.ServerTimings, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.StatsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var s struct {
		TTFT   *float64 `json:"time_to_first_token"`
		TPS    *float64 `json:"tokens_per_second"`
		Output *int     `json:"output_tokens"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&s); err != nil {
		return nil, err
	}
	if s.TPS == nil {
		return nil, errors.New("no tokens_per_second")
	}
	st := &measure.ServerTimings{PredictedPerSecond: *s.TPS}
	if s.TTFT != nil {
		st.PromptMS = *s.TTFT * 1000
	}
	if s.Output != nil {
		st.PredictedN = *s.Output
	}
	return st, nil
}

// describe turns a transport error into words that say what happened.
func (p *Prober) describe(ctx context.Context, err error, r *measure.Reply) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("no complete reply within %v (--request-timeout); %d chunks with content had arrived", p.RequestTimeout, r.Chunks)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return "cancelled"
	}
	return err.Error()
}

// chunk is the part of a streamed chat chunk the probe reads.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
		} `json:"delta"`
		FinishReason *string         `json:"finish_reason"`
		Logprobs     json.RawMessage `json:"logprobs"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens *int `json:"completion_tokens"`
		PromptTokens     *int `json:"prompt_tokens"`
		Details          *struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		flmUsage
	} `json:"usage"`
	Timings *measure.ServerTimings `json:"timings"`
	Error   json.RawMessage        `json:"error"`
}

// flmUsage are FastFlowLM's own figures in its last chunk's usage
// (src/server/streaming_ostream_openai.hpp, send_final_response): seconds,
// and tokens a second. Its decoding_speed_tps is completion_tokens over
// decoding_duration, and each of those tokens is one timed decode step: the
// first token, which the prefill gives, is neither counted nor timed, and the
// step that gives the end of turn is both (src/common/AutoModel). A rate it
// cannot divide out (no step, no time) it sends as null.
type flmUsage struct {
	DecodingSpeedTPS    *float64 `json:"decoding_speed_tps"`
	DecodingDuration    *float64 `json:"decoding_duration"`
	PrefillDurationTTFT *float64 `json:"prefill_duration_ttft"`
}

// timings are the figures as the serve's own, or nil when it sent none.
func (u *flmUsage) timings(completionTokens *int) *measure.ServerTimings {
	if u.DecodingSpeedTPS == nil && u.DecodingDuration == nil {
		return nil
	}
	st := &measure.ServerTimings{}
	if u.DecodingSpeedTPS != nil {
		st.PredictedPerSecond = *u.DecodingSpeedTPS
	}
	if u.DecodingDuration != nil && completionTokens != nil {
		st.DecodeSteps, st.DecodeMS = *completionTokens, *u.DecodingDuration*1000
	}
	if u.PrefillDurationTTFT != nil {
		st.PromptMS = *u.PrefillDurationTTFT * 1000
	}
	return st
}

var (
	dataField = []byte("data")
	done      = []byte("[DONE]")
	typeError = []byte("error")
)

// read assembles the stream into r. It returns nil only when the stream ended
// with [DONE]. arrival gives, when a line comes, the number of the network
// arrival that brought it.
// lp, when not nil, gathers the logprobs.
func read(body io.Reader, t0 time.Time, r *measure.Reply, arrival func() int64, lp *capture) error {
	lines := newLineReader(body)
	var content, reasoning strings.Builder
	defer func() {
		r.Content, r.Reasoning = content.String(), reasoning.String()
	}()
	var ev event
	var at float64 // when the event's last data line came
	var from int64 // and the arrival that brought it
	lastFrom := int64(-1)
	for {
		line, err := lines.next()
		// The arrival time, taken before the line is parsed, so the parse
		// does not count against the serve.
		now := msSince(t0)
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				return err
			}
			if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
				return errors.New("the stream ended before [DONE]: the serve closed the connection")
			}
			return err
		}
		if !ev.take(line) {
			if name, _ := field(line); bytes.Equal(name, dataField) {
				at, from = now, arrival()
			}
			continue
		}
		if !ev.hasData {
			ev.reset()
			continue
		}
		data := bytes.TrimSpace(ev.data)
		if bytes.Equal(data, done) {
			return nil
		}
		if bytes.Equal(ev.typ, typeError) {
			return fmt.Errorf("the serve sent an error in the stream: %s", errorMessage(data))
		}
		chunks, jerr := decode(data)
		if jerr != nil {
			// A Python serve may write a non-finite logprob bare (NaN,
			// -Infinity): the chunk's content still counts.
			if fixed, changed := nullNonFinite(data); changed {
				chunks, _ = decode(fixed)
			}
			if chunks == nil {
				return fmt.Errorf("a stream chunk is not JSON (%v): %.120q", jerr, data)
			}
		}
		ev.reset()
		for i := range chunks {
			c := &chunks[i]
			if len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) {
				return fmt.Errorf("the serve sent an error in the stream: %s", errorMessage(data))
			}
			for j := range c.Choices {
				lp.keep(c.Choices[j].Logprobs)
			}
			if take(c, r, &content, &reasoning) {
				if r.FirstMS == nil {
					first := at
					r.FirstMS = &first
				}
				last := at
				r.LastMS = &last
				r.Chunks++
				if n := len(r.Arrivals); n > 0 && from == lastFrom {
					r.Arrivals[n-1].Chunks++
				} else {
					r.Arrivals = append(r.Arrivals, measure.Arrival{MS: at, Chunks: 1})
				}
				lastFrom = from
			}
		}
	}
}

// decode reads an event's data: one JSON chunk, or, from a serve that puts
// several data lines in one event, several.
func decode(data []byte) ([]chunk, error) {
	var one [1]chunk
	err := json.Unmarshal(data, &one[0])
	if err == nil {
		return one[:], nil
	}
	var cs []chunk
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var c chunk // fresh each time: json reuses slice elements without zeroing them
		if derr := dec.Decode(&c); derr == io.EOF {
			break
		} else if derr != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// take records what one chunk carries. It reports whether the chunk bore
// content or reasoning.
func take(c *chunk, r *measure.Reply, content, reasoning *strings.Builder) (bearing bool) {
	for _, ch := range c.Choices {
		d := &ch.Delta
		if d.Content != "" {
			bearing = true
			add(content, d.Content, r)
		}
		if rs := d.ReasoningContent + d.Reasoning; rs != "" {
			bearing = true
			add(reasoning, rs, r)
		}
		if ch.FinishReason != nil {
			r.FinishReason = *ch.FinishReason
		}
	}
	if u := c.Usage; u != nil {
		if u.CompletionTokens != nil {
			n := *u.CompletionTokens
			r.CompletionTokens = &n
		}
		if u.PromptTokens != nil {
			n := *u.PromptTokens
			r.PromptTokens = &n
		}
		if u.Details != nil && u.Details.CachedTokens != nil {
			n := *u.Details.CachedTokens
			r.CachedTokens = &n
		}
		if st := u.timings(u.CompletionTokens); st != nil {
			r.Server = st
		}
	}
	if c.Timings != nil {
		r.Server = c.Timings
	}
	return bearing
}

func add(b *strings.Builder, s string, r *measure.Reply) {
	if b.Len()+len(s) > MaxText {
		r.Truncated = true
		return
	}
	b.WriteString(s)
}

func msSince(t0 time.Time) float64 {
	return float64(time.Since(t0)) / float64(time.Millisecond)
}

// errorMessage pulls the message out of an OpenAI-style error body, or gives
// the body itself.
func errorMessage(b []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
		// some serves put the message at the top
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return s
		case e.Message != "":
			return e.Message
		}
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(empty body)"
	}
	return s
}

type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errors.New("stream too long")
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// countedReader counts reads, for a body that is not on the probe's own
// connection.
type countedReader struct {
	r     io.Reader
	reads atomic.Int64
}

func (c *countedReader) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.r.Read(p)
}
