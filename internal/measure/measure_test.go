package measure

import (
	"math"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestTokens(t *testing.T) {
	tests := []struct {
		name    string
		r       Reply
		wantN   int
		wantSrc string
	}{
		{"usage first", Reply{CompletionTokens: ptr(40), Server: &ServerTimings{PredictedN: 39}, Chunks: 38}, 40, SourceUsage},
		{"usage of zero is still usage", Reply{CompletionTokens: ptr(0), Chunks: 3}, 0, SourceUsage},
		{"server when no usage", Reply{Server: &ServerTimings{PredictedN: 39}, Chunks: 38}, 39, SourceServer},
		{"chunks when the server sent no count", Reply{Server: &ServerTimings{PredictedPerSecond: 80}, Chunks: 38}, 38, SourceChunks},
		{"chunks when nothing else", Reply{Chunks: 7}, 7, SourceChunks},
	}
	for _, tt := range tests {
		n, src := tt.r.Tokens()
		if n != tt.wantN || src != tt.wantSrc {
			t.Errorf("%s: Tokens() = %d, %q, want %d, %q", tt.name, n, src, tt.wantN, tt.wantSrc)
		}
	}
}

func TestDecodeRate(t *testing.T) {
	tests := []struct {
		name    string
		r       Reply
		want    float64
		wantWhy string
	}{
		{"128 tokens over 1270 ms", Reply{FirstMS: ptr(250.0), LastMS: ptr(1520.0), CompletionTokens: ptr(128)}, 100, ""},
		{"the first token is left out", Reply{FirstMS: ptr(0.0), LastMS: ptr(1000.0), CompletionTokens: ptr(2)}, 1, ""},
		{"one token", Reply{FirstMS: ptr(250.0), LastMS: ptr(250.0), CompletionTokens: ptr(1)}, 0, "1 token, too few for a rate"},
		{"no tokens", Reply{FirstMS: ptr(250.0), LastMS: ptr(250.0), CompletionTokens: ptr(0)}, 0, "0 tokens, too few for a rate"},
		{"no content", Reply{CompletionTokens: ptr(10)}, 0, "no content arrived"},
		{"first without last", Reply{FirstMS: ptr(1.0), CompletionTokens: ptr(10)}, 0, "no content arrived"},
		{"a failed reply", Reply{FirstMS: ptr(250.0), LastMS: ptr(1520.0), CompletionTokens: ptr(128), Error: "stream ended"}, 0, "the reply failed"},
		{"one chunk", Reply{FirstMS: ptr(250.0), LastMS: ptr(250.0), CompletionTokens: ptr(10)}, 0, "all tokens arrived in one chunk"},
	}
	for _, tt := range tests {
		got, why := tt.r.DecodeRate()
		if math.Abs(got-tt.want) > 1e-9 || why != tt.wantWhy {
			t.Errorf("%s: DecodeRate() = %v, %q, want %v, %q", tt.name, got, why, tt.want, tt.wantWhy)
		}
	}
}

func TestFirstTokenMS(t *testing.T) {
	if v, ok := (&Reply{FirstMS: ptr(277.0)}).FirstTokenMS(); v != 277 || !ok {
		t.Errorf("FirstTokenMS() = %v, %v, want 277, true", v, ok)
	}
	if v, ok := (&Reply{}).FirstTokenMS(); v != 0 || ok {
		t.Errorf("FirstTokenMS() of no content = %v, %v, want 0, false", v, ok)
	}
}

func TestServerRate(t *testing.T) {
	if v, why := (&Reply{Server: &ServerTimings{PredictedPerSecond: 84.4}}).ServerRate(); v != 84.4 || why != "" {
		t.Errorf("ServerRate() = %v, %q, want 84.4", v, why)
	}
	for _, r := range []Reply{{}, {Server: &ServerTimings{PredictedN: 3}}} {
		if _, why := r.ServerRate(); why == "" {
			t.Errorf("ServerRate() of %+v gave no reason for a missing rate", r.Server)
		}
	}
}
