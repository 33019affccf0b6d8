// Package fakellm is a simulated LLM serve: an OpenAI-compatible chat
// endpoint that streams at a chosen decode rate after a chosen first-token
// delay, and prints the route lines a real serve prints. It is
// deterministic: the same requests give the same replies, and tokens are paced
// on a fixed schedule.
//
// It has modes for every way a serve goes wrong that the gate must see: the
// slow route, both or neither route in the log, thinking left on, a
// degenerate or error reply, never ready, exit at start, exit mid-stream and a
// stalled stream.
package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// Routes the simulated serve can report.
const (
	RouteFast    = "fast"
	RouteSlow    = "slow"
	RouteBoth    = "both"
	RouteNeither = "neither"
)

// Options set up a simulated serve. Requests are numbered from 1 in the order
// they arrive, warm-ups included.
type Options struct {
	Model string
	Route string // RouteFast, RouteSlow, RouteBoth or RouteNeither

	// Persona makes the simulated serve behave like one kind of serve: its
	// paths, how it turns thinking off, its reasoning field, its own figures
	// and its log lines. "" is the reference serve.
	Persona string

	// Rates is the decode rate in tok/s for request 1, 2, ...; the last one
	// repeats. 0 streams without pacing.
	Rates        []float64
	FirstTokenMS float64 // delay before the first token
	// RateNoise draws each request's rate from Rates' figure ± that fraction,
	// uniformly, from a generator seeded with Seed and the request's number:
	// the same seed gives the same rates.
	RateNoise float64
	Seed      uint64
	// Decay plays a device that throttles as it heats: request n's rate
	// falls from Rates' figure r toward Decay.To, r·e^(-(n-1)/Tau) of the way
	// left, before RateNoise. A Tau of 0 keeps the rate.
	Decay Decay
	// Instant streams without pacing, and reports the nominal rate in the
	// serve's own timings (predicted_ms as n - 1 steps at that rate).
	Instant bool
	// Nagle writes as a Python serve often does: the prompt evaluated
	// first, then the headers, the role chunk and each token in writes of
	// their own. Serve it on a NagleListener.
	Nagle bool

	AnswerTokens int // tokens in a full answer; 0: always more than max_tokens

	// ThinkingAlways reasons (every token in the reasoning field) even when the
	// request turns thinking off; otherwise the serve thinks only when the
	// request does not turn it off, like Qwen3.
	ThinkingAlways bool
	ReasoningField string // "reasoning_content" (default) or "reasoning"

	Degenerate    int // this request answers "//////..."
	ErrorAt       int // this request answers HTTP 500
	ExitMidStream int // this request exits the serve after a few tokens
	Stall         int // this request stops sending after a few tokens
	Content       string
	Say           string // printed to the log at start, as it is

	// Burst holds every token and sends them in one write when the answer
	// is done, as a buffering proxy in front of the serve does.
	Burst bool
	// ClaimTokens, when set, is the usage.completion_tokens sent, whatever
	// was streamed: a serve whose counter lies.
	ClaimTokens int

	NoUsage   bool // never send usage
	NoTimings bool // never send llama.cpp timings

	// LogprobsShape is how logprobs are answered when a request asks for
	// them: ShapeLlamaCpp, ShapeVLLM, ShapeOllama (each serve's own
	// entries), ShapeNone (ignored), ShapeReject (HTTP 400, as OVMS
	// answers a streamed request for them) or ShapeGarbage; "": the
	// persona's.
	LogprobsShape string
	// Kernel is how this route's arithmetic departs from the reference's
	// (Generate): the zero Kernel is the reference.
	Kernel Kernel

	// LoadMode is how requests that come at once are taken: LoadBatch,
	// LoadSerial, LoadSlice, LoadBusy, or LoadIndependent. BatchCost is LoadBatch's slowdown for
	// each other request decoding; PauseMS is LoadSerial's pause before a
	// request that waited.
	// Slots, when above 0, is answered on /props as total_slots, as
	// llama-server says how many requests it decodes at once.
	Slots int
	// CPUPlatform plays vLLM on its CPU platform: /metrics's
	// cache_config_info carries cpu_kvcache_space_bytes.
	CPUPlatform bool
	LoadMode    string
	BatchCost   float64
	PauseMS     float64

	NeverReady bool          // health answers 503 forever
	ReadyAfter time.Duration // health answers 503 until then
	HealthPath string        // default /health

	// Exit ends the process (os.Exit in the command); in-process tests close
	// the connection instead when it is nil.
	Exit func(code int)
	Log  io.Writer // the serve's log; route lines and one line a request
	// Sensor, when set, is the simulated device's energy sensor: busy
	// while a request streams.
	Sensor *Sensor
}

// Server is a simulated serve's HTTP handler.
type Server struct {
	opt     Options
	p       persona
	start   time.Time
	mu      sync.Mutex
	n       int      // requests so far
	last    stats    // of the last request, for a persona with a stats path
	prompt  []string // the last request's prompt, for the prompt cache
	logMu   sync.Mutex
	started bool
	// decoding is how many requests are streaming; serial takes one at a
	// time under --load-mode serial.
	decoding atomic.Int64
	serial   fifo
	// inFlight is a request being answered, under --load-mode busy.
	inFlight atomic.Bool
}

// stats are Lemonade's figures of the last request.
type stats struct {
	TTFT   float64 `json:"time_to_first_token"`
	TPS    float64 `json:"tokens_per_second"`
	Input  int     `json:"input_tokens"`
	Output int     `json:"output_tokens"`
}

// New returns a simulated serve and prints its start-up lines to opt.Log.
func New(opt Options) *Server {
	if opt.Model == "" {
		opt.Model = "sim-0.6B"
	}
	if opt.Route == "" {
		opt.Route = RouteFast
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	p := personas()[opt.Persona]
	if opt.ReasoningField == "" {
		opt.ReasoningField = p.reasoningField
	}
	if opt.HealthPath == "" {
		opt.HealthPath = p.health
	}
	s := &Server{opt: opt, p: p, start: time.Now()}
	s.serial.pause = ms(opt.PauseMS)
	s.logf("loading model %s", opt.Model)
	if opt.Say != "" {
		fmt.Fprintln(opt.Log, opt.Say)
	}
	s.logMu.Lock()
	s.p.startLines(opt.Log, opt.Route, opt.Model)
	s.logMu.Unlock()
	return s
}

func (s *Server) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.opt.Log, "fakellm: "+format+"\n", args...)
}

// ServeHTTP answers health and chat requests.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch path := r.URL.Path; {
	case path == s.opt.HealthPath:
		s.health(w)
	case slices.Contains(s.p.chatPaths, path):
		s.chat(w, r)
	case s.p.statsPath != "" && path == s.p.statsPath:
		s.mu.Lock()
		st := s.last
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	case s.p.ps && path == "/api/ps":
		s.ps(w)
	case s.p.vllmMetrics && path == "/metrics":
		s.vllmMetrics(w)
	case path == "/props" && s.opt.Slots > 0:
		// llama-server's /props: its slots (tools/server/server.cpp).
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"total_slots":%d,"model_path":%q}`, s.opt.Slots, s.opt.Model)
	case path == "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, s.opt.Model)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter) {
	if s.opt.NeverReady || time.Since(s.start) < s.opt.ReadyAfter {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"status":"loading model"}`)
		return
	}
	if s.opt.HealthPath == "/" { // Ollama
		io.WriteString(w, "Ollama is running")
		return
	}
	if s.opt.HealthPath == "/v1/models" { // FastFlowLM has no health path
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, s.opt.Model)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"status":"ok"}`)
}

// chatRequest is the part of an OpenAI chat request the simulated serve reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	MaxTokens     int      `json:"max_tokens"`
	Temperature   *float64 `json:"temperature"`
	Stream        bool     `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
	ReasoningEffort    string         `json:"reasoning_effort"`
	Think              *bool          `json:"think"`
	Seed               *int64         `json:"seed"`
	Logprobs           bool           `json:"logprobs"`
	TopLogprobs        int            `json:"top_logprobs"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"invalid JSON body"}}`, http.StatusBadRequest)
		return
	}
	if len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"messages is empty"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.n++
	n := s.n
	if !s.started {
		s.started = true
		s.logMu.Lock()
		s.p.firstRequestLines(s.opt.Log, s.opt.Route, s.opt.Model)
		s.logMu.Unlock()
	}
	s.mu.Unlock()
	prompt := req.Messages[len(req.Messages)-1].Content
	s.logf("request %d: %d prompt bytes, max_tokens %d, stream %v", n, len(prompt), req.MaxTokens, req.Stream)

	if n == s.opt.ErrorAt {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"code":500,"message":"simulated failure: device lost","type":"server_error"}}`)
		return
	}

	shape := s.shape()
	if req.Logprobs {
		switch {
		case shape == ShapeReject:
			// OVMS, src/llm/apis/openai_completions.cpp.
			badRequest(w, "logprobs are not supported in streaming mode.")
			return
		case shape != ShapeNone && (req.TopLogprobs < 0 || req.TopLogprobs > maxTopLogprobs):
			badRequest(w, fmt.Sprintf("top_logprobs must be between 0 and %d", maxTopLogprobs))
			return
		}
	}
	tokens := s.answer(prompt, n, req.MaxTokens)
	// Like Qwen3, the serve thinks unless the request turns it off in the
	// way this kind of serve understands.
	off := req.ChatTemplateKwargs["enable_thinking"] == false
	switch s.p.thinkingOff {
	case "effort":
		off = req.ReasoningEffort == "none"
	case "think":
		// FastFlowLM sets its models' enable_think from "think", then
		// from reasoning_effort, which its Qwen3 and Gemma models read.
		off = req.Think != nil && !*req.Think
		switch req.ReasoningEffort {
		case "none":
			off = true
		case "low", "medium", "high":
			off = false
		}
	}
	thinking := s.opt.ThinkingAlways || !off
	finish := "length"
	if s.opt.AnswerTokens > 0 && s.opt.AnswerTokens < req.MaxTokens {
		finish = "stop"
	}
	mode := loadModes[s.opt.LoadMode]
	if mode.refuse != "" {
		if !s.inFlight.CompareAndSwap(false, true) {
			s.refuse(w, req, n, mode.refuse)
			return
		}
		defer s.inFlight.Store(false)
	}
	if mode.queue {
		if !s.serial.acquire(r.Context()) {
			return
		}
		defer s.serial.release()
	}
	if !req.Stream {
		s.whole(w, req, tokens, thinking, finish)
		return
	}
	s.decoding.Add(1)
	defer s.decoding.Add(-1)
	s.stream(w, r, req, n, tokens, thinking, finish)
}

// answer is the deterministic reply to prompt as a list of tokens: the
// simulated model's (Generate), or one character repeated, or the given
// content, whose tokens are sure of themselves.
func (s *Server) answer(prompt string, n, maxTokens int) []measure.Token {
	count := maxTokens
	if count <= 0 {
		count = 16
	}
	if s.opt.AnswerTokens > 0 {
		count = min(count, s.opt.AnswerTokens)
	}
	sure := func(text string) measure.Token {
		return measure.Token{Text: text, Logprob: -0.01, Top: []measure.Alt{{Text: text, Logprob: -0.01}}}
	}
	switch {
	case n == s.opt.Degenerate:
		out := make([]measure.Token, count)
		for i := range out {
			out[i] = sure("/")
		}
		return out
	case s.opt.Content != "":
		// The whole given content in the first token, the rest as spaces, so
		// the token count stays what max_tokens asks.
		out := make([]measure.Token, count)
		out[0] = sure(s.opt.Content)
		for i := 1; i < count; i++ {
			out[i] = sure(" ")
		}
		return out
	}
	return Generate(prompt, count, s.opt.Kernel)
}

var vocabulary = strings.Fields(`the serve answers each question with a steady stream of words that
	carry no meaning but look like text: a cache line holds sixty four bytes and the keeper
	climbs the tower at dusk while Rome grows and the bread rises overnight in a warm kitchen`)

// rate is request n's nominal decode rate.
func (s *Server) rate(n int) float64 {
	if len(s.opt.Rates) == 0 {
		return 0
	}
	r := s.opt.Rates[min(n, len(s.opt.Rates))-1]
	r = s.opt.Decay.Of(r, n)
	if s.opt.RateNoise > 0 {
		u := rand.New(rand.NewPCG(s.opt.Seed, uint64(n))).Float64()
		r *= 1 + s.opt.RateNoise*(2*u-1)
	}
	return r
}

// Decay is a rate that falls toward To with a time constant of Tau
// requests.
type Decay struct {
	To, Tau float64
}

// Of is rate r at request n (from 1): To + (r - To)·e^(-(n-1)/Tau), r
// itself when Tau is 0.
func (d Decay) Of(r float64, n int) float64 {
	if d.Tau == 0 {
		return r
	}
	return d.To + (r-d.To)*math.Exp(-float64(n-1)/d.Tau)
}

// promptCache is what a llama.cpp-like serve keeps of the last prompt: the
// longest common prefix is not evaluated again. Tokens are words here, after
// a chat template's opening every prompt shares.
type promptCache struct{ total, cached int }

const templateTokens = 4

func (s *Server) cache(req chatRequest) promptCache {
	words := strings.Fields(req.Messages[len(req.Messages)-1].Content)
	s.mu.Lock()
	defer s.mu.Unlock()
	common := 0
	for common < len(words) && common < len(s.prompt) && words[common] == s.prompt[common] {
		common++
	}
	s.prompt = words
	total := templateTokens + len(words)
	// At least one token is evaluated, to sample the first from.
	return promptCache{total: total, cached: min(templateTokens+common, total-1)}
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req chatRequest, n int, tokens []measure.Token, thinking bool, finish string) {
	shape := s.shape()
	prompt := s.cache(req)
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	defer s.opt.Sensor.Busy()()
	begin := time.Now()
	if s.opt.Nagle {
		// As a Python serve often does: the prompt first, then the
		// headers, the role chunk and the first token, a write each.
		if !sleepUntil(r, begin.Add(ms(s.opt.FirstTokenMS))) {
			return
		}
		w.WriteHeader(http.StatusOK)
		fl.Flush()
	}
	id := fmt.Sprintf("chatcmpl-%d", n)
	created := s.start.Unix()
	var held []byte // the tokens a buffering proxy holds
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		b = bytes.ReplaceAll(b, []byte(nanMark), []byte("NaN"))
		if s.opt.Burst && held != nil {
			held = fmt.Appendf(held, "data: %s\n\n", b)
			return true
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": s.opt.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
	}
	// The role-only chunk comes at once, before prefill, as llama.cpp sends it.
	if !send(chunk(map[string]any{"role": "assistant", "content": nil}, nil)) {
		return
	}
	if !sleepUntil(r, begin.Add(ms(s.opt.FirstTokenMS))) {
		return
	}
	first := time.Now()
	nominal := s.batchRate(s.rate(n))
	rate := nominal
	if s.opt.Instant {
		rate = 0
	}
	field := "content"
	if thinking {
		field = s.opt.ReasoningField
	}
	if s.opt.Burst {
		held = []byte{}
	}
	next := first
	for i, tok := range tokens {
		if rate > 0 && i > 0 {
			next = next.Add(s.tokenWait(rate))
			if !sleepUntil(r, next) {
				return
			}
		}
		if i == 3 && n == s.opt.ExitMidStream {
			s.logf("fatal: device lost in the middle of request %d", n)
			if s.opt.Exit != nil {
				s.opt.Exit(134)
			}
			panic(http.ErrAbortHandler)
		}
		if i == 3 && n == s.opt.Stall {
			s.logf("request %d stalled", n)
			<-r.Context().Done()
			return
		}
		c := chunk(map[string]any{field: tok.Text}, nil)
		if req.Logprobs {
			if lp := logprobsField(shape, tok, req.TopLogprobs, i, n); lp != nil {
				c["choices"].([]any)[0].(map[string]any)["logprobs"] = lp
			}
		}
		if !send(c) {
			return
		}
	}
	end := time.Now()
	if held != nil {
		// The proxy lets go of the whole answer at once.
		w.Write(held)
		fl.Flush()
		held = nil
	}
	last := chunk(map[string]any{}, finish)
	decode := end.Sub(first).Seconds()
	if s.opt.Instant && nominal > 0 {
		decode = float64(len(tokens)-1) / nominal
	}
	// As llama.cpp counts: predicted_ms runs from the first token sampled,
	// so predicted_per_second is n tokens over n - 1 steps.
	pps := 0.0
	if decode > 0 {
		pps = float64(len(tokens)) / decode
	}
	s.mu.Lock()
	s.last = stats{TTFT: first.Sub(begin).Seconds(), TPS: pps, Input: prompt.total, Output: len(tokens)}
	s.mu.Unlock()
	if s.p.timings && !s.opt.NoTimings {
		last["timings"] = map[string]any{
			"cache_n": prompt.cached, "prompt_n": prompt.total - prompt.cached, "prompt_ms": s.opt.FirstTokenMS,
			"predicted_n": len(tokens), "predicted_ms": decode * 1000, "predicted_per_second": pps,
		}
	}
	claimed := len(tokens)
	if s.opt.ClaimTokens > 0 {
		claimed = s.opt.ClaimTokens
	}
	if s.p.flmUsage {
		// FastFlowLM's last chunk carries the finish and its usage,
		// asked for or not (send_final_response).
		last["choices"] = []any{map[string]any{"index": 0, "delta": map[string]any{"content": nil}, "finish_reason": finish}}
		if !s.opt.NoUsage {
			last["usage"] = s.flmUsage(claimed, prompt, first.Sub(begin), decode, len(tokens))
		}
	}
	if !send(last) {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage && !s.opt.NoUsage && !s.p.flmUsage {
		if !send(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": s.opt.Model,
			"choices": []any{},
			"usage":   s.promptUsage(s.usage(claimed), prompt, claimed),
		}) {
			return
		}
	}
	io.WriteString(w, "data: [DONE]\n\n")
	fl.Flush()
	s.logf("request %d: %d tokens, finish %s", n, len(tokens), finish)
}

// promptUsage puts the prompt's tokens, and those the cache held, in usage.
func (s *Server) promptUsage(u map[string]any, prompt promptCache, tokens int) map[string]any {
	u["prompt_tokens"], u["total_tokens"] = prompt.total, prompt.total+tokens
	u["prompt_tokens_details"] = map[string]any{"cached_tokens": prompt.cached}
	return u
}

func (s *Server) usage(tokens int) map[string]any {
	return map[string]any{"prompt_tokens": 20, "completion_tokens": tokens, "total_tokens": 20 + tokens}
}

// flmUsage is FastFlowLM's usage (src/server/streaming_ostream_openai.hpp,
// send_final_response), as its decode loop counts (src/common/AutoModel/
// automodel.cpp, _shared_generate): the first token comes from the prefill,
// neither counted nor timed; each token after it, and the end of turn, is a
// timed decode step. So n tokens streamed are n steps (completion_tokens n),
// n - 1 of them in the span from the first token to the last and the end of
// turn's one more; decoding_speed_tps is steps over their time, and seconds
// are seconds. prompt_tokens are those prefilled (the cached prefix
// skipped); a rate of nothing over nothing is NaN, which its JSON library
// writes as null.
func (s *Server) flmUsage(claimed int, prompt promptCache, ttft time.Duration, span float64, n int) map[string]any {
	evaluated := prompt.total - prompt.cached
	var decoding, tps any = 0.0, nil
	if n > 1 && span > 0 {
		step := span / float64(n-1)
		decoding = step * float64(n)
		tps = 1 / step
	}
	var prefillTPS any
	if ttft > 0 {
		prefillTPS = float64(evaluated) / ttft.Seconds()
	}
	const capacity = 32768
	return map[string]any{
		"prompt_tokens":                      evaluated,
		"completion_tokens":                  claimed,
		"total_tokens":                       evaluated + claimed,
		"active_kv_tokens":                   prompt.total + n,
		"max_kv_token_capacity":              capacity,
		"kv_token_occupancy_rate_percentage": float64(prompt.total+n) / capacity * 100,
		"load_duration":                      0.0,
		"prefill_duration_ttft":              ttft.Seconds(),
		"decoding_duration":                  decoding,
		"prefill_speed_tps":                  prefillTPS,
		"decoding_speed_tps":                 tps,
	}
}

func (s *Server) whole(w http.ResponseWriter, req chatRequest, tokens []measure.Token, thinking bool, finish string) {
	text := text(tokens)
	msg := map[string]any{"role": "assistant", "content": text}
	if thinking {
		msg = map[string]any{"role": "assistant", "content": "", s.opt.ReasoningField: text}
	}
	resp := map[string]any{
		"id": "chatcmpl", "object": "chat.completion", "model": s.opt.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
	}
	if !s.opt.NoUsage {
		resp["usage"] = map[string]any{"prompt_tokens": 20, "completion_tokens": len(tokens), "total_tokens": 20 + len(tokens)}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// sleepUntil waits for t, or for the client to go away (false).
func sleepUntil(r *http.Request, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return r.Context().Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// ps answers Ollama's /api/ps (api/types.go ProcessModelResponse,
// v0.12.11): the loaded model, 1041.71 MiB as the persona's model buffer
// says, and how much of it is in device memory: all on the fast route,
// 20 of 29 layers' worth on the partial one, none otherwise.
func (s *Server) ps(w http.ResponseWriter) {
	const size = 1092312514 // 1041.71 MiB
	vram := int64(0)
	switch s.opt.Route {
	case RouteFast, RouteBoth:
		vram = size
	case RoutePartial:
		vram = size * 20 / 29
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"models":[{"name":%q,"model":%q,"size":%d,"digest":"0123","details":{"format":"gguf"},"expires_at":"2026-12-01T00:00:00Z","size_vram":%d,"context_length":4096}]}`,
		s.opt.Model, s.opt.Model, size, vram)
}

// vllmMetrics answers vLLM's /metrics, its cache_config_info as
// prometheus_client writes it: the labels are CacheConfig's fields
// (CacheConfig.metrics_info, vllm/config/cache.py), and
// cpu_kvcache_space_bytes is a number only where vLLM's CPU platform set
// it (vllm/platforms/cpu.py, 4 GiB when VLLM_CPU_KVCACHE_SPACE is unset).
func (s *Server) vllmMetrics(w http.ResponseWriter) {
	cpu := "None"
	if s.opt.CPUPlatform {
		cpu = "4294967296"
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprintf(w, `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name=%q} 0.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_kvcache_space_bytes=%q,cpu_offload_gb="0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",is_attention_free="False",num_cpu_blocks="None",num_gpu_blocks="2048",sliding_window="None",swap_space="4"} 1.0
`, s.opt.Model, cpu)
}
