package fakellm

import (
	"fmt"

	"net/http"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// How the simulated serve answers a request for logprobs (--logprobs-shape).
const (
	ShapeLlamaCpp = "llamacpp" // llama.cpp's server: id, token, bytes, logprob, top_logprobs with ids
	ShapeVLLM     = "vllm"     // vLLM: token, logprob, bytes, top_logprobs
	ShapeOllama   = "ollama"   // Ollama v0.12.11+ on /v1: token, logprob, bytes (omitted when empty), top_logprobs
	ShapeNone     = "none"     // the fields are ignored and no logprobs sent (FastFlowLM)
	ShapeReject   = "reject"   // HTTP 400 to a request that carries them (OVMS with stream: true)
	ShapeGarbage  = "garbage"  // logprobs no client can believe, the content as ever
)

// ShapeNames are the shapes, for flags.
func ShapeNames() []string {
	return []string{ShapeLlamaCpp, ShapeVLLM, ShapeOllama, ShapeNone, ShapeReject, ShapeGarbage}
}

// maxTopLogprobs is the most alternatives a request may ask for, as vLLM
// (max_logprobs) and Ollama bound it.
const maxTopLogprobs = 20

// nanMark is a logprob written as a bare NaN in the stream, as a Python
// serve's json.dumps writes one.
const nanMark = "1.2345678e+300"

// shape is how this serve answers a request for logprobs.
func (s *Server) shape() string {
	if s.opt.LogprobsShape != "" {
		return s.opt.LogprobsShape
	}
	if s.p.logprobs != "" {
		return s.p.logprobs
	}
	return ShapeLlamaCpp
}

func badRequest(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, `{"error":{"code":400,"message":%q,"type":"invalid_request_error"}}`, msg)
}

// logprobsField is the choice's logprobs for token i of request n, in the
// shape asked, with k alternatives; nil for none.
func logprobsField(shape string, t measure.Token, k, i, n int) any {
	top := t.Top[:min(k, len(t.Top))]
	switch shape {
	case ShapeLlamaCpp:
		type alt struct {
			ID      int     `json:"id"`
			Token   string  `json:"token"`
			Bytes   []int   `json:"bytes"`
			Logprob float64 `json:"logprob"`
		}
		type entry struct {
			alt
			Top []alt `json:"top_logprobs"`
		}
		e := entry{alt: alt{idOf(t.ID), t.Text, byteList(t.Text), t.Logprob}, Top: []alt{}}
		for _, a := range top {
			e.Top = append(e.Top, alt{idOf(a.ID), a.Text, byteList(a.Text), a.Logprob})
		}
		return map[string]any{"content": []entry{e}}
	case ShapeVLLM, ShapeOllama:
		type alt struct {
			Token   string  `json:"token"`
			Logprob float64 `json:"logprob"`
			Bytes   []int   `json:"bytes,omitempty"`
		}
		type entry struct {
			alt
			Top []alt `json:"top_logprobs"`
		}
		e := entry{alt: alt{t.Text, t.Logprob, byteList(t.Text)}, Top: []alt{}}
		for _, a := range top {
			e.Top = append(e.Top, alt{a.Text, a.Logprob, byteList(a.Text)})
		}
		if shape == ShapeOllama && len(e.Top) == 0 {
			e.Top = nil // Ollama's top_logprobs is omitempty
		}
		return map[string]any{"content": []entry{e}}
	case ShapeGarbage:
		// One kind of garbage a request, in turn: not the shape, a
		// probability above 1, a bare NaN.
		bad := map[string]any{"token": t.Text, "logprob": t.Logprob}
		switch {
		case n%3 == 1:
			return "lots"
		case i == 1 && n%3 == 2:
			bad["logprob"] = 2.5
		case i == 1:
			bad["logprob"] = 1.2345678e+300 // written NaN
		}
		return map[string]any{"content": []any{bad}}
	}
	return nil
}

func idOf(id *int) int {
	if id == nil {
		return 0
	}
	return *id
}

func byteList(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

// logprobsHelp is what --help says of the logprobs flags.
var logprobsHelp = strings.Join([]string{
	"how a request with logprobs: true is answered: " + strings.Join(ShapeNames(), ", "),
	"(default: the persona's; llama.cpp's with ids for the reference serve, vllm for vllm and vllm-ascend,",
	"ollama for ollama, reject for ovms, none for flm)",
}, " ")
