package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// writeLargestRun writes into dir the largest run directory the bounds
// (MaxRunBytes, MaxRunObjects) let Read take, in one of two shapes:
// "bytes", reply files as the gate writes them (WriteJSON) of 2048 tokens
// with 20 alternatives each, up to MaxRunBytes; "objects", hand-made reply
// files of empty tokens ("{}", the smallest object, each a measure.Token
// decoded) up to MaxRunObjects.
func writeLargestRun(t testing.TB, dir, shape string) {
	t.Helper()
	res := Result{Schema: Schema, Verdict: Pass, Limits: judge.Limits{Floor: 60, FirstTokenMS: 600, RateSource: judge.RateServer, Lead: 3},
		Route: route.Evidence{FastPatterns: []string{"fast"}, SlowPatterns: []string{"slow"}},
		Run:   RunFacts{CheckName: "npu serve smoke", MaxTokens: 2048, Thinking: "off"}}
	if err := WriteJSON(filepath.Join(dir, ResultFile), &res); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, LogFile), []byte("sim ready on the fast route\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	size, objects := fileSize(t, filepath.Join(dir, ResultFile))
	left := func() (int64, int) { return MaxRunBytes - size, MaxRunObjects - objects }
	for n := 1; ; n++ {
		path := filepath.Join(dir, fmt.Sprintf("reply_%d.json", n))
		switch shape {
		case "bytes":
			if err := WriteJSON(path, bigReply(n, 2048, 20)); err != nil {
				t.Fatal(err)
			}
		case "objects":
			bytesLeft, objectsLeft := left()
			tokens := min(objectsLeft-1, int(bytesLeft-64)/3, (MaxFile-64)/3)
			if tokens <= 0 {
				return
			}
			body := fmt.Sprintf(`{"n":%d,"first_ms":1,"last_ms":2,"completion_tokens":2,"content":"x","generated":[%s{}]}`, n, strings.Repeat("{},", tokens-1))
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("shape %q: bytes or objects", shape)
		}
		s, o := fileSize(t, path)
		if size+s > MaxRunBytes || objects+o > MaxRunObjects {
			os.Remove(path)
			return
		}
		size, objects = size+s, objects+o
	}
}

// bigReply is a reply of tokens, each with top alternatives, as the probe
// records one.
func bigReply(n, tokens, top int) *measure.Reply {
	first, last, count := 250.0, 250.0+float64(tokens)*10, tokens
	r := &measure.Reply{N: n, Prompt: "Explain in detail how a CPU cache works", MaxTokens: tokens, T0: time.Unix(0, 0).UTC(),
		FirstMS: &first, LastMS: &last, EndMS: last, Chunks: tokens, CompletionTokens: &count, TopLogprobs: top, Logprobs: measure.LogprobsSent}
	var content strings.Builder
	for i := range tokens {
		id := 1000 + i
		text := fmt.Sprintf(" word%d", i%97)
		content.WriteString(text)
		tok := measure.Token{Text: text, ID: &id, Logprob: -0.123456789}
		for j := range top {
			alt := id + j
			tok.Top = append(tok.Top, measure.Alt{Text: fmt.Sprintf(" alt%d", j), ID: &alt, Logprob: -1.5 - float64(j)})
		}
		r.Generated = append(r.Generated, tok)
		r.Arrivals = append(r.Arrivals, measure.Arrival{MS: first + float64(i)*10, Chunks: 1})
	}
	r.Content = content.String()
	return r
}

func fileSize(t testing.TB, path string) (int64, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b)), strings.Count(string(b), "{")
}

// TestWriteLargestRun writes the largest run directories the bounds allow
// into $NPU_SERVE_SMOKE_LARGEST_RUN/bytes and .../objects, for measuring
// what re-judging them takes (docs/reference.md):
//
//	NPU_SERVE_SMOKE_LARGEST_RUN=/tmp/largest go test -run TestWriteLargestRun ./internal/report
//	/usr/bin/time -v npu-serve-smoke judge /tmp/largest/bytes
//
// Each is checked to be read whole. Without the variable it is skipped:
// decoding two million objects takes a minute under -race on a loaded
// machine, and TestReadRunBounds checks the bounds themselves.
func TestWriteLargestRun(t *testing.T) {
	root := os.Getenv("NPU_SERVE_SMOKE_LARGEST_RUN")
	if root == "" {
		t.Skip("writes the largest run directories the bounds allow for measuring; set NPU_SERVE_SMOKE_LARGEST_RUN=DIR to write them there")
	}
	for _, shape := range []string{"bytes", "objects"} {
		dir := filepath.Join(root, shape)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeLargestRun(t, dir, shape)
		res, err := Read(dir)
		if err != nil {
			t.Fatalf("Read() of the largest %s directory: %v", shape, err)
		}
		t.Logf("%s: %d replies read from %s", shape, len(res.Replies), dir)
	}
}
