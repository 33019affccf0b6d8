package fakellm_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/probe"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
)

func ask(t *testing.T, opt fakellm.Options, k, replies int) []measure.Reply {
	t.Helper()
	srv := httptest.NewServer(fakellm.New(opt))
	t.Cleanup(srv.Close)
	path := "/v1/chat/completions"
	if opt.Persona == fakellm.PersonaOVMS {
		path = "/v3/chat/completions"
	}
	p := &probe.Prober{URL: srv.URL + path, MaxTokens: 12, RequestTimeout: 10 * time.Second, TopLogprobs: k}
	var out []measure.Reply
	for n := 1; n <= replies; n++ {
		out = append(out, p.Ask(context.Background(), n, false, prompts.Prompt{Prompt: "What is the capital of France?"}))
	}
	return out
}

// want is what a client keeps of the simulated model's answer: k
// alternatives, ids where the shape has them.
func want(k int, ids bool) []measure.Token {
	out := fakellm.Generate("What is the capital of France?", 12, fakellm.Kernel{})
	for i := range out {
		out[i].Top = out[i].Top[:k]
		if !ids {
			out[i].ID = nil
			for j := range out[i].Top {
				out[i].Top[j].ID = nil
			}
		}
	}
	return out
}

// Each serve's shape, by persona or by --logprobs-shape, reads back as the
// simulated model's tokens.
func TestShapes(t *testing.T) {
	tests := []struct {
		name string
		opt  fakellm.Options
		ids  bool
	}{
		{"reference serve", fakellm.Options{}, true},
		{"llama.cpp", fakellm.Options{Persona: fakellm.PersonaLlamaCpp}, true},
		{"lemonade", fakellm.Options{Persona: fakellm.PersonaLemonade}, true},
		{"vllm", fakellm.Options{Persona: fakellm.PersonaVLLM}, false},
		{"vllm-ascend", fakellm.Options{Persona: fakellm.PersonaVLLMAscend}, false},
		{"ollama", fakellm.Options{Persona: fakellm.PersonaOllama}, false},
		{"--logprobs-shape vllm", fakellm.Options{LogprobsShape: fakellm.ShapeVLLM}, false},
		{"--logprobs-shape ollama", fakellm.Options{LogprobsShape: fakellm.ShapeOllama}, false},
	}
	for _, tt := range tests {
		tt.opt.Instant = true
		r := ask(t, tt.opt, 3, 1)[0]
		if r.Error != "" || r.Logprobs != measure.LogprobsSent {
			t.Fatalf("%s: error %q, Logprobs %q (%s); want sent", tt.name, r.Error, r.Logprobs, r.LogprobsDetail)
		}
		if diff := cmp.Diff(want(3, tt.ids), r.Generated); diff != "" {
			t.Errorf("%s: Generated (-want +got):\n%s", tt.name, diff)
		}
		if r.Content+r.Reasoning != strings.Join(texts(r.Generated), "") {
			t.Errorf("%s: content and reasoning %q are not the tokens' text", tt.name, r.Content+r.Reasoning)
		}
	}
}

func texts(ts []measure.Token) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Text)
	}
	return out
}

// Serves that send none, reject the fields, or send garbage: the replies'
// figures stand, and each says what became of the logprobs.
func TestShapesWithout(t *testing.T) {
	none := ask(t, fakellm.Options{Persona: fakellm.PersonaFLM, Instant: true}, 5, 1)[0]
	if none.Error != "" || none.Logprobs != measure.LogprobsNone || none.Generated != nil {
		t.Errorf("flm: error %q, Logprobs %q, %d tokens; want none", none.Error, none.Logprobs, len(none.Generated))
	}
	for _, opt := range []fakellm.Options{{Persona: fakellm.PersonaOVMS}, {LogprobsShape: fakellm.ShapeReject}} {
		opt.Instant = true
		for _, r := range ask(t, opt, 5, 2) {
			if r.Error != "" || r.Logprobs != measure.LogprobsRefused || !strings.Contains(r.LogprobsDetail, "HTTP 400: logprobs are not supported in streaming mode.") || r.Chunks != 12 {
				t.Errorf("%+v reply %d: error %q, Logprobs %q (%q), %d chunks; want refused with OVMS's words, 12 chunks", opt, r.N, r.Error, r.Logprobs, r.LogprobsDetail, r.Chunks)
			}
		}
	}
	why := []string{"not the OpenAI shape", "above 0", "no logprob"}
	for i, r := range ask(t, fakellm.Options{LogprobsShape: fakellm.ShapeGarbage, Instant: true}, 5, 3) {
		if r.Error != "" || r.Logprobs != measure.LogprobsGarbage || !strings.Contains(r.LogprobsDetail, why[i]) || r.Chunks != 12 {
			t.Errorf("garbage reply %d: error %q, Logprobs %q (%q), %d chunks; want garbage naming %q, 12 chunks", r.N, r.Error, r.Logprobs, r.LogprobsDetail, r.Chunks, why[i])
		}
	}
	// Not asked: nothing said.
	if r := ask(t, fakellm.Options{Instant: true}, 0, 1)[0]; r.Logprobs != "" || r.Generated != nil || r.TopLogprobs != 0 {
		t.Errorf("not asked: Logprobs %q, %d tokens, top_logprobs %d; want none of them", r.Logprobs, len(r.Generated), r.TopLogprobs)
	}
}
