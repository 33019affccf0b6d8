package publish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// Limits of GitHub's API on what it stores.
const (
	CheckTextLimit = 65535 // a check run's output.summary and output.text, each
	CommentLimit   = 65536 // an issue comment's body
)

// Publisher posts one run's check run and sticky comment.
type Publisher struct {
	Client    *github.Client
	Ctx       *Context
	CheckName string
	Comment   bool // post the sticky comment when there is a pull request
	// Notice reports what was skipped or failed, to the log; it is never a
	// reason to change the verdict.
	Notice func(format string, args ...any)

	// Now is the publisher's clock, for the check run's times (time.Now
	// when nil): a run's result.json is the run's to write, its times too.
	Now func() time.Time

	checkID int64
	// app is the slug of the app that owns the check run posted, which is
	// the app whose installation token this is: its comments are its bot's.
	app string
}

// NewClient is a go-github client for the context's API (GHES included),
// authenticated with token, retrying GitHub's transient failures.
func NewClient(c *Context, token string, retry Retry, base http.RoundTripper) (*github.Client, error) {
	hc := &http.Client{Transport: retry.Transport(base), Timeout: 30 * time.Second, CheckRedirect: sameHost}
	client := github.NewClient(hc).WithAuthToken(token)
	u, err := url.Parse(c.APIURL + "/")
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("GITHUB_API_URL %q is not a URL", c.APIURL)
	}
	client.BaseURL = u
	return client, nil
}

// sameHost refuses a redirect to another host, or from https to http: the
// client adds the token to every request it sends, redirected ones too, so
// following it would hand the token to that host. A redirect on the API's
// own host (GitHub's 301 for a renamed repository) is followed, up to 10.
func sameHost(req *http.Request, via []*http.Request) error {
	from := via[len(via)-1].URL
	if !strings.EqualFold(req.URL.Host, from.Host) || from.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("the API redirected to another host (%s, from %s); not followed, so that the token is not sent there", req.URL.Redacted(), from.Redacted())
	}
	if len(via) >= 10 {
		return errors.New("the API redirected 10 times; not followed further")
	}
	return nil
}

func (p *Publisher) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Publisher) notice(format string, args ...any) {
	if p.Notice != nil {
		p.Notice(format, args...)
	}
}

// Skipped is why nothing can be posted in this context, or "".
func (p *Publisher) Skipped() string {
	switch {
	case p.Ctx.Fork:
		return "this pull request comes from a fork, whose token cannot write checks or comments; post the run from a workflow_run job with `npu-serve-smoke publish` (docs/workflow.md)"
	case p.Ctx.SHA == "":
		return "no commit to report on (GITHUB_SHA is empty)"
	}
	return ""
}

// Start creates the check run in_progress, so a required status check shows
// the gate as pending while it runs. It returns the check run's id, 0 when it
// was not created.
func (p *Publisher) Start(ctx context.Context, started time.Time) int64 {
	if why := p.Skipped(); why != "" {
		p.notice("check run not created: %s", why)
		return 0
	}
	opts := github.CreateCheckRunOptions{
		Name:      p.CheckName,
		HeadSHA:   p.Ctx.SHA,
		Status:    github.String("in_progress"),
		StartedAt: &github.Timestamp{Time: started},
		Output: &github.CheckRunOutput{
			Title:   github.String("running: the serve is being started and measured"),
			Summary: github.String("The gate is running. The verdict follows when it is done."),
		},
	}
	if u := p.Ctx.RunURL(); u != "" {
		opts.DetailsURL = github.String(u)
	}
	run, _, err := p.Client.Checks.CreateCheckRun(ctx, p.Ctx.Owner, p.Ctx.Repo, opts)
	if err != nil {
		p.notice("check run not created: %s", explain(err, "checks: write"))
		return 0
	}
	p.checkID = run.GetID()
	p.app = run.GetApp().GetSlug()
	return p.checkID
}

// Finish completes the check run (creating it when Start did not) and posts
// or edits the sticky comment. It returns the check run's id.
func (p *Publisher) Finish(ctx context.Context, res *report.Result, summary string) int64 {
	if why := p.Skipped(); why != "" {
		p.notice("not posted to GitHub: %s", why)
		return 0
	}
	if from := p.Ctx.EvidenceFrom; from != "" {
		summary = UntrustedNote(from) + summary
	}
	p.finishCheck(ctx, res, summary)
	if p.Comment {
		p.comment(ctx, summary)
	}
	return p.checkID
}

func (p *Publisher) finishCheck(ctx context.Context, res *report.Result, summary string) {
	conclusion := "failure"
	switch res.Verdict {
	case report.Pass:
		conclusion = "success"
	case report.Cancelled:
		conclusion = "cancelled"
	}
	title := Title(res)
	if from := p.Ctx.EvidenceFrom; from != "" {
		title += " (evidence from " + from + "'s run, untrusted)"
	}
	// The check run's times are this process's clock; the run's own are
	// its claim, shown as such.
	claimed := fmt.Sprintf("The run says it started %s and finished %s.\n\n",
		res.Run.Started.UTC().Format(time.RFC3339), res.Run.Finished.UTC().Format(time.RFC3339))
	output := &github.CheckRunOutput{
		Title:   github.String(title),
		Summary: github.String(report.Cut(summary, CheckTextLimit)),
		Text:    github.String(report.Cut(claimed+CheckText(res), CheckTextLimit)),
	}
	now := &github.Timestamp{Time: p.now()}
	if p.checkID != 0 {
		_, _, err := p.Client.Checks.UpdateCheckRun(ctx, p.Ctx.Owner, p.Ctx.Repo, p.checkID, github.UpdateCheckRunOptions{
			Name: p.CheckName, Status: github.String("completed"), Conclusion: github.String(conclusion),
			CompletedAt: now, Output: output,
		})
		if err != nil {
			p.notice("check run %d not completed: %s", p.checkID, explain(err, "checks: write"))
		}
		return
	}
	opts := github.CreateCheckRunOptions{
		Name: p.CheckName, HeadSHA: p.Ctx.SHA, Status: github.String("completed"),
		Conclusion: github.String(conclusion), StartedAt: now,
		CompletedAt: now, Output: output,
	}
	if u := p.Ctx.RunURL(); u != "" {
		opts.DetailsURL = github.String(u)
	}
	run, _, err := p.Client.Checks.CreateCheckRun(ctx, p.Ctx.Owner, p.Ctx.Repo, opts)
	if err != nil {
		p.notice("check run not created: %s", explain(err, "checks: write"))
		return
	}
	p.checkID = run.GetID()
	p.app = run.GetApp().GetSlug()
}

// Untrusted says what a check run and a comment are worth when the evidence
// came from the run of another repository (a fork), named by from.
func Untrusted(from string) string {
	return "The evidence below came from the run of " + from + " and was not produced by trusted code: " +
		"that run's code, the gate's included, was the pull request's to change, so its serve.log, replies, load rounds, witnesses and energy figures may be made up. " +
		"They were judged again here with this workflow's own check name, limits, load settings and witness classes; the verdict the run claimed was ignored. " +
		"A required check is only as trustworthy as the code that measured (docs/workflow.md)."
}

// UntrustedNote is Untrusted as a Markdown warning, to put above a report.
func UntrustedNote(from string) string {
	return "> [!WARNING]\n> " + report.Cell(Untrusted(from), 1000) + "\n\n"
}

// Abort completes the check run as a failure when the gate could not run at
// all (bad input, a busy port), so a required check does not stay pending.
func (p *Publisher) Abort(ctx context.Context, why string) {
	if p.checkID == 0 {
		return
	}
	_, _, err := p.Client.Checks.UpdateCheckRun(ctx, p.Ctx.Owner, p.Ctx.Repo, p.checkID, github.UpdateCheckRunOptions{
		Name: p.CheckName, Status: github.String("completed"), Conclusion: github.String("failure"),
		CompletedAt: &github.Timestamp{Time: p.now()},
		Output: &github.CheckRunOutput{
			Title:   github.String("FAIL: the gate could not run"),
			Summary: github.String(report.Cut(report.Cell(why, 4000), CheckTextLimit)),
		},
	})
	if err != nil {
		p.notice("check run %d not completed: %s", p.checkID, explain(err, "checks: write"))
	}
}

// CheckPR makes sure the pull request to comment on has the commit being
// reported as its head. A workflow_run job posts for a run it did not see
// start: the pull request number comes from that run's result.json, and this
// keeps a run from commenting on a pull request it did not measure.
func (p *Publisher) CheckPR(ctx context.Context) error {
	pr, _, err := p.Client.PullRequests.Get(ctx, p.Ctx.Owner, p.Ctx.Repo, p.Ctx.PR)
	if err != nil {
		return fmt.Errorf("pull request #%d could not be read: %s", p.Ctx.PR, explain(err, "pull-requests: read"))
	}
	if head := pr.GetHead().GetSHA(); head != p.Ctx.SHA {
		return fmt.Errorf("pull request #%d's head is %.12s, not the measured commit %.12s", p.Ctx.PR, head, p.Ctx.SHA)
	}
	return nil
}

// Marker is the hidden line that finds the sticky comment of a check name.
func Marker(checkName string) string {
	// An HTML comment ends at "-->" and may not hold "--".
	safe := strings.NewReplacer("--", "- -", ">", "&gt;", "\n", " ").Replace(checkName)
	return "<!-- npu-serve-smoke: " + safe + " -->"
}

// comment edits the sticky comment of this check name in place, or creates
// it: one comment per check name, however many runs.
func (p *Publisher) comment(ctx context.Context, summary string) {
	if p.Ctx.PR == 0 {
		return
	}
	marker := Marker(p.CheckName)
	body := marker + "\n" + report.Cut(summary, CommentLimit-len(marker)-1)
	me, err := p.author(ctx)
	if err != nil {
		p.notice("PR comment not posted: who the token posts as is not known: %s", explain(err, "pull-requests: write"))
		return
	}
	id, err := p.findComment(ctx, marker, me)
	if err != nil {
		p.notice("PR comment not posted: %s", explain(err, "pull-requests: write"))
		return
	}
	if id != 0 {
		_, _, err = p.Client.Issues.EditComment(ctx, p.Ctx.Owner, p.Ctx.Repo, id, &github.IssueComment{Body: github.String(body)})
	} else {
		_, _, err = p.Client.Issues.CreateComment(ctx, p.Ctx.Owner, p.Ctx.Repo, p.Ctx.PR, &github.IssueComment{Body: github.String(body)})
	}
	if err != nil {
		p.notice("PR comment not posted: %s", explain(err, "pull-requests: write"))
	}
}

// GitHubActionsApp is the app whose installation token a workflow's
// GITHUB_TOKEN is; its comments are by the user "github-actions[bot]".
const GitHubActionsApp = "github-actions"

// author is the user the token posts comments as: only a comment of theirs
// is the sticky comment, so a comment that anyone else wrote holding the
// marker (which is public) is never edited. An app installation's token
// (GITHUB_TOKEN is one) posts as the app's bot, "SLUG[bot]" of type Bot; the
// slug is that of the app owning the check run posted, else GitHub
// Actions'. Any other token (a personal access token) posts as its user,
// whom GET /user names; an installation's token is refused there (403).
func (p *Publisher) author(ctx context.Context) (*github.User, error) {
	if p.app != "" {
		return bot(p.app), nil
	}
	u, _, err := p.Client.Users.Get(ctx, "")
	var ge *github.ErrorResponse
	if errors.As(err, &ge) && ge.Response != nil && ge.Response.StatusCode == http.StatusForbidden {
		return bot(GitHubActionsApp), nil
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

// bot is the bot user of the app with slug.
func bot(slug string) *github.User {
	return &github.User{Login: github.String(slug + "[bot]"), Type: github.String("Bot")}
}

// findComment looks through every page of the pull request's comments for
// one by me that starts with marker.
func (p *Publisher) findComment(ctx context.Context, marker string, me *github.User) (int64, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := p.Client.Issues.ListComments(ctx, p.Ctx.Owner, p.Ctx.Repo, p.Ctx.PR, opts)
		if err != nil {
			return 0, err
		}
		for _, c := range cs {
			if strings.HasPrefix(c.GetBody(), marker) && sameUser(c.GetUser(), me) {
				return c.GetID(), nil
			}
		}
		if resp.NextPage == 0 {
			return 0, nil
		}
		opts.Page = resp.NextPage
	}
}

// sameUser reports whether a comment's author u is me: the same login
// (GitHub's logins ignore case) and the same type, so a user can never pass
// for a bot.
func sameUser(u, me *github.User) bool {
	return strings.EqualFold(u.GetLogin(), me.GetLogin()) && u.GetType() == me.GetType()
}

// explain says what a failed call means and what to do.
func explain(err error, permission string) string {
	var ge *github.ErrorResponse
	if errors.As(err, &ge) && ge.Response != nil {
		switch ge.Response.StatusCode {
		case http.StatusForbidden, http.StatusNotFound, http.StatusUnauthorized:
			return fmt.Sprintf("HTTP %d (%s): the token lacks a permission; grant `permissions: %s` to the job", ge.Response.StatusCode, ge.Message, permission)
		}
		return fmt.Sprintf("HTTP %d: %s", ge.Response.StatusCode, ge.Message)
	}
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		return "GitHub's rate limit: " + rl.Message
	}
	var al *github.AbuseRateLimitError
	if errors.As(err, &al) {
		return "GitHub's secondary rate limit, still after retries: " + al.Message
	}
	return err.Error()
}

// Title is the check run's title: the verdict and the median rate.
func Title(res *report.Result) string {
	word := map[string]string{report.Pass: "PASS", report.Cancelled: "CANCELLED"}[res.Verdict]
	if word == "" {
		word = "FAIL"
	}
	var failed []string
	for _, a := range res.Assertions {
		if !a.OK {
			failed = append(failed, a.Name)
		}
	}
	t := word
	if m, ok := res.Median(res.Rate); ok {
		t += fmt.Sprintf(": median %.1f tok/s (floor %.1f)", m, res.Limits.Floor)
	}
	if len(failed) > 0 && res.Verdict != report.Cancelled {
		t += "; failed: " + strings.Join(failed, ", ")
	}
	return t
}

// CheckText is the check run's details: every reply in full measure, and the
// serve log's tail.
func CheckText(res *report.Result) string {
	var b strings.Builder
	b.WriteString("#### Each reply\n\n| # | first token | decode | tokens (source) | finish | error |\n|---:|---:|---:|---|---|---|\n")
	for i := range res.Replies {
		r := &res.Replies[i]
		ft, rate := "—", "—"
		if v, ok := r.FirstTokenMS(); ok {
			ft = fmt.Sprintf("%.1f ms", v)
		}
		if v, why := r.DecodeRate(); why == "" {
			rate = fmt.Sprintf("%.2f tok/s", v)
		} else {
			rate = report.Cell(why, 60)
		}
		n, src := r.Tokens()
		fmt.Fprintf(&b, "| %d | %s | %s | %d (%s) | %s | %s |\n", r.N, ft, rate, n, src, report.Cell(r.FinishReason, 20), report.Cell(r.Error, 200))
	}
	if ev := res.Route; ev.Fast != nil || ev.Slow != nil {
		b.WriteString("\n#### Route evidence\n\n")
		for _, m := range []*route.Match{ev.Fast, ev.Slow} {
			if m != nil {
				fmt.Fprintf(&b, "- line %d matches %s: %s\n", m.Line, report.Cell(m.Pattern, 100), report.Cell(m.Text, 300))
			}
		}
	}
	return b.String()
}
