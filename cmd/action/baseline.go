package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/sethvargo/go-githubactions"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/history"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/publish"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// historyBaseline resolves --baseline github:PATTERN before anything is
// started: the artifact named after the check name in the latest successful
// run of this workflow on the pattern. None found: a notice, and the run
// goes on without the baseline assertion. One that cannot be a baseline
// (another model, too large, not a zip): bad input, exit 2. ok is false when
// the gate must stop with code.
func (e *env) historyBaseline(ctx context.Context, plan *config.Plan, a *githubactions.Action) (code int, ok bool) {
	pattern, fromGitHub, _ := history.Spec(plan.Config.Baseline)
	if !fromGitHub {
		return 0, true
	}
	bad := func(err error) (int, bool) {
		fmt.Fprintf(e.stderr, "npu-serve-smoke: bad input, nothing was started:\n%s\n", indent("--baseline "+plan.Config.Baseline+": "+err.Error()))
		if a != nil {
			a.WithFieldsMap(map[string]string{"title": "npu serve smoke: bad input"}).Errorf("--baseline: %s", err)
		}
		return exitUsage, false
	}
	if a == nil {
		return bad(errors.New("a baseline from GitHub's history is read inside GitHub Actions only; outside, pass the earlier run's result.json"))
	}
	gc, err := publish.FromEnv(e.getenv)
	if err != nil {
		return bad(err)
	}
	src, err := e.historySource(gc, plan.GitHubToken, pattern)
	if err != nil {
		return bad(err)
	}
	tmp, err := os.MkdirTemp(e.getenv("RUNNER_TEMP"), "npu-serve-smoke-baseline-*")
	if err != nil {
		return bad(err)
	}
	defer os.RemoveAll(tmp)
	var nf *history.NotFound
	run, err := src.Latest(ctx)
	if err == nil {
		var res *report.Result
		res, err = src.Result(ctx, run, history.ArtifactName(plan.CheckName), tmp, history.Want{Model: plan.Model, CheckName: plan.CheckName, Thinking: plan.Thinking})
		if err == nil {
			plan.Baseline, err = history.Baseline(res, run.URL, plan.Limits())
		}
	}
	switch {
	case errors.As(err, &nf):
		fmt.Fprintf(e.stderr, "no baseline: %s; the run goes on without the baseline assertion\n", nf.Why)
		a.Noticef("no baseline: %s; the run goes on without the baseline assertion", nf.Why)
	case err != nil:
		return bad(err)
	default:
		fmt.Fprintf(e.stderr, "baseline: %s (%s): median %.1f tok/s, first token %.0f ms\n", run.URL, run.Branch, plan.Baseline.Rate, plan.Baseline.FirstTokenMS)
	}
	return 0, true
}
