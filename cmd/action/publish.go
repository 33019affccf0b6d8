package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/publish"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// publishRun posts a finished run: the fork pull request pattern, where the
// job that measured has no token that can write and a workflow_run job
// posts for it.
func (e *env) publishRun(ctx context.Context, args []string) int {
	fs := e.flagSet("publish")
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: npu-serve-smoke publish DIR [flags]\n\nPosts the run in DIR as a check run and a sticky PR comment, from inside GitHub Actions.\n\n")
		fs.PrintDefaults()
	}
	checkName := fs.String("check-name", "", "the check run's name (default: the run's own)")
	comment := fs.String("comment", "on-pr", "on-pr or never")
	pr := fs.Int("pr-number", 0, "the pull request (default: the event's, else the run's own, checked against its head)")
	token := fs.String("github-token", e.getenv("GITHUB_TOKEN"), "token (default: $GITHUB_TOKEN; never printed)")
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if dir == "" && fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	if dir == "" || (*comment != "on-pr" && *comment != "never") {
		fs.Usage()
		return exitUsage
	}
	if e.getenv("GITHUB_ACTIONS") != "true" {
		fmt.Fprintf(e.stderr, "npu-serve-smoke publish: not inside GitHub Actions (GITHUB_ACTIONS is not true); run it in a workflow job\n")
		return exitUsage
	}
	a := newAction(e.getenv, e.stdout)
	if *token != "" {
		a.AddMask(*token)
	}
	res, err := report.Read(dir)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke publish: %v\n", err)
		return exitUsage
	}
	name := *checkName
	if name == "" {
		name = res.Run.CheckName
	}
	if name == "" {
		name = config.Default().CheckName
	}
	gc, pub := e.publisher(a, *token, name, *comment == "on-pr", *pr)
	if pub == nil {
		return exitFail
	}
	if gc.SHA == "" && res.GitHub != nil {
		gc.SHA = res.GitHub.SHA
	}
	if gc.PR == 0 && res.GitHub != nil && res.GitHub.PR != 0 {
		// The run's own pull request: believed only when its head is the
		// commit this event reports on.
		gc.PR = res.GitHub.PR
		if err := pub.CheckPR(ctx); err != nil {
			a.Noticef("no PR comment: %v", err)
			gc.PR = 0
		}
	}
	checkID := pub.Finish(ctx, res, report.Markdown(res, publish.CheckTextLimit))
	publish.Step(a, e.getenv, res, checkID)
	return exitPass
}
