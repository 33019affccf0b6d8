package probe

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
)

// pyServe is testdata/nagle_serve.py running: a serve written with Python's
// http.server, which this project's client did not shape.
type pyServe struct {
	URL    string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
}

func (s *pyServe) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.Write(p)
}

// log is what the serve printed to stderr so far.
func (s *pyServe) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// stop interrupts the serve and waits for it.
func (s *pyServe) stop() {
	s.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// startPython starts the Python serve with args, or skips, saying so on
// stderr, where python3 is missing.
func startPython(tb testing.TB, args ...string) *pyServe {
	tb.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		fmt.Fprintln(os.Stderr, "SKIP: python3 is not on PATH: the tests against a Python serve did not run")
		tb.Skip("python3 is not on PATH: the tests against a Python serve did not run")
	}
	s := &pyServe{}
	s.cmd = exec.Command(py, append([]string{filepath.Join("testdata", "nagle_serve.py")}, args...)...)
	s.cmd.Stderr = s
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	var port int
	if _, serr := fmt.Sscanf(line, "listening on %d", &port); err != nil || serr != nil {
		tb.Fatalf("nagle_serve.py: %q, %v; stderr: %s", line, err, s.log())
	}
	s.URL = fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", port)
	return s
}

// nagleServe is the simulated serve writing as a Python serve does, on a
// listener with Nagle's algorithm on.
func nagleServe(tb testing.TB, opt fakellm.Options) string {
	tb.Helper()
	opt.Nagle = true
	srv := httptest.NewUnstartedServer(fakellm.New(opt))
	srv.Listener = fakellm.NagleListener(srv.Listener)
	srv.Start()
	tb.Cleanup(srv.Close)
	return srv.URL + "/v1/chat/completions"
}

func TestPythonServe(t *testing.T) {
	for _, version := range []string{"1.1", "1.0"} {
		t.Run("HTTP/"+version, func(t *testing.T) {
			py := startPython(t, "--rate", "100", "--first-token-ms", "50", "--http", version)
			p := &Prober{URL: py.URL, MaxTokens: 16, RequestTimeout: 30 * time.Second}
			for n := 1; n <= 3; n++ {
				r := p.Ask(context.Background(), n, false, question)
				if r.Error != "" || r.Retried != "" {
					t.Fatalf("Ask() = error %q, retried %q; serve log:\n%s", r.Error, r.Retried, py.log())
				}
				if c := r.Count(); c.N != 16 || c.Source != measure.SourceUsage || c.Doubt != "" {
					t.Errorf("Count() = %+v, want 16 from usage, believed", c)
				}
				if e := r.Estimate(); e.Why != "" {
					t.Errorf("Estimate() = %+v, want a rate", e)
				}
			}
			py.stop()
			log := py.log()
			if n := strings.Count(log, `"POST /v1/chat/completions`); n != 3 {
				t.Errorf("the serve logged %d requests, want 3:\n%s", n, log)
			}
			// A reset connection makes http.server print a traceback.
			if strings.Contains(log, "Traceback") || strings.Contains(log, "Error") {
				t.Errorf("the serve logged an error; the probe must close its connections cleanly:\n%s", log)
			}
		})
	}
}

func TestPythonServeBurstAndLie(t *testing.T) {
	py := startPython(t, "--rate", "200", "--first-token-ms", "10", "--mode", "burst")
	p := &Prober{URL: py.URL, MaxTokens: 16, RequestTimeout: 30 * time.Second}
	r := p.Ask(context.Background(), 1, false, question)
	if e := r.Estimate(); r.Error != "" || e.Why != measure.Burst {
		t.Errorf("a stream held and sent at once: error %q, Estimate() = %+v, want no rate: %s", r.Error, e, measure.Burst)
	}
	liar := startPython(t, "--rate", "200", "--first-token-ms", "10", "--mode", "lie")
	p.URL = liar.URL
	r = p.Ask(context.Background(), 1, false, question)
	if c := r.Count(); r.Error != "" || c.N != 16 || c.Source != measure.SourceChunks || !strings.Contains(c.Doubt, "usage.completion_tokens 1000 is above max_tokens 16") {
		t.Errorf("a serve claiming 1000 tokens for 16: error %q, Count() = %+v, want the 16 chunks and the doubt said", r.Error, c)
	}
}

func TestNagleServe(t *testing.T) {
	url := nagleServe(t, fakellm.Options{Rates: []float64{200}, FirstTokenMS: 20})
	p := &Prober{URL: url, MaxTokens: 16, RequestTimeout: 30 * time.Second}
	for n := 1; n <= 3; n++ {
		r := p.Ask(context.Background(), n, false, question)
		if r.Error != "" || r.Retried != "" {
			t.Fatalf("Ask() = error %q, retried %q", r.Error, r.Retried)
		}
		if e := r.Estimate(); e.Why != "" || len(r.Arrivals) < 2 {
			t.Errorf("Estimate() = %+v over %d arrivals, want a rate", e, len(r.Arrivals))
		}
		if r.Server == nil || r.Server.CacheN == nil {
			t.Errorf("Server = %+v, want llama.cpp's timings with cache_n", r.Server)
		}
	}
}

// TestRetryBeforeAnyByte: a serve that drops the first connection without a
// byte is asked again, once, and the reply says so; one that drops after
// answering is not asked again.
func TestRetryBeforeAnyByte(t *testing.T) {
	sim := fakellm.New(fakellm.Options{Rates: []float64{0}})
	var mu sync.Mutex
	calls := 0
	drop := func(w http.ResponseWriter, r *http.Request, after bool) {
		if after {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
		}
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}
	tests := []struct {
		name        string
		dropUntil   int // calls that are dropped
		after       bool
		wantCalls   int
		wantRetried bool
		wantErr     string
	}{
		{"dropped once before any byte", 1, false, 2, true, ""},
		{"dropped twice before any byte", 2, false, 2, true, "EOF"},
		{"dropped after the headers", 1, true, 1, false, "the stream ended before [DONE]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			calls = 0
			mu.Unlock()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls++
				n := calls
				mu.Unlock()
				if n <= tt.dropUntil {
					drop(w, r, tt.after)
					return
				}
				sim.ServeHTTP(w, r)
			}))
			defer srv.Close()
			p := &Prober{URL: srv.URL + "/v1/chat/completions", MaxTokens: 4, RequestTimeout: 10 * time.Second}
			r := p.Ask(context.Background(), 1, false, question)
			mu.Lock()
			got := calls
			mu.Unlock()
			if got != tt.wantCalls || (r.Retried != "") != tt.wantRetried || !strings.Contains(r.Error, tt.wantErr) || tt.wantErr == "" && r.Error != "" {
				t.Errorf("Ask(): %d calls, retried %q, error %q; want %d calls, retried %v, error %q", got, r.Retried, r.Error, tt.wantCalls, tt.wantRetried, tt.wantErr)
			}
		})
	}
}

// TestAskHeaders: no compression, no kept-alive connection.
func TestAskHeaders(t *testing.T) {
	sim := fakellm.New(fakellm.Options{Rates: []float64{0}})
	var mu sync.Mutex
	var enc, conn []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		enc, conn = append(enc, r.Header.Get("Accept-Encoding")), append(conn, r.Header.Get("Connection"))
		mu.Unlock()
		sim.ServeHTTP(w, r)
	}))
	defer srv.Close()
	p := &Prober{URL: srv.URL + "/v1/chat/completions", MaxTokens: 4, RequestTimeout: 10 * time.Second}
	for n := 1; n <= 2; n++ {
		if r := p.Ask(context.Background(), n, false, question); r.Error != "" {
			t.Fatal(r.Error)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(enc, []string{"identity", "identity"}) || !slices.Equal(conn, []string{"close", "close"}) {
		t.Errorf("Accept-Encoding %q, Connection %q; want identity and close on each request", enc, conn)
	}
}

var benchPrompt = prompts.Prompt{Prompt: "Write a long story about a lighthouse keeper."}

// rateBench asks replies of a serve at 100 tok/s and 300 ms to its first
// token and reports the median rate and first-token error.
func rateBench(b *testing.B, url string, maxTokens int, client *http.Client) {
	const replies = 5
	var rates, firsts []float64
	for b.Loop() {
		p := &Prober{URL: url, MaxTokens: maxTokens, RequestTimeout: time.Minute, Client: client}
		for n := 1; n <= replies; n++ {
			r := p.Ask(context.Background(), n, false, benchPrompt)
			if r.Error != "" {
				b.Fatal(r.Error)
			}
			if v, why := r.DecodeRate(); why == "" {
				rates = append(rates, v)
			}
			if v, ok := r.FirstTokenMS(); ok {
				firsts = append(firsts, v-300)
			}
		}
	}
	b.ReportMetric(median(rates), "tok/s")
	b.ReportMetric(median(firsts), "ms-first-token-error")
	b.ReportMetric(float64(len(rates)), "replies-with-a-rate")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// clients are the probe's own transport and Go's default client (kept-alive
// connections, delayed ACKs), for comparison.
var clients = []struct {
	name   string
	client *http.Client
}{{"probe", nil}, {"go-default", &http.Client{}}}

// BenchmarkNagleRate: against serves that leave Nagle on and write small,
// at 100 tok/s and 300 ms to the first token, the median rate at 16 and 256
// tokens and the first token's error.
//
//	go test -run '^$' -bench NagleRate -benchtime 1x ./internal/probe
func BenchmarkNagleRate(b *testing.B) {
	for _, serve := range []string{"fakellm", "python"} {
		for _, c := range clients {
			for _, mt := range []int{16, 256} {
				b.Run(fmt.Sprintf("serve=%s/client=%s/max-tokens=%d", serve, c.name, mt), func(b *testing.B) {
					url := ""
					if serve == "python" {
						url = startPython(b, "--rate", "100", "--first-token-ms", "300").URL
					} else {
						url = nagleServe(b, fakellm.Options{Rates: []float64{100}, FirstTokenMS: 300})
					}
					rateBench(b, url, mt, c.client)
				})
			}
		}
	}
}

// BenchmarkAddedTime: against a serve that answers at once (Nagle on), the
// time the gate adds to a reply: its first token and its end, median over
// replies 2-5 (reply 1 opens the first connection).
//
//	go test -run '^$' -bench AddedTime -benchtime 1x ./internal/probe
func BenchmarkAddedTime(b *testing.B) {
	for _, serve := range []string{"fakellm", "python"} {
		for _, c := range clients {
			b.Run(fmt.Sprintf("serve=%s/client=%s", serve, c.name), func(b *testing.B) {
				url := ""
				if serve == "python" {
					url = startPython(b, "--rate", "0", "--first-token-ms", "0").URL
				} else {
					url = nagleServe(b, fakellm.Options{Rates: []float64{0}})
				}
				var firsts, ends []float64
				for b.Loop() {
					p := &Prober{URL: url, MaxTokens: 16, RequestTimeout: time.Minute, Client: c.client}
					for n := 1; n <= 5; n++ {
						r := p.Ask(context.Background(), n, false, benchPrompt)
						if r.Error != "" {
							b.Fatal(r.Error)
						}
						if n > 1 {
							firsts, ends = append(firsts, *r.FirstMS), append(ends, r.EndMS)
						}
					}
				}
				b.ReportMetric(median(firsts), "ms-first-token")
				b.ReportMetric(median(ends), "ms-end")
			})
		}
	}
}
