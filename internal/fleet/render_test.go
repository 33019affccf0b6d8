package fleet

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/agree"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

func ms(v float64) *float64 { return &v }
func n(v int) *int          { return &v }

// result is a run whose one reply decodes at rate tok/s.
func resultAt(rate float64) *report.Result {
	return &report.Result{
		Verdict: report.Pass,
		Limits:  judge.Limits{Floor: 60, FirstTokenMS: 600, RateSource: judge.RateClient},
		Replies: []measure.Reply{{N: 1, FirstMS: ms(200), LastMS: ms(200 + 127/rate*1000), CompletionTokens: n(128), Content: "x"}},
		Route:   route.Evidence{Fast: &route.Match{Line: 1}},
	}
}

func TestMarkdown(t *testing.T) {
	m := &Merged{Base: "npu serve smoke", Rows: []Row{
		{Job: Job{"model": "a", "device": "npu"}, CheckName: "npu serve smoke (a, npu)", State: Pass, Result: resultAt(90), Baseline: &judge.Baseline{Rate: 100, FirstTokenMS: 200}},
		{Job: Job{"model": "b", "device": "npu"}, CheckName: "npu serve smoke (b, npu)", State: Fail, Result: resultAt(50),
			Why: []string{"route: \"<img src=x> @team | `rm -rf` [x](https://evil) \x1b[31m\""}, Note: "no successful run of w on release/*"},
		{Job: Job{"model": "c", "device": "igpu"}, CheckName: "npu serve smoke (c, igpu)", State: Missing, Why: []string{"no artifact npu-serve-smoke-c-igpu"}},
	}}
	hist := &History{Releases: []string{"release/1.1", `release/"1.2"`}, Medians: map[string][]float64{
		"npu serve smoke (a, npu)": {95, 100},
		"npu serve smoke (b, npu)": {80, math.NaN()},
	}}
	md := m.Markdown(65536, hist)
	for _, want := range []string{
		"### ❌ npu serve smoke: FAIL: 1 of 3 jobs passed (1 failed, 1 missing)\n",
		"| a | npu | ✅ pass | 90.0 tok/s (60) | 200 ms (600) | fast | -10.0% rate, +0.0% first token |\n",
		"| b | npu | ❌ FAIL | 50.0 tok/s (60) | 200 ms (600) | fast | none: no successful run of w on release/\\* |\n",
		"| c | igpu | ❌ missing | — | — | — | — |\n",
		`    x-axis ["release/1.1", "release/_1.2_", "this run"]`,
		"    line [95, 100, 90]\n",
		"Not drawn (no median in every release): b on npu; c on igpu.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}
	for _, bad := range []string{"<img", "@team", "`rm", "](https://evil)", "\x1b"} {
		if strings.Contains(md, bad) {
			t.Errorf("Markdown() carries the job's text %q as it came:\n%s", bad, md)
		}
	}
	if got := m.Markdown(300, nil); len(got) > 300 {
		t.Errorf("Markdown(300) is %d bytes", len(got))
	}
	var con bytes.Buffer
	m.Console(&con)
	if strings.Contains(con.String(), "\x1b") {
		t.Errorf("Console() printed a control character:\n%q", con.String())
	}
	if !strings.HasSuffix(con.String(), "RESULT: FAIL: 1 of 3 jobs passed (1 failed, 1 missing)\n") {
		t.Errorf("Console() = %q", con.String())
	}
}

func TestPassNeedsRows(t *testing.T) {
	if (&Merged{}).Pass() {
		t.Errorf("Merged{}.Pass() = true; no row is no pass")
	}
}

// A column of agreement when any row has a reference; none otherwise.
func TestMarkdownAgreement(t *testing.T) {
	withRef := resultAt(90)
	withRef.Reference = &report.Reference{File: "ref"}
	withRef.Agreement = []agree.Reply{{N: 1, RefN: 1, OK: true}, {N: 2, RefN: 2}, {N: 3}}
	m := &Merged{Base: "npu serve smoke", Rows: []Row{
		{Job: Job{"model": "a", "device": "npu"}, State: Pass, Result: withRef},
		{Job: Job{"model": "b", "device": "npu"}, State: Pass, Result: resultAt(90)},
		{Job: Job{"model": "c", "device": "igpu"}, State: Missing},
	}}
	md := m.Markdown(65536, nil)
	for _, want := range []string{
		"| route | against the baseline | agreement |\n|---|---|---|---:|---:|---|---|---|\n",
		"| a | npu | ✅ pass | 90.0 tok/s (60) | 200 ms (600) | fast | — | 1/2 agree |\n",
		"| b | npu | ✅ pass | 90.0 tok/s (60) | 200 ms (600) | fast | — | no reference |\n",
		"| c | igpu | ❌ missing | — | — | — | — | no reference |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}
	var con bytes.Buffer
	m.Console(&con)
	if !strings.Contains(con.String(), "route fast, agreement 1/2 agree\n") {
		t.Errorf("Console() = %q, want the agreement on row a", con.String())
	}
	m.Rows = m.Rows[1:]
	if md := m.Markdown(65536, nil); strings.Contains(md, "agreement") {
		t.Errorf("Markdown() without references has an agreement column:\n%s", md)
	}
}

// The energy column: there when a row has joules per token, each row's
// gross figure (what a ceiling judges) with the net one beside it where
// there is one (else unavailable), and none when no runner had a sensor.
func TestMarkdownEnergy(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	net := resultAt(90)
	net.Energy = &judge.Energy{Source: "nvml:0", GrossJPerToken: f(2), NetJPerToken: f(1.25)}
	gross := resultAt(90)
	gross.Energy = &judge.Energy{Source: "rapl:0", GrossJPerToken: f(3)}
	none := resultAt(90)
	none.Energy = &judge.Energy{Source: "auto", Why: "no energy source can be read here"}
	m := &Merged{Base: "npu serve smoke", Rows: []Row{
		{Job: Job{"model": "a", "device": "npu"}, State: Pass, Result: net},
		{Job: Job{"model": "b", "device": "npu"}, State: Pass, Result: gross},
		{Job: Job{"model": "c", "device": "npu"}, State: Pass, Result: none},
		{Job: Job{"model": "d", "device": "npu"}, State: Pass, Result: resultAt(90)},
	}}
	md := m.Markdown(65536, nil)
	for _, want := range []string{
		"| route | against the baseline | energy |\n|---|---|---|---:|---:|---|---|---:|\n",
		"| a | npu | ✅ pass | 90.0 tok/s (60) | 200 ms (600) | fast | — | 2 J/token gross, 1.25 net (nvml:0) |\n",
		"| b | npu | ✅ pass | 90.0 tok/s (60) | 200 ms (600) | fast | — | 3 J/token gross (rapl:0) |\n",
		"| c | npu | ✅ pass | 90.0 tok/s (60) | 200 ms (600) | fast | — | unavailable |\n",
		"| d | npu | ✅ pass | 90.0 tok/s (60) | 200 ms (600) | fast | — | — |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}
	m.Rows = m.Rows[2:]
	if md := m.Markdown(65536, nil); strings.Contains(md, "energy") {
		t.Errorf("Markdown() with no sensor on any runner has an energy column:\n%s", md)
	}
}

// A load column when any row ran --load; none otherwise.
func TestMarkdownLoad(t *testing.T) {
	loaded := resultAt(90)
	loaded.Load = &judge.LoadRun{Limits: judge.LoadLimits{Streams: 4, Expect: judge.LoadSerial}}
	loaded.LoadRounds = []judge.Round{{N: 1, Efficiency: 0.2, Concurrency: 0.8, WorstFirstMS: 3000}}
	m := &Merged{Base: "npu serve smoke", Rows: []Row{
		{Job: Job{"model": "a", "device": "npu"}, State: Pass, Result: loaded},
		{Job: Job{"model": "b", "device": "npu"}, State: Pass, Result: resultAt(90)},
	}}
	md := m.Markdown(65536, nil)
	for _, want := range []string{
		"| route | against the baseline | load |\n|---|---|---|---:|---:|---|---|---|\n",
		"| a | npu | ✅ pass | 90.0 tok/s (60) | 200 ms (600) | fast | — | 4 streams, serial: η 0.20, 0.8 at once, worst first token 3000 ms (medians of 1 rounds) |\n",
		"| b | npu | ✅ pass | 90.0 tok/s (60) | 200 ms (600) | fast | — | — |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}
	var con bytes.Buffer
	m.Console(&con)
	if !strings.Contains(con.String(), "route fast, load 4 streams, serial: η 0.20") {
		t.Errorf("Console() = %q", con.String())
	}
	m.Rows = m.Rows[1:]
	if md := m.Markdown(65536, nil); strings.Contains(md, "| load |") {
		t.Errorf("Markdown() without --load has a load column:\n%s", md)
	}
}
