package fakellm_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/probe"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
)

// --load-mode busy: a request that arrives while another is in flight is
// answered at once, 200 OK, with one chunk and finish_reason "stop"; once
// none is in flight, a request is answered in full.
func TestLoadBusy(t *testing.T) {
	srv := httptest.NewServer(fakellm.New(fakellm.Options{LoadMode: fakellm.LoadBusy, Stall: 1, Rates: []float64{1000}}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/v1/chat/completions"
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"messages":[{"role":"user","content":"hold"}],"max_tokens":12,"stream":true}`))
	// The headers come with the role chunk, once the request is in
	// flight; request 1 then stalls after three tokens.
	held, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p := &probe.Prober{URL: url, MaxTokens: 12, RequestTimeout: 10 * time.Second}
	r := p.Ask(context.Background(), 2, false, prompts.Prompt{Prompt: "What is the capital of France?"})
	if r.Error != "" || r.Content != fakellm.BusyText || r.FinishReason != "stop" || r.Chunks != 1 {
		t.Errorf("while another is in flight: error %q, content %q, finish %q, %d chunks; want %q, stop, 1 chunk", r.Error, r.Content, r.FinishReason, r.Chunks, fakellm.BusyText)
	}
	cancel()
	held.Body.Close()
	// Request 1 ends once its client has gone; a request then is answered.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		r = p.Ask(context.Background(), 3, false, prompts.Prompt{Prompt: "What is the capital of France?"})
		if r.Content != fakellm.BusyText {
			break
		}
	}
	if r.Error != "" || r.FinishReason != "length" || r.Chunks != 12 {
		t.Errorf("none in flight: error %q, content %q, finish %q, %d chunks; want 12 chunks to length", r.Error, r.Content, r.FinishReason, r.Chunks)
	}
}
