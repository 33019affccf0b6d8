package publish

import (
	"context"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// Outcome is a finished check run that is not one gate's run: the merged
// verdict of a job matrix.
type Outcome struct {
	Pass              bool
	Title             string
	Summary           string // also the sticky comment
	Text              string
	Started, Finished time.Time
}

// Post creates the check run completed with the outcome and posts or edits
// the sticky comment of the check name. It returns the check run's id, 0
// when it was not created.
func (p *Publisher) Post(ctx context.Context, o Outcome) int64 {
	if why := p.Skipped(); why != "" {
		p.notice("not posted to GitHub: %s", why)
		return 0
	}
	conclusion := "failure"
	if o.Pass {
		conclusion = "success"
	}
	opts := github.CreateCheckRunOptions{
		Name: p.CheckName, HeadSHA: p.Ctx.SHA, Status: github.String("completed"),
		Conclusion: github.String(conclusion),
		StartedAt:  &github.Timestamp{Time: o.Started}, CompletedAt: &github.Timestamp{Time: o.Finished},
		Output: &github.CheckRunOutput{
			Title:   github.String(o.Title),
			Summary: github.String(report.Cut(o.Summary, CheckTextLimit)),
		},
	}
	if o.Text != "" {
		opts.Output.Text = github.String(report.Cut(o.Text, CheckTextLimit))
	}
	if u := p.Ctx.RunURL(); u != "" {
		opts.DetailsURL = github.String(u)
	}
	run, _, err := p.Client.Checks.CreateCheckRun(ctx, p.Ctx.Owner, p.Ctx.Repo, opts)
	if err != nil {
		p.notice("check run not created: %s", explain(err, "checks: write"))
	} else {
		p.checkID = run.GetID()
	}
	if p.Comment {
		p.comment(ctx, o.Summary)
	}
	return p.checkID
}
