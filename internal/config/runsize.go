package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/probe"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// runSize is about what a run asked for writes of the files its readers
// read back together (report.Read: result.json and the reply files), in
// bytes and JSON objects: each reply twice (its reply_N.json and
// result.json), each warm-up once (result.json), each with max_tokens +
// probe.ExtraTokens tokens, a token with its top alternatives and its
// arrival as the gate encodes them (report.WriteJSON), with texts of 8
// bytes, and the reply's own fields. A serve whose tokens are longer writes more bytes, never more
// objects.
func runSize(replies, warmup, maxTokens, top int) (size, objects float64) {
	one, two := encodedTokens(1, top), encodedTokens(2, top)
	perToken := float64(len(two) - len(one))
	perTokenObjects := float64(bytes.Count(two, []byte("{")) - bytes.Count(one, []byte("{")))
	copies := 2*float64(replies) + float64(warmup)
	tokens := float64(maxTokens) + probe.ExtraTokens
	reply := float64(len(one)) - perToken // a reply's own fields, of no token
	return copies * (reply + tokens*perToken), copies * (1 + tokens*perTokenObjects)
}

// encodedTokens is a reply of n tokens, each with top alternatives and an
// arrival of its own, as a reply file holds it.
func encodedTokens(n, top int) []byte {
	id := 151643
	r := measure.Reply{N: 1}
	for i := range n {
		t := measure.Token{Text: " token" + strings.Repeat("s", i%2+1), ID: &id, Logprob: -1.2345678901234567}
		for range top {
			t.Top = append(t.Top, measure.Alt{Text: t.Text, ID: &id, Logprob: t.Logprob})
		}
		r.Generated = append(r.Generated, t)
		r.Arrivals = append(r.Arrivals, measure.Arrival{MS: 12345.678901234567, Chunks: 1})
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	return b
}

// checkRunSize refuses a run whose replies could not be read back from its
// out directory: past report.MaxRunBytes or report.MaxRunObjects, judge,
// publish and the fleet merge refuse the directory.
func (c Config) checkRunSize() error {
	if c.Replies < 1 || c.MaxTokens < 2 || c.Warmup < 0 || c.TopLogprobs < 0 || c.TopLogprobs > probe.MaxTopLogprobs {
		return nil // each is bad input of its own
	}
	replies := max(c.Replies, c.MaxReplies)
	size, objects := runSize(replies, c.Warmup, c.MaxTokens, c.TopLogprobs)
	if size <= report.MaxRunBytes && objects <= report.MaxRunObjects {
		return nil
	}
	return fmt.Errorf("--max-replies %d (or --replies), --max-tokens %d and --top-logprobs %d: the run's replies would come to about %.0f MiB and %.0f JSON objects in its out directory, more than the %d MiB and %d objects judge, publish and report read back from a run; lower --max-replies, --max-tokens or --top-logprobs",
		replies, c.MaxTokens, c.TopLogprobs, size/(1<<20), objects, report.MaxRunBytes>>20, report.MaxRunObjects)
}
