package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sethvargo/go-githubactions"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/console"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/history"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/publish"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// historyBaseline resolves --baseline github:PATTERN before anything is
// started: the artifact named after the check name in the latest successful
// run of this workflow on the pattern that this repository's own code made
// (history.Find). A newer candidate that cannot serve is a notice, and the
// next older is tried; none found, or the look cut by its bounds: a notice,
// and the run goes on without the baseline assertion (and with
// --floor-from-baseline, on --floor). Only a look that cannot be made as
// asked (no token, no permission) is bad input. ok is false when the gate
// must stop with code.
func (e *env) historyBaseline(ctx context.Context, plan *config.Plan, a *githubactions.Action) (code int, ok bool) {
	pattern, fromGitHub, _ := history.Spec(plan.Config.Baseline)
	if !fromGitHub {
		return 0, true
	}
	h, bad, cleanup := e.openHistory(plan, a, "baseline", plan.Config.Baseline, pattern,
		"outside, pass the earlier run's result.json")
	if h.err != nil {
		return bad(h.err)
	}
	defer cleanup()
	src, tmp, notice := h.src, h.tmp, h.notice
	f, err := src.Find(ctx, history.ArtifactName(plan.CheckName), tmp, history.Want{Model: plan.Model, CheckName: plan.CheckName, Thinking: plan.Thinking}, plan.Limits())
	for _, why := range f.Skipped {
		notice("baseline skipped: %s; the next older run is tried", why)
	}
	var nf *history.NotFound
	switch {
	case errors.As(err, &nf):
		floor := ""
		if plan.FloorFromBaseline != 0 {
			floor = fmt.Sprintf(", and the floor stays %.1f tok/s (--floor), not %g of a baseline's rate", plan.Floor, plan.FloorFromBaseline)
		}
		notice("no baseline: %s; the run goes on without the baseline assertion%s", nf.Why, floor)
	case err != nil:
		return bad(err)
	default:
		from := fmt.Sprintf("%s on %s", f.Run.URL, f.Run.Branch)
		plan.SetBaseline(f.Baseline, from)
		fmt.Fprintf(e.stderr, "baseline: %s (%s): median %.1f tok/s, first token %.0f ms\n", f.Run.URL, console.Text(f.Run.Branch), plan.Baseline.Rate, plan.Baseline.FirstTokenMS)
		if plan.FloorFromBaseline != 0 {
			fmt.Fprintf(e.stderr, "floor: %.1f tok/s, %s\n", plan.Floor, console.Text(plan.FloorWhy))
		}
	}
	return 0, true
}

// historyReference resolves --reference github:PATTERN before anything is
// started, as historyBaseline resolves a baseline: the artifact named
// history.ReferenceArtifact(check name) in the newest successful run of this
// workflow on the pattern that this repository's own code made, holding a
// run recorded by record that passed and shares this run's max_tokens,
// thinking setting and prompts (config.UseReference). A newer candidate that
// cannot serve is a notice, and the next older is tried; none found: a
// notice, and the run goes on without the agreement assertion.
func (e *env) historyReference(ctx context.Context, plan *config.Plan, a *githubactions.Action) (code int, ok bool) {
	pattern, fromGitHub, _ := history.Spec(plan.Config.Reference)
	if !fromGitHub {
		return 0, true
	}
	h, bad, cleanup := e.openHistory(plan, a, "reference", plan.Config.Reference, pattern,
		"outside, pass the reference's out directory or result.json")
	if h.err != nil {
		return bad(h.err)
	}
	defer cleanup()
	src, tmp, notice := h.src, h.tmp, h.notice
	want := plan.ReferenceWant()
	var ref *report.Reference
	use := func(res *report.Result, from string) (err error) {
		ref, err = config.UseReference("its result.json", from, res, want)
		return err
	}
	name := history.ReferenceArtifact(plan.CheckName)
	f, err := src.FindReference(ctx, name, tmp, history.Want{CheckName: plan.CheckName, Thinking: plan.Thinking}, use)
	for _, why := range f.Skipped {
		notice("reference skipped: %s; the next older run is tried", why)
	}
	var nf *history.NotFound
	switch {
	case errors.As(err, &nf) && plan.ReferenceMissing == config.ReferenceMissingSkip:
		notice("no reference: %s; the run goes on without the agreement assertion, as --reference-missing skip asks (record one with npu-serve-smoke record and upload its out/ as %s: docs/workflow.md)", nf.Why, name)
	case errors.As(err, &nf):
		// A reference was asked for and none can be used: the agreement
		// fails, saying why, rather than vanish from the verdict.
		why := nf.Why
		if len(f.Skipped) > 0 {
			why += "; passed over: " + strings.Join(f.Skipped, "; ")
		}
		why += fmt.Sprintf(" (record one with npu-serve-smoke record and upload its out/ as %s: docs/workflow.md)", name)
		plan.Reference = &report.Reference{File: plan.Config.Reference, Missing: why}
		notice("no reference: %s; the agreement assertion fails (--reference-missing skip leaves it out until there is one)", why)
	case err != nil:
		return bad(err)
	default:
		ref.File = fmt.Sprintf("%s on %s", f.Run.URL, f.Run.Branch)
		plan.Reference = ref
		fmt.Fprintf(e.stderr, "reference: %s (%s): %s, %d with logprobs\n", f.Run.URL, console.Text(f.Run.Branch), report.Replies(ref.Checked.Replies), ref.Checked.Logprobs)
	}
	return 0, true
}

// historyLook is what a look into GitHub's history for --baseline or
// --reference github:PATTERN needs: the source, a temporary directory for
// the artifact, and the notice for candidates passed over. err is why the
// look cannot be made (bad input).
type historyLook struct {
	src    *history.Source
	tmp    string
	notice func(format string, args ...any)
	err    error
}

// openHistory prepares the look for --flag value (github:pattern). bad
// reports a bad input of that flag and says to stop; cleanup removes the
// temporary directory. Outside GitHub Actions the look cannot be made, and
// outside says what to pass instead.
func (e *env) openHistory(plan *config.Plan, a *githubactions.Action, flag, value, pattern, outside string) (h historyLook, bad func(error) (int, bool), cleanup func()) {
	bad = func(err error) (int, bool) {
		fmt.Fprintf(e.stderr, "npu-serve-smoke: bad input, nothing was started:\n%s\n", indent("--"+flag+" "+value+": "+err.Error()))
		if a != nil {
			a.WithFieldsMap(map[string]string{"title": "npu serve smoke: bad input"}).Errorf("--%s: %s", flag, console.Text(err.Error()))
		}
		return exitUsage, false
	}
	cleanup = func() {}
	if a == nil {
		h.err = fmt.Errorf("a %s from GitHub's history is read inside GitHub Actions only; %s", flag, outside)
		return h, bad, cleanup
	}
	gc, err := publish.FromEnv(e.getenv)
	if err != nil {
		h.err = err
		return h, bad, cleanup
	}
	if h.src, h.err = e.historySource(gc, plan.GitHubToken, pattern); h.err != nil {
		return h, bad, cleanup
	}
	if h.tmp, h.err = os.MkdirTemp(e.getenv("RUNNER_TEMP"), "npu-serve-smoke-"+flag+"-*"); h.err != nil {
		return h, bad, cleanup
	}
	cleanup = func() { os.RemoveAll(h.tmp) }
	h.notice = func(format string, args ...any) {
		msg := console.Text(fmt.Sprintf(format, args...))
		fmt.Fprintln(e.stderr, msg)
		a.Noticef("%s", msg)
	}
	return h, bad, cleanup
}
