package report

import (
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

func loadResult() *Result {
	r := &Result{Verdict: Fail, Load: &judge.LoadRun{Limits: judge.LoadLimits{Streams: 4, Expect: judge.LoadBatch, Efficiency: 0.5, MaxRounds: 11}}}
	r.LoadRounds = []judge.Round{
		{N: 1, Aggregate: 307.8, Concurrency: 3.9, Efficiency: 0.77, Rates: []float64{76.9, 76.5, 77, 77}, WorstFirstMS: 34},
		{N: 2, Aggregate: 70, Conservative: true, Concurrency: 0.7, Efficiency: 0.18, Rates: []float64{100, 100}, WorstFirstMS: 2989, GapMS: 355, Gaps: 3},
		{N: 3, Failed: "stream 2 failed: \"HTTP 503: <img src=x> | busy\""},
	}
	return r
}

func TestLoadTable(t *testing.T) {
	md := Markdown(loadResult(), MarkdownLimit)
	for _, want := range []string{
		"#### Load: 4 streams at once, batch expected\n",
		"| 1 | 0.77 | 3.9 | 307.8 tok/s | 76.9, 76.5, 77.0, 77.0 | 34 ms | — |\n",
		"| 2 | 0.18 | 0.7 | 70.0 tok/s (conservative) | 100.0, 100.0 | 2989 ms | 355 ms (3) |\n",
		"never the sum of the streams' rates",
		"at most 11 rounds",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "<img") || !strings.Contains(md, "| 3 | failed: stream 2 failed:") || strings.Contains(md, "<img src=x> | busy") {
		t.Errorf("the failed round's serve words are not escaped:\n%s", md)
	}
	if md := Markdown(&Result{Verdict: Pass}, MarkdownLimit); strings.Contains(md, "Load") {
		t.Errorf("a run without --load has a load table:\n%s", md)
	}
	r := loadResult()
	r.LoadRounds = nil
	if md := Markdown(r, MarkdownLimit); strings.Contains(md, "#### Load") {
		t.Errorf("no rounds, yet a table:\n%s", md)
	}
}

func TestLoadText(t *testing.T) {
	r := loadResult()
	if got, want := LoadText(r), "4 streams, batch: η 0.47, 2.3 at once, worst first token 1512 ms (medians of 2 rounds)"; got != want {
		t.Errorf("LoadText = %q, want %q", got, want)
	}
	r.LoadRounds = r.LoadRounds[2:]
	if got, want := LoadText(r), "4 streams, batch: no round measured"; got != want {
		t.Errorf("LoadText = %q, want %q", got, want)
	}
	if LoadText(nil) != "" || LoadText(&Result{}) != "" {
		t.Error("LoadText of a run without --load")
	}
}
