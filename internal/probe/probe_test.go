package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
)

func prober(t *testing.T, h http.Handler) *Prober {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Prober{URL: srv.URL + "/v1/chat/completions", Model: "m", MaxTokens: 10, RequestTimeout: 10 * time.Second}
}

var question = prompts.Prompt{Prompt: "What is the capital of France?"}

func TestAskFast(t *testing.T) {
	p := prober(t, fakellm.New(fakellm.Options{Rates: []float64{200}, FirstTokenMS: 30}))
	r := p.Ask(context.Background(), 1, false, question)
	if r.Error != "" {
		t.Fatalf("Ask() error = %s", r.Error)
	}
	if n, src := r.Tokens(); n != 10 || src != measure.SourceUsage {
		t.Errorf("Tokens() = %d, %s, want 10 from usage", n, src)
	}
	if r.Chunks != 10 {
		t.Errorf("Chunks = %d, want 10", r.Chunks)
	}
	// The role-only chunk comes at once; the first token only after 30 ms.
	if ft, ok := r.FirstTokenMS(); !ok || ft < 30 {
		t.Errorf("FirstTokenMS() = %v, %v, want at least 30: a role-only chunk must not count", ft, ok)
	}
	// Only that there is a rate: a loaded machine can delay the first
	// chunk's arrival and bunch the rest, so no bound on it holds.
	if rate, why := r.DecodeRate(); why != "" || rate <= 0 {
		t.Errorf("DecodeRate() = %v, %q, want a positive rate", rate, why)
	}
	if r.Server == nil || r.Server.PredictedN != 10 || r.Server.PromptMS != 30 {
		t.Errorf("Server = %+v, want the serve's timings (predicted_n 10, prompt_ms 30)", r.Server)
	}
	if r.FinishReason != "length" || r.Content == "" || r.Reasoning != "" || r.Warmup || r.N != 1 || r.Prompt != question.Prompt {
		t.Errorf("Reply = %+v, want content, finish length, no reasoning", r)
	}
	if r.EndMS < *r.LastMS {
		t.Errorf("EndMS %v before LastMS %v", r.EndMS, *r.LastMS)
	}
}

// FastFlowLM: thinking off with its own "think": false, and its figures
// read from the last chunk's usage as the serve's, on the stream's
// definition.
func TestAskFLM(t *testing.T) {
	p := prober(t, fakellm.New(fakellm.Options{Persona: fakellm.PersonaFLM, Rates: []float64{200}}))
	p.ThinkingControl = "think"
	r := p.Ask(context.Background(), 1, false, question)
	if r.Error != "" || r.Content == "" || r.Reasoning != "" {
		t.Fatalf("Ask() = content %q, reasoning %q, error %q: want content with thinking off", r.Content, r.Reasoning, r.Error)
	}
	s := r.Server
	if s == nil || s.DecodeSteps != 10 || s.DecodeMS <= 0 || s.PredictedPerSecond <= 0 {
		t.Fatalf("Server = %+v, want 10 steps, their time and the rate", s)
	}
	e := r.ServerEstimate()
	if e.Method != measure.MethodServer || math.Abs(e.Rate-s.PredictedPerSecond) > 1e-6*e.Rate {
		t.Errorf("ServerEstimate() = %+v, want decoding_speed_tps %v on the span's definition", e, s.PredictedPerSecond)
	}
	p.ThinkingControl = "chat-template-kwargs"
	if r := p.Ask(context.Background(), 2, false, question); r.Content != "" || r.Reasoning == "" {
		t.Errorf("without \"think\": false: content %q, reasoning %q, want it thinking", r.Content, r.Reasoning)
	}
}

// The body asks greedily with the fixed seed, and for logprobs only when
// TopLogprobs is set.
func TestAskRequestBody(t *testing.T) {
	for _, k := range []int{0, 5, 40} {
		var mu sync.Mutex
		var got map[string]any
		sim := fakellm.New(fakellm.Options{})
		p := prober(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			json.Unmarshal(b, &got)
			mu.Unlock()
			if r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type = %q", r.Header.Get("Content-Type"))
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			sim.ServeHTTP(w, r)
		}))
		p.TopLogprobs = k
		r := p.Ask(context.Background(), 1, true, question)
		want := map[string]any{
			"model":                "m",
			"messages":             []any{map[string]any{"role": "user", "content": question.Prompt}},
			"max_tokens":           10.0,
			"temperature":          0.0,
			"seed":                 float64(Seed),
			"stream":               true,
			"stream_options":       map[string]any{"include_usage": true},
			"chat_template_kwargs": map[string]any{"enable_thinking": false},
		}
		wantK := min(k, MaxTopLogprobs)
		if k > 0 {
			want["logprobs"], want["top_logprobs"] = true, float64(wantK)
		}
		mu.Lock()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("TopLogprobs %d: request body (-want +got):\n%s", k, diff)
		}
		mu.Unlock()
		if r.Seed == nil || *r.Seed != Seed || r.TopLogprobs != wantK {
			t.Errorf("TopLogprobs %d: Reply seed %v, top_logprobs %d, want %d, %d", k, r.Seed, r.TopLogprobs, Seed, wantK)
		}
	}
}

// How each --thinking-control asks for thinking on and off: only its own
// fields are sent.
func TestBodyThinking(t *testing.T) {
	kwargs := func(on bool) map[string]any { return map[string]any{"enable_thinking": on} }
	tests := []struct {
		control  string
		thinking bool
		want     map[string]any
	}{
		{"chat-template-kwargs", false, map[string]any{"chat_template_kwargs": kwargs(false)}},
		{"chat-template-kwargs", true, map[string]any{"chat_template_kwargs": kwargs(true)}},
		{"", false, map[string]any{"chat_template_kwargs": kwargs(false)}},
		{"reasoning-effort", false, map[string]any{"reasoning_effort": "none"}},
		{"reasoning-effort", true, map[string]any{}},
		{"both", false, map[string]any{"chat_template_kwargs": kwargs(false), "reasoning_effort": "none"}},
		{"both", true, map[string]any{"chat_template_kwargs": kwargs(true)}},
		{"think", false, map[string]any{"think": false}},
		{"think", true, map[string]any{"think": true}},
	}
	for _, tt := range tests {
		p := &Prober{ThinkingControl: tt.control, Thinking: tt.thinking}
		var body map[string]any
		if err := json.Unmarshal(p.Body("q"), &body); err != nil {
			t.Fatal(err)
		}
		got := map[string]any{}
		for _, k := range []string{"chat_template_kwargs", "reasoning_effort", "think"} {
			if v, ok := body[k]; ok {
				got[k] = v
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Body(%q, thinking %v) (-want +got):\n%s", tt.control, tt.thinking, diff)
		}
	}
}

func TestAsk(t *testing.T) {
	tests := []struct {
		name    string
		opt     fakellm.Options
		prober  func(*Prober)
		check   func(t *testing.T, r measure.Reply)
		wantErr string
	}{
		{
			name: "thinking left on: reasoning_content, no content",
			opt:  fakellm.Options{ThinkingAlways: true},
			check: func(t *testing.T, r measure.Reply) {
				if r.Content != "" || r.Reasoning == "" || r.FirstMS == nil || r.Chunks != 10 {
					t.Errorf("content %q, reasoning %q, chunks %d: want all reasoning, timed", r.Content, r.Reasoning, r.Chunks)
				}
			},
		},
		{
			name: "the reasoning field of newer vLLM",
			opt:  fakellm.Options{ThinkingAlways: true, ReasoningField: "reasoning"},
			check: func(t *testing.T, r measure.Reply) {
				if r.Reasoning == "" || r.FirstMS == nil {
					t.Errorf("reasoning %q, first %v: want the reasoning field read and timed", r.Reasoning, r.FirstMS)
				}
			},
		},
		{
			name:   "thinking on is asked for when set",
			prober: func(p *Prober) { p.Thinking = true },
			check: func(t *testing.T, r measure.Reply) {
				if r.Reasoning == "" || r.Content != "" {
					t.Errorf("content %q reasoning %q: the simulated serve thinks when enable_thinking is true", r.Content, r.Reasoning)
				}
			},
		},
		{
			name: "no usage: the server's predicted_n",
			opt:  fakellm.Options{NoUsage: true},
			check: func(t *testing.T, r measure.Reply) {
				if n, src := r.Tokens(); n != 10 || src != measure.SourceServer {
					t.Errorf("Tokens() = %d, %s, want 10 from server", n, src)
				}
			},
		},
		{
			name: "no usage, no timings: chunks",
			opt:  fakellm.Options{NoUsage: true, NoTimings: true},
			check: func(t *testing.T, r measure.Reply) {
				if n, src := r.Tokens(); n != 10 || src != measure.SourceChunks || r.Server != nil {
					t.Errorf("Tokens() = %d, %s, server %v, want 10 from chunks", n, src, r.Server)
				}
			},
		},
		{
			name: "an answer shorter than max_tokens",
			opt:  fakellm.Options{AnswerTokens: 4},
			check: func(t *testing.T, r measure.Reply) {
				if n, _ := r.Tokens(); n != 4 || r.FinishReason != "stop" {
					t.Errorf("tokens %d finish %q, want 4, stop", n, r.FinishReason)
				}
			},
		},
		{name: "an HTTP error names status and message", opt: fakellm.Options{ErrorAt: 1}, wantErr: "HTTP 500: simulated failure: device lost"},
		{name: "a stalled stream times out", opt: fakellm.Options{Stall: 1}, prober: func(p *Prober) { p.RequestTimeout = 2 * time.Second },
			wantErr: "no complete reply within 2s (--request-timeout); 3 chunks with content had arrived"},
		{name: "a serve that dies mid-stream", opt: fakellm.Options{ExitMidStream: 1}, wantErr: "the stream ended before [DONE]"},
		{name: "a stream past the body bound", prober: func(p *Prober) { p.MaxBody = 600 }, wantErr: "the stream ran past 600 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opt.Rates = []float64{0}
			p := prober(t, fakellm.New(tt.opt))
			if tt.prober != nil {
				tt.prober(p)
			}
			r := p.Ask(context.Background(), 1, false, question)
			if tt.wantErr == "" && r.Error != "" {
				t.Fatalf("Ask() error = %s", r.Error)
			}
			if !strings.Contains(r.Error, tt.wantErr) {
				t.Errorf("Ask() error = %q, want it to contain %q", r.Error, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

// TestAskRawStreams feeds streams a serve might send, byte for byte.
func TestAskRawStreams(t *testing.T) {
	tests := []struct {
		name, ctype, body string
		status            int
		wantErr           string
		wantContent       string
	}{
		{name: "not a stream", ctype: "application/json", body: `{"choices":[]}`, wantErr: `the serve answered "application/json", not a stream`},
		{name: "an error in the stream", body: "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"out of memory\"}}\n\n", wantErr: "the serve sent an error in the stream: out of memory", wantContent: "a"},
		{name: "a chunk that is not JSON", body: "data: {nope\n\n", wantErr: "a stream chunk is not JSON"},
		{name: "comments, other fields and CRLF are passed over", body: ": ping\r\nevent: message\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"Pa\"}}]}\r\n\r\ndata:{\"choices\":[{\"delta\":{\"content\":\"ris\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n", wantContent: "Paris"},
		{name: "HTTP error with a string error", status: 400, body: `{"error":"model not found"}`, wantErr: "HTTP 400: model not found"},
		{name: "HTTP error with a plain body", status: 503, body: "Loading model", wantErr: "HTTP 503: Loading model"},
		{name: "HTTP error with an empty body", status: 502, wantErr: "HTTP 502: (empty body)"},
		{name: "a line too long", body: "data: " + strings.Repeat("x", 70<<10) + "\n", wantErr: "a stream line ran past 64 KiB"},
		{name: "no [DONE]", body: "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", wantErr: "the stream ended before [DONE]", wantContent: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := prober(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ct := tt.ctype
				if ct == "" {
					ct = "text/event-stream; charset=utf-8"
				}
				w.Header().Set("Content-Type", ct)
				if tt.status != 0 {
					w.WriteHeader(tt.status)
				}
				io.WriteString(w, tt.body)
			}))
			r := p.Ask(context.Background(), 1, false, question)
			if tt.wantErr == "" && r.Error != "" || !strings.Contains(r.Error, tt.wantErr) {
				t.Errorf("Ask() error = %q, want %q", r.Error, tt.wantErr)
			}
			if r.Content != tt.wantContent {
				t.Errorf("Content = %q, want %q", r.Content, tt.wantContent)
			}
		})
	}
}

func TestAskCancelledAndUnreachable(t *testing.T) {
	p := prober(t, fakellm.New(fakellm.Options{Stall: 1}))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if r := p.Ask(ctx, 1, false, question); r.Error != "cancelled" {
		t.Errorf("Ask() after cancel: error = %q, want cancelled", r.Error)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p = &Prober{URL: url, MaxTokens: 4, RequestTimeout: 5 * time.Second}
	if r := p.Ask(context.Background(), 1, false, question); !strings.Contains(r.Error, "connection refused") {
		t.Errorf("Ask() of a closed port: error = %q, want connection refused", r.Error)
	}
}

// readString reads a whole stream that came in one read.
func readString(s string, r *measure.Reply) error {
	cr := &countedReader{r: strings.NewReader(s)}
	return read(cr, time.Now(), r, cr.reads.Load, nil)
}

func TestTextBound(t *testing.T) {
	var b strings.Builder
	fmt.Fprint(&b, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n")
	big := strings.Repeat("y", 60<<10)
	for range 20 {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", big)
	}
	b.WriteString("data: [DONE]\n\n")
	var r measure.Reply
	if err := readString(b.String(), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || len(r.Content) > MaxText || r.Chunks != 21 {
		t.Errorf("Truncated %v, len %d, chunks %d: want the content cut at %d and every chunk counted", r.Truncated, len(r.Content), r.Chunks, MaxText)
	}
}

// BenchmarkRead is the probe's own cost: CPU per streamed token parsed, for a
// llama.cpp-shaped stream of one token a chunk.
func BenchmarkRead(b *testing.B) {
	const tokens = 1000
	var s strings.Builder
	s.WriteString(`data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1764000000,"id":"chatcmpl-x","model":"Qwen3-0.6B","system_fingerprint":"b6000","object":"chat.completion.chunk"}` + "\n\n")
	for i := range tokens {
		fmt.Fprintf(&s, `data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":" word%d"}}],"created":1764000000,"id":"chatcmpl-x","model":"Qwen3-0.6B","system_fingerprint":"b6000","object":"chat.completion.chunk"}`+"\n\n", i)
	}
	s.WriteString(`data: {"choices":[],"usage":{"completion_tokens":1000,"prompt_tokens":20,"total_tokens":1020}}` + "\n\ndata: [DONE]\n\n")
	stream := s.String()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var r measure.Reply
		if err := readString(stream, &r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tokens), "ns/token")
}

var timeZero = time.Now()
