package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

func id(n int) *int { return &n }

// readLogprobs reads a whole stream asking for k alternatives.
func readLogprobs(t *testing.T, stream string, k, maxTokens int) measure.Reply {
	t.Helper()
	r := measure.Reply{TopLogprobs: k}
	lp := newCapture(k, maxTokens)
	cr := &countedReader{r: strings.NewReader(stream)}
	if err := read(cr, timeZero, &r, cr.reads.Load, lp); err != nil {
		t.Fatalf("read() = %v", err)
	}
	lp.finish(&r)
	return r
}

// Each serve's own stream shape, as its source writes it, gives the same
// tokens; ids only where the serve sends them (llama.cpp's server).
func TestLogprobsShapes(t *testing.T) {
	withIDs := []measure.Token{
		{Text: "The", ID: id(785), Logprob: -0.0312, Top: []measure.Alt{{Text: "The", ID: id(785), Logprob: -0.0312}, {Text: "Paris", ID: id(59604), Logprob: -3.61}}},
		{Text: " capital", ID: id(6722), Logprob: -0.25, Top: []measure.Alt{{Text: " capital", ID: id(6722), Logprob: -0.25}, {Text: " answer", ID: id(4226), Logprob: -1.6}}},
		{Text: " is", ID: id(374), Logprob: -0.00043, Top: []measure.Alt{{Text: " is", ID: id(374), Logprob: -0.00043}, {Text: " of", ID: id(315), Logprob: -8.1}}},
	}
	noIDs := func(rounded bool) []measure.Token {
		var out []measure.Token
		for _, t := range withIDs {
			t.ID = nil
			t.Top = append([]measure.Alt(nil), t.Top...)
			for i := range t.Top {
				t.Top[i].ID = nil
			}
			out = append(out, t)
		}
		if rounded { // vLLM's own digits
			out[0].Logprob, out[0].Top[0].Logprob, out[0].Top[1].Logprob = -0.031199, -0.031199, -3.6101
		}
		return out
	}
	tests := []struct {
		file string
		want []measure.Token
	}{
		{"logprobs_llamacpp.sse", withIDs},
		{"logprobs_vllm.sse", noIDs(true)},
		// Ollama's alternatives come out of order in the file: sorted.
		{"logprobs_ollama.sse", noIDs(false)},
	}
	for _, tt := range tests {
		b, err := os.ReadFile("testdata/" + tt.file)
		if err != nil {
			t.Fatal(err)
		}
		// Two asked, three sent: the two most likely kept.
		r := readLogprobs(t, string(b), 2, 10)
		if r.Logprobs != measure.LogprobsSent || r.LogprobsDetail != "" {
			t.Errorf("%s: Logprobs = %q (%q), want sent", tt.file, r.Logprobs, r.LogprobsDetail)
		}
		if diff := cmp.Diff(tt.want, r.Generated); diff != "" {
			t.Errorf("%s: Generated (-want +got):\n%s", tt.file, diff)
		}
		if n, src := r.Tokens(); r.Content != "The capital is" || n != 3 || src != measure.SourceUsage || r.Chunks != 3 {
			t.Errorf("%s: content %q, %d tokens from %s, %d chunks; want the reply's figures as ever", tt.file, r.Content, n, src, r.Chunks)
		}
	}
}

// lpStream is a stream of n tokens each with the given logprobs entry.
func lpStream(n int, entry func(i int) string) string {
	var b strings.Builder
	for i := range n {
		e := entry(i)
		lp := ""
		if e != "" {
			lp = `,"logprobs":` + e
		}
		fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" w%d\"}%s}]}\n\n", i, lp)
	}
	b.WriteString("data: {\"choices\":[],\"usage\":{\"completion_tokens\":" + fmt.Sprint(n) + "}}\n\ndata: [DONE]\n\n")
	return b.String()
}

func good(i int) string {
	return fmt.Sprintf(`{"content":[{"token":" w%d","logprob":-0.5,"top_logprobs":[{"token":" w%d","logprob":-0.5}]}]}`, i, i)
}

// Logprobs the probe cannot believe are dropped and the reason kept; the
// reply's own figures are those of the same stream without them.
func TestLogprobsGarbage(t *testing.T) {
	bad := func(at int, e string) func(int) string {
		return func(i int) string {
			if i == at {
				return e
			}
			return good(i)
		}
	}
	tests := []struct {
		name  string
		entry func(int) string
		why   string
	}{
		{"not an object", bad(1, `"lots"`), "not the OpenAI shape"},
		{"content not a list", bad(0, `{"content":{"token":"x"}}`), "not the OpenAI shape"},
		{"a positive logprob", bad(2, `{"content":[{"token":" w2","logprob":0.7}]}`), "token 3: logprob 0.7 is above 0"},
		{"a bare NaN", bad(1, `{"content":[{"token":" w1","logprob":NaN}]}`), "token 2: no logprob"},
		{"a bare -Infinity alternative", bad(1, `{"content":[{"token":" w1","logprob":-1,"top_logprobs":[{"token":"x","logprob":-Infinity}]}]}`), "token 2: alternative 1: no logprob"},
		{"a logprob as a word", bad(0, `{"content":[{"token":" w0","logprob":"high"}]}`), "not the OpenAI shape"},
		{"no token text", bad(0, `{"content":[{"logprob":-1}]}`), "token 1: no token text"},
		{"a long token", bad(0, `{"content":[{"token":"`+strings.Repeat("a", maxTokenText+1)+`","logprob":-1}]}`), "257 bytes"},
		{"a negative id", bad(0, `{"content":[{"id":-3,"token":" w0","logprob":-1}]}`), "not a token id"},
		{"a fractional id", bad(0, `{"content":[{"id":1.5,"token":" w0","logprob":-1}]}`), "not a token id"},
	}
	plain := readLogprobs(t, lpStream(4, func(int) string { return "" }), 3, 10)
	for _, tt := range tests {
		r := readLogprobs(t, lpStream(4, tt.entry), 3, 10)
		if r.Logprobs != measure.LogprobsGarbage || r.Generated != nil || !strings.Contains(r.LogprobsDetail, tt.why) {
			t.Errorf("%s: Logprobs %q, detail %q, %d tokens; want garbage, none kept, detail naming %q", tt.name, r.Logprobs, r.LogprobsDetail, len(r.Generated), tt.why)
		}
		if r.Content != plain.Content || r.Chunks != plain.Chunks || r.Error != "" {
			t.Errorf("%s: content %q, %d chunks, error %q; want %q, %d, none", tt.name, r.Content, r.Chunks, r.Error, plain.Content, plain.Chunks)
		}
	}
	if plain.Logprobs != measure.LogprobsNone {
		t.Errorf("no logprobs in the stream: Logprobs = %q, want none", plain.Logprobs)
	}
	// A bare NaN in a string is text, not a number.
	r := readLogprobs(t, lpStream(2, func(i int) string {
		return fmt.Sprintf(`{"content":[{"token":"NaN \"-Infinity","logprob":-%d}]}`, i+1)
	}), 3, 10)
	if r.Logprobs != measure.LogprobsSent || len(r.Generated) != 2 || r.Generated[0].Text != `NaN "-Infinity` {
		t.Errorf("NaN in a token text: Logprobs %q, %+v; want sent, the text kept", r.Logprobs, r.Generated)
	}
}

// The serve is untrusted: no more tokens are kept than a little over
// max_tokens, and no more alternatives than asked.
func TestLogprobsBounds(t *testing.T) {
	r := readLogprobs(t, lpStream(40, good), 1, 10)
	if len(r.Generated) != 10+extraTokens || r.Logprobs != measure.LogprobsSent || !strings.Contains(r.LogprobsDetail, "at least 22 tokens past max_tokens + 8; kept the first 18") {
		t.Errorf("40 tokens for max_tokens 10: kept %d, Logprobs %q, detail %q; want %d kept and the rest named", len(r.Generated), r.Logprobs, r.LogprobsDetail, 10+extraTokens)
	}
	// Several tokens in one chunk count one by one.
	two := `{"content":[{"token":"a","logprob":-1},{"token":"b","logprob":-2}]}`
	r = readLogprobs(t, lpStream(6, func(int) string { return two }), 1, 3)
	if len(r.Generated) != 3+extraTokens {
		t.Errorf("12 tokens in 6 chunks for max_tokens 3: kept %d, want %d", len(r.Generated), 3+extraTokens)
	}
	many := `{"content":[{"token":"a","logprob":-1,"top_logprobs":[` + strings.Repeat(`{"token":"z","logprob":-9},`, 30) + `{"token":"a","logprob":-1}]}]}`
	r = readLogprobs(t, lpStream(1, func(int) string { return many }), 5, 10)
	if len(r.Generated) != 1 || len(r.Generated[0].Top) != 5 || r.Generated[0].Top[0].Text != "a" {
		t.Errorf("31 alternatives for 5 asked: %+v, want the 5 most likely, \"a\" first", r.Generated)
	}
}

// A serve that rejects the fields: the reply is the second request's,
// without them, and says so; every later request goes without.
func TestAskRefused(t *testing.T) {
	tests := []struct {
		status  int
		message string
		refused bool
	}{
		{400, `{"error":{"message":"top_logprobs is not supported","type":"invalid_request_error"}}`, true},
		{400, `{"error":"bad request"}`, true},
		{422, `{"detail":[{"loc":["body","logprobs"],"msg":"Extra inputs are not permitted"}]}`, true},
		{422, `{"detail":"no"}`, false},
		{500, `{"error":{"message":"top_logprobs: device lost"}}`, false},
	}
	for _, tt := range tests {
		var mu sync.Mutex
		var asked []bool // whether each request carried the fields
		sim := fakellm.New(fakellm.Options{})
		p := prober(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var body map[string]any
			json.Unmarshal(b, &body)
			_, with := body["logprobs"]
			mu.Lock()
			asked = append(asked, with)
			mu.Unlock()
			if with {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.message)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			sim.ServeHTTP(w, r)
		}))
		p.TopLogprobs = 5
		first := p.Ask(context.Background(), 1, false, question)
		second := p.Ask(context.Background(), 2, false, question)
		mu.Lock()
		got := fmt.Sprint(asked)
		mu.Unlock()
		if !tt.refused {
			if first.Error == "" || first.Logprobs != "" || p.Refusal() != "" || got != "[true true]" {
				t.Errorf("HTTP %d %s: error %q, Logprobs %q, requests %s; want the error, asked with the fields each time", tt.status, tt.message, first.Error, first.Logprobs, got)
			}
			continue
		}
		if got != "[true false false]" {
			t.Errorf("HTTP %d %s: requests with the fields %s, want [true false false]", tt.status, tt.message, got)
		}
		for _, r := range []measure.Reply{first, second} {
			if r.Error != "" || r.Logprobs != measure.LogprobsRefused || !strings.Contains(r.LogprobsDetail, fmt.Sprintf("HTTP %d", tt.status)) || r.TopLogprobs != 0 || r.Generated != nil {
				t.Errorf("HTTP %d: reply %d: error %q, Logprobs %q (%q), top_logprobs %d; want no error, refused with the serve's words, none asked", tt.status, r.N, r.Error, r.Logprobs, r.LogprobsDetail, r.TopLogprobs)
			}
			// The reply is the answered request's alone: its own chunks,
			// tokens and first token, not summed with the refusal's.
			if n, _ := r.Tokens(); n != 10 || r.Chunks != 10 || r.Retried != "" {
				t.Errorf("HTTP %d: reply %d: %d tokens, %d chunks, retried %q; want 10, 10, not retried", tt.status, r.N, n, r.Chunks, r.Retried)
			}
		}
		if p.Refusal() != first.LogprobsDetail {
			t.Errorf("Refusal() = %q, want %q", p.Refusal(), first.LogprobsDetail)
		}
	}
}

// Requests from several goroutines after a refusal all go without.
func TestAskRefusedConcurrent(t *testing.T) {
	var mu sync.Mutex
	with := 0
	sim := fakellm.New(fakellm.Options{})
	p := prober(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte(`"logprobs"`)) {
			mu.Lock()
			with++
			mu.Unlock()
			http.Error(w, `{"error":{"message":"logprobs unsupported"}}`, http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		sim.ServeHTTP(w, r)
	}))
	p.TopLogprobs = 3
	p.Ask(context.Background(), 1, false, question)
	var wg sync.WaitGroup
	for n := range 4 {
		wg.Go(func() {
			if r := p.Ask(context.Background(), n+2, false, question); r.Logprobs != measure.LogprobsRefused || r.Error != "" {
				t.Errorf("reply %d: Logprobs %q, error %q", n+2, r.Logprobs, r.Error)
			}
		})
	}
	wg.Wait()
	if with != 1 {
		t.Errorf("%d requests carried the fields, want 1", with)
	}
}
