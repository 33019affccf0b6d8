package probe

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// recorded is the simulated serve's stream for one request of 128 tokens,
// asking for k alternatives in shape.
func recorded(b *testing.B, shape string, k int) string {
	b.Helper()
	p := &Prober{MaxTokens: 128, TopLogprobs: k}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(p.Body("What is the capital of France?")))
	w := httptest.NewRecorder()
	fakellm.New(fakellm.Options{Instant: true, LogprobsShape: shape}).ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("the simulated serve answered %d: %s", w.Code, w.Body)
	}
	return w.Body.String()
}

// BenchmarkLogprobsCost is what asking for logprobs costs a reply: the
// stream's bytes, the reply file's bytes, and the probe's parse of each
// chunk (time and allocations) while the stream runs (ns/chunk, which
// delays the next token's arrival time) and after it ended (after-, the
// logprobs read), for 128 tokens without logprobs and with 5 alternatives
// in llama.cpp's and vLLM's shapes.
func BenchmarkLogprobsCost(b *testing.B) {
	for _, tt := range []struct {
		name  string
		shape string
		k     int
	}{{"none", fakellm.ShapeLlamaCpp, 0}, {"k5-llamacpp", fakellm.ShapeLlamaCpp, 5}, {"k5-vllm", fakellm.ShapeVLLM, 5}} {
		stream := recorded(b, tt.shape, tt.k)
		chunks := float64(strings.Count(stream, "data: "))
		var r measure.Reply
		var lp *capture
		read := func() {
			r = measure.Reply{TopLogprobs: tt.k}
			lp = nil
			if tt.k > 0 {
				lp = newCapture(tt.k, 128)
			}
			cr := &countedReader{r: strings.NewReader(stream)}
			if err := read(cr, timeZero, &r, cr.reads.Load, lp); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(tt.name+"/stream", func(b *testing.B) {
			perChunk(b, chunks, read)
			b.ReportMetric(float64(len(stream)), "stream-B/reply")
		})
		if tt.k == 0 {
			continue
		}
		b.Run(tt.name+"/after", func(b *testing.B) {
			read()
			kept, streamed := *lp, r
			perChunk(b, chunks, func() {
				c := kept // the fields kept are only read
				r = streamed
				c.finish(&r)
			})
			if len(r.Generated) != 128 {
				b.Fatalf("%d tokens of logprobs, want 128 (%s: %s)", len(r.Generated), r.Logprobs, r.LogprobsDetail)
			}
			file, _ := json.MarshalIndent(&r, "", "  ")
			b.ReportMetric(float64(len(file)), "file-B/reply")
		})
	}
	// The reply file without logprobs, for comparison.
	var r measure.Reply
	stream := recorded(b, fakellm.ShapeLlamaCpp, 0)
	cr := &countedReader{r: strings.NewReader(stream)}
	read(cr, timeZero, &r, cr.reads.Load, nil)
	file, _ := json.MarshalIndent(&r, "", "  ")
	b.Logf("a reply file without logprobs: %d bytes", len(file))
}

// perChunk runs f as the benchmark's body and reports its time and
// allocations per stream chunk.
func perChunk(b *testing.B, chunks float64, f func()) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var timed time.Duration
	for b.Loop() {
		f()
	}
	timed = b.Elapsed()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(timed.Nanoseconds())/float64(b.N)/chunks, "ns/chunk")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N)/chunks, "allocs/chunk")
}
