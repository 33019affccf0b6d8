package evidence

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// A run's claims (verdict, limits, route) are replaced by what its evidence
// says under the limits given.
func TestJudge(t *testing.T) {
	const claims = `{"schema": "npu-serve-smoke/v1", "verdict": "pass", "limits": {"floor": 1, "first_token_ms": 100000, "rate_source": "client"},
  "assertions": [{"name": "route", "ok": true, "detail": "claimed"}],
  "route": {"fast": {"line": 1, "text": "on the private route", "pattern": "on the private route"}}}`
	const reply = `{"n": 1, "first_ms": 250, "last_ms": 1520, "completion_tokens": 128, "content": "Paris"}`
	limits := judge.Limits{Floor: 60, FirstTokenMS: 600, RateSource: judge.RateClient}
	for _, tc := range []struct {
		name, log string
		noLog     bool
		floor     float64
		pass      bool
		failed    string // the failed assertions
		err       string
	}{
		{name: "fast route, over the floor", log: "ready on the private route dx\n", floor: 60, pass: true},
		{name: "the slow route, whatever was claimed", log: "serving with the per-op forward\n", floor: 60, failed: "route"},
		{name: "below the floor given here", log: "ready on the private route dx\n", floor: 150, failed: "rate"},
		{name: "no log", noLog: true, floor: 60, failed: "route", err: "the route is judged on an empty log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := wintest.TempDir(t)
			os.WriteFile(filepath.Join(dir, report.ResultFile), []byte(claims), 0o644)
			os.WriteFile(filepath.Join(dir, "reply_1.json"), []byte(reply), 0o644)
			if !tc.noLog {
				os.WriteFile(filepath.Join(dir, report.LogFile), []byte(tc.log), 0o644)
			}
			res, err := report.Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			l := limits
			l.Floor = tc.floor
			err = Judge(context.Background(), dir, res, l, route.DefaultFast, route.DefaultSlow, nil)
			if (err != nil) != (tc.err != "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Judge() error = %v, want %q", err, tc.err)
			}
			var failed []string
			for _, a := range res.Assertions {
				if !a.OK {
					failed = append(failed, a.Name)
				}
			}
			if res.Pass() != tc.pass || strings.Join(failed, ",") != tc.failed || res.Limits != l {
				t.Errorf("Judge() = %s, failed %v, limits %+v; want pass %v, failed %q, limits %+v", res.Verdict, failed, res.Limits, tc.pass, tc.failed, l)
			}
		})
	}
}

// TestAsRun: whatever kind an artifact's result.json claims, it is judged
// as a run, and the claim is said, quoted and bounded.
func TestAsRun(t *testing.T) {
	for _, tc := range []struct {
		kind, said string
	}{
		{report.KindRun, ""},
		{report.KindReference, `result.json says run.kind "reference" (a recording, whose route, rate and first token are not judged); it is judged as a run here`},
		{"Reference\n::error::x", `run.kind "Reference\n::error::x"`},
		{strings.Repeat("k", 100), `run.kind "` + strings.Repeat("k", 40) + `..."`},
	} {
		res := &report.Result{Run: report.RunFacts{Kind: tc.kind}}
		said := AsRun(res)
		if res.Run.Kind != report.KindRun || (tc.said == "") != (said == "") || !strings.Contains(said, tc.said) {
			t.Errorf("AsRun(kind %q) = %q, kind now %q; want kind %q and %q said", tc.kind, said, res.Run.Kind, report.KindRun, tc.said)
		}
	}
	// Judged as a run, a slow route fails: the recording's "not judged"
	// is gone.
	res := &report.Result{Run: report.RunFacts{Kind: report.KindReference}, Limits: judge.Limits{Floor: 60, FirstTokenMS: 600, RateSource: judge.RateClient}}
	AsRun(res)
	res.Judged(judge.Judge(res.Input()))
	if res.Pass() {
		t.Errorf("a recording's result with no evidence, judged as a run: %s, want fail: %+v", res.Verdict, res.Assertions)
	}
}
